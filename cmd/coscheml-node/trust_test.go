// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// The Epilog hands a collected run to the finisher; what the controller then says
// about the job decides whether anything is kept (docs/profiling.md).
func TestFinishKeepsOnlyCompletedJobs(t *testing.T) {
	// seq answers with states in turn: "STATE" (restart count 0, this run's) or
	// "STATE/N" (the controller is at run N).
	seq := func(states ...string) func(string) (jobStatus, error) {
		i := 0
		return func(string) (jobStatus, error) {
			s := states[min(i, len(states)-1)]
			i++
			if s == "ERR" {
				return jobStatus{}, errors.New("controller down")
			}
			st, n, _ := strings.Cut(s, "/")
			r, _ := strconv.Atoi(n)
			return jobStatus{State: st, Restarts: r}, nil
		}
	}
	tests := []struct {
		name  string
		state func(string) (jobStatus, error)
		keep  bool
		msg   string
	}{
		{"completed after completing", seq("COMPLETING", "COMPLETING", "COMPLETED"), true, ""},
		{"cancelled", seq("COMPLETING", "CANCELLED"), false, "CANCELLED"},
		{"timeout", seq("TIMEOUT"), false, "TIMEOUT"},
		{"failed", seq("FAILED"), false, "FAILED"},
		{"requeued", seq("PENDING"), false, "PENDING"},
		{"requeued, pending again", seq("COMPLETING", "PENDING/1"), false, "requeued"},
		{"requeued, running again", seq("COMPLETING", "RUNNING/1", "COMPLETED/1"), false, "requeued"},
		{"requeued, completed again", seq("COMPLETED/1"), false, "requeued"},
		{"never leaves completing", seq("COMPLETING"), false, "still COMPLETING"},
		{"controller down", seq("ERR"), false, "controller down"},
		{"job purged", seq(""), false, "no longer lists"},
		{"flaky controller then completed", seq("ERR", "COMPLETED"), true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t)
			ps, _ := profile.Open(cfg.ProfileDir)
			if err := ps.Put(&profile.Profile{Tag: "svc", Class: profile.ClassTrain, SoloRuntimeS: 100, CollectedAt: t0}); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"SLURM_JOB_ID": "61", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "0",
				"SLURM_JOB_COMMENT": "coscheml:app=svc,class=train", "SLURM_JOB_UID": "1000", "SLURM_JOB_EXIT_CODE": "0"}
			if err := prolog(cfg, env, t0, quiet()); err != nil {
				t.Fatal(err)
			}
			var pending string
			keep := func(run *jobprofile.Run) error {
				var err error
				pending, err = jobprofile.SavePending(cfg, run)
				return err
			}
			if err := epilog(cfg, env, t0.Add(2*time.Minute), quiet(), keep); err != nil {
				t.Fatal(err)
			}
			if pending == "" {
				t.Fatal("the Epilog handed nothing to the finisher")
			}
			var logb bytes.Buffer
			err := finish(cfg, pending, tc.state, time.Millisecond, 50*time.Millisecond, &logger{w: &logb})
			if _, serr := os.Stat(pending); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("pending file left: %v", serr)
			}
			obs, _ := observation.ReadDir(cfg.ObservationDir)
			st, _ := profile.Open(cfg.ProfileDir)
			runs, _ := st.SoloRuns("svc")
			if tc.keep {
				if err != nil || len(obs) != 1 || obs[0].UID != "1000" || len(runs) != 1 {
					t.Errorf("kept %d observations (%+v), %d solo runs; err %v; log %s", len(obs), obs, len(runs), err, logb.String())
				}
				return
			}
			if len(obs) != 0 || len(runs) != 0 {
				t.Errorf("kept %d observations, %d solo runs", len(obs), len(runs))
			}
			if got := fmt.Sprint(err) + logb.String(); !strings.Contains(got, tc.msg) {
				t.Errorf("error/log %q does not say %q", got, tc.msg)
			}
		})
	}
}

