// SPDX-License-Identifier: Apache-2.0

package training

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/model"
)

// FloorSafety is how a model's floor tests fare on measured co-locations:
// each sample is tested against each floor as placement tests it (accepted
// when the lower bound clears the floor) and counts as below its floor when
// accepted and measured below it. Weights are the floors' shares of the jobs,
// as in the calibration's choice of the default coverage.
type FloorSafety struct {
	Tested, Accepted, Below float64
}

// BelowShare is the share of accepted co-locations measured below their
// floor: the measure the calibration's default coverage is chosen on (0 when
// nothing is accepted).
func (f FloorSafety) BelowShare() float64 {
	if f.Accepted == 0 {
		return 0
	}
	return f.Below / f.Accepted
}

// BelowRate is the share of tested co-locations that were accepted and
// measured below their floor: the harm per co-location offered.
func (f FloorSafety) BelowRate() float64 {
	if f.Tested == 0 {
		return 0
	}
	return f.Below / f.Tested
}

func (f FloorSafety) String() string {
	return fmt.Sprintf("%.2f%% of accepted co-locations below their floor (%.1f of %.1f accepted, %.1f tested)",
		100*f.BelowShare(), f.Below, f.Accepted, f.Tested)
}

// EvaluateFloors tests every sample of ds against each floor with m's default
// coverage for that floor (nil floors: CalibrationOptions' default floors).
// A *model.Model's measured pairs are left out, as Evaluate leaves them out:
// a model must not be graded on its own measurements.
func EvaluateFloors(m model.Bounder, ds Dataset, floors []FloorWeight) FloorSafety {
	if mm, ok := m.(*model.Model); ok && len(mm.Measured) > 0 {
		m = mm.WithoutMeasured()
	}
	if len(floors) == 0 {
		floors = CalibrationOptions{}.withDefaults().Floors
	}
	var fs FloorSafety
	for i := range ds.Samples {
		s := &ds.Samples[i]
		for _, fw := range floors {
			fs.Tested += fw.Weight
			if _, lower := m.Bound(s.Job, s.Co, model.Query{Floor: fw.Floor}); lower >= fw.Floor {
				fs.Accepted += fw.Weight
				if s.Speed < fw.Floor {
					fs.Below += fw.Weight
				}
			}
		}
	}
	return fs
}
