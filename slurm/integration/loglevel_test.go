// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
)

// testLogLevels: with log_decisions at its default (verbose) a tagged
// submission's decision line stays out of slurmctld's log at SlurmctldDebug=info
// while the decision log records it; `scontrol setdebug verbose` brings the
// lines back without a restart (Slurm's own level check in the shim's logger);
// a refused job is logged at info whatever log_decisions says. The rest of the
// suite runs with log_decisions: info (it reads decisions from slurmctld's log).
func testLogLevels(t *testing.T, c *cluster) {
	c.openForUser() // its refusal is an ordinary user's submission
	tags := pickTags(t, c.cfg, c.a.repo)
	orig := c.cfg
	cfg := orig
	cfg.LogDecisions = config.Default().LogDecisions
	if cfg.LogDecisions != config.LogVerbose {
		t.Fatalf("log_decisions defaults to %q; this test checks verbose", cfg.LogDecisions)
	}
	c.writeConfig(cfg)
	c.restartCtld()
	var ids []int
	defer func() {
		c.cancel(ids...)
		if out, err := c.run("scontrol", "setdebug", "info"); err != nil {
			t.Errorf("scontrol setdebug info: %v: %s", err, out)
		}
		c.writeConfig(orig)
		c.restartCtld()
	}()
	held := func() string {
		t.Helper()
		id := c.mustSbatch("--hold", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+tags.goodA, "--wrap=true")
		ids = append(ids, id)
		d := decisionID(c.showJob(id).Comment)
		if d == "" {
			t.Fatalf("tagged job %d has no decision id: %s", id, c.showJob(id).Comment)
		}
		return d
	}

	quiet := held()
	if n := c.countLog("job_submit/coscheml", "decision="+quiet+" "); n != 0 {
		t.Errorf("log_decisions verbose at SlurmctldDebug=info: %d lines of decision %s in slurmctld's log, want 0", n, quiet)
	}
	if r, err := decisionlog.Find(cfg.DecisionLog, quiet, ""); err != nil || r.Outcome != "rewrite" {
		t.Errorf("decision %s not in the decision log (%v): %+v", quiet, err, r)
	}

	if out, err := c.run("scontrol", "setdebug", "verbose"); err != nil {
		t.Fatalf("scontrol setdebug verbose: %v: %s", err, out)
	}
	loud := held()
	if l := c.lastLogLine("decision=" + loud + " "); !strings.Contains(l, "job_submit/coscheml: ") || !strings.Contains(l, "outcome=rewrite") {
		t.Errorf("at SlurmctldDebug=verbose the decision line of %s is missing: %q", loud, l)
	}
	if out, err := c.run("scontrol", "setdebug", "info"); err != nil {
		t.Fatalf("scontrol setdebug info: %v: %s", err, out)
	}

	// A refusal is said at info: an invalid tag is rejected (invalid_tag: reject).
	before := c.countLog("job_submit/coscheml", "outcome=reject")
	if _, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app=../etc"); err == nil {
		t.Errorf("a job with an invalid tag was accepted: %s", stderr)
	}
	if after := c.countLog("job_submit/coscheml", "outcome=reject"); after != before+1 {
		t.Errorf("refusal lines in slurmctld's log: %d before, %d after, want one more", before, after)
	}
	c.mustCtldAlive()
}