// A job that exited non-zero is dropped in the Epilog already: no finisher.
func TestEpilogDropsFailedJobAtOnce(t *testing.T) {
	cfg, _ := testConfig(t)
	env := map[string]string{"SLURM_JOB_ID": "62", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "0",
		"SLURM_JOB_COMMENT": "coscheml:app=svc,class=train", "SLURM_JOB_EXIT_CODE": "256"}
	prolog(cfg, env, t0, quiet())
	called := false
	if err := epilog(cfg, env, t0.Add(2*time.Minute), quiet(), func(*jobprofile.Run) error { called = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if called {
		t.Error("a job with exit code 256 went to the finisher")
	}
}

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want jobStatus
		bad  bool
	}{
		{"COMPLETED                       0       \n", jobStatus{"COMPLETED", 0}, false},
		{"RUNNING 1\n", jobStatus{"RUNNING", 1}, false},
		{"OUT_OF_MEMORY 65535", jobStatus{"OUT_OF_MEMORY", 65535}, false},
		{"", jobStatus{}, false}, {"  \n", jobStatus{}, false},
		{"COMPLETED\n", jobStatus{}, true}, {"COMPLETED 0\nCOMPLETED 0\n", jobStatus{}, true},
		{"completed 0", jobStatus{}, true}, {"JobState=COMPLETED 0", jobStatus{}, true},
		{"COMPLETED -1", jobStatus{}, true}, {"COMPLETED 65536", jobStatus{}, true},
		{"COMPLETED +1", jobStatus{}, true}, {"COMPLETED 0x1", jobStatus{}, true},
		{"COMPLETED 0 junk", jobStatus{}, true},
	} {
		got, err := parseStatus(tc.in)
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("parseStatus(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

// squeueState runs a real program: a stand-in squeue that prints its arguments'
// answer, so the exact command line is checked too.
func TestSqueueState(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "squeue")
	os.WriteFile(fake, []byte(`#!/bin/sh
[ "$*" = "-h -t all -j 77 -O State:32,RestartCnt:8" ] || { echo "bad args: $*" >&2; exit 3; }
echo "CANCELLED                       2       "
`), 0o755)
	if st, err := squeueState(fake, "77"); err != nil || st != (jobStatus{"CANCELLED", 2}) {
		t.Errorf("state %+v err %v", st, err)
	}
	if _, err := squeueState(fake, "78"); err == nil || !strings.Contains(err.Error(), "bad args") {
		t.Errorf("wrong job: err %v", err)
	}
	purged := filepath.Join(dir, "squeue2")
	os.WriteFile(purged, []byte("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"), 0o755)
	if st, err := squeueState(purged, "77"); err != nil || st != (jobStatus{}) {
		t.Errorf("purged job: %+v %v", st, err)
	}
}

// As root in a folder others can write, the node side refuses to work.
func TestHooksRefuseWritableSharedFolders(t *testing.T) {
	for _, mode := range []os.FileMode{0o775, 0o757, 0o1777} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			cfg, path := testConfig(t)
			os.MkdirAll(cfg.ResidencyDir, 0o755)
			if err := os.Chmod(cfg.ResidencyDir, mode); err != nil {
				t.Fatal(err)
			}
			err := checkSharedFolders(cfg)
			if err == nil || !strings.Contains(err.Error(), "group- or world-writable") || !strings.Contains(err.Error(), "chmod go-w") {
				t.Fatalf("mode %04o: %v", mode, err)
			}
			environ := []string{"SLURM_JOB_ID=5", "SLURMD_NODENAME=n1", "SLURM_JOB_GPUS=0"}
			if rc := runHook("prolog", []string{"--config", path, "--no-syslog"}, environ, func() time.Time { return t0 }); rc != 0 {
				t.Fatalf("rc %d", rc)
			}
			store, _ := residency.Open(cfg.ResidencyDir)
			if _, err := store.Get("5", "n1"); err == nil {
				t.Error("the Prolog wrote into a world-writable residency folder")
			}
		})
	}
	cfg, _ := testConfig(t)
	for _, d := range []string{cfg.ResidencyDir, cfg.ProfileDir} {
		os.MkdirAll(d, 0o755)
	}
	if err := checkSharedFolders(cfg); err != nil {
		t.Errorf("0755 folders refused: %v", err)
	}
}

// The node count comes from slurmd's node list; an entry records it only for
// a job of several nodes.
func TestJobEnvNodes(t *testing.T) {
	for _, tc := range []struct {
		in           string
		nodes, entry int
	}{{"n[1-2]", 2, 2}, {"n1", 1, 0}, {"", 0, 0}, {"n[1-", 0, 0}} {
		je, _, err := jobEnv(map[string]string{"SLURM_JOB_ID": "1", "SLURMD_NODENAME": "n1", "SLURM_JOB_NODELIST": tc.in})
		if err != nil || je.Nodes != tc.nodes || nodeCount(je.Nodes) != tc.entry {
			t.Errorf("SLURM_JOB_NODELIST=%q: nodes %d (entry %d), err %v; want %d (%d)", tc.in, je.Nodes, nodeCount(je.Nodes), err, tc.nodes, tc.entry)
		}
	}
}

