// SPDX-License-Identifier: Apache-2.0

package sharestatus

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/metrics"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// fixture writes a cluster state to disk through the stores' own writers: on n1
// GPU 0 two tagged jobs share, on n1 GPU 1 one job runs alone, one decision has
// not started yet (a reservation), an old one has expired, and an observation
// measured the shared pair before.
func fixture(t *testing.T) Sources {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ResidencyDir = filepath.Join(dir, "residency")
	cfg.DecisionLog = filepath.Join(dir, "decisions.log")
	cfg.ObservationDir = filepath.Join(dir, "obs")

	st, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(job string, gpu int, tag, class, dec string, shards int) {
		e := residency.Entry{V: residency.Version, JobID: job, Node: "n1", GPUs: []int{gpu}, Shards: shards, Tag: tag,
			Class: profile.Class(class), DecisionID: dec, User: "alice", Start: now.Add(-time.Hour), Expires: now.Add(time.Hour)}
		if err := st.Start(e); err != nil {
			t.Fatal(err)
		}
	}
	entry("101", 0, "resnet18-bs32", "train", "d101", 2)
	entry("102", 0, "pointnet-bs32-amp", "infer", "d102", 2)
	entry("103", 1, "dcgan-bs128", "train", "d103", 0)
	stale := residency.Entry{V: residency.Version, JobID: "99", Node: "n2", GPUs: []int{0}, Start: now.Add(-48 * time.Hour), Expires: now.Add(-47 * time.Hour)}
	if err := st.Start(stale); err != nil {
		t.Fatal(err)
	}

	w := decisionlog.NewWriter(cfg.DecisionLog, 0, 0)
	for _, r := range []decisionlog.Record{
		{ID: "d101", Time: now.Add(-61 * time.Minute), Op: "submit", Tag: "resnet18-bs32", Outcome: "rewrite", Action: "exclusive", Node: "n1", GPU: 0, PredictedSpeed: 1},
		{ID: "d102", Time: now.Add(-61 * time.Minute), Op: "submit", Tag: "pointnet-bs32-amp", Outcome: "rewrite", Action: "share", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 0.93},
		{ID: "d200", Time: now.Add(-2 * time.Minute), Op: "submit", Tag: "ppo-bs64", Class: "train", Outcome: "rewrite", Action: "share", Node: "n1", GPU: 1, Shards: 2, PredictedSpeed: 0.97},
		{ID: "d201", Time: now.Add(-time.Minute), Op: "submit", Tag: "bert-bs32", Outcome: "reject", Action: "wait", GPU: -1},
		{ID: "d150", Time: now.Add(-40 * time.Minute), Op: "submit", Tag: "ppo-bs64", Outcome: "rewrite", Action: "share", Node: "n1", GPU: 1, Shards: 2},
	} {
		w.Log(r)
	}
	w.Close()
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}

	obs := []observation.Observation{
		{Tag: "resnet18-bs32", CoTags: []string{"pointnet-bs32-amp"}, Speed: 0.80, Source: "epilog", JobID: "50", When: now.Add(-5 * time.Hour)},
		{Tag: "resnet18-bs32", CoTags: []string{"pointnet-bs32-amp"}, Speed: 0.84, Source: "epilog", JobID: "60", When: now.Add(-3 * time.Hour)},
		{Tag: "resnet18-bs32", CoTags: []string{"dcgan-bs128"}, Speed: 0.5, Source: "epilog", JobID: "70", When: now.Add(-2 * time.Hour)},
	}
	if err := os.MkdirAll(cfg.ObservationDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := observation.AppendFile(filepath.Join(cfg.ObservationDir, "n1.csv"), obs...); err != nil {
		t.Fatal(err)
	}

	ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	if err != nil {
		t.Fatal(err)
	}
	cat := profile.CatalogOf(ps)
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	return FromConfig(cfg, cat, m)
}

