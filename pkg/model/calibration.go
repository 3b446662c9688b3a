// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safetext"
)

// Calibration holds conformal margins measured at training time: for each
// coverage level and each predicted speed, how far the model's prediction may
// lie above the measured speed. It is built by package training from the
// model's own leave-families-out cross-validation residuals (prediction -
// measured speed of samples whose family the fold model never saw) on the
// training data only, and stored in the model file (format 2).
//
// The margins are conditional on the predicted speed (Mondrian conformal
// prediction over a grid of predicted speeds): the model errs differently for
// pairs it calls safe and pairs it calls slow, and a floor is only ever tested
// near it. So the margin a class gets is the grid's value at a prediction near
// the class's floor (see ClassMargins): a per-class margin that follows the
// configured floors instead of being fixed at training time.
type Calibration struct {
	// Levels are the coverage levels, ascending, each in (0, 1).
	Levels []float64 `codec:"levels" json:"levels"`
	// Margins[l][g] is the conformal quantile at Levels[l] of (prediction -
	// measured) among the residuals whose prediction lies near Grid(g) =
	// g/GridSteps. A margin is never negative: a model that underestimates is
	// not given credit for it.
	Margins [][]float64 `codec:"margins" json:"margins"`
	// Window is the half-width in predicted speed of the residuals used at
	// each grid point (widened, per point, until MinResiduals are inside).
	Window float64 `codec:"window" json:"window"`
	// MinResiduals is the fewest residuals behind any grid point's quantile.
	MinResiduals int `codec:"min_residuals" json:"min_residuals"`
	// Residuals is how many cross-validation residuals it was built from.
	Residuals int `codec:"residuals" json:"residuals"`
	// DefaultCoverage is the coverage level chosen by cross-validation on the
	// training data (the one a configuration's floor_confidence 0 asks for).
	DefaultCoverage float64 `codec:"default_coverage" json:"default_coverage"`
	// Method says how the residuals and the default were obtained, in words.
	Method string `codec:"method" json:"method"`
	// FloorCoverage is the default coverage per floor (ascending floors,
	// non-decreasing coverage), chosen at training time so that a stricter
	// floor's accepted co-locations fall below it no more often than a looser
	// floor's (infer is protected most; docs/model.md, "Per-floor coverage").
	// Empty in older files: every floor then uses DefaultCoverage.
	FloorCoverage []FloorCoverage `codec:"floor_coverage,omitempty" json:"floor_coverage,omitempty"`
	// Scale > 0 makes the margins locally adaptive (normalized conformal
	// prediction; format 3): Margins then hold quantiles of (prediction -
	// measured) / scale, where scale is the job application's difficulty,
	// JobScale[tag] (the mean |residual| of the calibration's residuals with
	// that application as the job, shrunk toward the overall mean), or Scale
	// (the overall mean) for an application without an entry; a margin is the
	// quantile times that scale. So an application the model judges well gets
	// a narrower margin than one it often misjudges. 0 (older files): Margins
	// are in speed, the same for every application.
	Scale    float64            `codec:"scale,omitempty" json:"scale,omitempty"`
	JobScale map[string]float64 `codec:"job_scale,omitempty" json:"job_scale,omitempty"`
}

// FloorCoverage is the default coverage for a speed floor: a floor tested at
// coverage 0 uses the entry with the highest Floor at or below it.
type FloorCoverage struct {
	Floor    float64 `codec:"floor" json:"floor"`
	Coverage float64 `codec:"coverage" json:"coverage"`
}

// GridSteps is the resolution of the predicted-speed grid: margins are kept
// for predicted speeds 0, 0.01, ..., 1 (a prediction above 1 uses the last).
const GridSteps = 100

// MaxNormScore bounds a normalized calibration's quantiles (residual /
// scale); a plain calibration's margins stay within [0, 10].
const MaxNormScore = 1000

// minScale is the smallest scale a normalized calibration may hold, so that a
// quantile times its scale stays a number a floor test can use.
const minScale = 1e-4

