// Package model predicts how fast a job runs when it shares a GPU with co-runners.
package model

import "github.com/coscheml/coscheml/pkg/profile"

// Predictor predicts the normalized speed (1.0 = as fast as alone) of job when it
// shares one GPU with the given co-runners. Implementations must be safe for
// concurrent use and must not allocate on this call.
type Predictor interface {
	PredictSpeed(job *profile.Profile, coRunners []*profile.Profile) float64
}

// SpreadPredictor is a Predictor that can also say how far its ensemble's members
// disagree, so a caller can ask a prediction to clear a floor with some confidence.
type SpreadPredictor interface {
	Predictor
	// PredictSpeedSpread returns the prediction PredictSpeed gives and the standard
	// deviation of the members' predictions around it (0 for a single tree).
	PredictSpeedSpread(job *profile.Profile, coRunners []*profile.Profile) (speed, sd float64)
}

// LowerPredictor is a Predictor that can also give a lower bound on the speed,
// one the measured speed clears with probability coverage (calibrated on data
// the predictor was not fitted to). Placement tests floors against the lower
// bound when the predictor has one; the oracle's true speeds have none.
type LowerPredictor interface {
	Predictor
	// PredictSpeedLower returns the prediction PredictSpeed gives and the lower
	// bound at coverage (0: the predictor's default). It must not allocate.
	PredictSpeedLower(job *profile.Profile, coRunners []*profile.Profile, coverage float64) (speed, lower float64)
}

// FloorLowerPredictor is a LowerPredictor whose default coverage depends on
// the floor the bound is tested against (a calibration that protects a
// stricter floor more, docs/model.md "Per-floor coverage"). Placement calls it
// with the floor of the job whose speed it bounds.
type FloorLowerPredictor interface {
	LowerPredictor
	// PredictSpeedLowerFloor is PredictSpeedLower where coverage 0 means the
	// default coverage for floor. It must not allocate.
	PredictSpeedLowerFloor(job *profile.Profile, coRunners []*profile.Profile, coverage, floor float64) (speed, lower float64)
}

// Versioned is a Predictor whose answers change over time (the pair memory
// learns from observations): Version changes whenever they may have, so a
// caller that caches predictions knows to drop its cache.
type Versioned interface {
	Version() uint64
}
