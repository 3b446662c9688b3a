// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// TestCheckGroups: preflight checks each node group against slurm.conf: the
// nodes exist with the group's GPU count (per-GPU Types summed), its feature
// and its gres Type; each mistake is named with the node and its line.
func TestCheckGroups(t *testing.T) {
	const conf = "NodeName=a[1-2] Features=a100,ib Gres=gpu:a100:4,shard:16\n" +
		"NodeName=h1 Features=h100 Gres=gpu:g0:1,gpu:g1:1,shard:8\n" +
		"NodeName=v1 Gres=gpu:2\n"
	sc, err := slurmconf.Parse(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	good := []config.NodeGroup{
		{Nodes: "a[1-2]", GPUsPerNode: 4, GPUMemoryMiB: 40960, GPUModel: "A100", Feature: "a100", GresType: "a100"},
		{Nodes: "h1", GPUsPerNode: 2, GPUMemoryMiB: 81920, GPUModel: "H100", Feature: "h100"},
	}
	for _, tc := range []struct {
		name  string
		edit  func(g []config.NodeGroup) []config.NodeGroup
		fails []string // substrings, one per expected failure
	}{
		{"all match", nil, nil},
		{"GPU count", func(g []config.NodeGroup) []config.NodeGroup { g[1].GPUsPerNode = 4; return g }, []string{"node h1 has 2 GPUs in slurm.conf (line 2), the group says 4"}},
		{"feature missing", func(g []config.NodeGroup) []config.NodeGroup { g[1].Feature = "h200"; return g }, []string{"node h1 lacks the feature h200"}},
		{"gres type missing", func(g []config.NodeGroup) []config.NodeGroup { g[1].GresType = "h100"; return g }, []string{"node h1 has no GPU of Type h100"}},
		{"node not in slurm.conf", func(g []config.NodeGroup) []config.NodeGroup { g[0].Nodes = "a[1-3]"; return g }, []string{"node a3 is not a NodeName"}},
		{"many missing nodes, bounded", func(g []config.NodeGroup) []config.NodeGroup { g[0].Nodes = "z[1-10]"; return g },
			[]string{"node z1 ", "node z2 ", "node z3 ", "7 more problems"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := append([]config.NodeGroup(nil), good...)
			if tc.edit != nil {
				groups = tc.edit(groups)
			}
			found := checkGroups(sc, config.ClusterSpec{Groups: groups})
			var fails []string
			oks := 0
			for _, f := range found {
				if f.fail {
					fails = append(fails, f.msg)
				} else {
					oks++
				}
			}
			if len(fails) != len(tc.fails) {
				t.Fatalf("failures %q, want %d like %q", fails, len(tc.fails), tc.fails)
			}
			for i, want := range tc.fails {
				if !strings.Contains(fails[i], want) {
					t.Errorf("failure %q lacks %q", fails[i], want)
				}
			}
			if len(tc.fails) == 0 && oks != 2 {
				t.Errorf("%d groups reported matching, want 2: %+v", oks, found)
			}
		})
	}
	// The flat form is checked too (no features or Types to check).
	found := checkGroups(sc, config.ClusterSpec{Nodes: "v1", GPUsPerNode: 2, GPUMemoryMiB: 16384})
	if len(found) != 1 || found[0].fail {
		t.Errorf("flat form: %+v, want one match", found)
	}
}
