// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"math"
	"strconv"
)

// SlowSpeed is the cut below which a co-located sample counts as "slow" for the
// AUC figures (15% or more slowdown).
const SlowSpeed = 0.85

// AUC is a ROC area under the curve; NaN when undefined (the samples are all slow
// or all not slow), which JSON writes as null.
type AUC float64

// MarshalJSON writes null for an undefined AUC.
func (a AUC) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(a), 'f', -1, 64), nil
}

// UnmarshalJSON reads null as undefined.
func (a *AUC) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = AUC(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("auc: %w", err)
	}
	*a = AUC(v)
	return nil
}

func (a AUC) String() string {
	if math.IsNaN(float64(a)) {
		return "n/a"
	}
	return strconv.FormatFloat(float64(a), 'f', 3, 64)
}

// Metrics scores speed predictions against measured speeds.
type Metrics struct {
	Samples int     `codec:"samples" json:"samples"`
	MAE     float64 `codec:"mae" json:"mae"`
	RMSE    float64 `codec:"rmse" json:"rmse"`
	// The mean predictor always predicts the mean speed of its training set.
	MeanPredictorMAE  float64 `codec:"mean_predictor_mae" json:"mean_predictor_mae"`
	MeanPredictorRMSE float64 `codec:"mean_predictor_rmse" json:"mean_predictor_rmse"`
	// ROC AUC for picking out the samples with true speed < SlowSpeed: scored by
	// the sum of the solo SM utilizations (the baseline heuristic) and by the
	// model's predicted speed (lower = more likely slow).
	UtilSumAUC  AUC `codec:"utilsum_auc" json:"utilsum_auc"`
	ModelAUC    AUC `codec:"model_auc" json:"model_auc"`
	SlowSamples int `codec:"slow_samples" json:"slow_samples"`
}
