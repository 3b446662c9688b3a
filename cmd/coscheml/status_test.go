// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/promcheck"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/sharestatus"
)

// statusEnv writes a cluster state through the stores' own writers: n1 GPU 0
// shared by two tagged jobs, n1 GPU 1 with one job, and one reservation.
func statusEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	nowFunc = func() time.Time { return now }
	t.Cleanup(func() { nowFunc = time.Now })
	res, dlog := filepath.Join(e.dir, "residency"), filepath.Join(e.dir, "decisions.log")
	body := fmt.Sprintf("profile_dir: %s\nresidency_dir: %s\ndecision_log: %s\nobservation_dir: %s\n",
		filepath.Join(e.dir, "no-profiles"), res, dlog, filepath.Join(e.dir, "obs"))
	if err := os.WriteFile(e.config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := residency.Open(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct {
		id, tag, class string
		gpu            int
	}{{"201", "resnet18-bs128", "train", 0}, {"202", "dcgan-bs128", "train", 0}, {"203", "ppo-bs64", "train", 1}} {
		err := st.Start(residency.Entry{V: residency.Version, JobID: j.id, Node: "gpu01", GPUs: []int{j.gpu}, Shards: 2, Tag: j.tag,
			Class: profile.Class(j.class), DecisionID: "d" + j.id, User: "bob", Start: now.Add(-10 * time.Minute), Expires: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}
	w := decisionlog.NewWriter(dlog, 0, 0)
	w.Log(decisionlog.Record{ID: "d300", Time: now.Add(-time.Minute), Op: "submit", Tag: "neumf-bs64", Class: "infer",
		Outcome: "rewrite", Action: "share", Node: "gpu01", GPU: 1, Shards: 2, PredictedSpeed: 0.96})
	w.Close()
	return e
}

func TestStatus(t *testing.T) {
	e := statusEnv(t)
	tests := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"shared GPUs only", []string{"status"}, []string{"2 GPUs in use by 3 jobs, 1 shared; 1 reservations", "resnet18-bs128", "dcgan-bs128", "BELOW", "d300"}, []string{"ppo-bs64"}},
		{"all GPUs", []string{"status", "--all"}, []string{"ppo-bs64", "resnet18-bs128"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errw := e.run(tt.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errw)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}

	code, out, errw := e.run("status", "--json")
	if code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, errw)
	}
	var snap sharestatus.Snapshot
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(snap.GPUs) != 2 || !snap.GPUs[0].Shared || len(snap.Reservations) != 1 {
		t.Fatalf("--json: %+v", snap)
	}
	heavy := snap.GPUs[0].Jobs[0] // resnet18-bs128 next to dcgan-bs128: the heavy pair
	if want := speeds(t, "resnet18-bs128", "dcgan-bs128"); heavy.PredictedSpeed == nil || *heavy.PredictedSpeed != want || !heavy.BelowFloor {
		t.Errorf("job 201: predicted %v below %v, want %v (library) below floor", heavy.PredictedSpeed, heavy.BelowFloor, want)
	}
}

func TestStatusPromFilePassesPromtool(t *testing.T) {
	e := statusEnv(t)
	prom := filepath.Join(e.dir, "coscheml.prom")
	if code, _, errw := e.run("status", "--prom", prom); code != exitOK {
		t.Fatalf("exit %d: %s", code, errw)
	}
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`coscheml_gpus_shared{node="gpu01"} 1`, `coscheml_reservations{node="gpu01"} 1`,
		`coscheml_job_speed_predicted_ratio{node="gpu01",gpu="0",job_id="201",tag="resnet18-bs128",class="train"}`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("%s lacks %q:\n%s", prom, w, b)
		}
	}
	promcheck.File(t, prom)
}

func TestStatusErrors(t *testing.T) {
	e := newEnv(t)
	body := fmt.Sprintf("residency_dir: %s\n", filepath.Join(e.dir, "missing"))
	if err := os.WriteFile(e.config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errw := e.run("status"); code == exitOK || !strings.Contains(errw, "missing") {
		t.Errorf("missing residency store: exit %d, %q", code, errw)
	}
	if code, _, _ := e.run("status", "extra"); code != exitUsage {
		t.Errorf("extra argument: exit %d, want %d", code, exitUsage)
	}
}

// A user who may not see every user's jobs (not root, not the decision log's
// owner) sees other users' jobs counted on their GPUs but not who or what they
// are, and only their own reservations, as Slurm's PrivateData=jobs would.
func TestStatusHidesOtherUsers(t *testing.T) {
	e := statusEnv(t)
	const me = 51000
	st, err := residency.Open(filepath.Join(e.dir, "residency"))
	if err != nil {
		t.Fatal(err)
	}
	now := nowFunc()
	if err := st.Start(residency.Entry{V: residency.Version, JobID: "204", Node: "gpu01", GPUs: []int{1}, Shards: 2, Tag: "pointnet-bs32-amp",
		Class: "train", DecisionID: "d204", User: "51000", Start: now.Add(-time.Minute), Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	w := decisionlog.NewWriter(filepath.Join(e.dir, "decisions.log"), 0, 0)
	w.Log(decisionlog.Record{ID: "d301", Time: now.Add(-time.Minute), Op: "submit", UserID: me, Tag: "neumf-bs64",
		Outcome: "rewrite", Action: "share", Node: "gpu01", GPU: 0, Shards: 2})
	w.Close()
	for _, tc := range []struct {
		name string
		uid  int
		want []string
		not  []string
	}{
		{"root sees all", 0, []string{"201", "bob", "resnet18-bs128", "d300", "d301", "204"}, []string{"hidden-"}},
		{"a user sees their own", me, []string{"204", "pointnet-bs32-amp", "d301", "hidden-1", "hidden-3", "4 jobs"},
			[]string{"bob", "resnet18-bs128", "dcgan-bs128", "ppo-bs64", "d300", "201"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := callerUID
			callerUID = func() int { return tc.uid }
			defer func() { callerUID = old }()
			code, out, errw := e.run("status", "--all")
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errw)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("output shows %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestAgeText: seconds under a minute never round up into "1m0s", minutes
// above, and a start ahead of the clock is said rather than shown as 0s.
func TestAgeText(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{400 * time.Millisecond, "0s"},
		{24*time.Second + 600*time.Millisecond, "24s"},
		{59*time.Second + 700*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{5*time.Minute + 20*time.Second, "5m"},
		{2*time.Hour + 13*time.Minute, "2h13m"},
		{-300 * time.Millisecond, "0s"}, // within a second: the same moment
		{-24 * time.Second, "?(start 24s ahead of this clock)"},
	} {
		if got := ageText(tc.d); got != tc.want {
			t.Errorf("ageText(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
