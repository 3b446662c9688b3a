// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math"
	"sync"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

func prof(tag string, sm, bw, memMiB float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: profile.ClassTrain, SMUtil: profile.Stat{Mean: sm}, MemBWUtil: profile.Stat{Mean: bw}, MemUsedMiB: memMiB}
}

func TestFeatures(t *testing.T) {
	job := prof("job", 60, 30, 2048)
	a := prof("a", 50, 20, 1024)
	b := prof("b", 40, 40, 3072)
	tests := []struct {
		name string
		co   []*profile.Profile
		want map[string]float64
	}{
		{"alone", nil, map[string]float64{
			"job_sm_util_mean": 60, "job_mem_used_gib": 2, "co_count": 0, "co_sm_util_sum": 0,
			"total_sm_util": 60, "job_sm_share": 1, "sm_overlap": 0,
		}},
		{"one co-runner", []*profile.Profile{a}, map[string]float64{
			"co_count": 1, "co_sm_util_sum": 50, "co_sm_util_max": 50, "co_membw_util_sum": 20,
			"co_mem_used_gib_sum": 1, "total_sm_util": 110, "total_membw_util": 50, "total_mem_used_gib": 3,
			"job_sm_share": 60.0 / 110, "job_membw_share": 30.0 / 50, "sm_overlap": 60 * 0.5, "membw_overlap": 30 * 0.2,
		}},
		{"two co-runners and a nil", []*profile.Profile{a, nil, b}, map[string]float64{
			"co_count": 2, "co_sm_util_sum": 90, "co_sm_util_max": 50, "co_membw_util_sum": 60, "co_membw_util_max": 40,
			"co_mem_used_gib_sum": 4, "co_mem_used_gib_max": 3, "total_sm_util": 150,
			// P(some co-runner busy) = 1 - (1-0.5)(1-0.4) = 0.7
			"sm_overlap": 60 * 0.7, "membw_overlap": 30 * (1 - 0.8*0.6),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var x featureVec
			computeFeatures(job, tc.co, &x)
			for name, want := range tc.want {
				i := featureIndex(name)
				if i < 0 {
					t.Fatalf("unknown feature %s", name)
				}
				if math.Abs(x[i]-want) > 1e-9 {
					t.Errorf("%s = %v, want %v", name, x[i], want)
				}
			}
		})
	}
	if n := len(FeatureNames()); n != numFeatures {
		t.Fatalf("FeatureNames has %d names, want %d", n, numFeatures)
	}
	for i, n := range FeatureNames() {
		if n == "" || featureIndex(n) != i {
			t.Errorf("feature %d name %q does not round-trip", i, n)
		}
	}
}

func TestPredictNoAllocAndConcurrent(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000), prof("b", 20, 10, 2000)}
	if n := testing.AllocsPerRun(200, func() { _ = m.PredictSpeed(job, co) }); n != 0 {
		t.Fatalf("PredictSpeed allocates %v times per call", n)
	}
	want := m.PredictSpeed(job, co)
	var wg sync.WaitGroup
	errs := make(chan float64, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				if got := m.PredictSpeed(job, co); got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Fatalf("concurrent prediction %v, want %v", got, want)
	}
	if got := m.PredictSpeed(job, nil); got != 1 {
		t.Fatalf("alone: %v, want 1", got)
	}
	if got := m.PredictSpeed(nil, []*profile.Profile{nil}); got != 1 {
		t.Fatalf("nil job with only nil co-runners: %v, want 1", got)
	}
}

// TestCompileRejectsInvalidTrees: Compile runs the checks Decode runs.
func TestCompileRejectsInvalidTrees(t *testing.T) {
	leaf := Tree{Feature: []int32{-1}, Threshold: []float64{0}, Left: []int32{0}, Right: []int32{0}, Value: []float64{1}, Samples: []int32{1}}
	if err := (&Model{Features: FeatureNames(), Trees: []Tree{leaf}}).Compile(); err != nil {
		t.Fatalf("one leaf: %v", err)
	}
	loop := Tree{Feature: []int32{0}, Threshold: []float64{1}, Left: []int32{0}, Right: []int32{0}, Value: []float64{1}, Samples: []int32{1}}
	if err := (&Model{Features: FeatureNames(), Trees: []Tree{loop}}).Compile(); err == nil {
		t.Fatal("a tree whose root is its own child compiled")
	}
	if err := (&Model{Features: FeatureNames()[:3], Trees: []Tree{leaf}}).Compile(); err == nil {
		t.Fatal("a model with other features compiled")
	}
}

