// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safetext"
)

// Model is a trained, compiled interference model. It is immutable once trained
// or loaded, so one value may be shared by any number of goroutines.
type Model struct {
	Features     []string  `codec:"features"`      // feature names in vector order
	Params       Params    `codec:"params"`        // training settings
	TrainDigest  string    `codec:"train_digest"`  // Dataset.Digest of the training set
	TrainSamples int       `codec:"train_samples"` // samples trained on
	TrainMean    float64   `codec:"train_mean"`    // mean speed of the training set
	CV           CVSummary `codec:"cv"`            // cross-validation measured at training
	Source       string    `codec:"source"`        // free text: where the data came from
	CreatedAt    time.Time `codec:"created_at"`
	Trees        []Tree    `codec:"trees"`
	// Calibration: conformal margins from cross-validation (format 2; empty in
	// a format 1 file or a model trained without cross-validation).
	Calibration Calibration `codec:"calibration"`
	// Tags are the applications the training data held (as job or co-runner),
	// sorted; SeenCalibration holds the margins for a co-location of only such
	// applications, from leave-pairs-out residuals (tighter than Calibration's
	// leave-families-out ones: the model knows both applications). Both empty in
	// older files: every prediction then uses Calibration. docs/model.md.
	Tags            []string    `codec:"tags"`
	SeenCalibration Calibration `codec:"seen_calibration"`
	// Measured are the pairs the admin's training data measured, answered
	// from the measurement (measured.go); MeasuredSD is the pooled standard
	// deviation of repeated measurements of one pair. Empty in older files
	// (which older programs, ignoring the field, read as before).
	Measured   []MeasuredPair `codec:"measured,omitempty"`
	MeasuredSD float64        `codec:"measured_sd,omitempty"`

	// The packed form for prediction, built by Compile and Decode (see pack).
	nodes    []node              // every tree's nodes, tree after tree
	vals     []float64           // leaf values by node index
	roots    []int32             // tree i's root
	depths   []int32             // tree i's depth
	tags     map[string]struct{} // Tags as a set, for the margin's lookup
	measured map[pairKey]int32   // index of Measured by pair
}

// node is one packed tree node. A split sends x to left when x[feat] < thr and
// to left+1 otherwise (NaN goes right, as in Tree.predict). A leaf is a fixed
// point: thr is NaN, so the comparison is false for any x, and left is its own
// index minus one. So a tree walk needs no leaf test: depth steps from the root
// always end on the leaf, which lets predictVec walk four trees side by side.
type node struct {
	thr  float64
	feat int32
	left int32
}

// Compile checks the trees (as Decode checks a file's) and builds the packed
// form that PredictSpeed walks. A trainer (package training) calls it once on
// the Model it has filled in, before the Model is shared; Decode, Load and
// Default return compiled models.
func (m *Model) Compile() error {
	if err := m.validate(); err != nil {
		return err
	}
	m.pack()
	return nil
}

// pack lays out the (validated) Trees for prediction: each tree breadth-first
// from its root, so that a split's two children take adjacent slots whatever
// the order in the file.
func (m *Model) pack() {
	m.nodes, m.vals, m.roots, m.depths = nil, nil, nil, nil
	m.tags = nil
	m.measured = nil
	if len(m.Measured) > 0 {
		m.measured = make(map[pairKey]int32, len(m.Measured))
		for i, p := range m.Measured {
			m.measured[pairKey{p.Job, p.Co}] = int32(i)
		}
	}
	if len(m.Tags) > 0 {
		m.tags = make(map[string]struct{}, len(m.Tags))
		for _, t := range m.Tags {
			m.tags[t] = struct{}{}
		}
	}
	for ti := range m.Trees {
		t := &m.Trees[ti]
		base := len(m.nodes)
		m.roots = append(m.roots, int32(base))
		m.depths = append(m.depths, int32(t.depth()))
		queue := []int32{0} // tree-local node of each packed slot, in order
		for q := 0; q < len(queue); q++ {
			i := queue[q]
			self := int32(base + q)
			n := node{thr: math.NaN(), left: self - 1}
			v := t.Value[i]
			if f := t.Feature[i]; f >= 0 {
				n = node{thr: t.Threshold[i], feat: f, left: int32(base + len(queue))}
				queue = append(queue, t.Left[i], t.Right[i])
				v = 0
			}
			m.nodes = append(m.nodes, n)
			m.vals = append(m.vals, v)
		}
	}
}

// step moves one level down from node i.
func step(nodes []node, x *featureVec, i int32) int32 {
	n := &nodes[i]
	s := int32(1)
	if x[n.feat] < n.thr {
		s = 0
	}
	return n.left + s
}

