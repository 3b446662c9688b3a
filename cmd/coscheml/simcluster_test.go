package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateHeteroCluster: `simulate --cluster` replays a trace on the shipped
// heterogeneous cluster (the demo's Philly jobs and the Alibaba pod list whose
// pods name GPU models), describes its groups, and every policy finishes (a GPU
// over-committed would fail the run); the cluster file's mistakes and flags that
// contradict it are usage errors.
func TestSimulateHeteroCluster(t *testing.T) {
	e := newEnv(t)
	example := filepath.Join("..", "..", "etc", "examples", "cluster-hetero.yaml")
	pods := filepath.Join("..", "..", "etc", "examples", "alibaba-pods-hetero.csv")
	for _, args := range [][]string{
		{"simulate", "--cluster", example, "--jobs", "300", "--seeds", "1", "--max-duration", "24h", "--load", "2", "--quiet"},
		{"simulate", "--cluster", example, "--trace", "alibaba", "--file", pods, "--jobs", "300", "--seeds", "1", "--load", "2", "--quiet"},
	} {
		code, out, errOut := e.run(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		for _, want := range []string{"4 groups, 18 nodes, 64 GPUs", "(Tesla T4)", "| coscheml |", "| blind |", "| oracle |"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: report lacks %q:\n%s", args, want, out)
			}
		}
	}
	bad := filepath.Join(e.dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("cluster:\n  groups:\n    - nodes: a1\n      gpus_per_node: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(e.dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("policy: blind\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "--cluster", example, "--nodes", "4"}, "--nodes"},
		{[]string{"simulate", "--cluster", example, "--gpu-mem-mib", "1000"}, "--gpu-mem-mib"},
		{[]string{"simulate", "--cluster", bad}, "gpus_per_node"},
		{[]string{"simulate", "--cluster", empty}, "no node configured"},
	} {
		code, _, errOut := e.run(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure naming %q", tc.args, code, errOut, tc.want)
		}
	}
}
