// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The job's own options on real daemons (docs/slurm-integration.md, "The job's
// own options"): what Slurm really stores after the plugin answered. Held jobs
// only: nothing has to run, so each subtest takes seconds.

// statesPoll is how long the plugin's node-state poll (every 5 s) needs at most
// to see a node's new state.
const statesPoll = 7 * time.Second

var rawTresRE = regexp.MustCompile(`TresPerNode=(\S+)`)

// testArray: a tagged job array is not pinned (a pin would put every task on one
// node): each task asks for all shards of one GPU, any node.
func testArray(t *testing.T, c *cluster) {
	slots := strconv.Itoa(c.cfg.SlotsPerGPU)
	id := c.mustSbatch("--hold", "--array=0-3", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=true")
	defer c.cancel(id)
	j := c.showJob(id)
	if j.ReqNodeList != "(null)" || !strings.Contains(j.TresPerNode, "shard:"+slots) {
		t.Errorf("array job %d: ReqNodeList=%s TresPerNode=%s, want (null) and shard:%s", id, j.ReqNodeList, j.TresPerNode, slots)
	}
	if l := c.lastLogLine("job array"); !strings.Contains(l, "action=exclusive") {
		t.Errorf("no decision line for the array: %q", l)
	}
	// The same job without --array is pinned: the difference is the array.
	one := c.mustSbatch("--hold", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=true")
	defer c.cancel(one)
	if j := c.showJob(one); j.ReqNodeList == "(null)" {
		t.Errorf("the same job without --array was not pinned: %s", j.TresPerNode)
	}
	c.mustCtldAlive()
}

// testExclude: -x is never overridden by a pin, and a one-node -w is kept.
func testExclude(t *testing.T, c *cluster) {
	var ids []int
	defer func() { c.cancel(ids...) }()
	for _, tc := range []struct{ opt, want string }{
		{"--exclude=n[1-3]", "n4"},
		{"--exclude=n1,n2,n4", "n3"},
		{"--nodelist=n2", "n2"},
	} {
		id := c.mustSbatch("--hold", tc.opt, "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=true")
		ids = append(ids, id)
		if j := c.showJob(id); j.ReqNodeList != tc.want {
			t.Errorf("%s: job %d pinned to %s, want %s (TresPerNode=%s)", tc.opt, id, j.ReqNodeList, tc.want, j.TresPerNode)
		}
	}
	c.mustCtldAlive()
}

// testDrained: no pin goes to a drained node, and a pending job pinned to a node
// that then drains moves when it is decided again (scontrol update, as the
// re-decide loop sends it).
func testDrained(t *testing.T, c *cluster) {
	slots := strconv.Itoa(c.cfg.SlotsPerGPU)
	var ids []int
	defer func() {
		c.cancel(ids...)
		c.run("scontrol", "update", "nodename=n2", "state=resume")
	}()
	submit := func() job {
		id := c.mustSbatch("--hold", "--exclude=n1,n3,n4", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+lightA, "--wrap=true")
		ids = append(ids, id)
		return c.showJob(id)
	}
	before := submit()
	if before.ReqNodeList != "n2" {
		t.Fatalf("job %d before the drain: pinned to %s, want n2", before.ID, before.ReqNodeList)
	}
	if _, err := c.run("scontrol", "update", "nodename=n2", "state=drain", "reason=coscheml-test"); err != nil {
		t.Fatal(err)
	}

	// The plugin sees the drain at its next node-state poll (every 5 s; later
	// on a loaded machine). Wait for that instead of a fixed time: a probe's
	// decision counts every GPU (n1, n3, n4 excluded, n2 drained) "on a node the
	// job may not use" once it has. (Not "is the probe unpinned": the probes
	// made before the poll hold n2's GPUs until their reservations age out, so
	// a later one waits unpinned whether or not the drain was seen.)
	allMasked := fmt.Sprintf("%d on a node the job may not use", numNodes*gpusPerNode)
	sawDrain := func(j job) bool {
		return strings.Contains(c.lastLogLine("decision="+decisionID(j.Comment)+" "), allMasked)
	}
	deadline := time.Now().Add(statesPoll + 20*time.Second)
	after := submit()
	for !sawDrain(after) && time.Now().Before(deadline) {
		c.cancel(after.ID)
		time.Sleep(time.Second)
		after = submit()
	}
	if !sawDrain(after) {
		t.Fatalf("the plugin did not see n2 drained within %v: job %d's decision: %s", statesPoll+20*time.Second, after.ID,
			c.lastLogLine("decision="+decisionID(after.Comment)+" "))
	}

	// A new job whose only node drained is not pinned there: all shards of one
	// GPU, any node it allows (it waits for n2 as Slurm decides).
	if after.ReqNodeList != "(null)" || !strings.Contains(after.TresPerNode, "shard:"+slots) {
		t.Errorf("job %d after the drain: ReqNodeList=%s TresPerNode=%s, want (null) and shard:%s", after.ID, after.ReqNodeList, after.TresPerNode, slots)
	}

	// The job pinned before the drain: decided again, its pin is dropped.
	m := rawTresRE.FindStringSubmatch(before.Raw)
	if m == nil {
		t.Fatalf("job %d: no TresPerNode in\n%s", before.ID, before.Raw)
	}
	if out, err := c.run("scontrol", "update", "JobId="+strconv.Itoa(before.ID), "Comment="+before.Comment, "TresPerNode="+m[1]); err != nil {
		t.Fatalf("re-decision of job %d: %v\n%s", before.ID, err, out)
	}
	if j := c.showJob(before.ID); j.ReqNodeList != "(null)" || !sawDrain(j) {
		t.Errorf("job %d pinned to drained n2: its re-decision keeps the pin or does not count n2 as unusable: ReqNodeList=%s TresPerNode=%s\n%s",
			before.ID, j.ReqNodeList, j.TresPerNode, c.lastLogLine("modify job="+strconv.Itoa(before.ID)+" "))
	}
	if n := c.countLog("node states unknown"); n > 0 {
		t.Errorf("the plugin could not poll the node states:\n%s", c.lastLogLine("node states unknown"))
	}
	c.mustCtldAlive()
}
