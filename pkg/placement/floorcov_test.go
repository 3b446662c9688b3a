// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// floorLowerPred is fakePred with a default coverage per floor, like a model
// with per-floor coverage: at the default coverage a floor of 0.52 or more is
// cleared with a margin of 0.06, a lower floor with none; a set coverage has
// no margin.
type floorLowerPred struct {
	fakePred
}

func (f floorLowerPred) Bound(job *profile.Profile, co []*profile.Profile, q model.Query) (float64, float64) {
	s := f.PredictSpeed(job, co)
	if len(co) == 0 || q.Coverage > 0 || q.Floor < 0.52 {
		return s, s
	}
	return s, s - 0.06
}

func (floorLowerPred) Revision() uint64 { return 0 }

// Placement asks a per-floor predictor for each affected job's bound at that
// job's floor, so a stricter class (infer here) is refused where the same
// prediction clears a looser class's floor, for the new job and for a
// resident alike.
func TestBoundAtEachJobsFloor(t *testing.T) {
	with := func(p *profile.Profile, cl profile.Class) *profile.Profile {
		q := *p
		q.Class = cl
		return &q
	}
	tests := []struct {
		name          string
		resident, job profile.Class
		coverage      float64
		want          Action
	}{
		{"train next to train: no margin at 0.5", profile.ClassTrain, profile.ClassTrain, 0, ActionShare},
		{"an infer job: 0.55 - 0.06 under its 0.52", profile.ClassTrain, profile.ClassInfer, 0, ActionWait},
		{"an infer resident: 0.575 - 0.06 under its 0.52", profile.ClassInfer, profile.ClassTrain, 0, ActionWait},
		{"a set coverage applies to every floor", profile.ClassInfer, profile.ClassInfer, 0.9, ActionShare},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster(1, 1, 24000, 4)
			put(c, "1", with(heavyA, tc.resident), 0, 0, 2)
			r := req("2", with(heavyB, tc.job), 1) // predicted 0.55, resident 0.575
			p, err := NewCoScheML(floorLowerPred{fakePred{0.5}}, Options{Floors: Floors{HPC: 0.5, Train: 0.5, Infer: 0.52}, FloorConfidence: tc.coverage})
			if err != nil {
				t.Fatal(err)
			}
			if d := p.Place(c, r); d.Action != tc.want {
				t.Fatalf("%v, want %v (%s)", d.Action, tc.want, d.Reason)
			}
		})
	}
}
