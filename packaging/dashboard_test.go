// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/metrics"
	"github.com/coscheml/coscheml/pkg/sharestatus"
)

// TestDashboardHasDataWhenIdle: on a healthy idle cluster (configured nodes, no
// job, no decision yet) every panel of the Grafana dashboard either queries a
// metric the writers export with a sample (a 0) or says in words why it is
// empty (noValue): none reads "No data".
func TestDashboardHasDataWhenIdle(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ResidencyDir = filepath.Join(dir, "residency")
	for _, d := range []string{"active", "done"} {
		if err := os.MkdirAll(filepath.Join(cfg.ResidencyDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg.DecisionLog, cfg.ObservationDir = "", ""
	cfg.Cluster.Nodes, cfg.Cluster.GPUsPerNode = "gpu[01-02]", 4
	now := time.Now()
	snap, err := sharestatus.Take(sharestatus.FromConfig(cfg, nil, nil), now)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range append(snap.Metrics(), metrics.NewCounters(now).Families(now)...) {
		if len(f.Samples) > 0 {
			exported[f.Name] = true
			exported[f.Name+"_bucket"] = f.Type == metrics.Histogram
		}
	}

	b, err := os.ReadFile("grafana/coscheml.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					NoValue string `json:"noValue"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	metricName := regexp.MustCompile(`coscheml_[a-z_]+`)
	for _, p := range dash.Panels {
		if p.FieldConfig.Defaults.NoValue != "" {
			continue
		}
		// A panel shows data when one of its queries has every metric it reads.
		var missing []string
		shows := false
		for _, tg := range p.Targets {
			all := true
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if !exported[m] {
					all = false
					missing = append(missing, m)
				}
			}
			shows = shows || all && len(tg.Expr) > 0
		}
		if !shows {
			t.Errorf("panel %q: %v have no series on an idle cluster and the panel has no noValue text", p.Title, missing)
		}
	}
}
