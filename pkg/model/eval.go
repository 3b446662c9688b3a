package model

import (
	"fmt"
	"math"
	"sort"
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

// Scored is one evaluated sample: its measured speed, the model's prediction, the
// mean predictor's prediction and the util-sum heuristic's score
// (Sample.UtilSum). Cross-validation (package training) pools these across folds.
type Scored struct {
	Truth, Pred, MeanPred, UtilSum float64
}

// MetricsOf scores a set of evaluated samples.
func MetricsOf(r []Scored) Metrics {
	m := Metrics{Samples: len(r)}
	if len(r) == 0 {
		m.UtilSumAUC, m.ModelAUC = AUC(math.NaN()), AUC(math.NaN())
		return m
	}
	var ae, se, mae, mse float64
	for _, s := range r {
		d := s.Pred - s.Truth
		ae += math.Abs(d)
		se += d * d
		d = s.MeanPred - s.Truth
		mae += math.Abs(d)
		mse += d * d
		if s.Truth < SlowSpeed {
			m.SlowSamples++
		}
	}
	n := float64(len(r))
	m.MAE, m.RMSE = ae/n, math.Sqrt(se/n)
	m.MeanPredictorMAE, m.MeanPredictorRMSE = mae/n, math.Sqrt(mse/n)
	slow := func(s Scored) bool { return s.Truth < SlowSpeed }
	m.UtilSumAUC = rocAUC(r, slow, func(s Scored) float64 { return s.UtilSum })
	m.ModelAUC = rocAUC(r, slow, func(s Scored) float64 { return -s.Pred })
	return m
}

// rocAUC is the probability that a random positive scores above a random
// negative (ties count half): the Mann-Whitney statistic, by ranks.
func rocAUC(r []Scored, positive func(Scored) bool, score func(Scored) float64) AUC {
	type ps struct {
		s   float64
		pos bool
	}
	v := make([]ps, len(r))
	var np, nn float64
	for i, x := range r {
		v[i] = ps{score(x), positive(x)}
		if v[i].pos {
			np++
		} else {
			nn++
		}
	}
	if np == 0 || nn == 0 {
		return AUC(math.NaN())
	}
	sort.Slice(v, func(i, j int) bool { return v[i].s < v[j].s })
	rankSum := 0.0
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j].s == v[i].s {
			j++
		}
		avg := float64(i+j+1) / 2 // mean of 1-based ranks i+1..j
		for k := i; k < j; k++ {
			if v[k].pos {
				rankSum += avg
			}
		}
		i = j
	}
	return AUC((rankSum - np*(np+1)/2) / (np * nn))
}

// Evaluate scores m on every sample of ds. The mean predictor predicts the
// training mean when m reports one (a *Model does); otherwise it predicts the
// mean of ds itself, an optimistic baseline.
func Evaluate(m Predictor, ds Dataset) Metrics {
	mean := 0.0
	if tm, ok := m.(interface{ TrainingMean() float64 }); ok {
		mean = tm.TrainingMean()
	} else if ds.Len() > 0 {
		mean = meanSpeed(ds)
	}
	r := make([]Scored, ds.Len())
	for i := range ds.Samples {
		s := &ds.Samples[i]
		r[i] = Scored{Truth: s.Speed, Pred: m.PredictSpeed(s.Job, s.Co), MeanPred: mean, UtilSum: s.UtilSum()}
	}
	return MetricsOf(r)
}

// meanSpeed is the mean measured speed of ds's samples.
func meanSpeed(ds Dataset) float64 {
	s := 0.0
	for i := range ds.Samples {
		s += ds.Samples[i].Speed
	}
	return s / float64(ds.Len())
}
