// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// The shipped model answers a pair its training data measured from the
// measurement, bounded by the measurement noise at the coverage the floor
// asks; any other co-location from the trees, as before.
func TestMeasuredPairAnswers(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Measured) == 0 {
		t.Fatal("the shipped model has no measured pairs")
	}
	trees := m.WithoutMeasured()
	mp := m.Measured[len(m.Measured)/2]
	job, co := &profile.Profile{Tag: mp.Job}, &profile.Profile{Tag: mp.Co}
	other := &profile.Profile{Tag: "never-measured", SMUtil: profile.Stat{Mean: 40}}
	noise := max(m.MeasuredSD, MeasuredNoiseFloor)
	tests := []struct {
		name        string
		co          []*profile.Profile
		floor, cov  float64
		measured    bool
		wantSpeed   float64
		wantMarginZ float64 // the bound is wantSpeed - NormalQuantile(this) * noise / sqrt(N)
	}{
		{"measured, train floor, default coverage", []*profile.Profile{co}, 0.75, 0, true, mp.Speed, m.SeenCalibration.CoverageAt(0.75)},
		{"measured, infer floor, default coverage", []*profile.Profile{co}, 0.9, 0, true, mp.Speed, m.SeenCalibration.CoverageAt(0.9)},
		{"measured, coverage asked", []*profile.Profile{co}, 0.9, 0.8, true, mp.Speed, 0.8},
		{"unmeasured co-runner", []*profile.Profile{other}, 0.9, 0, false, 0, 0},
		{"two co-runners", []*profile.Profile{co, co}, 0.75, 0, false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.IsMeasured(job, tc.co); got != tc.measured {
				t.Fatalf("IsMeasured %v, want %v", got, tc.measured)
			}
			s, l := m.Bound(job, tc.co, Query{Coverage: tc.cov, Floor: tc.floor})
			if !tc.measured {
				ws, wl := trees.Bound(job, tc.co, Query{Coverage: tc.cov, Floor: tc.floor})
				if s != ws || l != wl || m.PredictSpeed(job, tc.co) != trees.PredictSpeed(job, tc.co) {
					t.Fatalf("(%v, %v), want the trees' (%v, %v)", s, l, ws, wl)
				}
				return
			}
			want := tc.wantSpeed - NormalQuantile(tc.wantMarginZ)*noise/math.Sqrt(float64(mp.N))
			if s != tc.wantSpeed || math.Abs(l-want) > 1e-12 || m.PredictSpeed(job, tc.co) != tc.wantSpeed {
				t.Fatalf("(%v, %v), want (%v, %v)", s, l, tc.wantSpeed, want)
			}
		})
	}
	if m.SeenCalibration.CoverageAt(0.9) <= m.SeenCalibration.CoverageAt(0.75) {
		t.Fatal("infer's floor is not bounded at a higher coverage than train's")
	}
}

func TestNormalQuantile(t *testing.T) {
	for _, tc := range []struct{ c, want float64 }{{0.5, 0}, {0.3, 0}, {math.NaN(), 0}, {0.975, 1.959964}, {0.95, 1.644854}, {1, 3.719016}} {
		if got := NormalQuantile(tc.c); math.Abs(got-tc.want) > 1e-5 {
			t.Errorf("NormalQuantile(%v) = %v, want %v", tc.c, got, tc.want)
		}
	}
}

// Explain says when the answer is a measurement rather than the trees' path.
func TestExplainMeasured(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	mp := m.Measured[0]
	job := &profile.Profile{Tag: mp.Job}
	lines := m.Explain(job, []*profile.Profile{{Tag: mp.Co}})
	if last := lines[len(lines)-1]; !strings.Contains(last, "measured pair") {
		t.Fatalf("last line %q does not name the measurement", last)
	}
	lines = m.WithoutMeasured().Explain(job, []*profile.Profile{{Tag: mp.Co}})
	if last := lines[len(lines)-1]; strings.Contains(last, "measured pair") {
		t.Fatalf("trees alone: %q", last)
	}
}
