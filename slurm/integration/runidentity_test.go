// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// TestRunIdentity checks on real daemons that what the node side keeps belongs to
// the run that produced it (docs/observations.md, "Trust"):
//
//   - requeue: `scontrol requeue` of a running tagged job; only the second run,
//     which completed, leaves an observation and a profile, and no pending file
//     or finisher log of either run is left;
//   - requeue_finisher: the same with the Epilog given no restart count, so the
//     first run waits for its finisher, which must drop it by the controller's
//     count (squeue RestartCnt);
//   - retag: `scontrol update comment=` of a running tagged job to another tag;
//     the run is kept under the tag it started with.
//
// The cluster runs without the plugin (the node side alone) and with
// AuthInfo=cred_expire=5 (a requeued job may start again only after the
// credential lifetime; on 22.05.8 it then started 38-57 s after the requeue
// instead of about 121 s). Its Prolog and Epilog are wrapped to record what slurmd
// gave them, and the finishers find a gated squeue first on their PATH: while
// the gate is closed their questions wait, as with a slow controller.
func TestRunIdentity(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	c := newClusterTopo(t, a, false, topology{extraConf: "AuthInfo=cred_expire=5"}, func(cfg *config.Config) {
		cfg.Profiling.Enabled = true
	})
	w := wrapHooks(t, c)
	sub := func(name string, f func(t *testing.T, c *cluster, w hookWrap)) {
		t.Run(name, func(st *testing.T) {
			c.t = st
			defer func() { c.t = t }()
			f(st, c, w)
		})
	}
	sub("requeue", func(t *testing.T, c *cluster, w hookWrap) { testRequeueKeepsLastRun(t, c, w, false) })
	// The same without the restart count in the Epilog's environment: the first
	// run's finisher must tell from the controller's count that it was requeued.
	sub("requeue_finisher", func(t *testing.T, c *cluster, w hookWrap) { testRequeueKeepsLastRun(t, c, w, true) })
	sub("retag", testRetagKeepsStartTag)
	if t.Failed() {
		t.Logf("slurmd log tail:\n%s", tailFile(c.path("log", "slurmd-n1.log"), 3000))
	}
}

// hookWrap is where the wrapped hooks leave their records.
type hookWrap struct {
	dumps   string // <job>.<hook>.<ns>.env: each hook's environment
	epilogs string // one line "<job>" per Epilog that finished
	pending string // the finishers' pending folder
	gate    string // while this file exists, the finishers' squeue waits
	hide    string // while this file exists, the Epilog gets no SLURM_JOB_RESTART_COUNT
}

func wrapHooks(t *testing.T, c *cluster) hookWrap {
	t.Helper()
	w := hookWrap{
		dumps:   c.path("jobs", "hookenv"),
		epilogs: c.path("jobs", "epilogs.done"),
		pending: filepath.Join(filepath.Dir(c.cfg.ObservationDir), "run", "profiling", "pending"),
		gate:    c.path("shim", "closed"),
		hide:    c.path("shim", "hide-restarts"),
	}
	c.mkdirs(filepath.Join("jobs", "hookenv"), "shim")
	// Bounded: a gate left closed must not keep finishers forever.
	c.writeFile(filepath.Join("shim", "squeue"), fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ -e %q ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done\nexec %q \"$@\"\n",
		w.gate, c.a.slurm.bin("squeue")), 0o755)
	for _, hook := range []string{"prolog", "epilog"} {
		wrapper := c.path("hooks", hook+".sh")
		real := c.path("hooks", hook+"-real.sh")
		if err := os.Rename(wrapper, real); err != nil {
			t.Fatal(err)
		}
		before, after := "", ""
		if hook == "epilog" {
			before = fmt.Sprintf("[ -e %q ] && unset SLURM_JOB_RESTART_COUNT\n", w.hide)
			after = fmt.Sprintf("echo \"$SLURM_JOB_ID\" >> %q\n", w.epilogs)
		}
		c.writeFile(filepath.Join("hooks", hook+".sh"), fmt.Sprintf(`#!/bin/sh
f=%q/"$SLURM_JOB_ID".%s.$(date +%%s%%N).env
env | sort > "$f.tmp" && mv "$f.tmp" "$f"
export COSCHEML_SLURM_BIN=%q
%s%q "$@"
rc=$?
%sexit $rc
`, w.dumps, hook, c.path("shim"), before, real, after), 0o755)
	}
	return w
}

