// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
)

// appResiduals: out-of-fold residuals of two applications in 10 folds, the
// model erring by sd 0.01 on "easy" and 0.06 on "hard" (predictions 0.6-1.0).
func appResiduals(seed uint64, perApp int) []OutOfFold {
	r := rand.New(rand.NewPCG(seed, 17))
	var oof []OutOfFold
	for i := range perApp {
		for _, app := range []struct {
			tag string
			sd  float64
		}{{"easy", 0.01}, {"hard", 0.06}} {
			p := 0.6 + 0.4*r.Float64()
			oof = append(oof, OutOfFold{Fold: "f" + strconv.Itoa(i%10), Pred: p, Truth: p - app.sd*r.NormFloat64(), Tag: app.tag})
		}
	}
	return oof
}

// Margins normalized by the job application's scale, calibrated on one sample
// and read back from a model file on disk, reach their coverage per
// application on fresh held-out residuals; plain margins, one for both,
// over-cover the easy application and under-cover the hard one.
func TestCalibrateJobScaleCoverage(t *testing.T) {
	cal := appResiduals(1, 1500)
	held := appResiduals(2, 4000)
	tests := []struct {
		name   string
		opts   CalibrationOptions
		perApp bool // coverage holds for each application, not only pooled
	}{
		{"plain", CalibrationOptions{}, false},
		{"job-scaled", CalibrationOptions{JobScale: true}, true},
		{"job-scaled, shrink 20", CalibrationOptions{JobScale: true, ScaleShrink: 20}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := Calibrate(cal, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Default()
			if err != nil {
				t.Fatal(err)
			}
			mm := *m
			mm.SeenCalibration = c
			if err := mm.Compile(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "scaled.model")
			if err := mm.Save(path); err != nil {
				t.Fatal(err)
			}
			got, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := &got.SeenCalibration
			if tc.opts.JobScale != (sc.Scale > 0) || (sc.Scale > 0 && !(sc.JobScale["easy"] < sc.Scale && sc.Scale < sc.JobScale["hard"])) {
				t.Fatalf("scales after reload: overall %v, per application %v", sc.Scale, sc.JobScale)
			}
			for _, lv := range []float64{0.9, 0.95, 0.99} {
				miss := map[string]float64{}
				n := map[string]float64{}
				for _, r := range held {
					n[r.Tag]++
					if r.Truth < r.Pred-sc.MarginFor(r.Pred, r.Tag, lv) {
						miss[r.Tag]++
					}
				}
				// 1 - level plus 3 binomial standard deviations (n = 4000 per
				// application) plus the grid's rounding
				tol := func(k float64) float64 { return 1 - lv + 3*math.Sqrt(lv*(1-lv)/k) + 0.005 }
				pooled := (miss["easy"] + miss["hard"]) / (n["easy"] + n["hard"])
				if pooled > tol(n["easy"]+n["hard"]) {
					t.Errorf("level %v: pooled miss rate %.4f", lv, pooled)
				}
				easy, hard := miss["easy"]/n["easy"], miss["hard"]/n["hard"]
				if tc.perApp && (easy > tol(n["easy"]) || hard > tol(n["hard"])) {
					t.Errorf("level %v: miss rate easy %.4f, hard %.4f, want each at most %.4f", lv, easy, hard, tol(n["easy"]))
				}
				if !tc.perApp && !(hard > 1.5*(1-lv) && easy < 1-lv) {
					t.Errorf("level %v: plain margins miss easy %.4f, hard %.4f: want the hard application under-covered", lv, easy, hard)
				}
			}
		})
	}
}

// Options and residuals Calibrate refuses.
func TestCalibrateRefuses(t *testing.T) {
	good := appResiduals(3, 200)
	tests := []struct {
		name string
		oof  func() []OutOfFold
	}{
		{"too few residuals", func() []OutOfFold { return good[:50] }},
		{"NaN prediction", func() []OutOfFold { o := append([]OutOfFold(nil), good...); o[7].Pred = math.NaN(); return o }},
		{"infinite measurement", func() []OutOfFold { o := append([]OutOfFold(nil), good...); o[7].Truth = math.Inf(-1); return o }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Calibrate(tc.oof(), CalibrationOptions{JobScale: true}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