// Valid checks the calibration's shape and numbers (an empty one is valid:
// a model without calibration).
func (c *Calibration) Valid() error {
	if len(c.Levels) == 0 && len(c.Margins) == 0 {
		return nil
	}
	if len(c.Levels) != len(c.Margins) || len(c.Levels) > 64 {
		return fmt.Errorf("calibration: %d levels, %d margin rows", len(c.Levels), len(c.Margins))
	}
	if !(c.Scale >= 0 && c.Scale <= 1) || (c.Scale == 0 && len(c.JobScale) > 0) || len(c.JobScale) > maxTags {
		return fmt.Errorf("calibration: scale %v with %d application scales: want a scale in [0, 1], positive when there are application scales, at most %d", c.Scale, len(c.JobScale), maxTags)
	}
	for tag, v := range c.JobScale {
		if tag == "" || len(tag) > 256 || !(v >= minScale && v <= 1) {
			return fmt.Errorf("calibration: application scale %v for %q: want a tag of 1-256 bytes and a scale in [%v, 1]", v, safetext.Limit(tag, 64), minScale)
		}
	}
	if c.Scale > 0 && c.Scale < minScale {
		return fmt.Errorf("calibration: scale %v: want at least %v", c.Scale, minScale)
	}
	hi := 10.0 // a margin in speed
	if c.Scale > 0 {
		hi = MaxNormScore // a quantile of residual / scale
	}
	prev := 0.0
	for l, lv := range c.Levels {
		if !(lv > prev && lv < 1) {
			return fmt.Errorf("calibration: level %v: want ascending values in (0, 1)", lv)
		}
		prev = lv
		if len(c.Margins[l]) != GridSteps+1 {
			return fmt.Errorf("calibration: level %v has %d grid points, want %d", lv, len(c.Margins[l]), GridSteps+1)
		}
		for _, v := range c.Margins[l] {
			if !(v >= 0 && v <= hi) {
				return fmt.Errorf("calibration: level %v: margin %v outside [0, %v]", lv, v, hi)
			}
		}
	}
	if c.DefaultCoverage != 0 && !(c.DefaultCoverage > 0 && c.DefaultCoverage < 1) {
		return fmt.Errorf("calibration: default coverage %v outside (0, 1)", c.DefaultCoverage)
	}
	if len(c.FloorCoverage) > 64 {
		return fmt.Errorf("calibration: %d floor coverages, want at most 64", len(c.FloorCoverage))
	}
	for i, fc := range c.FloorCoverage {
		if !(fc.Floor > 0 && fc.Floor <= 1) || !(fc.Coverage > 0 && fc.Coverage < 1) {
			return fmt.Errorf("calibration: floor coverage %v at floor %v: want a floor in (0, 1] and a coverage in (0, 1)", fc.Coverage, fc.Floor)
		}
		// ascending floors with non-decreasing coverage: a stricter floor is
		// never tested at a lower coverage than a looser one
		if i > 0 && !(fc.Floor > c.FloorCoverage[i-1].Floor && fc.Coverage >= c.FloorCoverage[i-1].Coverage) {
			return fmt.Errorf("calibration: floor coverage %v at floor %v after %v at %v: want ascending floors and non-decreasing coverage",
				fc.Coverage, fc.Floor, c.FloorCoverage[i-1].Coverage, c.FloorCoverage[i-1].Floor)
		}
	}
	return nil
}

// CoverageAt is the default coverage for a job whose floor is floor: the
// FloorCoverage entry with the highest floor at or below it, never below
// DefaultCoverage (a floor under every entry, or a calibration without
// entries, gets DefaultCoverage). 0 without calibration.
func (c *Calibration) CoverageAt(floor float64) float64 {
	cov := c.DefaultCoverage
	for _, fc := range c.FloorCoverage {
		if fc.Floor > floor+1e-9 {
			break
		}
		cov = max(cov, fc.Coverage)
	}
	return cov
}

// Calibrated reports whether the model carries conformal margins.
func (m *Model) Calibrated() bool { return len(m.Calibration.Levels) > 0 }

// Margin is how far below a prediction of speed the measured speed may lie
// at the given coverage (0: the model's DefaultCoverage). Coverage between two
// stored levels uses the higher one (never less safe than asked); above the
// highest, the highest. A model without calibration has margin 0. For a
// normalized calibration it is the margin of an application at the overall
// scale (Scale); a decision uses the job application's own (MarginFor). For
// reports.
func (m *Model) Margin(speed, coverage float64) float64 {
	return m.Calibration.margin(speed, "", coverage)
}

// MarginFor is the margin of a prediction of speed for a job of application
// tag, at coverage (0: the default): Margin's rule, times the application's
// scale when the calibration is normalized.
func (c *Calibration) MarginFor(speed float64, tag string, coverage float64) float64 {
	return c.margin(speed, tag, coverage)
}

// scaleFor is the normalizer of the job application tag's margins: 1 for a
// plain calibration, else its JobScale entry, or Scale without one ("" is
// never an entry: the overall scale).
func (c *Calibration) scaleFor(tag string) float64 {
	if c.Scale <= 0 {
		return 1
	}
	if v, ok := c.JobScale[tag]; ok {
		return v
	}
	return c.Scale
}

