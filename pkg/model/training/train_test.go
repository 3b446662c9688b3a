// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/trees"
)

func prof(tag string, sm, bw, memMiB float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: profile.ClassTrain, SMUtil: profile.Stat{Mean: sm}, MemBWUtil: profile.Stat{Mean: bw}, MemUsedMiB: memMiB}
}

// synthetic builds a dataset whose speed depends only on the co-runner's SM
// utilization: 0.6 above 50%, 1.0 below.
func synthetic(t *testing.T) Dataset {
	t.Helper()
	cat := profile.Catalog{}
	var obs []observation.Observation
	for i := 0; i < 40; i++ {
		tag := "app" + string(rune('a'+i%26)) + "-bs" + string(rune('0'+i/26))
		cat[tag] = prof(tag, float64(5+i*2), float64(3+(i*7)%50), float64(1000+i*100))
	}
	tags := make([]string, 0, len(cat))
	for tg := range cat {
		tags = append(tags, tg)
	}
	for i, a := range tags {
		for j, b := range tags {
			if (i+j)%3 != 0 {
				continue
			}
			s := 1.0
			if cat[b].SMUtil.Mean > 50 {
				s = 0.6
			}
			obs = append(obs, observation.Observation{Tag: a, CoTags: []string{b}, Speed: s})
		}
	}
	ds, err := BuildDataset(cat, obs)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestTrainFindsTheSplit(t *testing.T) {
	ds := synthetic(t)
	m, err := Train(ds, model.Params{MaxDepth: 3, MinLeaf: 5, Trees: 1, Bins: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := m.Trees[0]
	// co_sm_util_sum and co_sm_util_max split the data identically; golearn keeps
	// the first, the sum.
	if got := model.FeatureNames()[tr.Feature[0]]; got != "co_sm_util_sum" {
		t.Fatalf("root splits on %s, want co_sm_util_sum", got)
	}
	if th := tr.Threshold[0]; th <= 49 || th > 51 {
		t.Fatalf("root threshold %v, want between the co-runner utils 49 and 51", th)
	}
	if met := Evaluate(m, ds); met.MAE > 1e-9 || float64(met.ModelAUC) != 1 {
		t.Fatalf("on its training set: MAE %v AUC %v, want 0 and 1", met.MAE, met.ModelAUC)
	}
	// The split is pure, so both children are leaves.
	if leaves(&tr) != 2 {
		t.Fatalf("%d leaves, want 2", leaves(&tr))
	}
}

// TestMatchesGolearn: with every value offered (Bins 0) and no leaf limit, the
// node-by-node driver must build the tree golearn's own recursive Fit builds, and
// the compiled tree must predict what golearn predicts.
func TestMatchesGolearn(t *testing.T) {
	full := lucidDataset(t)
	idx := make([]int, 0, 300)
	for i := 0; i < full.Len() && len(idx) < 300; i += 5 {
		idx = append(idx, i)
	}
	ds := full.Subset(idx)
	const depth = 4
	m, err := Train(ds, model.Params{MaxDepth: depth, MinLeaf: 1, Trees: 1, Bins: 0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := trees.NewDecisionTreeRegressor(trees.MSE, depth)
	if err := g.Fit(golearnInstances(t, ds)); err != nil {
		t.Fatal(err)
	}
	// Same partition of the training set, hence the same predictions on it. (On
	// unseen samples the two may differ: where two features split the training
	// set identically, float rounding in golearn's loss sums, which depend on the
	// order it is handed the samples, decides which one it keeps.)
	want := g.Predict(golearnInstances(t, ds))
	for i := range ds.Samples {
		s := &ds.Samples[i]
		if got := m.PredictSpeed(s.Job, s.Co); math.Abs(got-want[i]) > 1e-9 {
			t.Fatalf("sample %d (%s with %v): compiled %v, golearn %v", i, s.Tag, s.CoTags, got, want[i])
		}
	}
	if gl, ours := strings.Count(g.String(), "PREDICT"), leaves(&m.Trees[0]); gl != ours {
		t.Fatalf("golearn's tree has %d leaves, the compiled one %d", gl, ours)
	}
}

func golearnInstances(t testing.TB, ds Dataset) *base.DenseInstances {
	t.Helper()
	inst := base.NewDenseInstances()
	names := model.FeatureNames()
	specs := make([]base.AttributeSpec, len(names))
	for f, name := range names {
		specs[f] = inst.AddAttribute(base.NewFloatAttribute(name))
	}
	cls := base.NewFloatAttribute("speed")
	cspec := inst.AddAttribute(cls)
	if err := inst.AddClassAttribute(cls); err != nil {
		t.Fatal(err)
	}
	if err := inst.Extend(ds.Len()); err != nil {
		t.Fatal(err)
	}
	for i := range ds.Samples {
		for f := range names {
			inst.Set(specs[f], i, base.PackFloatToBytes(ds.Samples[i].Feature(f)))
		}
		inst.Set(cspec, i, base.PackFloatToBytes(ds.Samples[i].Speed))
	}
	return inst
}

func TestMinLeafAndRouting(t *testing.T) {
	ds := lucidDataset(t)
	for _, p := range []model.Params{
		{MaxDepth: 6, MinLeaf: 25, Trees: 1, Bins: 32, Seed: 1},
		{MaxDepth: 8, MinLeaf: 3, Trees: 1, Bins: 8, Seed: 1},
	} {
		m, err := Train(ds, p)
		if err != nil {
			t.Fatal(err)
		}
		tr := &m.Trees[0]
		if d := depth(tr); d > p.MaxDepth {
			t.Errorf("depth %d > max %d", d, p.MaxDepth)
		}
		// Route the training set through the compiled tree: leaf counts must be
		// the recorded ones and at least MinLeaf.
		count := make([]int32, len(tr.Feature))
		for i := range ds.Samples {
			path := path(tr, &ds.Samples[i])
			count[path[len(path)-1]]++
		}
		for i, f := range tr.Feature {
			if f >= 0 {
				continue
			}
			if count[i] != tr.Samples[i] {
				t.Errorf("leaf %d: %d samples routed, %d recorded", i, count[i], tr.Samples[i])
			}
			if int(count[i]) < p.MinLeaf {
				t.Errorf("leaf %d has %d samples, min leaf %d", i, count[i], p.MinLeaf)
			}
		}
	}
}

func TestExplain(t *testing.T) {
	ds := synthetic(t)
	m, err := Train(ds, model.Params{MaxDepth: 3, MinLeaf: 5, Trees: 1, Bins: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &ds.Samples[0]
	lines := m.Explain(s.Job, s.Co)
	if len(lines) != 2 {
		t.Fatalf("explain %q: want a split and a leaf", lines)
	}
	if !strings.HasPrefix(lines[0], "co_sm_util_sum ") || !strings.Contains(lines[0], "49") && !strings.Contains(lines[0], "5") {
		t.Fatalf("split line %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "leaf: speed ") {
		t.Fatalf("leaf line %q", lines[1])
	}
	fm, err := Train(ds, model.Params{MaxDepth: 3, MinLeaf: 5, Trees: 3, Bins: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	lines = fm.Explain(s.Job, s.Co)
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "forest of 3 trees: speed ") {
		t.Fatalf("forest explain ends with %q", last)
	}
	if got := m.Explain(s.Job, nil); len(got) != 1 || !strings.Contains(got[0], "alone") {
		t.Fatalf("explain alone: %q", got)
	}
}

func TestParamsValidate(t *testing.T) {
	bad := []model.Params{
		{MaxDepth: 0, MinLeaf: 1, Trees: 1},
		{MaxDepth: 3, MinLeaf: 0, Trees: 1},
		{MaxDepth: 3, MinLeaf: 1, Trees: 0},
		{MaxDepth: 3, MinLeaf: 1, Trees: 1, Bins: 1},
		{MaxDepth: 3, MinLeaf: 1, Trees: 1, MaxFeatures: len(model.FeatureNames()) + 1},
		{MaxDepth: 3, MinLeaf: 1, Trees: 1, Features: []string{"nope"}},
		{MaxDepth: 3, MinLeaf: 1, Trees: 1, Features: []string{"sm_overlap", "sm_overlap"}},
	}
	for _, p := range bad {
		if err := Validate(p); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	if err := Validate(DefaultParams()); err != nil {
		t.Fatal(err)
	}
}

// leaves counts the leaf nodes of a compiled tree.
func leaves(t *model.Tree) int {
	n := 0
	for _, f := range t.Feature {
		if f < 0 {
			n++
		}
	}
	return n
}

// depth is the number of splits on the tree's longest root-to-leaf path
// (children come after their parent, which Compile checks).
func depth(t *model.Tree) int {
	d := make([]int, len(t.Feature))
	best := 0
	for i, f := range t.Feature {
		if f < 0 {
			best = max(best, d[i])
			continue
		}
		d[t.Left[i]] = d[i] + 1
		d[t.Right[i]] = d[i] + 1
	}
	return best
}

// path is the node indices from the root to s's leaf.
func path(t *model.Tree, s *Sample) []int32 {
	var p []int32
	i := int32(0)
	for {
		p = append(p, i)
		f := t.Feature[i]
		if f < 0 {
			return p
		}
		if s.Feature(int(f)) < t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
}
