// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"math"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Measured pairs: the co-located speeds the admin's training data measured
// (the Lucid pairs, or `coscheml-train train --pairs`). For a job with exactly
// one co-runner whose pair was measured, the measurement answers instead of
// the trees: the trees generalize from solo profiles and their leave-pairs-out
// margins (0.14 at infer's floor) refuse most pairs a measurement shows safe
// (docs/model.md, "Measured pairs"). Only the admin's data is stored here,
// never the users' observations that retrain folds in (those go through the
// pair memory's per-user caps).

// MeasuredPair is the mean co-located speed of Job next to Co over N
// measurements (speeds above 1 clipped to 1, as the ground truth does).
type MeasuredPair struct {
	Job   string  `codec:"job" json:"job"`
	Co    string  `codec:"co" json:"co"`
	Speed float64 `codec:"speed" json:"speed"`
	N     int     `codec:"n" json:"n"`
}

// MeasuredNoiseFloor is the smallest measurement noise a measured pair's
// bound assumes (the pair memory's NoiseSD: a pair measured twice alike is
// not known to better than that).
const MeasuredNoiseFloor = 0.03

// maxMeasured bounds a model's measured pairs (43 applications make 1,849).
const maxMeasured = 1 << 20

type pairKey struct{ job, co string }

// NormalQuantile is the standard normal quantile at one-sided coverage c, 0
// for c <= 0.5 (capped at 0.9999).
func NormalQuantile(c float64) float64 {
	if !(c > 0.5) {
		return 0
	}
	c = min(c, 0.9999)
	return math.Sqrt2 * math.Erfinv(2*c-1)
}

// validateMeasured checks the measured pairs of a decoded model.
func (m *Model) validateMeasured() error {
	if len(m.Measured) > maxMeasured {
		return fmt.Errorf("%d measured pairs, want at most %d", len(m.Measured), maxMeasured)
	}
	if !(m.MeasuredSD >= 0 && m.MeasuredSD < 1) {
		return fmt.Errorf("measured pairs' noise %v outside [0, 1)", m.MeasuredSD)
	}
	seen := make(map[pairKey]bool, len(m.Measured))
	for i, p := range m.Measured {
		if err := profile.ValidateTag(p.Job); err != nil {
			return fmt.Errorf("measured pair %d: %w", i+1, err)
		}
		if err := profile.ValidateTag(p.Co); err != nil {
			return fmt.Errorf("measured pair %d: co-runner: %w", i+1, err)
		}
		if !(p.Speed > 0 && p.Speed <= 1) || p.N < 1 {
			return fmt.Errorf("measured pair %d (%s next to %s): speed %v over %d measurements, want (0, 1] over at least 1",
				i+1, p.Job, p.Co, p.Speed, p.N)
		}
		k := pairKey{p.Job, p.Co}
		if seen[k] {
			return fmt.Errorf("measured pair %d (%s next to %s) listed twice", i+1, p.Job, p.Co)
		}
		seen[k] = true
	}
	return nil
}

// measuredPair is the measurement of job next to its one co-runner, if the
// training data has one. It does not allocate.
func (m *Model) measuredPair(job *profile.Profile, co []*profile.Profile) (MeasuredPair, bool) {
	if m.measured == nil || job == nil || len(co) != 1 || co[0] == nil {
		return MeasuredPair{}, false
	}
	i, ok := m.measured[pairKey{job.Tag, co[0].Tag}]
	if !ok {
		return MeasuredPair{}, false
	}
	return m.Measured[i], true
}

// IsMeasured reports whether the model answers job next to co from a
// measurement (the pair memory then keeps the model's answer out of its
// residual corrections, which are about the trees' bias).
func (m *Model) IsMeasured(job *profile.Profile, co []*profile.Profile) bool {
	_, ok := m.measuredPair(job, co)
	return ok
}

// Measurement is the training data's measurement of job next to its one
// co-runner: mean speed, count, and the noise a bound assumes (MeasuredSD, at
// least MeasuredNoiseFloor); ok false when that pair was not measured.
func (m *Model) Measurement(job *profile.Profile, co []*profile.Profile) (speed float64, n int, noise float64, ok bool) {
	p, ok := m.measuredPair(job, co)
	if !ok {
		return 0, 0, 0, false
	}
	return p.Speed, p.N, max(m.MeasuredSD, MeasuredNoiseFloor), true
}

// measuredLower is a measured pair's lower bound at coverage: the mean less
// z(coverage) standard errors of it (the pair memory's rule for a known pair).
func (m *Model) measuredLower(p MeasuredPair, coverage float64) float64 {
	return p.Speed - NormalQuantile(coverage)*max(m.MeasuredSD, MeasuredNoiseFloor)/math.Sqrt(float64(p.N))
}

// WithoutMeasured is the model answering every pair from its trees: what
// retrain's held-out comparison judges (a measured pair would grade the
// lookup, not what was learned). The copy shares the trees.
func (m *Model) WithoutMeasured() *Model {
	c := *m
	c.Measured, c.MeasuredSD, c.measured = nil, 0, nil
	return &c
}