// hookEnvs returns the environments a hook got for job id, oldest first.
func (w hookWrap) hookEnvs(t *testing.T, id int, hook string) []map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.dumps, fmt.Sprintf("%d.%s.*.env", id, hook)))
	sort.Slice(files, func(i, j int) bool { return stamp(files[i]) < stamp(files[j]) })
	var envs []map[string]string
	for _, f := range files {
		envs = append(envs, readEnvFile(t, f))
	}
	return envs
}

func stamp(path string) int64 {
	parts := strings.Split(filepath.Base(path), ".")
	n, _ := strconv.ParseInt(parts[len(parts)-2], 10, 64)
	return n
}

// waitSettled waits until n Epilogs of job id finished and no pending run of the
// job is left (its finishers decided); it returns the finisher logs left behind,
// which only a finisher that could not decide leaves.
func (w hookWrap) waitSettled(t *testing.T, id, n int, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(w.epilogs)
		done := 0
		for _, l := range strings.Fields(string(b)) {
			if l == strconv.Itoa(id) {
				done++
			}
		}
		runs, _ := filepath.Glob(filepath.Join(w.pending, fmt.Sprintf("%d@*.json", id)))
		alive := w.finishers(id)
		if done >= n && len(runs) == 0 && alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: %d of %d Epilogs done, pending runs %v, %d finishers alive after %v", id, done, n, runs, alive, d)
		}
		time.Sleep(250 * time.Millisecond)
	}
	var logs []string
	left, _ := filepath.Glob(filepath.Join(w.pending, fmt.Sprintf("%d@*.log", id)))
	for _, l := range left {
		b, _ := os.ReadFile(l)
		logs = append(logs, fmt.Sprintf("%s:\n%s", filepath.Base(l), b))
	}
	return logs
}

// finishers counts the live finisher processes of job id: a finisher may still
// hold a run whose pending file is gone (read, then removed by another).
func (w hookWrap) finishers(id int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	prefix := filepath.Join(w.pending, strconv.Itoa(id)+"@")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "finish" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) }) {
			n++
		}
	}
	return n
}

// observationsOf returns the observations of tag.
func observationsOf(c *cluster, tag string) []observation.Observation {
	obs, _ := observation.ReadDir(c.cfg.ObservationDir)
	var out []observation.Observation
	for _, o := range obs {
		if o.Tag == tag {
			out = append(out, o)
		}
	}
	return out
}