// TestPackedMatchesFlat: a tree stored in an unusual order (children not
// adjacent, right before left) predicts the same after Decode packs it as the
// flat arrays say, for values on both sides of every threshold and NaN.
func TestPackedMatchesFlat(t *testing.T) {
	f := int32(featureIndex("co_sm_util_sum"))
	g := int32(featureIndex("job_sm_util_mean"))
	tr := Tree{
		// 0: co_sm < 50 ? 4 : 1;  1: job_sm < 20 ? 3 : 2;  leaves 2: 0.8, 3: 1.0, 4: 0.6
		Feature:   []int32{f, g, -1, -1, -1},
		Threshold: []float64{50, 20, 0, 0, 0},
		Left:      []int32{4, 3, 0, 0, 0},
		Right:     []int32{1, 2, 0, 0, 0},
		Value:     []float64{0.8, 0.9, 0.8, 1.0, 0.6},
		Samples:   []int32{10, 5, 2, 3, 5},
	}
	hand := &Model{Features: FeatureNames(), Trees: []Tree{tr, tr, tr, tr, tr}}
	compiled := &Model{Features: FeatureNames(), Trees: hand.Trees}
	if err := compiled.Compile(); err != nil {
		t.Fatal(err)
	}
	b, err := hand.Encode()
	if err != nil {
		t.Fatal(err)
	}
	packed, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		job, co float64
		want    float64
	}{
		{10, 40, 0.6}, {30, 40, 0.6}, {10, 60, 1.0}, {30, 60, 0.8}, {10, 50, 1.0}, {20, 60, 0.8},
		{math.NaN(), 60, 0.8}, {10, math.NaN(), 1.0},
	}
	for _, c := range cases {
		job, co := prof("j", c.job, 0, 0), []*profile.Profile{prof("c", c.co, 0, 0)}
		if got := hand.PredictSpeed(job, co); got != c.want {
			t.Errorf("flat: job %v co %v: %v, want %v", c.job, c.co, got, c.want)
		}
		if got := packed.PredictSpeed(job, co); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("packed: job %v co %v: %v, want %v", c.job, c.co, got, c.want)
		}
		if got := compiled.PredictSpeed(job, co); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("compiled: job %v co %v: %v, want %v", c.job, c.co, got, c.want)
		}
	}
}

// The spread is the standard deviation of the trees' own predictions, computed
// without allocating; its mean is PredictSpeed.
func TestPredictSpeedSpread(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		job  *profile.Profile
		co   []*profile.Profile
	}{
		{"light pair", prof("j", 12, 5, 2000), []*profile.Profile{prof("a", 7, 3, 1500)}},
		{"heavy pair", prof("j", 95, 60, 8000), []*profile.Profile{prof("a", 90, 55, 9000)}},
		{"three jobs", prof("j", 70, 40, 4000), []*profile.Profile{prof("a", 60, 30, 3000), prof("b", 20, 10, 2000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			speed, sd := m.PredictSpeedSpread(tc.job, tc.co)
			if speed != m.PredictSpeed(tc.job, tc.co) {
				t.Fatalf("spread mean %v != PredictSpeed %v", speed, m.PredictSpeed(tc.job, tc.co))
			}
			var x featureVec
			computeFeatures(tc.job, tc.co, &x)
			var s, ss float64
			for i := range m.Trees {
				v := m.Trees[i].predict(&x)
				s += v
				ss += v * v
			}
			n := float64(len(m.Trees))
			wantSD := math.Sqrt(ss/n - (s/n)*(s/n))
			if math.Abs(sd-wantSD) > 1e-9 || math.Abs(speed-s/n) > 1e-9 {
				t.Fatalf("spread (%v, %v), want (%v, %v) from the trees one by one", speed, sd, s/n, wantSD)
			}
			if sd <= 0 {
				t.Errorf("30 bagged trees agree exactly (sd %v): suspicious", sd)
			}
			if a := testing.AllocsPerRun(100, func() { _, _ = m.PredictSpeedSpread(tc.job, tc.co) }); a != 0 {
				t.Errorf("PredictSpeedSpread allocates %v times per call", a)
			}
		})
	}
	if speed, sd := m.PredictSpeedSpread(prof("j", 50, 20, 1000), nil); speed != 1 || sd != 0 {
		t.Errorf("alone: (%v, %v), want (1, 0)", speed, sd)
	}
}
