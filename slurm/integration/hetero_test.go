// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHetero: a cluster of two node groups (n1: 2 GPUs of Type a100, 40 GiB,
// feature a100; n2-n4: 4 GPUs of Type h200, 140 GiB, feature h200), listed as
// cluster.groups. A job asking for a model by feature (--constraint) or by Type
// (--gres=gpu:a100:1) is pinned to that model's nodes and shares them; a
// constraint no group names is left to Slurm; preflight finds the groups in
// slurm.conf.
func TestHetero(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	c := newClusterTopo(t, a, true, topology{hetero: true}, nil)

	submit := func(args ...string) job {
		t.Helper()
		id := c.mustSbatch(append([]string{"--hold", "-o", "/dev/null", "--comment", "coscheml:app=" + lightA, "--wrap=true"}, args...)...)
		j := c.showJob(id)
		c.cancel(id)
		return j
	}
	for _, tc := range []struct {
		name  string
		args  []string
		nodes []string // allowed pins; nil: left unchanged
	}{
		{"feature a100", []string{"--gres=gpu:1", "--constraint=a100"}, []string{"n1"}},
		{"Type a100", []string{"--gres=gpu:a100:1"}, []string{"n1"}},
		{"feature h200", []string{"--gres=gpu:1", "--constraint=h200"}, []string{"n2", "n3", "n4"}},
		{"Type h200", []string{"--gres=gpu:h200:1"}, []string{"n2", "n3", "n4"}},
		{"feature no group names", []string{"--gres=gpu:1", "--constraint=ib"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := submit(tc.args...)
			if tc.nodes == nil {
				if j.ReqNodeList != "(null)" || !strings.Contains(j.TresPerNode, "gpu") {
					t.Errorf("job changed: TresPerNode=%s ReqNodeList=%s", j.TresPerNode, j.ReqNodeList)
				}
				return
			}
			ok := false
			for _, n := range tc.nodes {
				ok = ok || j.ReqNodeList == n
			}
			if !ok || !strings.Contains(j.TresPerNode, "shard") {
				t.Errorf("pinned to %q with %s, want one of %v with shards", j.ReqNodeList, j.TresPerNode, tc.nodes)
			}
		})
	}

	// Running jobs: light a100 jobs run on n1 only (two GPUs, shared), where
	// Slurm starts them as the plugin pinned them.
	var ids []int
	for i := 0; i < 4; i++ {
		ids = append(ids, c.mustSbatch("-o", "/dev/null", "--comment", "coscheml:app="+lightA, "--gres=gpu:1", "--constraint=a100", "--wrap=sleep 2"))
	}
	states, _ := c.waitRan(ids, func(s string) bool { return s == "" || s == "COMPLETED" || s == "FAILED" || s == "CANCELLED" }, 120*time.Second)
	for _, id := range ids {
		j := c.showJob(id)
		if j.State != "COMPLETED" || j.NodeList != "n1" {
			t.Errorf("a100 job %d: %s on %s (squeue %q), want COMPLETED on n1", id, j.State, j.NodeList, states[id])
		}
	}

	cmd := exec.Command(filepath.Join(c.a.binDir, "coscheml"), "preflight", "--slurm-conf", c.path("slurm.conf"))
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.path("coscheml.yaml"))
	out, _ := cmd.CombinedOutput() // other checks (the installed plugin) may fail here
	if !strings.Contains(string(out), "cluster.groups[0] (NVIDIA A100-SXM4-40GB): 1 nodes of 2 GPUs match slurm.conf, feature a100, Type a100") {
		t.Errorf("preflight does not find the a100 group:\n%s", out)
	}
}
