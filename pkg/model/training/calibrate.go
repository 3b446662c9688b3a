package training

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
)

// CoverageLevels are the coverage levels a calibration stores.
var CoverageLevels = []float64{0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.875, 0.9, 0.925, 0.95, 0.975, 0.99}

// DefaultTarget is the default CalibrationOptions.Target: the largest share of
// accepted held-out co-locations allowed below their floor when the default
// coverage is chosen.
const DefaultTarget = 0.005

// FloorWeight is one class's floor and its share of the jobs, for choosing the
// default coverage.
type FloorWeight struct {
	Floor, Weight float64
}

// CalibrationOptions configure Calibrate; zero fields take the defaults.
type CalibrationOptions struct {
	// Window is the starting half-width, in predicted speed, of the residuals
	// behind each grid point (default 0.05).
	Window float64
	// MinResiduals is the fewest residuals behind a grid point's quantile
	// (default 100; the window widens until it holds that many): with 100, the
	// conformal quantile exists up to coverage 0.99.
	MinResiduals int
	// Floors are the classes' floors and shares the default coverage is chosen
	// for (default: the configuration's default floors, hpc 0.75 / train 0.75 /
	// infer 0.9, weighted 0.2 / 0.6 / 0.2 as the simulator's class mix).
	Floors []FloorWeight
	// Target is the largest share of accepted co-locations allowed to fall
	// below their floor when choosing the default coverage (default
	// DefaultTarget).
	Target float64
	// NoFloorCoverage leaves Calibration.FloorCoverage empty: every floor is
	// tested at the class-weighted default (the rule before per-floor
	// coverage; for comparisons).
	NoFloorCoverage bool
}

// FloorCoverageRule chooses a default coverage per floor (floors ascending,
// violation[f][l] the nested share of floor f's accepted held-out
// co-locations below it at levels[l]): the loosest floor keeps the
// class-weighted default chosen; each stricter floor gets the lowest level,
// not below the previous floor's, at which its violation share is at most the
// previous floor's at that floor's coverage (the highest level when none is).
// So the below-floor rate of accepted co-locations is ordered stricter floor
// <= looser floor on the training data: infer (0.9) is protected at least as
// well as hpc/train (0.75) per co-location, and, sharing less, more per job.
func FloorCoverageRule(levels []float64, chosen float64, violation [][]float64) []float64 {
	out := make([]float64, len(violation))
	if len(violation) == 0 || len(levels) == 0 {
		return out
	}
	prev := max(slices.Index(levels, chosen), 0)
	out[0] = levels[prev]
	for f := 1; f < len(violation); f++ {
		budget := violation[f-1][prev]
		l := prev
		for l < len(levels)-1 && violation[f][l] > budget {
			l++
		}
		out[f], prev = levels[l], l
	}
	return out
}

func (o CalibrationOptions) withDefaults() CalibrationOptions {
	if o.Window <= 0 {
		o.Window = 0.05
	}
	if o.MinResiduals <= 0 {
		o.MinResiduals = 100
	}
	if len(o.Floors) == 0 {
		f := config.Default().SpeedFloor
		o.Floors = []FloorWeight{{f.HPC, 0.2}, {f.Train, 0.6}, {f.Infer, 0.2}}
	}
	if o.Target <= 0 {
		o.Target = DefaultTarget
	}
	return o
}

// CoverageChoice is how the default coverage was chosen: per level, the share
// of accepted held-out co-locations that fell below their floor, and the share
// accepted, in nested leave-families-out.
type CoverageChoice struct {
	Levels    []float64
	Violation []float64 // below floor / accepted, class-weighted
	Accepted  []float64 // accepted / tested, class-weighted
	Chosen    float64
	Target    float64
	// Per distinct floor (ascending; classes with the same floor pooled):
	// FloorViolation[f][l] and FloorAccepted[f][l] as above for that floor
	// alone, and the default coverage chosen for it (FloorCoverageRule).
	Floors         []float64
	FloorViolation [][]float64
	FloorAccepted  [][]float64
	FloorChosen    []float64
}

