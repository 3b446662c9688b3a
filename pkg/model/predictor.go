// SPDX-License-Identifier: Apache-2.0

// Package model predicts how fast a job runs when it shares a GPU with co-runners.
package model

import "github.com/coscheml/coscheml/pkg/profile"

// Predictor predicts the normalized speed (1.0 = as fast as alone) of job when it
// shares one GPU with the given co-runners. Implementations must be safe for
// concurrent use and must not allocate on this call.
//
// A plain Predictor answers point predictions only (the oracle's true speeds,
// reports, evaluation); placement asks a Bounder, which Bounds makes of any
// Predictor.
type Predictor interface {
	PredictSpeed(job *profile.Profile, coRunners []*profile.Profile) float64
}

// Query says which lower bound a Bound call answers.
type Query struct {
	// Coverage is the probability the measured speed clears the bound,
	// calibrated on data the predictor was not fitted to; 0 asks for the
	// predictor's default coverage for Floor.
	Coverage float64
	// Floor is the speed floor the bound is tested against (0: none). A
	// predictor whose default coverage depends on the floor clears a stricter
	// floor at a higher coverage (docs/model.md "Per-floor coverage").
	Floor float64
}

// Bounder is the prediction placement asks for: the point prediction and a
// lower bound on the speed in one call.
type Bounder interface {
	Predictor
	// Bound returns the prediction PredictSpeed gives and the lower bound q
	// asks for. It must not allocate.
	Bound(job *profile.Profile, coRunners []*profile.Profile, q Query) (speed, lower float64)
	// Revision changes whenever the answers may have (the pair memory learns
	// from observations), so a caller that caches predictions knows to drop
	// its cache; a predictor whose answers never change returns 0.
	Revision() uint64
}

// Bounds returns p as a Bounder: p itself when it is one (own is true), else
// an adapter whose lower bound is the prediction itself and whose revision
// never changes (the oracle's true speeds have no margin to allow for).
func Bounds(p Predictor) (b Bounder, own bool) {
	if b, ok := p.(Bounder); ok {
		return b, true
	}
	return plain{p}, false
}

// plain is Bounds' adapter for a Predictor without a bound of its own.
type plain struct{ Predictor }

func (p plain) Bound(job *profile.Profile, co []*profile.Profile, _ Query) (speed, lower float64) {
	speed = p.PredictSpeed(job, co)
	return speed, speed
}

func (plain) Revision() uint64 { return 0 }

// Optimistic is the worst case of a wrong model: it says every job runs at full
// speed next to any co-runner, with no margin. The simulator and the replay use
// it (--predictor optimistic) to measure what the runtime guard saves when the
// predictions cannot be trusted at all; it is never a site's default.
type Optimistic struct{}

// PredictSpeed always answers 1.
func (Optimistic) PredictSpeed(*profile.Profile, []*profile.Profile) float64 { return 1 }

// Bound answers 1 for the prediction and its lower bound.
func (Optimistic) Bound(*profile.Profile, []*profile.Profile, Query) (speed, lower float64) {
	return 1, 1
}

// Revision is 0: the answers never change.
func (Optimistic) Revision() uint64 { return 0 }

// PredictorNames are the predictors a simulation or a replay can be told to use.
var PredictorNames = []string{"model", "optimistic"}
