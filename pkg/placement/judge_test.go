// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// TestJudgeShare: the verdict is Place's on one GPU holding the co-runners,
// and each job's bound is the one the floor test reads (lowerPred: margin 0.05
// at its default coverage).
func TestJudgeShare(t *testing.T) {
	pol, err := NewCoScheML(lowerPred{fakePred{k: 0.5}}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	job := func(id string, cl profile.Class, sm, mem float64) Resident {
		return Resident{JobID: id, Profile: prof("app-"+id, cl, sm, mem), Class: cl}
	}
	cases := []struct {
		name      string
		jobs      []Resident
		wantShare bool
		reason    string    // in the reason when refused
		lower     []float64 // each job's lower bound
	}{
		{name: "light pair shares", jobs: []Resident{job("a", profile.ClassTrain, 20, 1000), job("b", profile.ClassTrain, 20, 1000)},
			wantShare: true, lower: []float64{0.85, 0.85}},
		{name: "predictions clear the floor, lower bounds do not", jobs: []Resident{job("a", profile.ClassTrain, 48, 1000), job("b", profile.ClassTrain, 48, 1000)},
			wantShare: false, reason: "below speed floor", lower: []float64{0.71, 0.71}},
		// The infer job's bound is its latency speed: 1 / (1 + 0.30) next to a
		// co-runner busy 30% of the time, below the throughput bound 0.80.
		{name: "infer's stricter floor, by latency", jobs: []Resident{job("a", profile.ClassInfer, 10, 1000), job("b", profile.ClassTrain, 30, 1000)},
			wantShare: false, reason: "below speed floor", lower: []float64{1 / 1.3, 0.90}},
		{name: "memory does not fit", jobs: []Resident{job("a", profile.ClassTrain, 10, 20000), job("b", profile.ClassTrain, 10, 20000)},
			wantShare: false, reason: "memory", lower: []float64{0.90, 0.90}},
		{name: "more jobs than max_corunners", jobs: []Resident{job("a", profile.ClassTrain, 5, 100), job("b", profile.ClassTrain, 5, 100), job("c", profile.ClassTrain, 5, 100)},
			wantShare: false, reason: "", lower: []float64{0.90, 0.90, 0.90}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := pol.JudgeShare(tc.jobs, 32768, 4)
			if v.Share != tc.wantShare {
				t.Errorf("share %v, want %v (reason %q)", v.Share, tc.wantShare, v.Reason)
			}
			if !tc.wantShare && !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", v.Reason, tc.reason)
			}
			if len(v.Jobs) != len(tc.jobs) {
				t.Fatalf("%d bounds for %d jobs", len(v.Jobs), len(tc.jobs))
			}
			for i, b := range v.Jobs {
				wantFloor := DefaultOptions().Floors.For(tc.jobs[i].Class)
				if math.Abs(b.Lower-tc.lower[i]) > 1e-9 || b.Floor != wantFloor || b.Class != tc.jobs[i].Class || b.Lower > b.Speed {
					t.Errorf("job %d: %+v, want lower %.2f floor %.2f", i, b, tc.lower[i], wantFloor)
				}
			}
		})
	}
}