func TestTake(t *testing.T) {
	src := fixture(t)
	snap, err := Take(src, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Problems) != 0 {
		t.Errorf("problems: %v", snap.Problems)
	}
	if len(snap.GPUs) != 2 || snap.SharedGPUs() != 1 || snap.StaleEntries != 1 {
		t.Fatalf("GPUs %+v, shared %d, stale %d; want 2 GPUs, 1 shared, 1 stale", snap.GPUs, snap.SharedGPUs(), snap.StaleEntries)
	}
	g0 := snap.GPUs[0]
	if g0.Node != "n1" || g0.Index != 0 || !g0.Shared || len(g0.Jobs) != 2 {
		t.Fatalf("GPU 0: %+v", g0)
	}
	resnet, pointnet := g0.Jobs[0], g0.Jobs[1]
	p, _ := src.Catalog.Get("resnet18-bs32")
	q, _ := src.Catalog.Get("pointnet-bs32-amp")
	tests := []struct {
		name      string
		job       Job
		predicted float64
		floor     float64
		decision  *float64
		measured  *float64
	}{
		{"resnet next to pointnet", resnet, src.Model.PredictSpeed(p, []*profile.Profile{q}), src.Floors.Floor("train"), ptr(1), ptr(0.84)},
		{"pointnet next to resnet", pointnet, src.Model.PredictSpeed(q, []*profile.Profile{p}), src.Floors.Floor("infer"), ptr(0.93), nil},
		{"dcgan alone", snap.GPUs[1].Jobs[0], 1, src.Floors.Floor("train"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.job
			if j.PredictedSpeed == nil || *j.PredictedSpeed != tt.predicted || j.Floor != tt.floor || j.BelowFloor != (tt.predicted < tt.floor) {
				t.Errorf("predicted %v floor %v below %v; want %v, %v", deref(j.PredictedSpeed), j.Floor, j.BelowFloor, tt.predicted, tt.floor)
			}
			if deref(j.DecisionSpeed) != deref(tt.decision) || (j.DecisionSpeed == nil) != (tt.decision == nil) {
				t.Errorf("decision speed %v, want %v", deref(j.DecisionSpeed), deref(tt.decision))
			}
			if (j.MeasuredSpeed == nil) != (tt.measured == nil) || deref(j.MeasuredSpeed) != deref(tt.measured) {
				t.Errorf("measured %v, want %v (the newest of the same pair)", deref(j.MeasuredSpeed), deref(tt.measured))
			}
		})
	}
	// Reservations: the recent accepted decision that has not started; not the
	// rejected one, nor the one older than the reservation TTL, nor started ones.
	if len(snap.Reservations) != 1 || snap.Reservations[0].DecisionID != "d200" || snap.Reservations[0].GPU != 1 {
		t.Errorf("reservations %+v, want only d200 on n1 GPU 1", snap.Reservations)
	}
}

func TestTakeWithoutOptionalSources(t *testing.T) {
	src := fixture(t)
	src.DecisionLog, src.ObservationDir, src.Model = "", "", nil
	snap, err := Take(src, now)
	if err != nil {
		t.Fatal(err)
	}
	j := snap.GPUs[0].Jobs[0]
	if j.PredictedSpeed != nil || j.MeasuredSpeed != nil || j.DecisionSpeed != nil || len(snap.Reservations) != 0 {
		t.Errorf("without model, log and observations: %+v, reservations %v", j, snap.Reservations)
	}
}

func TestTakeErrors(t *testing.T) {
	if _, err := Take(Sources{}, now); err == nil {
		t.Error("no residency_dir: want an error")
	}
	src := fixture(t)
	src.ResidencyDir = filepath.Join(t.TempDir(), "missing")
	if _, err := Take(src, now); err == nil {
		t.Error("missing residency store: want an error")
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestMetricsZerosForInventory: the configured nodes and their GPUs are
// exported at 0 while idle, beside the nodes with jobs, so a dashboard of a
// healthy idle cluster shows 0, not "No data".
func TestMetricsZerosForInventory(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy bool
		want []string
	}{
		{"idle cluster", false, []string{
			`coscheml_gpus_shared{node="n1"} 0`, `coscheml_gpus_shared{node="n2"} 0`,
			`coscheml_jobs_sharing{node="n2"} 0`, `coscheml_gpus_in_use{node="n1"} 0`,
			`coscheml_jobs_predicted_below_floor{node="n2"} 0`, `coscheml_reservations{node="n2"} 0`,
			`coscheml_gpu_jobs{node="n1",gpu="0"} 0`, `coscheml_gpu_jobs{node="n2",gpu="1"} 0`,
		}},
		{"jobs on n1", true, []string{
			`coscheml_gpus_shared{node="n1"} 1`, `coscheml_gpus_shared{node="n2"} 0`,
			`coscheml_gpu_jobs{node="n1",gpu="0"} 2`, `coscheml_gpu_jobs{node="n1",gpu="1"} 1`, `coscheml_gpu_jobs{node="n2",gpu="0"} 0`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fixture(t)
			if !tc.busy {
				src.ResidencyDir = filepath.Join(t.TempDir(), "residency")
				for _, d := range []string{"active", "done"} {
					if err := os.MkdirAll(filepath.Join(src.ResidencyDir, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				src.DecisionLog = ""
			}
			src.Nodes, src.GPUsPerNode = []string{"n1", "n2"}, 2
			snap, err := Take(src, now)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := metrics.Write(&b, snap.Metrics()); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(b.Bytes(), []byte(w+"\n")) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
			if n := bytes.Count(b.Bytes(), []byte(`coscheml_gpu_jobs{`)); n != 4 {
				t.Errorf("%d coscheml_gpu_jobs samples, want one per configured GPU (4):\n%s", n, b.String())
			}
		})
	}
}
