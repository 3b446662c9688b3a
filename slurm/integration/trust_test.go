// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// epilogVars are the variables whose values per end state docs/profiling.md records.
var epilogVars = []string{
	"SLURM_SCRIPT_CONTEXT", "SLURM_JOB_EXIT_CODE", "SLURM_JOB_EXIT_CODE2", "SLURM_JOB_DERIVED_EC",
	"SLURM_JOB_END_TIME", "SLURM_JOB_START_TIME", "SLURM_JOB_COMMENT", "SLURM_JOB_GPUS",
}

// TestTrustEndStates runs one job per end state (COMPLETED, FAILED, CANCELLED while
// running, TIMEOUT) through the real node Prolog/Epilog and checks that only the
// completed one writes a profile and records an observation. A wrapper around the
// Epilog also saves what slurmd gave it (environment, `scontrol show job`) so the
// facts in docs/profiling.md can be checked per release; they are logged.
func TestTrustEndStates(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	c := newCluster(t, a, false, func(cfg *config.Config) {
		cfg.Profiling.Enabled = true
	})

	// Wrap the cluster's Epilog: save its inputs, then run the real one.
	dumps := c.path("jobs", "epilog")
	c.mkdirs(filepath.Join("jobs", "epilog"))
	hook := c.path("hooks", "epilog.sh")
	real := c.path("hooks", "epilog-real.sh")
	if err := os.Rename(hook, real); err != nil {
		t.Fatal(err)
	}
	c.writeFile(filepath.Join("hooks", "epilog.sh"), fmt.Sprintf(`#!/bin/sh
d=%q
export SLURM_CONF=%q
export PATH=%q
env | sort > "$d/$SLURM_JOB_ID.env.tmp" && mv "$d/$SLURM_JOB_ID.env.tmp" "$d/$SLURM_JOB_ID.env"
scontrol show job -d "$SLURM_JOB_ID" > "$d/$SLURM_JOB_ID.show" 2>&1
%q "$@"
rc=$?
touch "$d/$SLURM_JOB_ID.done"
exit $rc
`, dumps, c.path("slurm.conf"), envValue(c.env, "PATH")+":/usr/bin:/bin", real), 0o755)

	before := snapshot(t, c)
	type run struct {
		state, tag string
		args       []string
		id         int
	}
	runs := []*run{
		{state: "COMPLETED", tag: "trust-completed", args: []string{"--time=10", "--wrap=sleep 4"}},
		{state: "FAILED", tag: "trust-failed", args: []string{"--time=10", "--wrap=sleep 4; exit 1"}},
		{state: "CANCELLED", tag: "trust-cancelled", args: []string{"--time=10", "--wrap=sleep 300"}},
		{state: "TIMEOUT", tag: "trust-timeout", args: []string{"--time=1", "--wrap=sleep 300"}},
	}
	for _, r := range runs {
		args := append([]string{"--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app=" + r.tag + ",class=train"}, r.args...)
		r.id = c.mustSbatch(args...)
	}
	// Cancel while running, after the Prolog ran and the sampler took readings.
	waitState(t, c, runs[2].id, "RUNNING", 30*time.Second)
	time.Sleep(4 * time.Second)
	c.cancel(runs[2].id)

	// The time limit is one minute; slurmctld checks limits about every 30 s.
	for _, r := range runs {
		done := filepath.Join(dumps, strconv.Itoa(r.id)+".done")
		waitFile(t, done, 180*time.Second)
		// A batch launch that failed on slurmd also runs the Epilog, and Slurm
		// requeues the job (Restarts>0, pending about 121 s): the Epilog that
		// counts is the retry's.
		if j := c.showJob(r.id); j.Restarts > 0 && (j.State == "PENDING" || j.State == "REQUEUED" || j.State == "RUNNING") {
			t.Logf("job %d was requeued by Slurm (Restarts=%d, %s): waiting for its retry's Epilog", r.id, j.Restarts, j.State)
			os.Remove(done)
			waitFile(t, done, requeueWait+180*time.Second)
		}
	}
	// The Epilog leaves each run pending; a detached finisher decides once the
	// controller reports the final state.
	pending := filepath.Join(filepath.Dir(c.cfg.ObservationDir), "run", "profiling", "pending")
	deadline := time.Now().Add(60 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(pending, "*.json"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs still pending after 60s: %v", left)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if logs, _ := filepath.Glob(filepath.Join(pending, "*.log")); len(logs) > 0 {
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("finisher log %s:\n%s", l, b)
		}
	}
	after := snapshot(t, c)

	var facts strings.Builder
	for _, r := range runs {
		st := c.showJob(r.id)
		env := readEnvFile(t, filepath.Join(dumps, strconv.Itoa(r.id)+".env"))
		show, _ := os.ReadFile(filepath.Join(dumps, strconv.Itoa(r.id)+".show"))
		fmt.Fprintf(&facts, "%s (job %d, final JobState=%s ExitCode=%s):\n", r.state, r.id, st.State, fieldOf(st.Raw, "ExitCode"))
		for _, v := range epilogVars {
			val, ok := env[v]
			if !ok {
				val = "(unset)"
			}
			fmt.Fprintf(&facts, "    %s=%s\n", v, val)
		}
		fmt.Fprintf(&facts, "    scontrol from the Epilog: JobState=%s Reason=%s ExitCode=%s DerivedExitCode=%s\n",
			fieldOf(string(show), "JobState"), fieldOf(string(show), "Reason"), fieldOf(string(show), "ExitCode"), fieldOf(string(show), "DerivedExitCode"))
		if st.State != r.state {
			t.Errorf("job %d ended %s, want %s", r.id, st.State, r.state)
		}
	}
	ver, _ := c.run("scontrol", "--version")
	t.Logf("what slurmd gave the Epilog (%s):\n%s", strings.TrimSpace(ver), facts.String())
	if d := os.Getenv("COSCHEML_TRUST_FACTS"); d != "" {
		_ = os.WriteFile(filepath.Join(d, "epilog-facts-"+strings.Fields(ver + " x x")[1]+".txt"), []byte(facts.String()), 0o644)
	}

	// Only the completed job may leave a profile and an observation.
	for _, r := range runs {
		_, hadProfile := before.profiles[r.tag]
		_, hasProfile := after.profiles[r.tag]
		obs := after.obsByTag[r.tag] - before.obsByTag[r.tag]
		switch r.state {
		case "COMPLETED":
			if hadProfile || !hasProfile {
				t.Errorf("completed job %d: profile of %s before %v, after %v: want it written", r.id, r.tag, hadProfile, hasProfile)
			}
			if obs != 1 {
				t.Errorf("completed job %d: %d new observations of %s, want 1", r.id, obs, r.tag)
			}
			if uid := after.uidOf[r.tag]; uid != "0" {
				t.Errorf("completed job %d: observation uid %q, want 0 (the jobs run as root)", r.id, uid)
			}
		default:
			if hasProfile {
				t.Errorf("%s job %d wrote a profile of %s", r.state, r.id, r.tag)
			}
			if obs != 0 {
				t.Errorf("%s job %d recorded %d observations of %s", r.state, r.id, obs, r.tag)
			}
		}
	}
	for tag, b := range before.profiles {
		if !bytes.Equal(after.profiles[tag], b) {
			t.Errorf("stored profile %s changed", tag)
		}
	}
	if t.Failed() {
		t.Logf("slurmd log tail:\n%s", tailFile(c.path("log", "slurmd-n1.log"), 3000))
	}
}

