// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
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

	t.Run("constraint across a restart", func(t *testing.T) { testHeteroRestart(t, c) })

	cmd := exec.Command(filepath.Join(c.a.binDir, "coscheml"), "preflight", "--slurm-conf", c.path("slurm.conf"))
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.path("coscheml.yaml"))
	out, _ := cmd.CombinedOutput() // other checks (the installed plugin) may fail here
	if !strings.Contains(string(out), "cluster.groups[0] (NVIDIA A100-SXM4-40GB): 1 nodes of 2 GPUs match slurm.conf, feature a100, Type a100") {
		t.Errorf("preflight does not find the a100 group:\n%s", out)
	}
}

// testHeteroRestart: a job asking for the a100s while they are full is deferred;
// slurmctld restarts (the plugin forgets the job's constraint); when the a100s
// free, the re-decide loop sends the job's constraint back with its update, and
// the job starts on the a100 node. Without it the plugin would place the job as
// if it asked for no model, next to the light job running on an h200 node, where
// Slurm can never start it.
func testHeteroRestart(t *testing.T, c *cluster) {
	_, restore := c.deferWaits(10 * time.Second) // the fillers hold whole GPUs
	var ids []int
	defer func() { restore(ids...) }()
	stop := c.startRedecide(time.Second)
	defer stop()

	started := func(id int, m string) {
		t.Helper()
		if !c.waitStarted(id, m, 40*time.Second) {
			t.Fatalf("job %d did not start within 40 s:\n%s", id, c.showJob(id).Raw)
		}
	}
	marker := func(what string) string { return c.path("jobs", fmt.Sprintf("%s.%d", what, time.Now().UnixNano())) }
	// A light job on an h200: the co-runner an unconstrained placement prefers.
	hm := marker("h200light")
	h := c.mustSbatch("--gres=gpu:1", "--constraint=h200", "--time=10", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=touch "+hm+"; exec sleep 300")
	ids = append(ids, h)
	started(h, hm)
	var fillers []int
	for i := 0; i < heteroSmallGPUs; i++ {
		m := marker(fmt.Sprintf("a100filler%d", i))
		id := c.mustSbatch("--gres=gpu:1", "--constraint=a100", "--time=10", "-o", "/dev/null", "--wrap=touch "+m+"; exec sleep 300")
		ids = append(ids, id)
		fillers = append(fillers, id)
		started(id, m)
	}
	time.Sleep(residencySettle + 2*time.Second) // residency recorded; the loop's heartbeat seen

	xm := marker("a100deferred")
	x := c.mustSbatch("--gres=gpu:1", "--constraint=a100", "--time=10", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=touch "+xm+"; exec sleep 2")
	ids = append(ids, x)
	if xj := c.showJob(x); xj.State != "PENDING" || xj.Reason != "BeginTime" {
		t.Fatalf("a100 job %d with the a100s full: state %s reason %s, want deferred:\n%s", x, xj.State, xj.Reason, xj.Raw)
	}
	c.restartCtld()
	c.cancel(fillers...)
	if !c.waitStarted(x, xm, 60*time.Second) {
		t.Fatalf("deferred a100 job %d did not start within 60 s of the a100s freeing after a restart:\n%s", x, c.showJob(x).Raw)
	}
	if xj := c.showJob(x); xj.NodeList != "n1" {
		t.Errorf("deferred a100 job %d ran on %s, want n1 (the a100 node)", x, xj.NodeList)
	} else {
		t.Logf("deferred a100 job %d: re-decided after a slurmctld restart onto %s/%s (%s)", x, xj.NodeList, xj.GPUIdx, xj.TresPerNode)
	}
}
