// SPDX-License-Identifier: Apache-2.0

package training

import (
	"os"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/model"
)

// TestExplore is the parameter search behind docs/model.md (EXPLORE=1 to run).
func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip("set EXPLORE=1")
	}
	ds := lucidDataset(t)
	sm := []string{"job_sm_util_mean", "co_sm_util_sum", "total_sm_util", "job_sm_share", "sm_overlap"}
	mb := append(append([]string(nil), sm...), "membw_overlap")
	for _, p := range []model.Params{
		{MaxDepth: 6, MinLeaf: 10, Trees: 30, MaxFeatures: 2, Bins: 32, Seed: 1, Features: sm},
		{MaxDepth: 6, MinLeaf: 5, Trees: 60, MaxFeatures: 2, Bins: 32, Seed: 1, Features: sm},
		{MaxDepth: 6, MinLeaf: 5, Trees: 60, MaxFeatures: 2, Bins: 32, Seed: 1, Features: mb},
		{MaxDepth: 6, MinLeaf: 5, Trees: 60, MaxFeatures: 2, Bins: 32, Seed: 2, Features: mb},
		{MaxDepth: 6, MinLeaf: 5, Trees: 40, MaxFeatures: 2, Bins: 32, Seed: 1, Features: mb},
	} {
		t0 := time.Now()
		lao, err := LeaveFamiliesOut(ds, p)
		if err != nil {
			t.Fatal(err)
		}
		cal, ch, err := Calibrate(lao.OutOfFold, CalibrationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		acc := 0.0
		for l, lv := range ch.Levels {
			if lv == cal.DefaultCoverage {
				acc = ch.Accepted[l]
			}
		}
		t.Logf("d%d l%d t%d mf%d s%d f%v: lfo mae %.4f rmse %.4f auc %s | default coverage %.3g accepted %.3f (%v)",
			p.MaxDepth, p.MinLeaf, p.Trees, p.MaxFeatures, p.Seed, p.Features,
			lao.Metrics.MAE, lao.Metrics.RMSE, lao.Metrics.ModelAUC, cal.DefaultCoverage, acc,
			time.Since(t0).Round(time.Millisecond))
	}
}
