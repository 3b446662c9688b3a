// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
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

// TestPlaceStateTakesGroups: a state file's node that is in the configured
// groups takes its group's memory, model and features unless it gives its own.
func TestPlaceStateTakesGroups(t *testing.T) {
	cfg := config.Default()
	cfg.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{
		{Nodes: "a[1-2]", GPUsPerNode: 4, GPUMemoryMiB: 40960, GPUModel: "A100", Feature: "a100"},
		{Nodes: "v1", GPUsPerNode: 4, GPUMemoryMiB: 16384, GPUModel: "V100", Feature: "v100"},
	}}
	state := "nodes:\n  - name: a1\n    gpus:\n      - index: 0\n  - name: v1\n    model: Other\n    features: [x]\n    gpus:\n      - memory_mib: 8000\n  - name: z9\n    gpus:\n      - memory_mib: 1000\n"
	c, err := parseState([]byte(state), profile.Catalog{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		model string
		feats []string
		mem   float64
	}{{"A100", []string{"a100"}, 40960}, {"Other", []string{"x"}, 8000}, {"", nil, 1000}} {
		n := c.Nodes[i]
		if n.Model != want.model || !slices.Equal(n.Features, want.feats) || n.GPUs[0].MemMiB != want.mem {
			t.Errorf("node %s: %q %v %v MiB; want %q %v %v", n.Name, n.Model, n.Features, n.GPUs[0].MemMiB, want.model, want.feats, want.mem)
		}
	}
	if _, err := parseState([]byte("nodes:\n  - name: a1\n    features: [\"a b\"]\n    gpus:\n      - index: 0\n"), profile.Catalog{}, cfg); err == nil {
		t.Error("a feature with a space was accepted")
	}
}
