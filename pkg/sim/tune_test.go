// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/pairmem"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// syntheticJobs is the workload the calibration target is tuned on: NOT the
// Philly trace (that is the evaluation), but a fixed, documented distribution:
//   - n jobs, Poisson arrivals (exponential gaps), then scaled by
//     trace.SetLoad to the offered load on gpus GPUs;
//   - duration alone lognormal, median 1 h, sigma 1.5 (in ln seconds), kept
//     within [1 min, 24 h] by redrawing: many short jobs, a long tail;
//   - GPUs 1 (70%), 2 (10%), 4 (10%), 8 (10%).
//
// Applications and classes are assigned as for any trace (trace.Assign).
func syntheticJobs(n, gpus int, load float64, seed int64) ([]trace.Job, error) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x73796e7468))
	jobs := make([]trace.Job, n)
	t := 0.0
	for i := range jobs {
		t += r.ExpFloat64() * 600
		d := 0.0
		for d < 60 || d > 24*3600 {
			d = 3600 * math.Exp(1.5*r.NormFloat64())
		}
		g := 1
		switch u := r.Float64(); {
		case u < 0.1:
			g = 8
		case u < 0.2:
			g = 4
		case u < 0.3:
			g = 2
		}
		jobs[i] = trace.Job{ID: "syn" + strconv.Itoa(i), Submit: t, Duration: d, GPUs: g}
	}
	if _, err := trace.SetLoad(jobs, gpus, load); err != nil {
		return nil, err
	}
	return jobs, nil
}

// TestTuneFloorTarget is the nested leave-families-out simulation behind the
// default calibration target (training.DefaultTarget, docs/model.md): for each
// family F, a model trained without any observation of F, calibrated on its
// own leave-families-out residuals with each candidate target, runs the
// synthetic workload against the Lucid truth (which holds F) with the pair
// memory on. TUNE=1 to run (minutes).
func TestTuneFloorTarget(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	tt := shipped(t)
	cat, obs, fams := shippedTraining(t)
	targets := []float64{0.005, 0.0075, 0.01, 0.02, 0.03, 0.05}
	seeds := []int64{1, 2, 3}
	const nodes, perNode, n, load = 8, 8, 2000, 2.0
	type agg struct {
		below, jobs, ratio, runs float64
		cb, cj                   [3]float64 // per class: infer, train, hpc
	}
	classes := [3]profile.Class{profile.ClassInfer, profile.ClassTrain, profile.ClassHPC}
	mechs := []struct {
		name    string
		opts    pairmem.Options
		seen    bool // seen-pairs margins (Model.SeenCalibration)
		noFloor bool // every floor at the class-weighted default (CalibrationOptions.NoFloorCoverage)
	}{
		{"default (per-floor coverage)", pairmem.Options{}, true, false},
		{"every floor at the class-weighted coverage (before per-floor coverage)", pairmem.Options{}, true, true},
	}
	res := make([][]agg, len(mechs))
	worst := make([][]float64, len(mechs))
	for i := range mechs {
		res[i], worst[i] = make([]agg, len(targets)), make([]float64, len(targets))
	}
	for _, f := range fams {
		m, lfo, lpo := trainWithout(t, cat, obs, f)
		oracle := map[int64]float64{}
		for ti, target := range targets {
			for mi, mech := range mechs {
				cal, _, err := training.Calibrate(lfo.OutOfFold, training.CalibrationOptions{Target: target, NoFloorCoverage: mech.noFloor})
				if err != nil {
					t.Fatal(err)
				}
				seen, _, err := training.Calibrate(lpo.OutOfFold, training.CalibrationOptions{Target: target, NoFloorCoverage: mech.noFloor})
				if err != nil {
					t.Fatal(err)
				}
				mm := *m
				mm.Calibration = cal
				if mech.seen {
					mm.SeenCalibration = seen
				}
				pols := []string{"coscheml"}
				if ti == 0 && mi == 0 {
					pols = append(pols, "oracle")
				}
				exp := Experiment{
					Config: Config{Nodes: nodes, GPUsPerNode: perNode}, Truth: tt, Model: &mm,
					PairMemory: true, MemoryOptions: mech.opts, Options: placement.DefaultOptions(), Policies: pols, Seeds: seeds,
					Jobs: func(seed int64) ([]trace.Job, error) { return syntheticJobs(n, nodes*perNode, load, seed) },
				}
				runs, err := exp.Execute()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range runs {
					if r.Policy == "oracle" {
						oracle[r.Seed] = r.Overall.AvgJCT
					}
				}
				b, j, rs := 0.0, 0.0, 0.0
				for _, r := range runs {
					if r.Policy != "coscheml" {
						continue
					}
					b += float64(r.Overall.BelowFloor)
					j += float64(r.Overall.Jobs)
					rs += r.Overall.AvgJCT/oracle[r.Seed] - 1
					for ci, c := range classes {
						res[mi][ti].cb[ci] += float64(r.ByClass[c].BelowFloor)
						res[mi][ti].cj[ci] += float64(r.ByClass[c].Jobs)
					}
				}
				a := &res[mi][ti]
				a.below += b
				a.jobs += j
				a.ratio += rs
				a.runs += float64(len(seeds))
				worst[mi][ti] = max(worst[mi][ti], b/j)
				t.Logf("held out %-12s target %.4g, %s: coverage %.3g (seen pairs %.3g), below floor %.2f%%, avg JCT vs oracle %+.1f%%",
					f, target, mech.name, cal.DefaultCoverage, seen.DefaultCoverage, 100*b/j, 100*rs/float64(len(seeds)))
			}
		}
	}
	chosen := targets[0]
	stop := false
	for mi, mech := range mechs {
		for ti, target := range targets {
			below := res[mi][ti].below / res[mi][ti].jobs
			a := res[mi][ti]
			t.Logf("%s, target %.4g: below floor %.2f%% (worst family %.2f%%; infer %.2f%%, train %.2f%%, hpc %.2f%%), avg JCT vs oracle %+.1f%%",
				mech.name, target, 100*below, 100*worst[mi][ti], 100*a.cb[0]/max(a.cj[0], 1), 100*a.cb[1]/max(a.cj[1], 1), 100*a.cb[2]/max(a.cj[2], 1),
				100*a.ratio/a.runs)
			if mi == 0 && !stop {
				if below > 0.005 || worst[mi][ti] > 0.01 {
					stop = true
				} else {
					chosen = target
				}
			}
		}
	}
	t.Logf("rule (fixed before running): the largest target with at most 0.5%% of jobs below floor over all folds and at most 1%% in every fold: %.4g", chosen)
}

