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
