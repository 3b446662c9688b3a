// SPDX-License-Identifier: Apache-2.0

package training

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

func TestROCAUC(t *testing.T) {
	tests := []struct {
		name  string
		score []float64
		slow  []bool
		want  float64
		undef bool
	}{
		{"perfect", []float64{4, 3, 2, 1}, []bool{true, true, false, false}, 1, false},
		{"inverted", []float64{1, 2, 3, 4}, []bool{true, true, false, false}, 0, false},
		{"one swap", []float64{4, 2, 3, 1}, []bool{true, true, false, false}, 0.75, false},
		{"all tied", []float64{1, 1, 1, 1}, []bool{true, false, true, false}, 0.5, false},
		{"tie across classes", []float64{3, 2, 2, 1}, []bool{true, true, false, false}, 0.875, false},
		{"no slow samples", []float64{1, 2}, []bool{false, false}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := make([]Scored, len(tc.score))
			for i := range r {
				r[i] = Scored{UtilSum: tc.score[i], Truth: 1}
				if tc.slow[i] {
					r[i].Truth = 0.5
				}
			}
			got := float64(rocAUC(r, func(s Scored) bool { return s.Truth < model.SlowSpeed }, func(s Scored) float64 { return s.UtilSum }))
			if tc.undef {
				if !math.IsNaN(got) {
					t.Fatalf("AUC %v, want undefined", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("AUC %v, want %v", got, tc.want)
			}
		})
	}
}

// oracle predicts each sample's measured speed (looked up by tag pair).
type oracle map[string]float64

func (o oracle) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	return o[job.Tag+"|"+co[0].Tag]
}

type constant float64

func (c constant) PredictSpeed(*profile.Profile, []*profile.Profile) float64 { return float64(c) }

func TestEvaluate(t *testing.T) {
	ds := synthetic(t)
	o := oracle{}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		o[s.Tag+"|"+s.CoTags[0]] = s.Speed
	}
	m := Evaluate(o, ds)
	if m.Samples != ds.Len() || m.MAE != 0 || m.RMSE != 0 || float64(m.ModelAUC) != 1 || m.SlowSamples == 0 {
		t.Fatalf("oracle: %+v", m)
	}
	// The synthetic speed depends on the co-runner's utilization only, and the
	// util-sum heuristic adds the job's: it ranks well but not perfectly.
	if u := float64(m.UtilSumAUC); u <= 0.5 || u >= 1 {
		t.Fatalf("util-sum AUC %v", u)
	}
	// Without a training mean the mean predictor uses the data's own mean, so a
	// constant predictor at that mean scores exactly the baseline.
	mean := meanSpeed(ds, nil)
	c := Evaluate(constant(mean), ds)
	if math.Abs(c.MAE-c.MeanPredictorMAE) > 1e-12 || float64(c.ModelAUC) != 0.5 {
		t.Fatalf("constant: %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"samples"`, `"mae"`, `"rmse"`, `"mean_predictor_mae"`, `"utilsum_auc"`, `"model_auc":0.5`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON %s lacks %s", b, k)
		}
	}
	var back model.Metrics
	if err := json.Unmarshal([]byte(`{"model_auc":null,"utilsum_auc":0.9}`), &back); err != nil || !math.IsNaN(float64(back.ModelAUC)) || back.UtilSumAUC != 0.9 {
		t.Fatalf("unmarshal: %+v %v", back, err)
	}
}