// TestTuneLevers measures, on the synthetic tuning workload (not the
// evaluation's trace) with the shipped model and the pair memory from empty,
// the placement and pair-memory levers that are settings: each variant's avg JCT
// against the default configuration's oracle on the same seed (paired), and
// its jobs below floor. Its own oracle is shown too, since a placement
// setting changes the oracle as well. TUNE=1 to run (about a minute).
func TestTuneLevers(t *testing.T) {
	tt, m := tuneShipped(t)
	const nodes, perNode, n, load = 8, 8, 2000, 2.0
	var seeds []int64
	for s := int64(1); s <= 10; s++ {
		seeds = append(seeds, s)
	}
	opts := func(f func(*placement.Options)) placement.Options {
		o := placement.DefaultOptions()
		if f != nil {
			f(&o)
		}
		return o
	}
	// classWeighted is the shipped model with every floor at its
	// calibrations' class-weighted default coverage (before per-floor coverage)
	classWeighted := *m
	classWeighted.Calibration.FloorCoverage = nil
	classWeighted.SeenCalibration.FloorCoverage = nil
	if err := classWeighted.Compile(); err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		name  string
		opts  placement.Options
		mem   pairmem.Options
		study pairmem.Study
		model *model.Model // nil: the shipped model
	}{
		{"default", opts(nil), pairmem.Options{}, pairmem.Study{}, nil},
		{"every floor at the class-weighted coverage (before per-floor coverage)", opts(nil), pairmem.Options{}, pairmem.Study{}, &classWeighted},
		{"per-floor coverage for the model only (known pairs class-weighted)", opts(nil), pairmem.Options{}, pairmem.Study{KnownPairsClassWeighted: true}, nil},
		{"known pairs at the unseen families' coverage (the earlier rule)", opts(nil), pairmem.Options{}, pairmem.Study{UniformCoverage: true}, nil},
		{"floor_confidence 0.5 (margins about 0)", opts(func(o *placement.Options) { o.FloorConfidence = 0.5 }), pairmem.Options{}, pairmem.Study{}, nil},
		{"MinEvidence 1 (one user makes a pair known)", opts(nil), pairmem.Options{MinEvidence: 1}, pairmem.Study{}, nil},
		{"AppMinEvidence 3", opts(nil), pairmem.Options{AppMinEvidence: 3}, pairmem.Study{}, nil},
		{"prefer_share_speed 0.75", opts(func(o *placement.Options) { o.PreferShareSpeed = 0.75 }), pairmem.Options{}, pairmem.Study{}, nil},
		{"prefer_share_speed 0.95", opts(func(o *placement.Options) { o.PreferShareSpeed = 0.95 }), pairmem.Options{}, pairmem.Study{}, nil},
		{"prefer_share_speed 1 (an idle GPU before any share)", opts(func(o *placement.Options) { o.PreferShareSpeed = 1 }), pairmem.Options{}, pairmem.Study{}, nil},
	}
	base := map[int64]float64{}
	only := os.Getenv("TUNE_VARIANTS") // comma-separated variant numbers (0 always runs: the baseline)
	for vi, v := range variants {
		if vi > 0 && only != "" && !slices.Contains(strings.Split(only, ","), strconv.Itoa(vi)) {
			continue
		}
		vm := m
		if v.model != nil {
			vm = v.model
		}
		exp := Experiment{
			Config: Config{Nodes: nodes, GPUsPerNode: perNode}, Truth: tt, Model: vm,
			PairMemory: true, MemoryOptions: v.mem, MemoryStudy: v.study, Options: v.opts, Policies: []string{"coscheml", "oracle"}, Seeds: seeds,
			Jobs: func(seed int64) ([]trace.Job, error) { return syntheticJobs(n, nodes*perNode, load, seed) },
		}
		runs, err := exp.Execute()
		if err != nil {
			t.Fatal(err)
		}
		if vi == 0 {
			for _, r := range runs {
				if r.Policy == "oracle" {
					base[r.Seed] = r.Overall.AvgJCT
				}
			}
		}
		var cos, ora []float64
		below, jobs := 0.0, 0.0
		classes := []profile.Class{profile.ClassInfer, profile.ClassTrain, profile.ClassHPC}
		cb, cj := make([]float64, len(classes)), make([]float64, len(classes))
		for _, r := range runs {
			ratio := r.Overall.AvgJCT/base[r.Seed] - 1
			if r.Policy == "oracle" {
				ora = append(ora, ratio)
				continue
			}
			cos = append(cos, ratio)
			below += float64(r.Overall.BelowFloor)
			jobs += float64(r.Overall.Jobs)
			for i, c := range classes {
				cb[i] += float64(r.ByClass[c].BelowFloor)
				cj[i] += float64(r.ByClass[c].Jobs)
			}
		}
		c, o := StatOf(cos), StatOf(ora)
		per := ""
		for i, cl := range classes {
			per += fmt.Sprintf(" %s %.2f%%", cl, 100*cb[i]/max(cj[i], 1))
		}
		t.Logf("%-72s coscheml %+6.1f%% ± %4.1f, below floor %.2f%% (%.1f per seed;%s); its oracle %+5.1f%%",
			v.name, 100*c.Mean, 100*c.SD, 100*below/jobs, below/float64(len(seeds)), per, 100*o.Mean)
	}
}