func TestJobEnvUID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{{"1000", "1000"}, {"0", "0"}, {"-1", ""}, {"alice", ""}, {"", ""}} {
		je, _, err := jobEnv(map[string]string{"SLURM_JOB_ID": "1", "SLURMD_NODENAME": "n1", "SLURM_JOB_UID": tc.in})
		if err != nil || je.UID != tc.want {
			t.Errorf("SLURM_JOB_UID=%q: uid %q err %v", tc.in, je.UID, err)
		}
	}
}

// FuzzParseStatus: whatever squeue prints, the answer is one state word and a
// restart count in range, or none.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"COMPLETED 0\n", "", "JobState=COMPLETED", "COMPLETED 0\nFAILED 1\n", "RUNNING 99999", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		st, err := parseStatus(in)
		if err != nil && st != (jobStatus{}) {
			t.Fatalf("status %+v with error %v", st, err)
		}
		if st.State != "" && !stateRE.MatchString(st.State) {
			t.Fatalf("accepted %q", st.State)
		}
		if st.Restarts < 0 || st.Restarts > residency.MaxRestarts || (st.State == "" && st.Restarts != 0) {
			t.Fatalf("accepted restart count %d", st.Restarts)
		}
	})
}

// A job tagged without class= is recorded with its profile's class, the one
// placement judged it by, so the guard and explain see that class, not none
// (none would take the observe-only actions and the strictest floor).
func TestPrologRecordsProfileClass(t *testing.T) {
	cfg, _ := testConfig(t)
	ps, _ := profile.Open(cfg.ProfileDir)
	if err := ps.Put(&profile.Profile{Tag: "svc", Class: profile.ClassTrain, SoloRuntimeS: 100, CollectedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		comment string
		want    profile.Class
	}{
		{"coscheml:app=svc", profile.ClassTrain},
		{"coscheml:app=svc,class=infer", profile.ClassInfer}, // the user's stricter word stands
		{"coscheml:app=unknown", ""},
	} {
		env := map[string]string{"SLURM_JOB_ID": "71", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "0",
			"SLURM_JOB_COMMENT": tc.comment, "SLURM_JOB_UID": "1000"}
		if err := prolog(cfg, env, t0, quiet()); err != nil {
			t.Fatal(err)
		}
		store, _ := residency.Open(cfg.ResidencyDir)
		en, err := store.Get("71", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if en.Class != tc.want {
			t.Errorf("%q: recorded class %q, want %q", tc.comment, en.Class, tc.want)
		}
		store.End("71", "n1", t0.Add(time.Minute))
	}
}

// A several-GPU job is recorded on each of its GPUs with the plugin's shards
// per GPU (its token), else slurmd's total split over its GPUs. Where the
// Prolog sees only the last GPU of a job of several shard Types (Slurm 22.05
// to 26.05), its GPUs come from the token, which names them.
func TestPrologRecordsEachGPU(t *testing.T) {
	cfg, _ := testConfig(t)
	for _, tc := range []struct {
		comment, gpus, onNode string
		want                  string
		shards                int
	}{
		{"coscheml:app=svc coscheml-id=x-1-0123456789ab:2", "0,3", "", "[0 3]", 2},
		{"coscheml:app=svc", "0,3", "6", "[0 3]", 3}, // no token: slurmd's total over 2 GPUs
		{"coscheml:app=svc coscheml-id=x-1-0123456789ab:2:0.3", "3", "", "[0 3]", 2},
		{"coscheml:app=svc coscheml-id=x-1-0123456789ab:2:0.3", "2", "", "[2]", 2}, // not the decision's: slurmd's word
	} {
		env := map[string]string{"SLURM_JOB_ID": "81", "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": tc.gpus,
			"SLURM_JOB_COMMENT": tc.comment, "SLURM_JOB_UID": "1000", "SLURM_SHARDS_ON_NODE": tc.onNode}
		if err := prolog(cfg, env, t0, quiet()); err != nil {
			t.Fatal(err)
		}
		store, _ := residency.Open(cfg.ResidencyDir)
		en, err := store.Get("81", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(en.GPUs) != tc.want || en.Shards != tc.shards {
			t.Errorf("%q on %s: recorded GPUs %v with %d shards each, want %s with %d", tc.comment, tc.gpus, en.GPUs, en.Shards, tc.want, tc.shards)
		}
		store.End("81", "n1", t0.Add(time.Minute))
	}
}