func testRequeueKeepsLastRun(t *testing.T, c *cluster, w hookWrap, hideCount bool) {
	tag, first, second := "identity-requeue", c.path("jobs", "requeue.run0"), c.path("jobs", "requeue.run1")
	if hideCount {
		tag, first, second = "identity-requeue-finisher", c.path("jobs", "requeue-finisher.run0"), c.path("jobs", "requeue-finisher.run1")
		c.writeFile(filepath.Join("shim", "hide-restarts"), "", 0o644)
		defer os.Remove(w.hide)
	}
	script := fmt.Sprintf(`if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then touch %q; exec sleep 300; fi; touch %q; sleep 3`, first, second)
	id := c.mustSbatch("--gres=gpu:1", "--time=10", "--requeue", "-o", "/dev/null",
		"--comment=coscheml:app="+tag+",class=train", "--wrap="+script)
	defer c.cancel(id)
	waitFile(t, first, 60*time.Second)
	time.Sleep(2 * time.Second) // the sampler takes readings of the first run
	// The first run's finisher (if its Epilog leaves one) gets its first answer
	// only once the second run runs: the race a slow controller allows.
	c.writeFile(filepath.Join("shim", "closed"), "", 0o644)
	defer os.Remove(w.gate)
	if _, err := c.run("scontrol", "requeue", strconv.Itoa(id)); err != nil {
		t.Fatal(err)
	}
	requeued := time.Now()
	waitFile(t, second, requeueWait)
	if hideCount {
		// The first run's Epilog could not tell: its run waits for its finisher.
		if runs, _ := filepath.Glob(filepath.Join(w.pending, fmt.Sprintf("%d@*.run0.json", id))); len(runs) != 1 {
			t.Errorf("the first run's pending file is not there while its finisher waits: %v", runs)
		}
	}
	os.Remove(w.gate)
	fi, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	secondStart := fi.ModTime().Truncate(time.Second)
	t.Logf("job %d requeued; its second run started %v later", id, fi.ModTime().Sub(requeued).Round(100*time.Millisecond))
	logs := w.waitSettled(t, id, 2, 120*time.Second)

	j := c.showJob(id)
	if j.State != "COMPLETED" || j.Restarts != 1 {
		t.Errorf("job %d ended %s with Restarts=%d, want COMPLETED with 1", id, j.State, j.Restarts)
	}
	for _, hook := range []string{"prolog", "epilog"} {
		for i, env := range w.hookEnvs(t, id, hook) {
			val, ok := env["SLURM_JOB_RESTART_COUNT"]
			if !ok {
				val = "(unset)"
			}
			t.Logf("%s of run %d: SLURM_JOB_RESTART_COUNT=%s SLURM_JOB_EXIT_CODE=%s", hook, i, val, env["SLURM_JOB_EXIT_CODE"])
		}
	}
	if len(logs) > 0 {
		t.Errorf("finisher logs left (a finisher could not decide):\n%s", strings.Join(logs, "\n"))
	}
	obs := observationsOf(c, tag)
	if len(obs) != 1 {
		t.Fatalf("%d observations of %s, want 1 (the second run's): %+v", len(obs), tag, obs)
	}
	if obs[0].When.Before(secondStart) {
		t.Errorf("the observation ended %v, before the second run started (%v): the first, requeued run was kept", obs[0].When, secondStart)
	}
	st, err := profile.Open(c.cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Get(tag)
	if err != nil {
		t.Fatalf("no profile of %s after the second run completed: %v", tag, err)
	}
	if p.CollectedAt.Before(secondStart) {
		t.Errorf("profile of %s collected %v, before the second run started (%v)", tag, p.CollectedAt, secondStart)
	}
	t.Logf("kept: observation of job %d ended %v (second run started %v), profile collected %v", id, obs[0].When, secondStart, p.CollectedAt)
}

func testRetagKeepsStartTag(t *testing.T, c *cluster, w hookWrap) {
	const startTag, endTag = "identity-start", "identity-retagged"
	started := c.path("jobs", "retag.started")
	id := c.mustSbatch("--gres=gpu:1", "--time=10", "-o", "/dev/null",
		"--comment=coscheml:app="+startTag+",class=train", fmt.Sprintf("--wrap=touch %q; sleep 5", started))
	defer c.cancel(id)
	waitFile(t, started, 60*time.Second)
	if _, err := c.run("scontrol", "update", "jobid="+strconv.Itoa(id), "comment=coscheml:app="+endTag+",class=infer"); err != nil {
		t.Fatal(err)
	}
	if j := c.showJob(id); !strings.Contains(j.Comment, endTag) {
		t.Fatalf("job %d's comment after the update: %q", id, j.Comment)
	}
	logs := w.waitSettled(t, id, 1, 120*time.Second)
	if len(logs) > 0 {
		t.Errorf("finisher logs left:\n%s", strings.Join(logs, "\n"))
	}
	if envs := w.hookEnvs(t, id, "epilog"); len(envs) == 1 {
		comment := envs[0]["SLURM_JOB_COMMENT"]
		t.Logf("the Epilog got SLURM_JOB_COMMENT=%q", comment)
		if !strings.Contains(comment, endTag) {
			t.Logf("slurmd gave the Epilog the comment the job started with: the retag did not reach the node")
		}
	}
	if j := c.showJob(id); j.State != "COMPLETED" {
		t.Errorf("job %d ended %s, want COMPLETED", id, j.State)
	}
	if n := len(observationsOf(c, startTag)); n != 1 {
		t.Errorf("%d observations of %s (the tag the job started with), want 1", n, startTag)
	}
	if obs := observationsOf(c, endTag); len(obs) != 0 {
		t.Errorf("the retag moved the run to %s: %+v", endTag, obs)
	}
	st, err := profile.Open(c.cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(endTag); err == nil {
		t.Errorf("a profile of %s (the tag given while running) was written", endTag)
	}
	if p, err := st.Get(startTag); err != nil || p.Class != profile.ClassTrain {
		t.Errorf("profile of %s: %+v, %v; want one of class train", startTag, p, err)
	}
}
