package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/residency"
)

// explainEnv writes a config, a decision log with one decision, a residency entry
// for job 4242 and a fake scontrol that knows jobs 4242 (tagged) and 7 (untagged).
func explainEnv(t *testing.T) string {
	t.Helper()
	t.Setenv("COSCHEML_CONFIG", "")
	dir := t.TempDir()
	dlog := filepath.Join(dir, "decisions.log")
	res := filepath.Join(dir, "residency")
	cfg := filepath.Join(dir, "coscheml.yaml")
	os.WriteFile(cfg, []byte("decision_log: "+dlog+"\nresidency_dir: "+res+"\nprofile_dir: "+filepath.Join(dir, "p")+"\n"), 0o644)
	w := decisionlog.NewWriter(dlog, 0, 0)
	w.Log(decisionlog.Record{ID: "abc-7", Time: time.Now(), Op: "submit", Tag: "light-b", Class: "train", Outcome: "rewrite",
		Action: "share", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 0.98, MinResidentSpeed: 0.97,
		CoRunners: []string{"light-a"}, Policy: "coscheml", Reason: "n1/gpu0 with light-a", TresIn: "gres:gpu:1", TresOut: "gres:shard:2"})
	w.Close()
	store, _ := residency.Open(res)
	now := time.Now()
	if err := store.Start(residency.Entry{JobID: "4242", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "light-b", DecisionID: "abc-7", Start: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "scontrol")
	os.WriteFile(script, []byte(`#!/bin/sh
case "$4" in
4242) echo "JobId=4242 JobName=x JobState=RUNNING Reason=None NodeList=n1 Comment=run coscheml:app=light-b coscheml-id=abc-7:2 TresPerNode=gres:shard:2";;
7) echo "JobId=7 JobState=PENDING NodeList=(null) Comment=(null)";;
*) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1;;
esac
`), 0o755)
	t.Setenv("COSCHEML_SCONTROL", script)
	return cfg
}

func runCLI(args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := run(append([]string{"coscheml"}, args...), &out, &errw)
	return code, out.String(), errw.String()
}

func TestExplain(t *testing.T) {
	cfg := explainEnv(t)
	code, out, errs := runCLI("--config", cfg, "explain", "4242")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"job 4242: RUNNING on n1", "decision abc-7 (submit", "share on n1 GPU 0 with 2 shards",
		"predicted speed: 0.98", "co-runners at decision: light-a", "gres:gpu:1 -> gres:shard:2", "reason: n1/gpu0 with light-a",
		"running on n1 GPU 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("--config", cfg, "explain", "--json", "4242")
	var o explainOut
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Decision == nil || o.Decision.Node != "n1" || o.DecisionID != "abc-7" || o.Comment != "run coscheml:app=light-b coscheml-id=abc-7:2" {
		t.Fatalf("json: %d %s", code, out)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "7")
	if code != 0 || !strings.Contains(out, "PENDING") || !strings.Contains(out, "did not rewrite") {
		t.Fatalf("untagged job: %d %s", code, out)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "--decision", "abc-7")
	if code != 0 || !strings.Contains(out, "decision abc-7") {
		t.Fatalf("--decision: %d %s", code, out)
	}
	if code, _, _ = runCLI("--config", cfg, "explain", "999"); code != exitNotFound {
		t.Fatalf("unknown job: exit %d", code)
	}
	if code, _, _ = runCLI("--config", cfg, "explain", "--decision", "zzz-1"); code != exitNotFound {
		t.Fatalf("unknown decision: exit %d", code)
	}
	for _, bad := range [][]string{{"explain"}, {"explain", "1;rm"}, {"explain", "1", "2"}, {"explain", "--decision", "../x"}} {
		if code, _, _ = runCLI(append([]string{"--config", cfg}, bad...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}