// margin is MarginFor.
func (c *Calibration) margin(speed float64, tag string, coverage float64) float64 {
	if len(c.Levels) == 0 {
		return 0
	}
	if coverage <= 0 {
		coverage = c.DefaultCoverage
	}
	l := len(c.Levels) - 1
	for i, lv := range c.Levels {
		if lv >= coverage-1e-9 {
			l = i
			break
		}
	}
	g := 0
	switch {
	case speed >= 1 || math.IsNaN(speed):
		g = GridSteps // NaN is refused by the caller's floor test anyway
	case speed > 0:
		g = int(math.Round(speed * GridSteps))
	}
	return c.Margins[l][g] * c.scaleFor(tag)
}

// Bound implements Bounder: the prediction and its lower bound, the
// prediction less the calibration's margin at q.Coverage. Coverage 0 asks for
// the default coverage the calibration chose for q.Floor
// (Calibration.CoverageAt: floor 0, below every per-floor entry, gets
// DefaultCoverage), so a stricter floor (infer's) is cleared with a wider
// margin; a coverage > 0 applies as given. Placement tests the floors against
// the lower bound. Like PredictSpeed it does not allocate.
func (m *Model) Bound(job *profile.Profile, co []*profile.Profile, q Query) (speed, lower float64) {
	coverage, floor := q.Coverage, q.Floor
	if p, ok := m.measuredPair(job, co); ok {
		if coverage <= 0 {
			coverage = m.DefaultCoverageForFloor(job, co, floor)
		}
		return p.Speed, m.measuredLower(p, coverage)
	}
	var x featureVec
	computeFeatures(job, co, &x)
	if x[fCoCount] == 0 || len(m.Trees) == 0 {
		return 1, 1
	}
	speed, _ = m.predictVec(&x)
	cal := &m.Calibration
	if m.seen(job, co) {
		cal = &m.SeenCalibration
	}
	if coverage <= 0 {
		coverage = cal.CoverageAt(floor)
	}
	return speed, speed - cal.margin(speed, job.Tag, coverage)
}

// DefaultCoverageForFloor is DefaultCoverageFor for a job whose floor is
// floor: the default coverage of the calibration that bounds job next to co,
// for that floor.
func (m *Model) DefaultCoverageForFloor(job *profile.Profile, co []*profile.Profile, floor float64) float64 {
	if job != nil && !slices.Contains(co, nil) && m.seen(job, co) {
		return m.SeenCalibration.CoverageAt(floor)
	}
	return m.Calibration.CoverageAt(floor)
}

// DefaultCoverageFor is the default coverage of the calibration that bounds
// job next to co: the seen-pairs one when the model's training data held
// every application involved, else the leave-families-out one (0 without
// calibration). A pair memory in front of the model bounds its own estimates
// for that co-location at this coverage, the one the bound it replaces holds at.
func (m *Model) DefaultCoverageFor(job *profile.Profile, co []*profile.Profile) float64 {
	if job == nil || slices.Contains(co, nil) {
		return m.Calibration.DefaultCoverage
	}
	if m.seen(job, co) {
		return m.SeenCalibration.DefaultCoverage
	}
	return m.Calibration.DefaultCoverage
}

// seen reports whether the model has seen-pairs margins and its training data
// held job's application and every co-runner's (each with other partners at
// least: SeenCalibration's residuals are for such pairs).
func (m *Model) seen(job *profile.Profile, co []*profile.Profile) bool {
	if m.tags == nil || len(m.SeenCalibration.Levels) == 0 {
		return false
	}
	if _, ok := m.tags[job.Tag]; !ok {
		return false
	}
	for _, c := range co {
		if _, ok := m.tags[c.Tag]; !ok {
			return false
		}
	}
	return true
}

// SeenMargin is the seen-pairs margin at speed and coverage (0: its default),
// 0 without seen-pairs margins. For reports.
func (m *Model) SeenMargin(speed, coverage float64) float64 {
	return m.SeenCalibration.margin(speed, "", coverage)
}

// ClassMargins is the margin each class's floor is cleared with at coverage (0:
// the default): the calibration's margin for a prediction at the floor, which
// is where the floor test is decided. For reports (coscheml-train info).
func (m *Model) ClassMargins(floors map[profile.Class]float64, coverage float64) map[profile.Class]float64 {
	out := make(map[profile.Class]float64, len(floors))
	for c, f := range floors {
		out[c] = m.Margin(f, coverage)
	}
	return out
}
