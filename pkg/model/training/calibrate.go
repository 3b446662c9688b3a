// SPDX-License-Identifier: Apache-2.0

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

// DefaultMinResiduals is the default CalibrationOptions.MinResiduals: with
// 100, the conformal quantile exists up to coverage 0.99.
const DefaultMinResiduals = 100

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
	// JobScale makes the margins locally adaptive (normalized conformal
	// prediction): the score is (prediction - measured) / scale, where scale
	// is the job application's difficulty, the mean |residual| of the
	// residuals with that application as the job (OutOfFold.Tag), shrunk
	// toward the overall mean by ScaleShrink pseudo-residuals; a margin is the
	// score's quantile times the job application's scale. Every score is
	// cross-fitted: its scale is learned from the other folds only.
	JobScale bool
	// ScaleShrink is the weight, in residuals, of the overall mean in an
	// application's scale (default 5).
	ScaleShrink float64
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
		o.MinResiduals = DefaultMinResiduals
	}
	if len(o.Floors) == 0 {
		f := config.Default().SpeedFloor
		o.Floors = []FloorWeight{{f.HPC, 0.2}, {f.Train, 0.6}, {f.Infer, 0.2}}
	}
	if o.Target <= 0 {
		o.Target = DefaultTarget
	}
	if o.ScaleShrink <= 0 {
		o.ScaleShrink = 5
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
		if math.IsNaN(r.Pred) || math.IsNaN(r.Truth) || math.IsInf(r.Pred, 0) || math.IsInf(r.Truth, 0) {
			return model.Calibration{}, CoverageChoice{}, errors.New("calibrate: non-finite residual")
		}
	}
	sc := newScaler(oof, o)
	cal := model.Calibration{
		Levels: slices.Clone(CoverageLevels), Margins: margins(oof, o, func(r OutOfFold) float64 { return sc.scale(r.Tag, r.Fold, "") }),
		Window: o.Window, MinResiduals: o.MinResiduals, Residuals: len(oof),
		Method: "split-conformal quantiles of leave-families-out residuals (prediction - measured), by predicted speed; default coverage by nested leave-families-out",
	}
	if o.JobScale {
		cal.Scale, cal.JobScale = sc.all()
		cal.Method = "split-conformal quantiles of leave-families-out residuals normalized by the job application's scale ((prediction - measured) / mean |residual| of the application, cross-fitted), by predicted speed; default coverage by nested leave-families-out"
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
		// scales learned without F: the rest's scores from neither F nor
		// their own fold, F's from the rest
		inner := model.Calibration{Levels: cal.Levels, Margins: margins(rest, o, func(r OutOfFold) float64 { return sc.scale(r.Tag, r.Fold, f) })}
		for _, r := range held {
			for _, fw := range o.Floors {
				fi := slices.Index(ch.Floors, fw.Floor)
				tested += fw.Weight
				fTested[fi] += fw.Weight
				for l, lv := range cal.Levels {
					if r.Pred-inner.MarginFor(r.Pred, "", lv)*sc.scale(r.Tag, f, "") >= fw.Floor {
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

// scaler holds the mean |residual| per fold, overall and per job
// application, so that an application's scale can be learned without given
// folds (cross-fitting). A plain calibration's scale is 1.
type scaler struct {
	on     bool
	shrink float64
	sum    map[string]float64            // fold -> sum of |residual|
	n      map[string]float64            // fold -> residuals
	tagSum map[string]map[string]float64 // fold -> tag -> sum
	tagN   map[string]map[string]float64
}

func newScaler(oof []OutOfFold, o CalibrationOptions) *scaler {
	s := &scaler{on: o.JobScale, shrink: o.ScaleShrink, sum: map[string]float64{}, n: map[string]float64{},
		tagSum: map[string]map[string]float64{}, tagN: map[string]map[string]float64{}}
	if !s.on {
		return s
	}
	for _, r := range oof {
		d := math.Abs(r.Pred - r.Truth)
		s.sum[r.Fold] += d
		s.n[r.Fold]++
		if s.tagSum[r.Fold] == nil {
			s.tagSum[r.Fold], s.tagN[r.Fold] = map[string]float64{}, map[string]float64{}
		}
		s.tagSum[r.Fold][r.Tag] += d
		s.tagN[r.Fold][r.Tag]++
	}
	return s
}

// scale is tag's scale learned from every fold but ex1 and ex2 ("" excludes
// nothing): (sum + shrink x mean) / (n + shrink), at least the model's
// smallest scale (1 when the scaler is off).
func (s *scaler) scale(tag, ex1, ex2 string) float64 {
	if !s.on {
		return 1
	}
	var gs, gn, ts, tn float64
	for f := range s.sum {
		if f == ex1 || f == ex2 {
			continue
		}
		gs, gn = gs+s.sum[f], gn+s.n[f]
		ts, tn = ts+s.tagSum[f][tag], tn+s.tagN[f][tag]
	}
	if gn == 0 {
		return 1
	}
	return clampScale((ts + s.shrink*gs/gn) / (tn + s.shrink))
}

// all is the overall scale and every application's, from every fold: what
// the model file stores.
func (s *scaler) all() (float64, map[string]float64) {
	var gs, gn float64
	tags := map[string]bool{}
	for f := range s.sum {
		gs, gn = gs+s.sum[f], gn+s.n[f]
		for t := range s.tagSum[f] {
			tags[t] = true
		}
	}
	out := make(map[string]float64, len(tags))
	for t := range tags {
		out[t] = s.scale(t, "", "")
	}
	return clampScale(gs / max(gn, 1)), out
}

// clampScale keeps a scale within what a model file accepts.
func clampScale(v float64) float64 { return min(max(v, 1e-3), 1) }

// margins computes the conformal margin grid (see Calibrate) for every level.
// Each residual is divided by scaleOf(r) (1 for plain margins).
func margins(oof []OutOfFold, o CalibrationOptions, scaleOf func(OutOfFold) float64) [][]float64 {
	type pr struct{ pred, res float64 }
	all := make([]pr, len(oof))
	for i, r := range oof {
		all[i] = pr{r.Pred, (r.Pred - r.Truth) / scaleOf(r)}
	}
	out := make([][]float64, len(CoverageLevels))
	for l := range out {
		out[l] = make([]float64, model.GridSteps+1)
	}
	hi := 10.0 // a plain margin, in speed
	if o.JobScale {
		hi = model.MaxNormScore
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
			out[l][g] = min(max(res[k], 0), hi)
		}
	}
	return out
}

// SeenCalibrationOptions are the default options of the seen-pairs margins
// (CalibrateSeen): margins normalized by the job application's scale,
// shrunk by 20 residuals (chosen on the training data: docs/model.md,
// "Locally adaptive seen-pairs margins").
func SeenCalibrationOptions() CalibrationOptions {
	return CalibrationOptions{JobScale: true, ScaleShrink: 20}
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
	if opts.JobScale {
		cal.Method = "split-conformal quantiles of leave-pairs-out residuals (pairs of known applications never seen together) normalized by the job application's scale (mean |residual| of the application, cross-fitted by pair fold), by predicted speed; default coverage by nested leave-pairs-out"
	}
	return cal, ch, nil
}