// syntheticE2EJobs is the synthetic workload shaped like the real-daemon
// replay (make e2e): n single-GPU jobs of syntheticJobs' distributions at the
// offered load on gpus GPUs, every time divided by compress, work at least
// minWork seconds (as replay.Prepare does to a trace sample).
func syntheticE2EJobs(n, gpus int, load float64, seed int64, compress, minWork float64) ([]trace.Job, error) {
	jobs, err := syntheticJobs(n, gpus, load, seed)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		jobs[i].GPUs = 1
	}
	if _, err := trace.SetLoad(jobs, gpus, load); err != nil {
		return nil, err
	}
	for i := range jobs {
		jobs[i].Submit /= compress
		jobs[i].Duration = max(jobs[i].Duration/compress, minWork)
	}
	return jobs, nil
}

// withInferCoverage returns cal with its strictest floor entry (infer's) at
// coverage c, never below the calibration's default.
func withInferCoverage(cal model.Calibration, c float64) model.Calibration {
	cal.FloorCoverage = slices.Clone(cal.FloorCoverage)
	if n := len(cal.FloorCoverage); n > 1 && c > 0 {
		cal.FloorCoverage[n-1].Coverage = max(c, cal.DefaultCoverage, cal.FloorCoverage[n-2].Coverage)
	}
	return cal
}