// CVSummary holds the cross-validation results recorded with a model (zero when
// none was run).
type CVSummary struct {
	KFold        Metrics `codec:"kfold" json:"kfold"`
	KFoldK       int     `codec:"kfold_k" json:"kfold_k"`
	LeaveAppsOut Metrics `codec:"leave_apps_out" json:"leave_apps_out"`
	Apps         int     `codec:"apps" json:"apps"` // applications (folds) left out in turn
}

var _ Bounder = (*Model)(nil)

// Revision implements Bounder: a model's answers never change.
func (m *Model) Revision() uint64 { return 0 }

// PredictSpeed predicts job's normalized speed (1.0 = as fast as alone) on a GPU
// shared with co. With no co-runners the answer is 1.0 by definition (the model
// is trained on shared runs only). It does not allocate and is safe for
// concurrent use.
func (m *Model) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	speed, _ := m.PredictSpeedSpread(job, co)
	return speed
}

// PredictSpeedSpread returns the prediction PredictSpeed gives and how far the
// ensemble's members disagree: the mean of the trees' leaf values and their
// standard deviation (0 for a single tree or a measured pair). Like PredictSpeed it does not allocate.
func (m *Model) PredictSpeedSpread(job *profile.Profile, co []*profile.Profile) (speed, sd float64) {
	if p, ok := m.measuredPair(job, co); ok {
		return p.Speed, 0
	}
	var x featureVec
	computeFeatures(job, co, &x)
	if x[fCoCount] == 0 || len(m.Trees) == 0 {
		return 1, 0
	}
	return m.predictVec(&x)
}

// predictVec walks every tree for x and returns the mean leaf value and the
// standard deviation of the leaf values.
func (m *Model) predictVec(x *featureVec) (mean, sd float64) {
	var s, ss float64
	n := 0
	leaf := func(v float64) { s, ss, n = s+v, ss+v*v, n+1 }
	if len(m.roots) != len(m.Trees) || len(m.Trees) == 0 { // built by hand, not by Compile or Decode
		for i := range m.Trees {
			leaf(m.Trees[i].predict(x))
		}
		return meanSD(s, ss, n)
	}
	nodes, roots, depths := m.nodes, m.roots, m.depths
	k := 0
	// Four independent walks per loop: the loads of one do not wait on another's.
	for ; k+4 <= len(roots); k += 4 {
		i0, i1, i2, i3 := roots[k], roots[k+1], roots[k+2], roots[k+3]
		d := max(depths[k], depths[k+1], depths[k+2], depths[k+3])
		for range d {
			i0 = step(nodes, x, i0)
			i1 = step(nodes, x, i1)
			i2 = step(nodes, x, i2)
			i3 = step(nodes, x, i3)
		}
		leaf(m.vals[i0])
		leaf(m.vals[i1])
		leaf(m.vals[i2])
		leaf(m.vals[i3])
	}
	for ; k < len(roots); k++ {
		i := roots[k]
		for range depths[k] {
			i = step(nodes, x, i)
		}
		leaf(m.vals[i])
	}
	return meanSD(s, ss, n)
}

func meanSD(s, ss float64, n int) (mean, sd float64) {
	if n == 0 {
		return 1, 0
	}
	mean = s / float64(n)
	if v := ss/float64(n) - mean*mean; v > 0 {
		sd = math.Sqrt(v)
	}
	return mean, sd
}

// TrainingMean is the mean speed of the training set: the mean predictor baseline
// that Evaluate compares against.
func (m *Model) TrainingMean() float64 { return m.TrainMean }

// Explain returns the decision path of each tree in words, one line per split
// ("job_sm_util_mean 62.5 >= 48.3"), then the leaf's value, and for a forest the
// averaged prediction.
func (m *Model) Explain(job *profile.Profile, co []*profile.Profile) []string {
	var x featureVec
	computeFeatures(job, co, &x)
	if x[fCoCount] == 0 {
		return []string{"no co-runners: speed 1.000 (runs alone)"}
	}
	var out []string
	for ti := range m.Trees {
		t := &m.Trees[ti]
		prefix := ""
		if len(m.Trees) > 1 {
			prefix = "tree " + strconv.Itoa(ti+1) + ": "
		}
		for _, i := range t.path(&x) {
			f := t.Feature[i]
			if f < 0 {
				out = append(out, fmt.Sprintf("%sleaf: speed %.3f (mean of %d training samples)", prefix, t.Value[i], t.Samples[i]))
				break
			}
			op := "<"
			if x[f] >= t.Threshold[i] {
				op = ">="
			}
			out = append(out, fmt.Sprintf("%s%s %s %s %s", prefix, featureName(int(f)), fmtNum(x[f]), op, fmtNum(t.Threshold[i])))
		}
	}
	if len(m.Trees) > 1 {
		mean, sd := m.predictVec(&x)
		out = append(out, fmt.Sprintf("forest of %d trees: speed %.3f (average), trees spread %.3f (standard deviation)", len(m.Trees), mean, sd))
	}
	if p, ok := m.measuredPair(job, co); ok {
		out = append(out, fmt.Sprintf("measured pair: the answer is the training data's measurement, speed %.3f over %d run(s), not the trees'", p.Speed, p.N))
	}
	return out
}

