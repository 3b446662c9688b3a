// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/nohang"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// requeueEnv is the Prolog/Epilog environment of run `restarts` of job 61.
func requeueEnv(restarts, comment string) map[string]string {
	env := map[string]string{"SLURM_JOB_ID": "61", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "0",
		"SLURM_JOB_COMMENT": comment, "SLURM_JOB_UID": "1000", "SLURM_JOB_EXIT_CODE": "0"}
	if restarts != "" {
		env["SLURM_JOB_RESTART_COUNT"] = restarts
	}
	return env
}

// savePending is the Epilog's keeper without the detached finisher: it saves the
// run as pending and tells where.
func savePending(cfg config.Config, path *string) keeper {
	return func(run *jobprofile.Run) error {
		var err error
		*path, err = jobprofile.SavePending(cfg, run)
		return err
	}
}

// A job requeued while it ran, whose first run's finisher gets its first answer
// only once the second run is RUNNING (a slow controller): the first run is
// partial and must not be kept, and each run's finisher handles its own file.
// The stand-in squeue blocks until the second run has been collected, then
// answers as the controller would: RUNNING, then COMPLETED, at restart count 1.
func TestFinishRequeuedRunRacingItsRestart(t *testing.T) {
	cfg, cfgPath := testConfig(t)
	ps, _ := profile.Open(cfg.ProfileDir)
	if err := ps.Put(&profile.Profile{Tag: "svc", Class: profile.ClassTrain, SoloRuntimeS: 100, CollectedAt: t0}); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	gate, called, count := filepath.Join(bin, "go"), filepath.Join(bin, "called"), filepath.Join(bin, "count")
	script := `#!/bin/sh
touch ` + called + `
while [ ! -e ` + gate + ` ]; do sleep 0.02; done
n=$(cat ` + count + ` 2>/dev/null || echo 0)
echo $((n+1)) > ` + count + `
st=COMPLETED
[ "$n" = 0 ] && st=RUNNING
case "$*" in
*" -o %T") echo $st ;;
*) echo "$st 1" ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	finisher := func(pending string, out *bytes.Buffer) int {
		return runFinish([]string{"--config", cfgPath, "--no-syslog", "--wait", "20s", "--pending", pending}, out)
	}

	// Run 0: 200 s against a solo run time of 100 s (speed 0.5). Its Epilog saw
	// the restart count before the requeue raised it.
	comment := "coscheml:app=svc,class=train"
	if err := prolog(cfg, requeueEnv("0", comment), t0, quiet()); err != nil {
		t.Fatal(err)
	}
	var pending0, pending1 string
	if err := epilog(cfg, requeueEnv("0", comment), t0.Add(200*time.Second), quiet(), savePending(cfg, &pending0)); err != nil || pending0 == "" {
		t.Fatalf("run 0: pending %q, %v", pending0, err)
	}
	var log0 bytes.Buffer
	rc0 := make(chan int, 1)
	go func() { rc0 <- finisher(pending0, &log0) }()
	nohang.Call(t, "the first run's finisher asking squeue", func() error {
		for {
			if _, err := os.Stat(called); err == nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	// Run 1: 100 s (speed 1.0), collected while run 0's finisher still waits.
	if err := prolog(cfg, requeueEnv("1", comment), t0.Add(300*time.Second), quiet()); err != nil {
		t.Fatal(err)
	}
	if err := epilog(cfg, requeueEnv("1", comment), t0.Add(400*time.Second), quiet(), savePending(cfg, &pending1)); err != nil || pending1 == "" {
		t.Fatalf("run 1: pending %q, %v", pending1, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var first int
	nohang.Call(t, "the first run's finisher", func() error { first = <-rc0; return nil })
	var log1 bytes.Buffer
	second := finisher(pending1, &log1)

	if first != 0 || second != 0 {
		t.Errorf("finishers exited %d (run 0: %s) and %d (run 1: %s), want 0 and 0", first, log0.String(), second, log1.String())
	}
	if !strings.Contains(log0.String(), "requeued") {
		t.Errorf("run 0's finisher does not say the job was requeued: %s", log0.String())
	}
	for _, p := range []string{pending0, pending1} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pending file %s left: %v", p, err)
		}
	}
	obs, _ := observation.ReadDir(cfg.ObservationDir)
	if len(obs) != 1 || obs[0].Speed != 1 || !obs[0].When.Equal(t0.Add(400*time.Second)) {
		t.Errorf("observations %+v: want only run 1's (speed 1, ended %v)", obs, t0.Add(400*time.Second))
	}
}

// The Epilog of a run Slurm requeued sees the raised restart count (the
// controller raises it before it ends the run): that run is dropped at once.
func TestEpilogDropsRequeuedRun(t *testing.T) {
	for _, tc := range []struct {
		name         string
		prolog, end  string
		keep         bool
		logHas       string
		wantRestarts int
	}{
		{name: "first run completed", prolog: "0", end: "0", keep: true},
		{name: "second run completed", prolog: "1", end: "1", keep: true, wantRestarts: 1},
		{name: "requeued while running", prolog: "0", end: "1", logHas: "requeued (this was run 0, Slurm is at run 1)"},
		{name: "count missing at the end: the finisher decides", prolog: "2", end: "", keep: true, wantRestarts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t)
			comment := "coscheml:app=svc,class=train"
			if err := prolog(cfg, requeueEnv(tc.prolog, comment), t0, quiet()); err != nil {
				t.Fatal(err)
			}
			var kept *jobprofile.Run
			var logb bytes.Buffer
			err := epilog(cfg, requeueEnv(tc.end, comment), t0.Add(2*time.Minute), &logger{w: &logb}, func(run *jobprofile.Run) error {
				kept = run
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if (kept != nil) != tc.keep || !strings.Contains(logb.String(), tc.logHas) {
				t.Fatalf("kept %v, want %v; log %q", kept != nil, tc.keep, logb.String())
			}
			if kept != nil && kept.Env.Restarts != tc.wantRestarts {
				t.Errorf("run number %d, want %d", kept.Env.Restarts, tc.wantRestarts)
			}
		})
	}
}

// The tag and class of a run are what the job started with: `scontrol update
// comment=...` on a running job must not move its run to another tag.
func TestEpilogKeepsTagFromStart(t *testing.T) {
	for _, tc := range []struct {
		name, atEnd string
	}{
		{"unchanged", "coscheml:app=svc,class=train"},
		{"retagged", "coscheml:app=victim,class=infer"},
		{"tag removed", ""},
		{"comment made invalid", "coscheml:app=../../x"},
		{"other words around a new tag", "run 2 coscheml:app=victim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t)
			if err := prolog(cfg, requeueEnv("0", "coscheml:app=svc,class=train"), t0, quiet()); err != nil {
				t.Fatal(err)
			}
			var kept *jobprofile.Run
			if err := epilog(cfg, requeueEnv("0", tc.atEnd), t0.Add(2*time.Minute), quiet(), func(run *jobprofile.Run) error {
				kept = run
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if kept == nil || kept.Env.Tag != "svc" || kept.Env.Class != profile.ClassTrain {
				t.Fatalf("run kept as %+v, want tag svc class train (the Prolog's)", kept)
			}
		})
	}
	// A job untagged at its start stays untagged, whatever its comment says later.
	cfg, _ := testConfig(t)
	if err := prolog(cfg, requeueEnv("0", ""), t0, quiet()); err != nil {
		t.Fatal(err)
	}
	if err := epilog(cfg, requeueEnv("0", "coscheml:app=svc,class=train"), t0.Add(2*time.Minute), quiet(), func(run *jobprofile.Run) error {
		t.Errorf("an untagged job's run was kept as %s", run.Env.Tag)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The Prolog records the run number; a value that is not a count is recorded
// as 0 (the finisher then compares with the controller's count).
func TestPrologRecordsRunNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 0}, {"0", 0}, {"3", 3}, {"65535", 65535}, {"65536", 0}, {"-1", 0}, {"+2", 0}, {"0x3", 0}, {"999999", 0}} {
		cfg, _ := testConfig(t)
		if err := prolog(cfg, requeueEnv(tc.in, "coscheml:app=svc"), t0, quiet()); err != nil {
			t.Fatal(err)
		}
		store, _ := residency.Open(cfg.ResidencyDir)
		if e, err := store.Get("61", "n1"); err != nil || e.Restarts != tc.want {
			t.Errorf("SLURM_JOB_RESTART_COUNT=%q: entry %+v, %v; want run %d", tc.in, e, err, tc.want)
		}
	}
}

// FuzzRestartCount: whatever the variable holds, a count is in Slurm's range
// and is exactly the decimal number written there.
func FuzzRestartCount(f *testing.F) {
	for _, s := range []string{"", "0", "1", "65535", "65536", "-1", "+1", "007", " 1", "1e3", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := restartCount(map[string]string{"SLURM_JOB_RESTART_COUNT": s})
		if !ok {
			if n != 0 {
				t.Fatalf("%q: not a count, but %d", s, n)
			}
			return
		}
		if n < 0 || n > residency.MaxRestarts || strings.TrimLeft(s, "0") != strings.TrimLeft(strconv.Itoa(n), "0") {
			t.Fatalf("%q read as %d", s, n)
		}
	})
}
