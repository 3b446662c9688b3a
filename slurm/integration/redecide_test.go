// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/redecide"
)

// testRedecide: on a busy cluster a tagged job that nothing fits is answered
// "wait" and deferred (wait_defer); the re-decide loop (`coscheml redecide
// --loop`, as coscheml-redecide.service runs it) keeps it deferred while nothing
// frees, and once a co-runner ends re-decides it (scontrol update -> job_modify)
// into a shared placement that Slurm allocates on the intended GPU.
func testRedecide(t *testing.T, c *cluster) {
	tags := pickTags(t, c.cfg, c.a.repo)
	cfg, restore := c.deferWaits(10 * time.Second)
	var ids []int
	defer func() { restore(ids...) }()

	// A good pair fills one GPU (two co-runners, the most allowed) ...
	a := c.startJob("coscheml:app="+tags.goodA, "gpu:1")
	ids = append(ids, a.ID)
	time.Sleep(residencySettle)
	b := c.startJob("coscheml:app="+tags.goodB, "gpu:1")
	ids = append(ids, b.ID)
	if where(a) != where(b) {
		t.Fatalf("good pair %s + %s not co-located (%s, %s): the scenario needs them on one GPU", tags.goodA, tags.goodB, where(a), where(b))
	}
	// ... and untagged jobs every other GPU.
	fillers := map[int]string{}
	for i := 0; i < numNodes*gpusPerNode-1; i++ {
		m := c.path("jobs", fmt.Sprintf("filler.%d.%d", time.Now().UnixNano(), i))
		id := c.mustSbatch("--gres=gpu:1", "--time=10", "-o", "/dev/null", "--wrap=touch "+m+"; exec sleep 300")
		ids = append(ids, id)
		fillers[id] = m
	}
	// One deadline for all; a filler Slurm requeued gets its retry's time.
	deadline := time.Now().Add(40 * time.Second)
	for id, m := range fillers {
		if !c.waitStarted(id, m, max(time.Until(deadline), 0)) {
			t.Fatalf("filler job %d did not start within 40 s:\n%s", id, c.showJob(id).Raw)
		}
	}
	time.Sleep(residencySettle)

	// No loop runs yet: the plugin sees no heartbeat, so a wait is not deferred
	// (it would only start later): it keeps its whole-GPU request, eligible now.
	y := c.mustSbatch("--gres=gpu:1", "--time=10", "-o", "/dev/null", "--comment=coscheml:app="+tags.goodB, "--wrap=sleep 300")
	ids = append(ids, y)
	if yj := c.showJob(y); yj.State != "PENDING" || yj.Reason == "BeginTime" || !strings.Contains(yj.TresPerNode, "shard:4") {
		t.Errorf("busy-queue job %d without a re-decide loop: state %s reason %s TresPerNode=%s; want a whole-GPU wait, not deferred",
			y, yj.State, yj.Reason, yj.TresPerNode)
	}
	c.cancel(y)

	// The loop asks `scontrol ping` which controller is in control before each
	// pass (--standby-check): this release's answer must read as one controller,
	// this host, up, so that the loop below acts.
	ping := c.mustRun("scontrol", "ping")
	if cs := redecide.ParsePing(ping); len(cs) != 1 || !cs[0].Up || cs[0].Host != c.host {
		t.Errorf("scontrol ping reads as %+v, want this cluster's one controller %s up:\n%s", cs, c.host, ping)
	} else if ok, why := redecide.InControl(cs, c.host); !ok {
		t.Errorf("the loop on %s would stand by: %s", c.host, why)
	}

	// The loop, started as the service would be, with this cluster's clients.
	// The plugin reads its heartbeat within a second of its first pass.
	stop := c.startRedecide(time.Second)
	defer stop()
	time.Sleep(3 * time.Second)

	// The busy queue: nothing fits the next tagged job, so it is deferred with
	// its whole-GPU fail-safe request.
	xm := c.path("jobs", fmt.Sprintf("deferred.%d", time.Now().UnixNano()))
	x := c.mustSbatch("--gres=gpu:1", "--time=10", "-o", "/dev/null", "--comment=coscheml:app="+tags.goodB, "--wrap=touch "+xm+"; exec sleep 300")
	ids = append(ids, x)
	xj := c.showJob(x)
	if xj.State != "PENDING" || xj.Reason != "BeginTime" || !strings.Contains(xj.TresPerNode, "shard:4") || xj.ReqNodeList != "(null)" {
		t.Fatalf("busy-queue job %d not deferred with its fail-safe request: state %s reason %s TresPerNode=%s ReqNodeList=%s",
			x, xj.State, xj.Reason, xj.TresPerNode, xj.ReqNodeList)
	}
	first := decisionID(xj.Comment)
	if l := c.lastLogLine("decision=" + first + " "); !strings.Contains(l, "action=wait") || !strings.Contains(l, "deferred") {
		t.Errorf("job %d's decision %s is not a deferred wait: %s", x, first, l)
	}
	if n := c.countLog("job_submit/coscheml", "re-decide loop running (heartbeat"); n == 0 {
		t.Errorf("slurmctld's log never says the plugin saw the re-decide loop")
	}
	c.checkStandbyPass()

	// Nothing frees for longer than a refresh (wait_defer/2): the loop defers it
	// again, so it neither starts on a whole GPU nor stops being re-decided.
	// Wait for the loop's new decision (its pass every second may run late on a
	// loaded machine), bounded by a whole wait_defer plus slack.
	deferredAt := time.Now()
	redecided := deferredAt.Add(cfg.WaitDefer + 20*time.Second)
	var again string
	for {
		xj = c.showJob(x)
		if again = decisionID(xj.Comment); again != first || time.Now().After(redecided) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	// (Reason reads None between an update and the scheduler's next pass on
	// newer releases; the decision line says it was deferred again.)
	if l := c.lastLogLine("decision=" + again + " "); xj.State != "PENDING" || again == first || !strings.Contains(l, "modify job=") || !strings.Contains(l, "deferred") {
		t.Errorf("job %d %.0f s after it was deferred, with nothing free: state %s reason %s, decision %s (first %s: %s): want deferred again by the loop",
			x, time.Since(deferredAt).Seconds(), xj.State, xj.Reason, again, first, l)
	} else {
		t.Logf("job %d deferred again by the loop after %.1f s (wait_defer %v)", x, time.Since(deferredAt).Seconds(), cfg.WaitDefer)
	}

	// Capacity frees: b ends, and the loop re-decides x next to a.
	c.cancel(b.ID)
	if !c.waitStarted(x, xm, 30*time.Second) {
		t.Fatalf("re-decided job %d did not start within 30 s after job %d ended:\n%s", x, b.ID, c.showJob(x).Raw)
	}
	xj = c.showJob(x)
	c.checkPlacement(xj)
	if where(xj) != where(a) || !strings.Contains(xj.TresPerNode, "shard:2") {
		t.Errorf("re-decided job %d runs on %s (TresPerNode=%s), want shared with job %d on %s", x, where(xj), xj.TresPerNode, a.ID, where(a))
	}
	if l := c.lastLogLine("decision=" + decisionID(xj.Comment) + " "); !strings.Contains(l, "modify job=") || !strings.Contains(l, "action=share") ||
		!strings.Contains(l, "re-decided after a deferred wait") {
		t.Errorf("job %d's final decision is not a re-decided share: %s", x, l)
	}
	t.Logf("job %d: deferred as %s, re-decided into %s next to job %d (%s)", x, first, where(xj), a.ID, xj.TresPerNode)
}

// deferWaits restarts slurmctld with waits deferred (wait_defer) and untagged
// jobs holding whole GPUs through shards; restore cancels the given jobs, waits
// for an empty queue and restarts slurmctld with the configuration as it was.
func (c *cluster) deferWaits(wait time.Duration) (cfg config.Config, restore func(ids ...int)) {
	orig := c.cfg
	cfg = orig
	cfg.WaitDefer = wait
	cfg.Untagged = "exclusive"
	c.writeConfig(cfg)
	c.restartCtld()
	return cfg, func(ids ...int) {
		c.cancel(ids...)
		c.waitNoJobs(60 * time.Second)
		c.writeConfig(orig)
		c.restartCtld()
	}
}

// checkStandbyPass runs one `coscheml redecide` pass as the loop on a backup
// controller host would, while a deferred job waits: its scontrol (a wrapper
// that logs every call and otherwise runs the real one) answers `ping` with
// another host in control and this one as the backup. The pass must list
// nothing and update nothing, and say why.
func (c *cluster) checkStandbyPass() {
	t := c.t
	calls := c.path("log", "standby-scontrol.calls")
	wrapper := c.path("standby-scontrol")
	c.writeFile("standby-scontrol", "#!/bin/sh\necho \"$*\" >> "+calls+"\n"+
		"if [ \"$1\" = ping ]; then\n"+
		"  printf 'Slurmctld(primary) at otherctl is UP\\nSlurmctld(backup) at "+c.host+" is UP\\n'\n  exit 0\nfi\n"+
		"exec "+c.a.slurm.bin("scontrol")+" \"$@\"\n", 0o755)
	cmd := exec.Command(filepath.Join(c.a.binDir, "coscheml"), "redecide", "--scontrol", wrapper)
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.cfgPath)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("coscheml redecide on a standby host: %v\n%s", err, stderr.String())
	}
	made, _ := os.ReadFile(calls)
	if strings.TrimSpace(string(made)) != "ping" || !strings.Contains(stdout.String(), "re-decided 0 deferred job(s)") ||
		!strings.Contains(stderr.String(), "standing by: this host ("+c.host+") is a standby controller and Slurmctld(primary) at otherctl is in control") {
		t.Errorf("a pass on a standby controller host: scontrol calls %q, stdout %q, stderr %q; want one ping, nothing re-decided, the standing-by line",
			made, stdout.String(), stderr.String())
	} else {
		t.Logf("a pass on a standby controller host, with a deferred job queued: %s", strings.TrimSpace(stderr.String()))
	}
}

// startRedecide runs `coscheml redecide --loop` (coscheml-redecide.service) for
// this cluster, a pass every interval, with the cluster's clients and config; stop
// ends it and logs its output. newClusterTopo starts one for a plugin cluster whose
// configuration defers waits (wait_defer), stopped at cleanup.
func (c *cluster) startRedecide(interval time.Duration) (stop func()) {
	t := c.t
	loopLog := c.path("log", fmt.Sprintf("redecide.%d.log", time.Now().UnixNano()))
	lf, err := os.Create(loopLog)
	if err != nil {
		t.Fatal(err)
	}
	loop := exec.Command(filepath.Join(c.a.binDir, "coscheml"), "redecide", "--loop", "--interval", interval.String())
	loop.Env = append(c.env, "COSCHEML_CONFIG="+c.cfgPath)
	loop.Stdout, loop.Stderr = lf, lf
	if err := loop.Start(); err != nil {
		lf.Close()
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			loop.Process.Kill()
			loop.Wait()
			lf.Close()
			if b, _ := os.ReadFile(loopLog); len(b) > 0 {
				t.Logf("redecide loop's log:\n%s", tail(b, 2000))
			}
		})
	}
}