// storeState is the profile store's files and the observation counts per tag.
type storeState struct {
	profiles map[string][]byte
	obsByTag map[string]int
	uidOf    map[string]string // uid of the last observation of a tag
}

func snapshot(t *testing.T, c *cluster) storeState {
	t.Helper()
	s := storeState{profiles: map[string][]byte{}, obsByTag: map[string]int{}, uidOf: map[string]string{}}
	st, err := profile.Open(c.cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	ps, problems := st.List()
	for _, p := range problems {
		t.Errorf("profile store: %v", p)
	}
	for _, p := range ps {
		b, _ := profile.Encode(p)
		s.profiles[p.Tag] = b
	}
	obs, oprob := observation.ReadDir(c.cfg.ObservationDir)
	for _, p := range oprob {
		if !os.IsNotExist(p) && !strings.Contains(p.Error(), "no such file") {
			t.Errorf("observations: %v", p)
		}
	}
	for _, o := range obs {
		s.obsByTag[o.Tag]++
		s.uidOf[o.Tag] = o.UID
	}
	return s
}

// waitState waits up to d for job id to be in state; once more by requeueWait
// if Slurm requeued the job meanwhile (Slurm's retry, not a lost job).
func waitState(t *testing.T, c *cluster, id int, state string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	extended := false
	for {
		j := c.showJob(id)
		if j.State == state {
			return
		}
		if time.Now().After(deadline) {
			if extended || j.Restarts == 0 {
				t.Fatalf("job %d not %s after %v:\n%s", id, state, d, j.Raw)
			}
			t.Logf("job %d was requeued by Slurm (Restarts=%d, %s): waiting up to %v for its retry", id, j.Restarts, j.State, requeueWait)
			deadline, extended = time.Now().Add(requeueWait), true
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, d)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// fieldOf returns the value of the first " name=" field in scontrol output.
func fieldOf(s, name string) string {
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return "(absent)"
}

// envValue returns the last value of name in an environment list (the clients'
// PATH names the Slurm under test first).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return string(tail(b, n))
}
