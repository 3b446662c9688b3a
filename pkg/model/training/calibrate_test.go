// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
)

func TestFloorCoverageRule(t *testing.T) {
	levels := []float64{0.5, 0.9, 0.95, 0.99}
	tests := []struct {
		name      string
		chosen    float64
		violation [][]float64 // [floor][level], floors ascending
		want      []float64
	}{
		{"stricter floor already no worse: same coverage", 0.9,
			[][]float64{{0.05, 0.01, 0.005, 0}, {0.04, 0.01, 0.004, 0}}, []float64{0.9, 0.9}},
		{"stricter floor worse: raised to the first level at or under the looser's share", 0.9,
			[][]float64{{0.05, 0.01, 0.005, 0}, {0.2, 0.08, 0.012, 0.002}}, []float64{0.9, 0.99}},
		{"never under: the highest level", 0.5,
			[][]float64{{0.01, 0, 0, 0}, {0.2, 0.1, 0.05, 0.01}}, []float64{0.5, 0.99}},
		{"never below the looser floor's coverage even where a lower level would do", 0.95,
			[][]float64{{0.05, 0.01, 0.005, 0.001}, {0, 0, 0.006, 0.001}}, []float64{0.95, 0.99}},
		{"three floors: each against the next looser one", 0.5,
			[][]float64{{0.03, 0.02, 0.01, 0}, {0.05, 0.02, 0.01, 0}, {0.08, 0.03, 0.01, 0}}, []float64{0.5, 0.9, 0.95}},
		{"one floor: the class-weighted default", 0.95, [][]float64{{0.05, 0.01, 0.005, 0}}, []float64{0.95}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FloorCoverageRule(levels, tc.chosen, tc.violation); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// constructedResiduals: predictions between 0.55 and 1.0 in 6 folds; the
// model errs by about 0.01 either way, and from 0.85 on it also overestimates
// by 0.12 one time in 33 (a blind spot where infer's floor is decided), so at
// one coverage for every floor the 0.9 floor's accepted co-locations fall
// below it far more often than the 0.75 floor's.
func constructedResiduals() []OutOfFold {
	r := rand.New(rand.NewPCG(9, 9))
	var oof []OutOfFold
	for f := range 6 {
		for range 400 {
			p := 0.55 + 0.45*r.Float64()
			res := 0.01 * r.NormFloat64()
			if p >= 0.85 {
				res = 0.01 * r.NormFloat64()
				if r.IntN(33) == 0 {
					res = 0.12
				}
			}
			oof = append(oof, OutOfFold{Fold: "f" + strconv.Itoa(f), Pred: p, Truth: p - res})
		}
	}
	return oof
}

// Calibrating the constructed residuals gives infer's floor a higher coverage
// than hpc/train's, at which the share of its accepted held-out co-locations
// below the floor is no higher than theirs; the stored model round-trips
// from disk with it.
func TestCalibratePerFloor(t *testing.T) {
	oof := constructedResiduals()
	floors := []FloorWeight{{0.75, 0.2}, {0.75, 0.6}, {0.9, 0.2}} // hpc, train, infer
	tests := []struct {
		name     string
		opts     CalibrationOptions
		perFloor bool
	}{
		{"per-floor coverage (default)", CalibrationOptions{Floors: floors, Target: 0.01}, true},
		{"class-weighted only (NoFloorCoverage)", CalibrationOptions{Floors: floors, Target: 0.01, NoFloorCoverage: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cal, ch, err := Calibrate(oof, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ch.Floors, []float64{0.75, 0.9}) {
				t.Fatalf("floors %v, want the distinct floors 0.75, 0.9", ch.Floors)
			}
			at := func(c float64) int { return slices.Index(ch.Levels, c) }
			d := at(cal.DefaultCoverage)
			// the premise: at the class-weighted default, infer's floor is
			// worse protected than hpc/train's
			if !(ch.FloorViolation[1][d] > ch.FloorViolation[0][d]) {
				t.Fatalf("constructed set: at %v, floor 0.9 %v, floor 0.75 %v below floor: no ordering to restore",
					cal.DefaultCoverage, ch.FloorViolation[1][d], ch.FloorViolation[0][d])
			}
			if !tc.perFloor {
				if len(cal.FloorCoverage) != 0 || cal.CoverageAt(0.9) != cal.DefaultCoverage {
					t.Fatalf("NoFloorCoverage: %v, infer at %v", cal.FloorCoverage, cal.CoverageAt(0.9))
				}
				return
			}
			if len(cal.FloorCoverage) != 2 || cal.FloorCoverage[0] != (model.FloorCoverage{Floor: 0.75, Coverage: cal.DefaultCoverage}) {
				t.Fatalf("floor coverage %v, want 0.75 at the default %v, then 0.9", cal.FloorCoverage, cal.DefaultCoverage)
			}
			lo, hi := at(cal.CoverageAt(0.75)), at(cal.CoverageAt(0.9))
			if !(hi > lo) || !(ch.FloorViolation[1][hi] <= ch.FloorViolation[0][lo]) {
				t.Fatalf("infer at %v (%v below floor), hpc/train at %v (%v): want infer higher and no worse protected",
					ch.Levels[hi], ch.FloorViolation[1][hi], ch.Levels[lo], ch.FloorViolation[0][lo])
			}
			// the lowest such level: one below it would break the ordering
			if hi-1 > lo && ch.FloorViolation[1][hi-1] <= ch.FloorViolation[0][lo] {
				t.Fatalf("infer at %v although %v already orders it", ch.Levels[hi], ch.Levels[hi-1])
			}
			// stored and read back from disk
			m, err := model.Default()
			if err != nil {
				t.Fatal(err)
			}
			mm := *m
			mm.Calibration, mm.SeenCalibration, mm.Tags = cal, model.Calibration{}, nil
			if err := mm.Compile(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "per-floor.model")
			if err := mm.Save(path); err != nil {
				t.Fatal(err)
			}
			got, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Calibration.FloorCoverage, cal.FloorCoverage) || got.Calibration.CoverageAt(0.9) != ch.Levels[hi] {
				t.Fatalf("after reload: %v, want %v", got.Calibration.FloorCoverage, cal.FloorCoverage)
			}
		})
	}
}