// Calibrate builds conformal margins from out-of-fold predictions (normally
// LeaveFamiliesOut's OutOfFold, so each residual comes from a model that never
// saw the sample's family) and chooses the default coverage:
//
//   - Margins: for each coverage level and predicted speed p on a grid of
//     0.01, the split-conformal quantile (the ceil((n+1) level)-th smallest)
//     of prediction - measured among the n residuals whose prediction lies
//     within Window of p (widened until n >= MinResiduals), floored at 0.
//   - Default coverage: nested by fold. For each held-out family F, margins
//     are rebuilt from the other families' residuals only, and every sample of
//     F is tested against each class's floor: accepted when prediction -
//     margin >= floor, a violation when accepted and the measured speed is
//     below the floor. The default is the lowest level whose class-weighted
//     violation share of accepted samples is at most Target (the highest
//     level when none is). Only training data is used; never a simulation.
func Calibrate(oof []OutOfFold, opts CalibrationOptions) (model.Calibration, CoverageChoice, error) {
	o := opts.withDefaults()
	if len(oof) < o.MinResiduals {
		return model.Calibration{}, CoverageChoice{}, fmt.Errorf("calibrate: %d out-of-fold residuals, want at least %d", len(oof), o.MinResiduals)
	}
	for _, r := range oof {
		if math.IsNaN(r.Pred) || math.IsNaN(r.Truth) {
			return model.Calibration{}, CoverageChoice{}, errors.New("calibrate: NaN residual")
		}
	}
	cal := model.Calibration{
		Levels: slices.Clone(CoverageLevels), Margins: margins(oof, o),
		Window: o.Window, MinResiduals: o.MinResiduals, Residuals: len(oof),
		Method: "split-conformal quantiles of leave-families-out residuals (prediction - measured), by predicted speed; default coverage by nested leave-families-out",
	}
	ch := CoverageChoice{Levels: cal.Levels, Target: o.Target,
		Violation: make([]float64, len(cal.Levels)), Accepted: make([]float64, len(cal.Levels))}
	var folds []string
	for _, r := range oof {
		if !slices.Contains(folds, r.Fold) {
			folds = append(folds, r.Fold)
		}
	}
	acc := make([]float64, len(cal.Levels))
	bad := make([]float64, len(cal.Levels))
	tested := 0.0
	for _, fw := range o.Floors {
		if !slices.Contains(ch.Floors, fw.Floor) {
			ch.Floors = append(ch.Floors, fw.Floor)
		}
	}
	slices.Sort(ch.Floors)
	nf := len(ch.Floors)
	fAcc, fBad, fTested := make([][]float64, nf), make([][]float64, nf), make([]float64, nf)
	for i := range ch.Floors {
		fAcc[i], fBad[i] = make([]float64, len(cal.Levels)), make([]float64, len(cal.Levels))
	}
	for _, f := range folds {
		var rest, held []OutOfFold
		for _, r := range oof {
			if r.Fold == f {
				held = append(held, r)
			} else {
				rest = append(rest, r)
			}
		}
		if len(rest) < o.MinResiduals {
			continue // too little left to calibrate on: this fold cannot be scored
		}
		inner := model.Model{Calibration: model.Calibration{Levels: cal.Levels, Margins: margins(rest, o)}}
		for _, r := range held {
			for _, fw := range o.Floors {
				fi := slices.Index(ch.Floors, fw.Floor)
				tested += fw.Weight
				fTested[fi] += fw.Weight
				for l, lv := range cal.Levels {
					if r.Pred-inner.Margin(r.Pred, lv) >= fw.Floor {
						acc[l] += fw.Weight
						fAcc[fi][l] += fw.Weight
						if r.Truth < fw.Floor {
							bad[l] += fw.Weight
							fBad[fi][l] += fw.Weight
						}
					}
				}
			}
		}
	}
	ch.Chosen = cal.Levels[len(cal.Levels)-1]
	for l := len(cal.Levels) - 1; l >= 0; l-- {
		if tested > 0 {
			ch.Accepted[l] = acc[l] / tested
		}
		if acc[l] > 0 {
			ch.Violation[l] = bad[l] / acc[l]
		}
	}
	for l := range cal.Levels {
		if tested > 0 && ch.Violation[l] <= o.Target {
			ch.Chosen = cal.Levels[l]
			break
		}
	}
	cal.DefaultCoverage = ch.Chosen
	ch.FloorViolation, ch.FloorAccepted = make([][]float64, nf), make([][]float64, nf)
	for i := range ch.Floors {
		ch.FloorViolation[i], ch.FloorAccepted[i] = make([]float64, len(cal.Levels)), make([]float64, len(cal.Levels))
		for l := range cal.Levels {
			if fTested[i] > 0 {
				ch.FloorAccepted[i][l] = fAcc[i][l] / fTested[i]
			}
			if fAcc[i][l] > 0 {
				ch.FloorViolation[i][l] = fBad[i][l] / fAcc[i][l]
			}
		}
	}
	if tested > 0 && !o.NoFloorCoverage {
		ch.FloorChosen = FloorCoverageRule(cal.Levels, ch.Chosen, ch.FloorViolation)
		for i, f := range ch.Floors {
			cal.FloorCoverage = append(cal.FloorCoverage, model.FloorCoverage{Floor: f, Coverage: ch.FloorChosen[i]})
		}
	}
	if err := cal.Valid(); err != nil {
		return model.Calibration{}, ch, fmt.Errorf("calibrate: %w", err)
	}
	return cal, ch, nil
}

