package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/submit"
)

func writeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"profiles", "residency"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	y := "profile_dir: " + filepath.Join(dir, "profiles") + "\nresidency_dir: " + filepath.Join(dir, "residency") +
		"\ndecision_log: " + filepath.Join(dir, "decisions.log") +
		"\ncluster:\n  nodes: n[1-3]\n  gpus_per_node: 4\n  gpu_memory_mib: 80000\n" + extra
	path := filepath.Join(dir, "coscheml.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBridgeGo(t *testing.T) {
	t.Cleanup(func() {
		if e := engine.Swap(nil); e != nil {
			e.Close()
		}
	})
	if r := decideGo(submit.JobFields{Comment: "coscheml:app=x"}); r.Code != submit.Unchanged {
		t.Fatalf("without init: %+v", r)
	}
	if rc := initGo(writeConfig(t, "")); rc != 0 {
		t.Fatalf("init with a good config: %d (%v)", rc, engine.Load().Problems())
	}
	r := decideGo(submit.JobFields{Comment: "coscheml:app=nosuch", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	if r.Code != submit.Reject || !strings.Contains(r.UserMsg, "unknown application profile 'nosuch'") {
		t.Fatalf("unknown profile: %+v", r)
	}
	if rc := initGo(writeConfig(t, "model_path: /nonexistent/x.model\n")); rc != 1 {
		t.Fatalf("init with a missing model: %d, want 1", rc)
	}
	r = decideGo(submit.JobFields{Comment: "coscheml:app=nosuch", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	// The model is needed for placement only: tags are still checked against the
	// profiles, and the failure is in the first job's log.
	if r.Code != submit.Reject || !strings.Contains(r.Log, "nonexistent") {
		t.Fatalf("degraded: %+v", r)
	}
	r = decideGo(submit.JobFields{Comment: "coscheml:app=other", TresPerNode: "gres:gpu:1", MinNodes: 1, JobID: submit.NoVal})
	if strings.Contains(r.Log, "nonexistent") {
		t.Fatalf("the failure is logged per job: %q", r.Log)
	}
	if rc := initGo(filepath.Join(t.TempDir(), "missing.yaml")); rc != 1 {
		t.Fatalf("init with a missing config: %d", rc)
	}
	if r := decideGo(submit.JobFields{Comment: "coscheml:app=../x", TresPerNode: "gres:gpu:1"}); r.Code != submit.Unchanged {
		t.Fatalf("missing config must pass through: %+v", r)
	}
}

// TestCHarness drives the real c-shared library from C. Building it takes minutes
// on a loaded machine, so the test runs only when LIBCOSCHEML_SO names a library
// built with `go build -buildmode=c-shared -o $LIBCOSCHEML_SO ./cmd/libcoscheml`.
func TestCHarness(t *testing.T) {
	so := os.Getenv("LIBCOSCHEML_SO")
	if so == "" {
		t.Skip("set LIBCOSCHEML_SO to a built libcoscheml.so")
	}
	bin := filepath.Join(t.TempDir(), "harness")
	if out, err := exec.Command("gcc", "-Wall", "-o", bin, "testdata/harness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, so, writeConfig(t, "")).CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"init rc=0",
		"untagged rc=0 tres=NULL nodes=NULL msg=NULL",
		"nulls rc=0 tres=NULL",
		"badtag rc=2 tres=NULL nodes=NULL msg=coscheml: invalid tag",
		"long rc=2 tres=NULL nodes=NULL msg=coscheml: comment of 10000 characters",
		"unknown rc=2 tres=NULL nodes=NULL msg=coscheml: unknown application profile 'nosuch'",
		"modify rc=0",
		"loop done",
		"afterfini rc=0 tres=NULL nodes=NULL msg=NULL",
		"reinit rc=2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("harness output lacks %q:\n%s", want, got)
		}
	}
}
