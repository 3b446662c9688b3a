// SPDX-License-Identifier: Apache-2.0

package training

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/trees"
)

// offered resolves p.Features to a per-feature flag, indexed like
// model.FeatureNames.
func offered(p model.Params) ([]bool, error) {
	names := model.FeatureNames()
	use := make([]bool, len(names))
	if len(p.Features) == 0 {
		for f := range use {
			use[f] = true
		}
		return use, nil
	}
	for _, name := range p.Features {
		f := slices.Index(names, name)
		if f < 0 {
			return use, fmt.Errorf("unknown feature %q (known: %s)", profile.Sanitize(name), strings.Join(names, ", "))
		}
		if use[f] {
			return use, fmt.Errorf("feature %q listed twice", name)
		}
		use[f] = true
	}
	return use, nil
}

// DefaultParams are the settings the default model is trained with; see
// docs/model.md for the leave-applications-out validation behind them.
func DefaultParams() model.Params {
	return model.Params{
		MaxDepth: 6, MinLeaf: 5, Trees: 60, MaxFeatures: 2, Bins: 32, Seed: 1,
		Features: DefaultFeatures(),
	}
}

// DefaultFeatures are the features the default model splits on: the ones built
// from SM (kernel) utilization, and the memory-traffic overlap. Offering the
// other memory-bandwidth and memory-size features as well fits k-fold better
// but generalizes worse to unseen families (docs/model.md).
func DefaultFeatures() []string {
	return []string{"job_sm_util_mean", "co_sm_util_sum", "total_sm_util", "job_sm_share", "sm_overlap", "membw_overlap"}
}

// Validate reports out-of-range settings by name.
func Validate(p model.Params) error {
	numFeatures := len(model.FeatureNames())
	switch {
	case p.MaxDepth < 1 || p.MaxDepth > 20:
		return fmt.Errorf("max depth %d: want 1..20", p.MaxDepth)
	case p.MinLeaf < 1:
		return fmt.Errorf("min leaf %d: want >= 1", p.MinLeaf)
	case p.Trees < 1 || p.Trees > 1000:
		return fmt.Errorf("trees %d: want 1..1000", p.Trees)
	case p.MaxFeatures < 0 || p.MaxFeatures > numFeatures:
		return fmt.Errorf("max features %d: want 0 (all) .. %d", p.MaxFeatures, numFeatures)
	case p.Bins < 0 || p.Bins == 1:
		return fmt.Errorf("bins %d: want 0 (all values) or >= 2", p.Bins)
	}
	_, err := offered(p)
	return err
}

