// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math"
	"sort"

	"github.com/coscheml/coscheml/pkg/model"
)

// Scored is one evaluated sample: its measured speed, the model's prediction, the
// mean predictor's prediction and the util-sum heuristic's score
// (Sample.UtilSum). Cross-validation (package training) pools these across folds.
type Scored struct {
	Truth, Pred, MeanPred, UtilSum float64
	// Spread is the standard deviation of the ensemble members' predictions
	// (0 for a single tree or another Predictor).
	Spread float64
}

// MetricsOf scores a set of evaluated samples.
func MetricsOf(r []Scored) model.Metrics {
	m := model.Metrics{Samples: len(r)}
	if len(r) == 0 {
		m.UtilSumAUC, m.ModelAUC = model.AUC(math.NaN()), model.AUC(math.NaN())
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
		if s.Truth < model.SlowSpeed {
			m.SlowSamples++
		}
	}
	n := float64(len(r))
	m.MAE, m.RMSE = ae/n, math.Sqrt(se/n)
	m.MeanPredictorMAE, m.MeanPredictorRMSE = mae/n, math.Sqrt(mse/n)
	slow := func(s Scored) bool { return s.Truth < model.SlowSpeed }
	m.UtilSumAUC = rocAUC(r, slow, func(s Scored) float64 { return s.UtilSum })
	m.ModelAUC = rocAUC(r, slow, func(s Scored) float64 { return -s.Pred })
	return m
}

// rocAUC is the probability that a random positive scores above a random
// negative (ties count half): the Mann-Whitney statistic, by ranks.
func rocAUC(r []Scored, positive func(Scored) bool, score func(Scored) float64) model.AUC {
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
		return model.AUC(math.NaN())
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
	return model.AUC((rankSum - np*(np+1)/2) / (np * nn))
}

// Evaluate scores m on every sample of ds. The mean predictor predicts the
// training mean when m reports one (a *Model does); otherwise it predicts the
// mean of ds itself, an optimistic baseline.
func Evaluate(m model.Predictor, ds Dataset) model.Metrics {
	if mm, ok := m.(*model.Model); ok && len(mm.Measured) > 0 {
		m = mm.WithoutMeasured() // the trees are what is judged
	}
	mean := 0.0
	if tm, ok := m.(interface{ TrainingMean() float64 }); ok {
		mean = tm.TrainingMean()
	} else if ds.Len() > 0 {
		mean = meanSpeed(ds, nil)
	}
	r := make([]Scored, ds.Len())
	for i := range ds.Samples {
		s := &ds.Samples[i]
		r[i] = Scored{Truth: s.Speed, Pred: m.PredictSpeed(s.Job, s.Co), MeanPred: mean, UtilSum: s.UtilSum()}
	}
	return MetricsOf(r)
}
