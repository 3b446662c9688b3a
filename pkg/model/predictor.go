// Package model predicts how fast a job runs when it shares a GPU with co-runners.
package model

import "github.com/coscheml/coscheml/pkg/profile"

// Predictor predicts the normalized speed (1.0 = as fast as alone) of job when it
// shares one GPU with the given co-runners. Implementations must be safe for
// concurrent use and must not allocate on this call.
type Predictor interface {
	PredictSpeed(job *profile.Profile, coRunners []*profile.Profile) float64
}
