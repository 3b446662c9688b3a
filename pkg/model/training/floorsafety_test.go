// SPDX-License-Identifier: Apache-2.0

package training

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// fixedBounder answers every co-location with one prediction and lower bound.
type fixedBounder struct{ speed, lower float64 }

func (b fixedBounder) PredictSpeed(*profile.Profile, []*profile.Profile) float64 { return b.speed }
func (b fixedBounder) Bound(*profile.Profile, []*profile.Profile, model.Query) (float64, float64) {
	return b.speed, b.lower
}
func (fixedBounder) Revision() uint64 { return 0 }

func TestEvaluateFloors(t *testing.T) {
	ds := Dataset{Samples: []Sample{{Speed: 0.95}, {Speed: 0.8}, {Speed: 0.6}, {Speed: 0.5}}}
	floors := []FloorWeight{{Floor: 0.75, Weight: 0.8}, {Floor: 0.9, Weight: 0.2}}
	for _, tc := range []struct {
		name                   string
		m                      fixedBounder
		accepted, below, share float64
	}{
		// accepts every sample at both floors: below 0.75 are 2 (x0.8), below 0.9 are 3 (x0.2)
		{"accepts all", fixedBounder{1, 0.95}, 4, 2*0.8 + 3*0.2, (2*0.8 + 3*0.2) / 4},
		// clears 0.75 only: 4 samples x 0.8 accepted, 2 of them below
		{"accepts at 0.75 only", fixedBounder{0.9, 0.8}, 3.2, 1.6, 0.5},
		{"accepts none", fixedBounder{0.7, 0.6}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := EvaluateFloors(tc.m, ds, floors)
			near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
			if !near(fs.Tested, 4) || !near(fs.Accepted, tc.accepted) || !near(fs.Below, tc.below) || !near(fs.BelowShare(), tc.share) {
				t.Errorf("%+v (share %v), want accepted %v below %v share %v", fs, fs.BelowShare(), tc.accepted, tc.below, tc.share)
			}
		})
	}
}