// fmtNum prints v with at most 3 decimals and no trailing zeros ("48.3").
func fmtNum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Info is a printable summary of a model.
type Info struct {
	Path         string    `json:"path,omitempty"`
	Format       int       `json:"format_version"`
	Kind         string    `json:"kind"` // "tree" or "forest"
	Trees        int       `json:"trees"`
	Nodes        int       `json:"nodes"`
	Leaves       int       `json:"leaves"`
	Depth        int       `json:"depth"`
	Features     []string  `json:"features"`
	Params       Params    `json:"params"`
	TrainDigest  string    `json:"train_digest"`
	TrainSamples int       `json:"train_samples"`
	TrainMean    float64   `json:"train_mean"`
	CV           CVSummary `json:"cv"`
	Source       string    `json:"source,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// Calibration: the default coverage and the margins at the default floors
	// (hpc/train 0.75, infer 0.9) at that coverage; zero when uncalibrated.
	DefaultCoverage float64 `json:"default_coverage"`
	MarginAt075     float64 `json:"margin_at_0_75"`
	MarginAt090     float64 `json:"margin_at_0_90"`
	Residuals       int     `json:"calibration_residuals"`
	// FloorCoverage is the default coverage per floor (empty: DefaultCoverage
	// for every floor).
	FloorCoverage []FloorCoverage `json:"floor_coverage,omitempty"`
	// Seen-pairs margins (co-locations of the Tags applications): the same,
	// zero when the model has none.
	SeenTags            int             `json:"seen_tags,omitempty"`
	SeenDefaultCoverage float64         `json:"seen_default_coverage,omitempty"`
	SeenMarginAt075     float64         `json:"seen_margin_at_0_75,omitempty"`
	SeenMarginAt090     float64         `json:"seen_margin_at_0_90,omitempty"`
	SeenFloorCoverage   []FloorCoverage `json:"seen_floor_coverage,omitempty"`
	// Normalized seen-pairs margins (format 3): the overall scale, how many
	// applications have their own, and their range.
	SeenScale     float64 `json:"seen_scale,omitempty"`
	SeenJobScales int     `json:"seen_job_scales,omitempty"`
	SeenScaleMin  float64 `json:"seen_scale_min,omitempty"`
	SeenScaleMax  float64 `json:"seen_scale_max,omitempty"`
	// Measured pairs answered from the admin's measurements, and their noise.
	MeasuredPairs int     `json:"measured_pairs,omitempty"`
	MeasuredSD    float64 `json:"measured_sd,omitempty"`
}

// Info summarises the model.
func (m *Model) Info() Info {
	in := Info{
		Format: int(m.formatVersion()), Kind: "tree", Trees: len(m.Trees),
		Features: append([]string(nil), m.Features...), Params: m.Params,
		TrainDigest: m.TrainDigest, TrainSamples: m.TrainSamples, TrainMean: m.TrainMean,
		CV: m.CV, Source: m.Source, CreatedAt: m.CreatedAt,
	}
	if len(m.Trees) > 1 {
		in.Kind = "forest"
	}
	if m.Calibrated() {
		in.DefaultCoverage = m.Calibration.DefaultCoverage
		in.MarginAt075, in.MarginAt090 = m.Margin(0.75, 0), m.Margin(0.9, 0)
		in.Residuals = m.Calibration.Residuals
		in.FloorCoverage = append([]FloorCoverage(nil), m.Calibration.FloorCoverage...)
	}
	in.MeasuredPairs, in.MeasuredSD = len(m.Measured), m.MeasuredSD
	if len(m.SeenCalibration.Levels) > 0 && len(m.Tags) > 0 {
		in.SeenTags, in.SeenDefaultCoverage = len(m.Tags), m.SeenCalibration.DefaultCoverage
		in.SeenMarginAt075, in.SeenMarginAt090 = m.SeenMargin(0.75, 0), m.SeenMargin(0.9, 0)
		in.SeenFloorCoverage = append([]FloorCoverage(nil), m.SeenCalibration.FloorCoverage...)
		if sc := &m.SeenCalibration; sc.Scale > 0 {
			in.SeenScale, in.SeenJobScales = sc.Scale, len(sc.JobScale)
			in.SeenScaleMin, in.SeenScaleMax = math.Inf(1), math.Inf(-1)
			if len(sc.JobScale) == 0 {
				in.SeenScaleMin, in.SeenScaleMax = sc.Scale, sc.Scale
			}
			for _, v := range sc.JobScale {
				in.SeenScaleMin, in.SeenScaleMax = min(in.SeenScaleMin, v), max(in.SeenScaleMax, v)
			}
		}
	}
	for i := range m.Trees {
		in.Nodes += len(m.Trees[i].Feature)
		in.Leaves += m.Trees[i].leaves()
		in.Depth = max(in.Depth, m.Trees[i].depth())
	}
	return in
}

// String renders Info for a terminal.
func (in Info) String() string {
	s := fmt.Sprintf("model %s\n  format %d, %s of %d tree(s): %d nodes, %d leaves, depth %d\n",
		in.Path, in.Format, in.Kind, in.Trees, in.Nodes, in.Leaves, in.Depth)
	s += fmt.Sprintf("  params: max depth %d, min leaf %d, bins %d, max features %d, seed %d\n",
		in.Params.MaxDepth, in.Params.MinLeaf, in.Params.Bins, in.Params.MaxFeatures, in.Params.Seed)
	if len(in.Params.Features) > 0 {
		s += "  splits on: " + sanitizeLong(strings.Join(in.Params.Features, ", ")) + "\n"
	}
	s += fmt.Sprintf("  trained on %d samples (mean speed %.3f), sha256 %s\n", in.TrainSamples, in.TrainMean, in.TrainDigest)
	for _, src := range strings.Split(in.Source, "; ") {
		if src != "" {
			s += "  source: " + sanitizeLong(src) + "\n"
		}
	}
	s += "  created " + in.CreatedAt.UTC().Format(time.RFC3339) + "\n"
	if in.CV.KFoldK > 0 {
		s += fmt.Sprintf("  %d-fold CV:              MAE %.4f (mean predictor %.4f), AUC %s (util-sum %s)\n",
			in.CV.KFoldK, in.CV.KFold.MAE, in.CV.KFold.MeanPredictorMAE, in.CV.KFold.ModelAUC, in.CV.KFold.UtilSumAUC)
	}
	if in.CV.Apps > 0 {
		s += fmt.Sprintf("  leave-apps-out (%d apps): MAE %.4f (mean predictor %.4f), AUC %s (util-sum %s)\n",
			in.CV.Apps, in.CV.LeaveAppsOut.MAE, in.CV.LeaveAppsOut.MeanPredictorMAE, in.CV.LeaveAppsOut.ModelAUC, in.CV.LeaveAppsOut.UtilSumAUC)
	}
	if in.DefaultCoverage > 0 {
		s += fmt.Sprintf("  calibrated margins (%d leave-families-out residuals): default coverage %.3g, margin %.3f at speed 0.75, %.3f at 0.90\n",
			in.Residuals, in.DefaultCoverage, in.MarginAt075, in.MarginAt090)
		s += floorCoverageLine(in.FloorCoverage)
	} else {
		s += "  no calibrated margins: floors are tested against the prediction itself (retrain with cross-validation)\n"
	}
	if in.SeenTags > 0 {
		s += fmt.Sprintf("  seen-pairs margins (co-locations of its %d trained applications; leave-pairs-out): default coverage %.3g, margin %.3f at speed 0.75, %.3f at 0.90\n",
			in.SeenTags, in.SeenDefaultCoverage, in.SeenMarginAt075, in.SeenMarginAt090)
		if in.SeenJobScales > 0 {
			s += fmt.Sprintf("    normalized by the job application's scale (%d applications, %.4f-%.4f; the margins above at the overall scale %.4f)\n",
				in.SeenJobScales, in.SeenScaleMin, in.SeenScaleMax, in.SeenScale)
		}
		s += floorCoverageLine(in.SeenFloorCoverage)
	}
	if in.MeasuredPairs > 0 {
		s += fmt.Sprintf("  measured pairs: %d ordered pairs answered from the training data's measurements, bound by their noise (sd %.3f, at least %.2f)\n",
			in.MeasuredPairs, in.MeasuredSD, MeasuredNoiseFloor)
	}
	s += "  features computed: "
	for i, f := range in.Features {
		if i > 0 {
			s += ", "
		}
		s += f
	}
	return s + "\n"
}

// floorCoverageLine words a calibration's per-floor default coverage ("" when
// it has none: every floor at the default coverage).
func floorCoverageLine(fc []FloorCoverage) string {
	if len(fc) == 0 {
		return ""
	}
	s := "    default coverage per floor:"
	for i, f := range fc {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %.2f -> %.3g", f.Floor, f.Coverage)
	}
	return s + "\n"
}

// sanitizeLong keeps a source line whole (it carries a 64-digit digest).
func sanitizeLong(s string) string { return safetext.Limit(s, 512) }
