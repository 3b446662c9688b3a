// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/residency"
)

var t0 = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func testConfig(t *testing.T) (config.Config, string) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ResidencyDir = filepath.Join(dir, "residency")
	cfg.ProfileDir = filepath.Join(dir, "profiles")
	cfg.ObservationDir = filepath.Join(dir, "observations")
	cfg.Profiling.Enabled = false
	y := "residency_dir: " + cfg.ResidencyDir + "\nprofile_dir: " + cfg.ProfileDir + "\nobservation_dir: " + cfg.ObservationDir + "\nprofiling:\n  enabled: false\n"
	path := filepath.Join(dir, "coscheml.yaml")
	os.WriteFile(path, []byte(y), 0o644)
	return cfg, path
}

func quiet() *logger { return &logger{w: &bytes.Buffer{}} }

func TestParseGPUs(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false}, {"0", []int{0}, false}, {"0,2", []int{0, 2}, false}, {"1-3", []int{1, 2, 3}, false},
		{"GPU-8f3a", nil, true}, {"3-1", nil, true}, {"99", nil, true},
	}
	for _, tc := range tests {
		got, err := parseGPUs(tc.in)
		if (err != nil) != tc.bad || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseGPUs(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestPrologEpilog(t *testing.T) {
	cfg, _ := testConfig(t)
	env := map[string]string{
		"SLURM_JOB_ID": "41", "SLURMD_NODENAME": "n2", "SLURM_JOB_GPUS": "1",
		"SLURM_JOB_COMMENT": "coscheml:app=bert,class=infer coscheml-id=abc-1:2", "SLURM_JOB_USER": "alice",
	}
	if err := prolog(cfg, env, t0, quiet()); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "n2", "SLURM_JOB_GPUS": "1", "SLURM_JOB_COMMENT": "coscheml:app=resnet coscheml-id=abc-2:2"}
	if err := prolog(cfg, other, t0.Add(time.Minute), quiet()); err != nil {
		t.Fatal(err)
	}
	store, _ := residency.Open(cfg.ResidencyDir)
	got, err := store.Get("41", "n2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tag != "bert" || got.Class != "infer" || got.DecisionID != "abc-1" || got.Shards != 2 || !reflect.DeepEqual(got.GPUs, []int{1}) || got.User != "alice" {
		t.Fatalf("entry %+v", got)
	}
	env["SLURM_JOB_EXIT_CODE"] = "0"
	if err := epilog(cfg, other, t0.Add(3*time.Minute), quiet(), nil); err != nil {
		t.Fatal(err)
	}
	if err := epilog(cfg, env, t0.Add(5*time.Minute), quiet(), nil); err != nil {
		t.Fatal(err)
	}
	res, _ := store.List(t0, time.Minute)
	if len(res.Entries) != 0 {
		t.Fatalf("entries left after epilogs: %+v", res.Entries)
	}
	runs, err := store.CoRuns("n2", []int{1}, "41", t0, t0.Add(5*time.Minute))
	if err != nil || len(runs) != 3 || !reflect.DeepEqual(runs[1].CoTags, []string{"resnet"}) {
		t.Fatalf("co-runs %+v %v", runs, err)
	}
}

func TestPrologUntaggedAndBadInput(t *testing.T) {
	cfg, _ := testConfig(t)
	store, _ := residency.Open(cfg.ResidencyDir)
	// An untagged shard job: recorded without tag, shards from Slurm's variable.
	env := map[string]string{"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1", "CUDA_VISIBLE_DEVICES": "0", "SLURM_SHARDS_ON_NODE": "3"}
	if err := prolog(cfg, env, t0, quiet()); err != nil {
		t.Fatal(err)
	}
	if e, err := store.Get("7", "n1"); err != nil || e.Tag != "" || e.Shards != 3 {
		t.Fatalf("untagged: %+v %v", e, err)
	}
	// A hostile comment: recorded as untagged, logged.
	var buf bytes.Buffer
	env = map[string]string{"SLURM_JOB_ID": "8", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "2", "SLURM_JOB_COMMENT": "coscheml:app=../../x"}
	if err := prolog(cfg, env, t0, &logger{w: &buf}); err != nil {
		t.Fatal(err)
	}
	if e, err := store.Get("8", "n1"); err != nil || e.Tag != "" || !strings.Contains(buf.String(), "invalid tag") {
		t.Fatalf("hostile: %+v %v %q", e, err, buf.String())
	}
	// No GPUs: nothing recorded. Bad job id / node: an error, never a file.
	if err := prolog(cfg, map[string]string{"SLURM_JOB_ID": "9", "SLURMD_NODENAME": "n1"}, t0, quiet()); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get("9", "n1"); err == nil {
		t.Fatal("CPU job recorded")
	}
	if err := prolog(cfg, map[string]string{"SLURM_JOB_ID": "../1", "SLURM_JOB_GPUS": "0"}, t0, quiet()); err == nil {
		t.Fatal("bad job id accepted")
	}
	if err := prolog(cfg, map[string]string{"SLURM_JOB_ID": "10", "SLURMD_NODENAME": "../n", "SLURM_JOB_GPUS": "0"}, t0, quiet()); err == nil {
		t.Fatal("bad node name accepted")
	}
}

func TestHookAlwaysExitsZero(t *testing.T) {
	_, path := testConfig(t)
	environ := []string{"SLURM_JOB_ID=5", "SLURMD_NODENAME=n1", "SLURM_JOB_GPUS=0"}
	if rc := runHook("prolog", []string{"--config", path, "--no-syslog"}, environ, func() time.Time { return t0 }); rc != 0 {
		t.Fatalf("prolog rc %d", rc)
	}
	if rc := runHook("prolog", []string{"--config", "/nonexistent.yaml", "--no-syslog"}, environ, time.Now); rc != 0 {
		t.Fatalf("prolog with a missing config: rc %d", rc)
	}
	if rc := runHook("epilog", []string{"--bogus"}, environ, time.Now); rc != 0 {
		t.Fatalf("epilog with a bad flag: rc %d", rc)
	}
	if rc := runHook("epilog", []string{"--config", path, "--no-syslog"}, environ, func() time.Time { return t0.Add(time.Minute) }); rc != 0 {
		t.Fatalf("epilog rc %d", rc)
	}
}

func TestReconcileCommand(t *testing.T) {
	cfg, path := testConfig(t)
	store, _ := residency.Open(cfg.ResidencyDir)
	now := time.Now()
	for _, id := range []string{"1", "2"} {
		store.Start(residency.Entry{JobID: id, Node: "n1", GPUs: []int{0}, Start: now.Add(-time.Hour), Expires: now.Add(time.Hour)})
	}
	var out, errb bytes.Buffer
	rc := runReconcile([]string{"--config", path, "--live", "-"}, strings.NewReader("2\n"), &out, &errb, now)
	if rc != 0 || !strings.Contains(out.String(), "removed job 1 on n1: not among Slurm's live jobs") || !strings.Contains(out.String(), "0 expired, 1 gone") {
		t.Fatalf("rc %d out %q err %q", rc, out.String(), errb.String())
	}
	if _, err := store.Get("2", "n1"); err != nil {
		t.Fatalf("live job removed: %v", err)
	}
	// Done markers past DoneTTL and leftover temp files go too.
	e := residency.Entry{JobID: "3", Node: "n1", GPUs: []int{0}, DecisionID: "d-3", Start: now.Add(-time.Hour), Expires: now.Add(time.Hour)}
	store.Start(e)
	store.End("3", "n1", now)
	old := now.Add(-2 * residency.DoneTTL)
	os.Chtimes(filepath.Join(cfg.ResidencyDir, "done", "d-3"), old, old)
	tmp := filepath.Join(cfg.ResidencyDir, "active", ".9@n1.json.1.tmp")
	os.WriteFile(tmp, nil, 0o644)
	os.Chtimes(tmp, old, old)
	// A pending run whose finisher never decided goes after a day; a young one stays.
	pend := jobprofile.PendingDir(cfg)
	os.MkdirAll(pend, 0o700)
	for _, n := range []string{"5.json", "5.json.log", "6.json"} {
		os.WriteFile(filepath.Join(pend, n), []byte("{}"), 0o600)
	}
	stale := now.Add(-25 * time.Hour)
	os.Chtimes(filepath.Join(pend, "5.json"), stale, stale)
	os.Chtimes(filepath.Join(pend, "5.json.log"), stale, stale)
	out.Reset()
	if rc := runReconcile([]string{"--config", path}, nil, &out, &errb, now); rc != 0 ||
		!strings.Contains(out.String(), "1 leftover temp files, 1 done markers pruned") ||
		!strings.Contains(out.String(), "removed 1 pending runs") {
		t.Fatalf("pruning: rc %d out %q err %q", rc, out.String(), errb.String())
	}
	if left, _ := os.ReadDir(pend); len(left) != 1 || left[0].Name() != "6.json" {
		t.Errorf("pending left: %v", left)
	}
	if rc := runReconcile([]string{"--config", path, "--live", "-"}, strings.NewReader("x y\n"), &out, &errb, now); rc != 1 {
		t.Fatalf("garbage live list: rc %d", rc)
	}
}
