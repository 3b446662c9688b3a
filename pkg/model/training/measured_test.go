// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
)

func TestMeasuredPairs(t *testing.T) {
	ob := func(tag string, co []string, s float64) observation.Observation {
		return observation.Observation{Tag: tag, CoTags: co, Speed: s}
	}
	obs := []observation.Observation{
		ob("b", []string{"a"}, 0.8),
		ob("a", []string{"b"}, 1.2), // clipped to 1
		ob("a", []string{"b"}, 0.9),
		ob("c", []string{"c"}, 0.7), // one run of c next to c: two jobs, one measurement
		ob("c", []string{"c"}, 0.9),
		ob("a", []string{"b", "c"}, 0.5), // not a pair
		ob("a", nil, 1),                  // alone
		ob("b", []string{"a"}, math.Inf(1)),
	}
	got, sd := MeasuredPairs(obs)
	want := []model.MeasuredPair{{Job: "a", Co: "b", Speed: 0.95, N: 2}, {Job: "b", Co: "a", Speed: 0.8, N: 1}, {Job: "c", Co: "c", Speed: 0.8, N: 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Job != want[i].Job || got[i].Co != want[i].Co || got[i].N != want[i].N || math.Abs(got[i].Speed-want[i].Speed) > 1e-12 {
			t.Fatalf("pair %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// a next to b measured twice (1 and 0.9): sd of two values, 1 degree of freedom
	if w := math.Sqrt(0.005); math.Abs(sd-w) > 1e-12 {
		t.Fatalf("pooled sd %v, want %v", sd, w)
	}
	if _, sd := MeasuredPairs(obs[:2]); sd != 0 {
		t.Fatalf("no repeats: sd %v, want 0", sd)
	}
}

// retrain's held-out comparison grades the trees: a model answering the
// held-out pairs from their own measurements would look perfect.
func TestEvaluateJudgesTheTrees(t *testing.T) {
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	ds := lucidDataset(t)
	got, want := Evaluate(m, ds), Evaluate(m.WithoutMeasured(), ds)
	if got.MAE != want.MAE || got.MAE == 0 {
		t.Fatalf("MAE %v, want the trees' %v (> 0)", got.MAE, want.MAE)
	}
}
