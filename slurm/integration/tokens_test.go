// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
)

// testUpdateUnknownProfile: under unknown_profile: reject, an ordinary user's
// `scontrol update` that only sets the comment to an unknown tag is refused, as
// the submission with that tag is, and the job keeps its comment.
func testUpdateUnknownProfile(t *testing.T, c *cluster) {
	c.openForUser()
	orig := c.cfg
	cfg := orig
	cfg.UnknownProfile = config.UnknownReject
	c.writeConfig(cfg)
	c.restartCtld()
	defer func() {
		c.writeConfig(orig)
		c.restartCtld()
	}()
	const unknown = "integration-no-such-profile"
	if id, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app="+unknown); err == nil {
		c.cancel(id)
		t.Fatalf("submission with unknown tag %s accepted under unknown_profile: reject (job %d)", unknown, id)
	} else if !strings.Contains(stderr, "unknown application profile") {
		t.Errorf("submission refused without the reason: %s", stderr)
	}
	id, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app="+lightA)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	defer c.cancel(id)
	msg, err := c.userUpdate(id, "Comment=coscheml:app="+unknown)
	if err == nil {
		t.Errorf("comment-only update to unknown tag %s accepted", unknown)
	} else {
		t.Logf("comment-only update to %s -> %s", unknown, strings.ReplaceAll(msg, "\n", " | "))
	}
	if j := c.showJob(id); tagOf(j.Comment) != lightA {
		t.Errorf("refused update changed the comment to %q", j.Comment)
	}
	// A known tag by the same kind of update still goes through.
	if msg, err := c.userUpdate(id, "Comment=coscheml:app="+lightB); err != nil {
		t.Errorf("comment-only update to known tag %s: %v: %s", lightB, err, msg)
	} else if j := c.showJob(id); tagOf(j.Comment) != lightB {
		t.Errorf("update to %s: comment is %q", lightB, j.Comment)
	}
	if n := c.countLog("job_submit/coscheml", "modify job="+strconv.Itoa(id)+" ", "unknown application profile"); n == 0 {
		t.Errorf("no refusal line for the update of job %d: %s", id, c.lastLogLine("modify job="+strconv.Itoa(id)))
	}
	c.mustCtldAlive()
}

// testCopiedToken: an ordinary user's update of their job 2 that carries the
// token of their job 1 is re-decided without it: job 1's reservation stays, so
// job 2 is not placed on job 1's GPU as if it were idle, and the copied token
// does not reach job 2's comment.
func testCopiedToken(t *testing.T, c *cluster) {
	c.openForUser()
	tags := pickTags(t, c.cfg, c.a.repo)
	prefix := "gres:"
	if c.a.slurm.atLeast(23, 11) {
		prefix = "gres/"
	}
	var ids []int
	defer func() { c.cancel(ids...) }()
	submit := func(tag string) (int, string) {
		t.Helper()
		id, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app="+tag)
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		ids = append(ids, id)
		j := c.showJob(id)
		d := comment.ParseComment(j.Comment)
		if d.DecisionID == "" {
			t.Fatalf("job %d has no token: %q", id, j.Comment)
		}
		return id, j.Comment
	}
	id1, c1 := submit(tags.heavyA)
	id2, _ := submit(tags.heavyB)
	d1 := comment.ParseComment(c1)
	r1 := findDecision(t, c.cfg.DecisionLog, d1.DecisionID)

	tok1 := comment.FormatToken(d1.DecisionID, d1.Shards)
	msg, err := c.userUpdate(id2, "Comment=coscheml:app="+tags.heavyB+" "+tok1, "TresPerNode="+prefix+"gpu:1")
	if err != nil {
		t.Fatalf("update of job %d with job %d's token: %v: %s", id2, id1, err, msg)
	}
	j2 := c.showJob(id2)
	if strings.Contains(j2.Comment, d1.DecisionID) {
		t.Errorf("job %d's token reached job %d's comment: %q", id1, id2, j2.Comment)
	}
	d2 := comment.ParseComment(j2.Comment)
	if d2.DecisionID == "" {
		t.Fatalf("job %d re-decided without a token: %q", id2, j2.Comment)
	}
	r2 := findDecision(t, c.cfg.DecisionLog, d2.DecisionID)
	if slices.Contains(r2.Replaces, d1.DecisionID) {
		t.Errorf("job %d's update dropped job %d's reservation %s", id2, id1, d1.DecisionID)
	}
	if r2.Node != "" && r2.Node == r1.Node && r2.GPU == r1.GPU {
		t.Errorf("heavy job %d re-placed on job %d's GPU %s/%d as if it were idle", id2, id1, r1.Node, r1.GPU)
	}
	if n := c.countLog("job_submit/coscheml", "removed a coscheml-id token"); n == 0 {
		t.Errorf("no log line for the removed token")
	}
	t.Logf("job %d on %s/%d; job %d after the update with its token: %s/%d (replaced %v)", id1, r1.Node, r1.GPU, id2, r2.Node, r2.GPU, r2.Replaces)
	c.mustCtldAlive()
}

// findDecision waits for decision id in the decision log (written in the
// background) and returns it.
func findDecision(t *testing.T, path, id string) decisionlog.Record {
	t.Helper()
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var r decisionlog.Record
		if r, err = decisionlog.Find(path, id, ""); err == nil {
			return r
		}
	}
	t.Fatalf("decision %s not in the decision log: %v", id, err)
	return decisionlog.Record{}
}

// testRunningRetag: an ordinary user cannot change the coscheml directive of
// their running job by `scontrol update` (the job's GPU and its profiling were
// decided for the directive it started with); the comment stays as it was.
func testRunningRetag(t *testing.T, c *cluster) {
	c.openForUser()
	stdout, stderr, err := c.runAsUser("sbatch", "--chdir=/tmp", "-o", "/dev/null", "--gres=gpu:1",
		"--comment=coscheml:app="+lightA, "--wrap=sleep 120")
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, stderr)
	}
	m := jobIDRE.FindStringSubmatch(strings.TrimSpace(stdout))
	if m == nil {
		t.Fatalf("sbatch printed no job ID: %q", stdout)
	}
	id, _ := strconv.Atoi(m[1])
	defer func() {
		c.cancel(id)
		c.waitGone(job{ID: id})
	}()
	waitState(t, c, id, "RUNNING", 60*time.Second)
	time.Sleep(residencySettle) // the plugin sees the job in the residency store
	msg, err := c.userUpdate(id, "Comment=coscheml:app="+lightB)
	if err == nil {
		t.Errorf("retag of running job %d to %s accepted", id, lightB)
	} else {
		t.Logf("retag of running job %d -> %s", id, strings.ReplaceAll(msg, "\n", " | "))
	}
	if j := c.showJob(id); tagOf(j.Comment) != lightA {
		t.Errorf("running job %d's comment changed to %q", id, j.Comment)
	}
	if n := c.countLog("job_submit/coscheml", "modify job="+strconv.Itoa(id)+" ", "is running: its coscheml directive cannot change"); n == 0 {
		t.Errorf("no refusal line for the retag of job %d: %s", id, c.lastLogLine("modify job="+strconv.Itoa(id)))
	}
	c.mustCtldAlive()
}