// Train fits a tree (or a bagged forest) on ds and compiles it. The splits are
// chosen by golearn's CART regressor (MSE criterion); see grow for how it is fed.
func Train(ds Dataset, p model.Params) (*model.Model, error) {
	if err := Validate(p); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	n := ds.Len()
	if n < 2*p.MinLeaf {
		return nil, fmt.Errorf("train: %d samples, need at least 2*min leaf = %d", n, 2*p.MinLeaf)
	}
	m := &model.Model{
		Features:     model.FeatureNames(),
		Params:       p,
		TrainDigest:  ds.Digest(),
		TrainSamples: n,
		TrainMean:    meanSpeed(ds, nil),
		Tags:         ds.Tags(),
	}
	use, _ := offered(p) // checked by Validate
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for b := 0; b < p.Trees; b++ {
		idx := all
		rng := rand.New(rand.NewPCG(uint64(p.Seed), uint64(b)))
		if p.Trees > 1 {
			idx = make([]int, n)
			for i := range idx {
				idx[i] = rng.IntN(n)
			}
		}
		t, err := grow(ds, idx, p, use, rng)
		if err != nil {
			return nil, fmt.Errorf("train: tree %d: %w", b+1, err)
		}
		m.Trees = append(m.Trees, t)
	}
	if err := m.Compile(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return m, nil
}

func meanSpeed(ds Dataset, idx []int) float64 {
	if idx == nil {
		s := 0.0
		for i := range ds.Samples {
			s += ds.Samples[i].Speed
		}
		return s / float64(ds.Len())
	}
	s := 0.0
	for _, i := range idx {
		s += ds.Samples[i].Speed
	}
	return s / float64(len(idx))
}

// grow builds one tree breadth-first (so children get larger indices than their
// parent, as the flat form requires). golearn chooses each split: at every node we
// hand it that node's samples and ask for a depth-1 tree. We drive the recursion
// ourselves because golearn's regressor has no minimum leaf size, offers every
// distinct value as a threshold and rescans all samples for each (quadratic), and
// returns a dummy split when none improves the root. Around it we:
//   - clamp each feature to its MinLeaf-th smallest and largest value in the node,
//     so every threshold golearn can pick leaves at least MinLeaf samples per side;
//   - replace each feature by its equal-frequency bin index (at most Bins bins),
//     which bounds the thresholds golearn tries; the chosen bin boundary is mapped
//     back to a threshold on the raw feature (the midpoint between the two raw
//     values it separates), so the compiled tree routes training data exactly as
//     golearn split it;
//   - leave out features that are constant in the node.
func grow(ds Dataset, idx []int, p model.Params, use []bool, rng *rand.Rand) (model.Tree, error) {
	type pending struct {
		idx   []int
		depth int
	}
	var t model.Tree
	queue := []pending{{idx: idx}}
	for q := 0; q < len(queue); q++ {
		nd := queue[q]
		node := int32(len(t.Feature))
		t.Feature = append(t.Feature, -1)
		t.Threshold = append(t.Threshold, 0)
		t.Left = append(t.Left, 0)
		t.Right = append(t.Right, 0)
		t.Value = append(t.Value, meanSpeed(ds, nd.idx))
		t.Samples = append(t.Samples, int32(len(nd.idx)))
		if nd.depth >= p.MaxDepth || len(nd.idx) < 2*p.MinLeaf || sse(ds, nd.idx) < 1e-12 {
			continue
		}
		f, cut, ok, err := bestSplit(ds, nd.idx, p, use, rng)
		if err != nil {
			return model.Tree{}, err
		}
		if !ok {
			continue
		}
		var left, right []int
		for _, i := range nd.idx {
			if ds.Samples[i].Feature(f) < cut {
				left = append(left, i)
			} else {
				right = append(right, i)
			}
		}
		if len(left) < p.MinLeaf || len(right) < p.MinLeaf {
			continue // cannot happen after clamping; kept as a guard
		}
		t.Feature[node] = int32(f)
		t.Threshold[node] = cut
		// Children are appended in queue order: the next two slots after all nodes
		// already queued.
		t.Left[node] = int32(len(queue))
		t.Right[node] = int32(len(queue) + 1)
		queue = append(queue, pending{left, nd.depth + 1}, pending{right, nd.depth + 1})
	}
	return t, nil
}

func sse(ds Dataset, idx []int) float64 {
	m := meanSpeed(ds, idx)
	s := 0.0
	for _, i := range idx {
		d := ds.Samples[i].Speed - m
		s += d * d
	}
	return s
}

// binned is one feature prepared for golearn at one node.
type binned struct {
	feature int
	z       []float64 // bin index per sample
	edges   []float64 // raw thresholds between bins: value < edges[k] <=> bin <= k
}

// binFeature clamps and bins one feature's node values (see grow). It returns
// ok=false when the feature offers no split that respects minLeaf.
func binFeature(vals []float64, minLeaf, bins int) (z, edges []float64, ok bool) {
	n := len(vals)
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	lo, hi := sorted[minLeaf-1], sorted[n-minLeaf]
	if !(lo < hi) {
		return nil, nil, false
	}
	clamp := func(v float64) float64 { return min(max(v, lo), hi) }
	// Distinct clamped values with their counts, in order.
	var dv []float64
	var dc []int
	for _, v := range sorted {
		v = clamp(v)
		if len(dv) > 0 && dv[len(dv)-1] == v {
			dc[len(dc)-1]++
			continue
		}
		dv = append(dv, v)
		dc = append(dc, 1)
	}
	if bins <= 0 || len(dv) <= bins {
		for j := 0; j+1 < len(dv); j++ {
			edges = append(edges, dv[j]/2+dv[j+1]/2)
		}
	} else {
		step := float64(n) / float64(bins)
		next, cum := step, 0
		for j := 0; j+1 < len(dv); j++ {
			cum += dc[j]
			if float64(cum) >= next {
				edges = append(edges, dv[j]/2+dv[j+1]/2)
				for float64(cum) >= next {
					next += step
				}
			}
		}
	}
	if len(edges) == 0 {
		return nil, nil, false
	}
	z = make([]float64, n)
	for i, v := range vals {
		v = clamp(v)
		z[i] = float64(sort.Search(len(edges), func(k int) bool { return edges[k] > v }))
	}
	return z, edges, true
}

// bestSplit asks golearn for the best single split of the node's samples.
func bestSplit(ds Dataset, idx []int, p model.Params, use []bool, rng *rand.Rand) (feature int, cut float64, ok bool, err error) {
	var feats []binned
	vals := make([]float64, len(idx))
	offer := slices.Clone(use)
	if p.Trees > 1 && p.MaxFeatures > 0 {
		var cand []int
		for f := range offer {
			if offer[f] {
				cand = append(cand, f)
			}
			offer[f] = false
		}
		rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
		for _, f := range cand[:min(p.MaxFeatures, len(cand))] {
			offer[f] = true
		}
	}
	for f := range offer {
		if !offer[f] {
			continue
		}
		for j, i := range idx {
			vals[j] = ds.Samples[i].Feature(f)
		}
		z, edges, usable := binFeature(vals, p.MinLeaf, p.Bins)
		if usable {
			feats = append(feats, binned{feature: f, z: z, edges: edges})
		}
	}
	if len(feats) == 0 {
		return 0, 0, false, nil
	}
	names := model.FeatureNames()
	inst := base.NewDenseInstances()
	specs := make([]base.AttributeSpec, len(feats))
	for k, b := range feats {
		specs[k] = inst.AddAttribute(base.NewFloatAttribute(names[b.feature]))
	}
	target := base.NewFloatAttribute("speed")
	tspec := inst.AddAttribute(target)
	if err := inst.AddClassAttribute(target); err != nil {
		return 0, 0, false, fmt.Errorf("golearn: %w", err)
	}
	if err := inst.Extend(len(idx)); err != nil {
		return 0, 0, false, fmt.Errorf("golearn: %w", err)
	}
	for j, i := range idx {
		for k := range feats {
			inst.Set(specs[k], j, base.PackFloatToBytes(feats[k].z[j]))
		}
		inst.Set(tspec, j, base.PackFloatToBytes(ds.Samples[i].Speed))
	}
	reg := trees.NewDecisionTreeRegressor(trees.MSE, 1)
	if err := reg.Fit(inst); err != nil {
		return 0, 0, false, fmt.Errorf("golearn: %w", err)
	}
	if reg.RootNode == nil {
		return 0, 0, false, errors.New("golearn returned no tree")
	}
	k := int(reg.RootNode.Feature)
	if k < 0 || k >= len(feats) {
		return 0, 0, false, fmt.Errorf("golearn chose feature %d of %d", k, len(feats))
	}
	// golearn sends z < t left; z is an integer bin, so z < t <=> z <= ceil(t)-1
	// <=> raw value < edges[ceil(t)-1]. t = 0 is golearn's "no split improves".
	e := int(math.Ceil(reg.RootNode.Threshold)) - 1
	if e < 0 || e >= len(feats[k].edges) {
		return 0, 0, false, nil
	}
	return feats[k].feature, feats[k].edges[e], true, nil
}