// TestTuneInferCoverage is the nested leave-families-out study of infer's
// default coverage: as TestTuneFloorTarget at the
// chosen target, with infer's per-floor coverage set to each candidate, on two
// synthetic workloads (the demo-shaped one and one shaped like the e2e
// replay), scored per job: the share of jobs of each class below its floor,
// overall and in the worst fold, and avg JCT against the oracle (paired).
// TUNE=1 to run (several minutes).
func TestTuneInferCoverage(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	tt := shipped(t)
	cat, obs, fams := shippedTraining(t)
	// infer's coverage (0: the rule's, per co-location ordering) and whether
	// the seen-pairs margins are normalized by the job application's scale
	// (training.CalibrationOptions.JobScale); TUNE_INFER_COVS=1 adds the plain
	// margins at infer coverages 0.95 and 0.975
	type variant struct {
		cov      float64
		jobScale bool
	}
	covs := []variant{{0, false}, {0, true}}
	if os.Getenv("TUNE_INFER_COVS") != "" {
		covs = append(covs, variant{0.95, false}, variant{0.975, false})
	}
	type workload struct {
		name  string
		cfg   Config
		seeds []int64
		jobs  func(seed int64) ([]trace.Job, error)
	}
	wls := []workload{
		{"demo-shaped (8x8 GPUs, 2000 jobs, load 2)", Config{Nodes: 8, GPUsPerNode: 8}, []int64{1, 2, 3},
			func(seed int64) ([]trace.Job, error) { return syntheticJobs(2000, 64, 2, seed) }},
		{"e2e-shaped (4x4 GPUs x 4 slots, 200 single-GPU jobs, load 2, 500x, at submit + loop)",
			Config{Nodes: 4, GPUsPerNode: 4, Slots: 4, GPUMemMiB: 143771, Submit: &SubmitModel{Redecide: 1}},
			[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
			func(seed int64) ([]trace.Job, error) { return syntheticE2EJobs(200, 16, 2, seed, 500, 2) }},
	}
	classes := [3]profile.Class{profile.ClassInfer, profile.ClassTrain, profile.ClassHPC}
	type agg struct {
		below, jobs, ratio, runs, worst float64
		cb, cj                          [3]float64
	}
	res := make([][]agg, len(wls))
	for i := range res {
		res[i] = make([]agg, len(covs))
	}
	for _, f := range fams {
		m, lfo, lpo := trainWithout(t, cat, obs, f)
		cal, _, err := training.Calibrate(lfo.OutOfFold, training.CalibrationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen, _, err := training.Calibrate(lpo.OutOfFold, training.CalibrationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seenScaled, _, err := training.Calibrate(lpo.OutOfFold, training.SeenCalibrationOptions())
		if err != nil {
			t.Fatal(err)
		}
		for wi, wl := range wls {
			oracle := map[int64]float64{}
			for ci, c := range covs {
				mm := *m
				mm.Calibration = withInferCoverage(cal, c.cov)
				mm.SeenCalibration = withInferCoverage(seen, c.cov)
				if c.jobScale {
					mm.SeenCalibration = withInferCoverage(seenScaled, c.cov)
				}
				if err := mm.Compile(); err != nil {
					t.Fatal(err)
				}
				pols := []string{"coscheml"}
				if ci == 0 {
					pols = append(pols, "oracle")
				}
				exp := Experiment{Config: wl.cfg, Truth: tt, Model: &mm, PairMemory: true,
					Options: placement.DefaultOptions(), Policies: pols, Seeds: wl.seeds, Jobs: wl.jobs}
				runs, err := exp.Execute()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range runs {
					if r.Policy == "oracle" {
						oracle[r.Seed] = r.Overall.AvgJCT
					}
				}
				a := &res[wi][ci]
				b, j := 0.0, 0.0
				for _, r := range runs {
					if r.Policy != "coscheml" {
						continue
					}
					b += float64(r.Overall.BelowFloor)
					j += float64(r.Overall.Jobs)
					a.ratio += r.Overall.AvgJCT/oracle[r.Seed] - 1
					a.runs++
					for k, cl := range classes {
						a.cb[k] += float64(r.ByClass[cl].BelowFloor)
						a.cj[k] += float64(r.ByClass[cl].Jobs)
					}
				}
				a.below += b
				a.jobs += j
				a.worst = max(a.worst, b/j)
				t.Logf("held out %-12s %s, infer coverage %v, seen margins job-scaled %v (seen %.3g, unseen %.3g): below floor %.2f%%",
					f, wl.name[:10], c.cov, c.jobScale, mm.SeenCalibration.CoverageAt(0.9), mm.Calibration.CoverageAt(0.9), 100*b/j)
			}
		}
	}
	for wi, wl := range wls {
		for ci, c := range covs {
			a := res[wi][ci]
			t.Logf("%s, infer coverage %v, seen margins job-scaled %v: below floor %.2f%% of jobs (worst fold %.2f%%; infer %.2f%%, train %.2f%%, hpc %.2f%%), avg JCT vs oracle %+.1f%%",
				wl.name, c.cov, c.jobScale, 100*a.below/a.jobs, 100*a.worst, 100*a.cb[0]/max(a.cj[0], 1), 100*a.cb[1]/max(a.cj[1], 1), 100*a.cb[2]/max(a.cj[2], 1), 100*a.ratio/a.runs)
		}
	}
}

// truthFor answers a floor test with the true speed where use(floor) says so,
// else as its pair memory: the attribution of TestTuneWhereJCTGoes (which
// floor tests the gap to the oracle comes from).
type truthFor struct {
	*pairmem.Predictor
	truth model.Predictor
	use   func(floor float64) bool
}

func (h *truthFor) Bound(j *profile.Profile, co []*profile.Profile, q model.Query) (float64, float64) {
	s, l := h.Predictor.Bound(j, co, q)
	if h.use(q.Floor) {
		l = h.truth.PredictSpeed(j, co)
	}
	return s, l
}

// TestTuneWhereJCTGoes attributes Co-scheML's avg JCT gap to the oracle on
// the synthetic tuning workloads (not the evaluation's trace): the shipped model behind an empty pair memory, with the floor
// tests of one kind answered by the true speeds, against the oracle and blind
// sharing on the same jobs (paired per seed). TUNE=1 to run (about a minute).
func TestTuneWhereJCTGoes(t *testing.T) {
	tt, m := tuneShipped(t)
	infer := placement.DefaultOptions().Floors.Infer
	// the shipped model with its seen-pairs margins recalibrated on its own
	// training data, plain and normalized by the job application's scale
	cat, obs, _ := shippedTraining(t)
	ds, err := training.BuildDataset(cat, obs)
	if err != nil {
		t.Fatal(err)
	}
	seenAs := func(o training.CalibrationOptions) *model.Model {
		seen, _, err := training.CalibrateSeen(ds, m.Params, o)
		if err != nil {
			t.Fatal(err)
		}
		mm := *m
		mm.SeenCalibration = seen
		if err := mm.Compile(); err != nil {
			t.Fatal(err)
		}
		return &mm
	}
	inferCov := func(c float64) *model.Model {
		mm := *m
		mm.Calibration = withInferCoverage(m.Calibration, c)
		mm.SeenCalibration = withInferCoverage(m.SeenCalibration, c)
		if err := mm.Compile(); err != nil {
			t.Fatal(err)
		}
		return &mm
	}
	seeds := func(n int) []int64 {
		var s []int64
		for i := int64(1); i <= int64(n); i++ {
			s = append(s, i)
		}
		return s
	}
	wls := []struct {
		name  string
		cfg   Config
		seeds []int64
		jobs  func(seed int64) ([]trace.Job, error)
	}{
		{"demo-shaped", Config{Nodes: 8, GPUsPerNode: 8}, seeds(10),
			func(seed int64) ([]trace.Job, error) { return syntheticJobs(2000, 64, 2, seed) }},
		{"e2e-shaped, at submit + loop", Config{Nodes: 4, GPUsPerNode: 4, Slots: 4, GPUMemMiB: 143771, Submit: &SubmitModel{Redecide: 1}}, seeds(20),
			func(seed int64) ([]trace.Job, error) { return syntheticE2EJobs(200, 16, 2, seed, 500, 2) }},
	}
	variants := []struct {
		name   string
		policy string
		use    func(floor float64) bool // floor tests answered by the truth
		model  *model.Model             // nil: the shipped model
		opts   func(*placement.Options)
		warm   bool // the pair memory first learns from another sample (seed + WarmUpSeedOffset)
		cfg    func(*Config)
	}{
		{name: "oracle", policy: "oracle"},
		{name: "blind", policy: "blind"},
		{name: "coscheml (default)", policy: "coscheml"},
		{name: "seen margins plain (recalibrated)", policy: "coscheml", model: seenAs(training.CalibrationOptions{})},
		{name: "seen margins job-scaled", policy: "coscheml", model: seenAs(training.SeenCalibrationOptions())},
		{name: "truth for infer-floor tests", policy: "coscheml", use: func(f float64) bool { return f >= infer }},
		{name: "truth for the other floor tests", policy: "coscheml", use: func(f float64) bool { return f < infer }},
		{name: "truth for every floor test", policy: "coscheml", use: func(float64) bool { return true }},
		{name: "infer coverage 0.975", policy: "coscheml", model: inferCov(0.975)},
		{name: "infer coverage 0.95", policy: "coscheml", model: inferCov(0.95)},
		{name: "floor_confidence 0.75 (every floor)", policy: "coscheml", opts: func(o *placement.Options) { o.FloorConfidence = 0.75 }},
		{name: "prefer_share_speed 0.75 (share before opening an idle GPU)", policy: "coscheml", opts: func(o *placement.Options) { o.PreferShareSpeed = 0.75 }},
		{name: "warm memory (default otherwise)", policy: "coscheml", warm: true},
		// The defaults of shard_pinning and wait_defer: how Slurm reaches the
		// chosen GPU, and whether "wait" answers are re-decided (the plugin's
		// own mode, decided at submit).
		{name: "first-fit pinning (no per-GPU Types)", policy: "coscheml", cfg: func(c *Config) { c.Reach = placement.ReachFirstFit }},
		{name: "at submit, no re-decide loop", policy: "coscheml", cfg: func(c *Config) { c.Submit = &SubmitModel{} }},
		{name: "at submit + loop (2 s, start at next backfill 30 s)", policy: "coscheml", cfg: func(c *Config) { c.Submit = &SubmitModel{Redecide: 2, StartDelay: 30} }},
	}
	classes := []profile.Class{profile.ClassInfer, profile.ClassTrain, profile.ClassHPC}
	for _, wl := range wls {
		jct := map[string][]float64{}
		below := map[string][]float64{} // per class: below floor / jobs
		for _, v := range variants {
			cb, cj := make([]float64, len(classes)), make([]float64, len(classes))
			for _, seed := range wl.seeds {
				jobs, err := wl.jobs(seed)
				if err != nil {
					t.Fatal(err)
				}
				if err := trace.Assign(jobs, tt.Tags(), trace.DefaultClassMix, seed); err != nil {
					t.Fatal(err)
				}
				cfg, opts := wl.cfg, placement.DefaultOptions()
				cfg.Seed, opts.Seed = uint64(seed), uint64(seed)
				if v.cfg != nil {
					v.cfg(&cfg)
				}
				if v.opts != nil {
					v.opts(&opts)
				}
				if SlurmAlone(v.policy) {
					cfg.Submit = nil
				}
				var pred model.Predictor = tt
				if v.policy == "coscheml" {
					vm := m
					if v.model != nil {
						vm = v.model
					}
					mp, err := pairmem.NewPredictor(vm, pairmem.New(pairmem.Options{}))
					if err != nil {
						t.Fatal(err)
					}
					pred = mp
					if v.use != nil {
						pred = &truthFor{Predictor: mp, truth: tt, use: v.use}
					}
					cfg.OnCoRunEnd = func(job, co *profile.Profile, uid string, speed float64) {
						_ = mp.Observe(job, []*profile.Profile{co}, uid, speed)
					}
					if v.warm {
						wj, err := wl.jobs(seed + WarmUpSeedOffset)
						if err != nil {
							t.Fatal(err)
						}
						if err := trace.Assign(wj, tt.Tags(), trace.DefaultClassMix, seed+WarmUpSeedOffset); err != nil {
							t.Fatal(err)
						}
						wp, err := placement.ByName("coscheml", pred, opts)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := Run(cfg, wj, tt, wp); err != nil {
							t.Fatal(err)
						}
					}
				}
				pol, err := placement.ByName(v.policy, pred, opts)
				if err != nil {
					t.Fatal(err)
				}
				res, err := Run(cfg, jobs, tt, pol)
				if err != nil {
					t.Fatal(err)
				}
				all, by := Summarize(res)
				jct[v.name] = append(jct[v.name], all.AvgJCT)
				for i, c := range classes {
					cb[i] += float64(by[c].BelowFloor)
					cj[i] += float64(by[c].Jobs)
				}
			}
			for i := range classes {
				below[v.name] = append(below[v.name], cb[i]/max(cj[i], 1))
			}
		}
		for _, v := range variants {
			ratio := func(base string) Stat {
				var r []float64
				for i, x := range jct[v.name] {
					r = append(r, x/jct[base][i]-1)
				}
				return StatOf(r)
			}
			o, b := ratio("oracle"), ratio("blind")
			per := ""
			for i, c := range classes {
				per += fmt.Sprintf(" %s %.2f%%", c, 100*below[v.name][i])
			}
			t.Logf("%s | %-58s | vs oracle %+6.1f%% ± %4.1f | vs blind %+6.1f%% ± %4.1f | jobs below floor:%s",
				wl.name, v.name, 100*o.Mean, 100*o.SD, 100*b.Mean, 100*b.SD, per)
		}
	}
}

// shippedTraining reads the shipped training data (solo profiles as a catalog,
// pair observations) and the sorted application families it holds.
func shippedTraining(t *testing.T) (profile.Catalog, []observation.Observation, []string) {
	t.Helper()
	ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	if err != nil {
		t.Fatal(err)
	}
	cat := profile.CatalogOf(ps)
	obs, err := observation.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	var fams []string
	for _, o := range obs {
		if f := model.Family(o.Tag); !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	slices.Sort(fams)
	return cat, obs, fams
}

// trainWithout trains the default model on the observations holding no
// application of family f, with its leave-families-out and leave-pairs-out
// cross-validation: the outer fold of the nested studies.
func trainWithout(t *testing.T, cat profile.Catalog, obs []observation.Observation, f string) (*model.Model, training.CVReport, training.CVReport) {
	t.Helper()
	var kept []observation.Observation
	for _, o := range obs {
		if model.Family(o.Tag) != f && model.Family(o.CoTags[0]) != f {
			kept = append(kept, o)
		}
	}
	ds, err := training.BuildDataset(cat, kept)
	if err != nil {
		t.Fatal(err)
	}
	p := training.DefaultParams()
	lfo, err := training.LeaveFamiliesOut(ds, p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := training.Train(ds, p)
	if err != nil {
		t.Fatal(err)
	}
	lpo, err := training.LeavePairsOut(ds, training.SeenPairsFolds, p, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	return m, lfo, lpo
}

// tuneShipped skips a tuning study unless TUNE is set, and gives it the shipped
// ground truth and model.
func tuneShipped(t *testing.T) (*truth.Table, *model.Model) {
	t.Helper()
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	return shipped(t), m
}