// margins computes the conformal margin grid (see Calibrate) for every level.
func margins(oof []OutOfFold, o CalibrationOptions) [][]float64 {
	type pr struct{ pred, res float64 }
	all := make([]pr, len(oof))
	for i, r := range oof {
		all[i] = pr{r.Pred, r.Pred - r.Truth}
	}
	out := make([][]float64, len(CoverageLevels))
	for l := range out {
		out[l] = make([]float64, model.GridSteps+1)
	}
	res := make([]float64, 0, len(all))
	for g := 0; g <= model.GridSteps; g++ {
		p := float64(g) / model.GridSteps
		for w := o.Window; ; w += 0.01 {
			res = res[:0]
			for _, x := range all {
				if math.Abs(x.pred-p) <= w {
					res = append(res, x.res)
				}
			}
			if len(res) >= o.MinResiduals || len(res) == len(all) {
				break
			}
		}
		sort.Float64s(res)
		n := len(res)
		for l, lv := range CoverageLevels {
			k := int(math.Ceil(float64(n+1)*lv)) - 1 // 0-based rank
			k = min(max(k, 0), n-1)
			out[l][g] = min(max(res[k], 0), 10)
		}
	}
	return out
}

// SeenPairsFolds is the number of folds CalibrateSeen deals the pairs into.
const SeenPairsFolds = 10

// CalibrateSeen builds the seen-pairs margins (model.Model.SeenCalibration):
// Calibrate on LeavePairsOut's residuals (SeenPairsFolds folds of pairs, seed
// p.Seed), so the margins are the errors on a pair of known applications the
// model never saw together, and the default coverage is chosen by the same
// nested rule with the pair folds as folds. Training data only.
func CalibrateSeen(ds Dataset, p model.Params, opts CalibrationOptions) (model.Calibration, CoverageChoice, error) {
	lpo, err := LeavePairsOut(ds, SeenPairsFolds, p, p.Seed)
	if err != nil {
		return model.Calibration{}, CoverageChoice{}, fmt.Errorf("seen-pairs margins: %w", err)
	}
	cal, ch, err := Calibrate(lpo.OutOfFold, opts)
	if err != nil {
		return model.Calibration{}, ch, fmt.Errorf("seen-pairs margins: %w", err)
	}
	cal.Method = "split-conformal quantiles of leave-pairs-out residuals (pairs of known applications never seen together), by predicted speed; default coverage by nested leave-pairs-out"
	return cal, ch, nil
}
