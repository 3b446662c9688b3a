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
	for _, p := range []model.Params{
		{MaxDepth: 6, MinLeaf: 10, Trees: 10, MaxFeatures: 2, Bins: 32, Seed: 1, Features: sm},
		{MaxDepth: 6, MinLeaf: 10, Trees: 15, MaxFeatures: 2, Bins: 32, Seed: 1, Features: sm},
		{MaxDepth: 6, MinLeaf: 10, Trees: 10, MaxFeatures: 2, Bins: 32, Seed: 2, Features: sm},
	} {
		t0 := time.Now()
		kf, err := KFold(ds, 5, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		lao, err := LeaveAppsOut(ds, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("d%d l%d t%d mf%d s%d f%d: kf mae %.4f rmse %.4f auc %s | lao mae %.4f rmse %.4f mean %.4f auc %s/%s (%v)",
			p.MaxDepth, p.MinLeaf, p.Trees, p.MaxFeatures, p.Seed, len(p.Features),
			kf.Metrics.MAE, kf.Metrics.RMSE, kf.Metrics.ModelAUC,
			lao.Metrics.MAE, lao.Metrics.RMSE, lao.Metrics.MeanPredictorMAE, lao.Metrics.ModelAUC, lao.Metrics.UtilSumAUC,
			time.Since(t0).Round(time.Millisecond))
	}
}
