// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// standInSlurm puts scontrol and scancel stand-ins on PATH that append their
// arguments to the returned log; FAKE_FAIL ("scontrol requeue") makes that
// command fail, FAKE_HANG makes it hang; `scontrol show` and `squeue
// --noheader` print FAKE_SHOW and sinfo FAKE_SINFO.
func standInSlurm(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	logPath := filepath.Join(bin, "calls.log")
	script := `#!/bin/sh
name=$(basename "$0")
echo "$name $*" >> "` + logPath + `"
case "$FAKE_HANG" in "$name $1") exec sleep 30;; esac
case "$FAKE_FAIL" in "$name $1") echo "slurm_$1 error: Invalid job id specified" >&2; exit 1;; esac
case "$name $1" in "scontrol show"|"squeue --noheader") echo "$FAKE_SHOW";; "sinfo -h") echo "$FAKE_SINFO";; esac
exit 0
`
	for _, n := range []string{"scontrol", "scancel", "sinfo", "squeue"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return logPath
}

func readCalls(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestSlurmActuator(t *testing.T) {
	reason := "coscheml guard: job 7 over its budget\non gpu 0"
	comment := "scontrol update jobid=7 admincomment=coscheml guard: job 7 over its budget on gpu 0"
	tests := []struct {
		name       string
		do         func(guard.Actuator) error
		fail, hang string
		wantCalls  []string
		wantErr    string // "" = success
		wantLog    string
	}{
		{name: "requeue", do: func(a guard.Actuator) error { return a.Requeue("7", reason) },
			wantCalls: []string{comment, "scontrol requeue 7"}},
		{name: "cancel", do: func(a guard.Actuator) error { return a.Cancel("7", reason) },
			wantCalls: []string{comment, "scancel 7"}},
		{name: "suspend", do: func(a guard.Actuator) error { return a.Suspend("7", reason) },
			wantCalls: []string{comment, "scontrol suspend 7"}},
		{name: "resume", do: func(a guard.Actuator) error { return a.Resume("7", reason) },
			wantCalls: []string{comment, "scontrol resume 7"}},
		{name: "array job", do: func(a guard.Actuator) error { return a.Requeue("7_3", "r") },
			wantCalls: []string{"scontrol update jobid=7_3 admincomment=r", "scontrol requeue 7_3"}},
		{name: "failed action", fail: "scontrol requeue", do: func(a guard.Actuator) error { return a.Requeue("7", reason) },
			wantCalls: []string{comment, "scontrol requeue 7"}, wantErr: "Invalid job id specified"},
		{name: "reason not written, action taken", fail: "scontrol update", do: func(a guard.Actuator) error { return a.Cancel("7", reason) },
			wantCalls: []string{comment, "scancel 7"}, wantLog: "writing the reason"},
		{name: "hung command killed", hang: "scontrol suspend", do: func(a guard.Actuator) error { return a.Suspend("7", reason) },
			wantCalls: []string{comment, "scontrol suspend 7"}, wantErr: "no answer within"},
		{name: "hostile job id", do: func(a guard.Actuator) error { return a.Cancel("7;rm -rf /", reason) },
			wantErr: "invalid job id"},
		{name: "option as job id", do: func(a guard.Actuator) error { return a.Cancel("--user=alice", reason) },
			wantErr: "invalid job id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := standInSlurm(t)
			t.Setenv("FAKE_FAIL", tt.fail)
			t.Setenv("FAKE_HANG", tt.hang)
			var logs logLines
			err := tt.do(&slurmActuator{timeout: time.Second, logf: logs.logf})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if got := readCalls(t, calls); strings.Join(got, "\n") != strings.Join(tt.wantCalls, "\n") {
				t.Errorf("commands run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.wantCalls, "\n"))
			}
			if tt.wantLog != "" && !logs.has(tt.wantLog) {
				t.Errorf("no log line with %q: %q", tt.wantLog, logs.lines)
			}
		})
	}
}

// A requeue for a floor breach adds the guard's node to the job's excluded
// nodes, merged with the job's own, unless no node of its partition would be
// left; the requeue stands whatever happens after it.
func TestRequeueElsewhere(t *testing.T) {
	const reason = "r"
	head := []string{"scontrol update jobid=7 admincomment=r", "scontrol requeue 7", "squeue --noheader --states=all -j 7 -o %P|%x", "sinfo -h -p gpu -o %D"}
	tests := []struct {
		name       string
		show       string
		sinfo      string
		fail       string
		wantCalls  []string
		wantErr    string
		wantLog    string
		wantUpdate string
	}{
		{name: "excluded", show: "gpu|(null)", sinfo: "2\n1",
			wantUpdate: "scontrol update jobid=7 ExcNodeList=n1"},
		{name: "merged with the job's own", show: "gpu|n[3-4]", sinfo: "4",
			wantUpdate: "scontrol update jobid=7 ExcNodeList=n3,n4,n1"},
		{name: "no node would be left", show: "gpu|n2", sinfo: "2", wantLog: "none would be left"},
		{name: "squeue fails", show: "", fail: "squeue --noheader", wantLog: "not excluded",
			wantCalls: []string{"scontrol update jobid=7 admincomment=r", "scontrol requeue 7", "squeue --noheader --states=all -j 7 -o %P|%x"}},
		{name: "squeue answers nonsense", show: "gpu ExcNodeList=n[1-4]", wantLog: "not excluded",
			wantCalls: []string{"scontrol update jobid=7 admincomment=r", "scontrol requeue 7", "squeue --noheader --states=all -j 7 -o %P|%x"}},
		{name: "requeue fails", fail: "scontrol requeue", wantErr: "Invalid job id",
			wantCalls: []string{"scontrol update jobid=7 admincomment=r", "scontrol requeue 7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := standInSlurm(t)
			t.Setenv("FAKE_FAIL", tt.fail)
			t.Setenv("FAKE_HANG", "")
			t.Setenv("FAKE_SHOW", tt.show)
			t.Setenv("FAKE_SINFO", tt.sinfo)
			var logs logLines
			act := &trackingActuator{inner: &slurmActuator{timeout: time.Second, logf: logs.logf, node: "n1"}, retryAfter: time.Minute}
			err := guard.Apply(act, guard.Action{Kind: guard.Requeue, JobID: "7", Reason: reason, Elsewhere: true})
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			want := tt.wantCalls
			if want == nil {
				want = head
				if tt.wantUpdate != "" {
					want = append(slices.Clone(head), tt.wantUpdate)
				}
			}
			if got := readCalls(t, calls); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("commands run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if tt.wantLog != "" && !logs.has(tt.wantLog) {
				t.Errorf("no log line with %q: %q", tt.wantLog, logs.lines)
			}
		})
	}
}

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// guardTestSetup writes a residency folder with jobs on node n1 (and one on n2)
// and their profiles, and returns the configuration.
func guardTestSetup(t *testing.T) config.Config {
	t.Helper()
	cfg, _ := testConfig(t)
	dir := filepath.Dir(cfg.ResidencyDir)
	cfg.Guard.EventDir = filepath.Join(dir, "guard")
	cfg.Guard.MetricsFile = filepath.Join(dir, "guard.prom")
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, e := range []residency.Entry{
		{V: 1, JobID: "11", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "big", Class: profile.ClassTrain, User: "root", Start: now.Add(-time.Hour), Expires: now.Add(time.Hour)},
		{V: 1, JobID: "12", Node: "n1", GPUs: []int{0, 1}, Shards: 2, Tag: "small", Class: profile.ClassHPC, User: "root", Start: now.Add(-30 * time.Minute), Expires: now.Add(time.Hour)},
		{V: 1, JobID: "13", Node: "n1", GPUs: []int{2}, Shards: 2, User: "root", Start: now.Add(-time.Minute), Expires: now.Add(time.Hour)},
		{V: 1, JobID: "21", Node: "n2", GPUs: []int{0}, Shards: 2, Tag: "big", Class: profile.ClassTrain, User: "root", Start: now, Expires: now.Add(time.Hour)},
		{V: 1, JobID: "14", Node: "n1", GPUs: []int{3}, Shards: 2, Tag: "small", Class: profile.ClassHPC, User: "root", Start: now.Add(-3 * time.Hour), Expires: now.Add(-2 * time.Hour)},
	} {
		if err := store.Start(e); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*profile.Profile{
		{Tag: "big", Class: profile.ClassTrain, SoloRuntimeS: 100, CollectedAt: now, MemUsedMiB: 1000, SMUtil: profile.Stat{Mean: 60}},
		{Tag: "small", Class: profile.ClassHPC, SoloRuntimeS: 100, CollectedAt: now, MemUsedMiB: 20000, SMUtil: profile.Stat{Mean: 40}},
	} {
		if err := ps.Put(p); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// The job source lists this node's live residency entries with their profiles.
func TestResidencyJobs(t *testing.T) {
	cfg := guardTestSetup(t)
	store, _ := residency.Open(cfg.ResidencyDir)
	ps, _ := profile.Open(cfg.ProfileDir)
	var logs logLines
	src := newResidencyJobs(store, ps, "n1", time.Now, logs.logf)
	jobs, err := src.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]guard.Job{}
	for _, j := range jobs {
		got[j.ID] = j
	}
	tests := []struct {
		id        string
		present   bool
		tag       string
		class     profile.Class
		gpus      string
		profileOK bool
	}{
		{id: "11", present: true, tag: "big", class: profile.ClassTrain, gpus: "[0]", profileOK: true},
		{id: "12", present: true, tag: "small", class: profile.ClassHPC, gpus: "[0 1]", profileOK: true},
		{id: "13", present: true, gpus: "[2]"}, // untagged: no profile, never judged
		{id: "21"},                             // another node's
		{id: "14"},                             // past its expiry and the grace
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			j, ok := got[tt.id]
			if ok != tt.present {
				t.Fatalf("job %s listed: %v, want %v", tt.id, ok, tt.present)
			}
			if !ok {
				return
			}
			if j.Tag != tt.tag || j.Class != tt.class || fmt.Sprint(j.GPUs) != tt.gpus || j.User != "root" || j.Start.IsZero() {
				t.Errorf("job %+v", j)
			}
			if (j.Profile != nil) != tt.profileOK || (j.Profile != nil && j.Profile.Tag != tt.tag) {
				t.Errorf("job %s profile %+v", tt.id, j.Profile)
			}
		})
	}
	if len(logs.lines) != 0 {
		t.Errorf("unexpected log lines: %q", logs.lines)
	}
}

// mockNode is a go-nvml mock whose GPU 0 is near full: job 11 (pid 100) far
// over its memory budget, job 12 (pid 200) within its own.
func mockNode() nvml.Backend {
	srv := dgxh200.New()
	for i := range srv.Devices {
		d := srv.Devices[i].(*server.Device)
		used := uint64(1 << 30)
		var procs []gonvml.ProcessInfo
		if i == 0 {
			used = 140000 << 20
			procs = []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 125000 << 20}, {Pid: 200, UsedGpuMemory: 15000 << 20}}
		}
		d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Used: used, Total: 144384 << 20}, gonvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{Gpu: 95}, gonvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return procs, gonvml.SUCCESS }
		d.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
			var out []gonvml.ProcessUtilizationSample
			for _, p := range procs {
				out = append(out, gonvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: since + 1, SmUtil: 45})
			}
			return out, gonvml.SUCCESS
		}
	}
	b := nvml.Wrap(srv, "mock")
	return b
}

func writeProcRoot(t *testing.T, pids map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, job := range pids {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%s/step_0/user/task_0\n", job)
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The loop: a round without NVML logs and goes on; once NVML opens, the job
// over its own memory budget is requeued through Slurm's commands, the action
// lands in the event log and the metrics, and cancelling the context ends it.
func TestGuardLoop(t *testing.T) {
	tests := []struct {
		name        string
		dryRun      bool
		fail        string
		wantOutcome string
		wantCalls   bool
	}{
		{name: "requeue taken", wantOutcome: "taken", wantCalls: true},
		{name: "requeue fails", fail: "scontrol requeue", wantOutcome: "failed", wantCalls: true},
		{name: "dry run", dryRun: true, wantOutcome: "dry-run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := standInSlurm(t)
			t.Setenv("FAKE_FAIL", tt.fail)
			t.Setenv("FAKE_HANG", "")
			cfg := guardTestSetup(t)
			cfg.Guard.DryRun = tt.dryRun
			var logs logLines
			svc, err := newGuardService(cfg, "n1", logs.logf)
			if err != nil {
				t.Fatal(err)
			}
			svc.cfg.Guard.Period = 5 * time.Millisecond
			svc.procRoot = writeProcRoot(t, map[uint32]string{100: "11", 200: "12"})
			svc.nvml = nvml.WithTimeout(&flakyInit{Backend: mockNode(), fails: 2}, time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); svc.run(ctx) }()
			deadline := time.After(20 * time.Second)
			for !logs.has("job 11") {
				select {
				case <-deadline:
					cancel()
					t.Fatalf("no action on job 11; log: %q", logs.lines)
				case <-time.After(5 * time.Millisecond):
				}
			}
			cancel()
			<-done
			svc.close()

			if !logs.has("guard: start") || !logs.has("period=5ms nvml_timeout=2s command_timeout=10s") {
				t.Errorf("no start line with the settings: %q", logs.lines)
			}
			n := 0
			for _, l := range logs.lines {
				if strings.Contains(l, "NVML unavailable") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d lines about the missing NVML, want 1 (the same problem is said once): %q", n, logs.lines)
			}
			got := readCalls(t, calls)
			if tt.wantCalls != (len(got) > 0) || (tt.wantCalls && got[len(got)-1] != "scontrol requeue 11") {
				t.Errorf("commands %q", got)
			}
			events := readEvents(t, guardEventPath(cfg.Guard.EventDir, "n1"))
			var ev *decisionlog.Record
			for i := range events {
				if events[i].JobID == "11" && events[i].Action == "requeue" {
					ev = &events[i]
					break
				}
			}
			if ev == nil {
				t.Fatalf("no requeue event for job 11: %+v", events)
			}
			if ev.Op != decisionlog.OpGuard || ev.Outcome != tt.wantOutcome || ev.Node != "n1" || ev.GPU != 0 || ev.Tag != "big" ||
				ev.Class != "train" || ev.UserID != 0 || !strings.Contains(ev.Reason, "budget") {
				t.Errorf("event %+v", *ev)
			}
			prom, err := os.ReadFile(cfg.Guard.MetricsFile)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`coscheml_guard_actions_total{class="train",kind="requeue",outcome=%q}`, tt.wantOutcome)
			if !bytes.Contains(prom, []byte(want)) {
				t.Errorf("metrics lack %s:\n%s", want, prom)
			}
			if !bytes.Contains(prom, []byte("coscheml_guard_rounds_without_nvml_total 2")) {
				t.Errorf("metrics do not count the rounds without NVML:\n%s", prom)
			}
		})
	}
}

// flakyInit is a backend whose Init fails its first fails calls, or hangs
// until hang is closed.
type flakyInit struct {
	nvml.Backend
	fails int
	hang  chan struct{}
	mu    sync.Mutex
	calls int
}

func (f *flakyInit) Init() error {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.hang != nil {
		<-f.hang
	}
	if n <= f.fails {
		return fmt.Errorf("nvml init: %w", nvml.ErrNotAvailable)
	}
	return f.Backend.Init()
}

// A driver whose init hangs costs one parked call, not one per round: later
// rounds fail at once while it hangs, and the guard goes on.
func TestGuardHungNVMLInit(t *testing.T) {
	cfg := guardTestSetup(t)
	var logs logLines
	svc, err := newGuardService(cfg, "n1", logs.logf)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	hung := &flakyInit{Backend: mockNode(), hang: make(chan struct{})}
	defer close(hung.hang)
	svc.nvml = nvml.WithTimeout(hung, 5*time.Millisecond)
	now := time.Now()
	for i := range 5 {
		if svc.step(now.Add(time.Duration(i) * time.Second)) {
			t.Fatal("acted without NVML")
		}
	}
	hung.mu.Lock()
	calls := hung.calls
	hung.mu.Unlock()
	if calls != 1 {
		t.Errorf("the driver's init was called %d times over 5 rounds, want 1 (the hung one)", calls)
	}
	if !logs.has("NVML unavailable") {
		t.Errorf("no log line about NVML: %q", logs.lines)
	}
}

func readEvents(t *testing.T, path string) []decisionlog.Record {
	t.Helper()
	recs, err := decisionlog.Since(path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// The guard section becomes pkg/guard's Config: the site's floors and actions,
// pkg/guard's thresholds.
func TestGuardConfig(t *testing.T) {
	cfg := config.Default()
	cfg.SpeedFloor.Infer = 0.95
	cfg.Guard.Period = 7 * time.Second
	cfg.Guard.Actions.Train = config.GuardClassActions{Memory: "cancel", Floor: "observe"}
	g, err := guardConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := guard.Default()
	if g.Period != 7*time.Second || g.Floors.Infer != 0.95 || g.Window != d.Window || g.Cooldown != d.Cooldown ||
		g.Actions[profile.ClassTrain] != (guard.ClassActions{Memory: guard.Cancel, Floor: guard.Observe}) ||
		g.Actions[profile.ClassHPC] != d.Actions[profile.ClassHPC] || g.Actions[profile.ClassInfer] != d.Actions[profile.ClassInfer] {
		t.Errorf("guard config %+v", g)
	}
	// The shipped defaults are pkg/guard's.
	g, err = guardConfig(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	for cl, a := range d.Actions {
		if g.Actions[cl] != a {
			t.Errorf("class %s: config default %+v, pkg/guard default %+v", cl, g.Actions[cl], a)
		}
	}
	if g.Period != d.Period {
		t.Errorf("period %v, pkg/guard's %v", g.Period, d.Period)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the guard writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runGuard's exit codes: usage 2, an unusable configuration 1, a stop by
// signal 0 (here a disabled guard, which idles rather than exit).
func TestRunGuardExit(t *testing.T) {
	_, cfgPath := testConfig(t)
	disabled := filepath.Join(filepath.Dir(cfgPath), "disabled.yaml")
	b, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(disabled, append(b, "guard:\n  enabled: false\n  event_dir: \"\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(filepath.Dir(cfgPath), "bad.yaml")
	if err := os.WriteFile(bad, []byte("guard:\n  period: 10ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		signal bool
		want   int
		out    []string
	}{
		{name: "unknown flag", args: []string{"--bogus"}, want: 2},
		{name: "missing named config", args: []string{"--config", "/nonexistent/coscheml.yaml", "--no-syslog"}, want: 1, out: []string{"guard:"}},
		{name: "node name that is a path", args: []string{"--config", disabled, "--node", "../etc", "--no-syslog"}, want: 1, out: []string{"invalid node name"}},
		{name: "invalid config", args: []string{"--config", bad, "--no-syslog"}, want: 1, out: []string{`"guard.period"`}},
		{name: "disabled, stopped by SIGTERM", args: []string{"--config", disabled, "--node", "n1", "--no-syslog"}, signal: true, want: 0,
			out: []string{"guard: start", "on node n1", "enabled=false", "disabled", "stopped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out syncBuffer
			code := make(chan int, 1)
			go func() { code <- runGuard(tt.args, &out) }()
			if tt.signal {
				deadline := time.After(20 * time.Second)
				for !strings.Contains(out.String(), "idle until stopped") {
					select {
					case <-deadline:
						t.Fatalf("guard did not start: %s", out.String())
					case <-time.After(5 * time.Millisecond):
					}
				}
				if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			var got int
			select {
			case got = <-code:
			case <-time.After(20 * time.Second):
				// A guard that should have refused to start is running: stop it.
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				got = <-code
				t.Errorf("the guard ran instead of exiting at once")
			}
			if got != tt.want {
				t.Errorf("exit %d, want %d: %s", got, tt.want, out.String())
			}
			for _, w := range tt.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q: %s", w, out.String())
				}
			}
		})
	}
}

// Each action is one record of the job acted on; a floor action on a co-runner
// also gives the slowed job a record, without the co-runner's id; an observed
// finding that holds is written once per 10 minutes.
func TestGuardEvents(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	jobs := map[string]guard.Job{
		"11": {ID: "11", Tag: "big", Class: profile.ClassTrain, User: "root"},
		"12": {ID: "12", Tag: "small", Class: profile.ClassHPC, User: "nosuchuser-coscheml"},
	}
	type step struct {
		at      time.Duration
		a       guard.Action
		outcome string
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // job|action|outcome|uid
	}{
		{name: "memory requeue", steps: []step{{0, guard.Action{Kind: guard.Requeue, JobID: "11", Trigger: "11", Reason: "over budget"}, "taken"}},
			want: []string{"11|requeue|taken|0"}},
		{name: "suspend of a co-runner", steps: []step{{0, guard.Action{Kind: guard.Suspend, JobID: "11", Trigger: "12", Protects: "12", Reason: "job 12 below floor; job 11 shares"}, "taken"}},
			want: []string{"11|suspend|taken|0", "12|suspend-co-runner|taken|4294967295"}},
		{name: "resume concerns the resumed job only", steps: []step{{0, guard.Action{Kind: guard.Resume, JobID: "11", Trigger: "12", Reason: "job 12 left"}, "taken"}},
			want: []string{"11|resume|taken|0"}},
		{name: "observed finding once per 10 minutes", steps: []step{
			{0, guard.Action{Kind: guard.Observe, JobID: "12", Trigger: "12", Reason: "below floor"}, "observed"},
			{5 * time.Second, guard.Action{Kind: guard.Observe, JobID: "12", Trigger: "12", Reason: "below floor"}, "observed"},
			{11 * time.Minute, guard.Action{Kind: guard.Observe, JobID: "12", Trigger: "12", Reason: "below floor"}, "observed"},
		}, want: []string{"12|observe|observed|4294967295", "12|observe|observed|4294967295"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := guardTestSetup(t)
			svc, err := newGuardService(cfg, "n1", t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range tt.steps {
				svc.event(now.Add(st.at), st.a, jobs, st.outcome)
			}
			svc.close()
			var got []string
			for _, r := range readEvents(t, guardEventPath(cfg.Guard.EventDir, "n1")) {
				got = append(got, fmt.Sprintf("%s|%s|%s|%d", r.JobID, r.Action, r.Outcome, r.UserID))
				if r.JobID == "12" && r.Action == "suspend-co-runner" && strings.Contains(r.Reason, "11") {
					t.Errorf("the slowed job's record names the co-runner: %q", r.Reason)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

type countingActuator struct {
	calls []string
	fail  bool
}

func (c *countingActuator) do(kind, id string) error {
	c.calls = append(c.calls, kind+" "+id)
	if c.fail {
		return errors.New("slurm_requeue error: Requested operation is presently disabled")
	}
	return nil
}
func (c *countingActuator) Requeue(id, _ string) error { return c.do("requeue", id) }
func (c *countingActuator) Cancel(id, _ string) error  { return c.do("cancel", id) }
func (c *countingActuator) Suspend(id, _ string) error { return c.do("suspend", id) }
func (c *countingActuator) Resume(id, _ string) error  { return c.do("resume", id) }

// An action Slurm refuses is not run again every period: the next try comes
// retryAfter later; each held round still counts as failed, and a success
// clears the hold.
func TestTrackingActuatorRetry(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		at        time.Duration
		job       string
		fail      bool
		wantRun   bool
		wantError bool
	}{
		{at: 0, job: "11", fail: true, wantRun: true, wantError: true},
		{at: 5 * time.Second, job: "11", fail: true, wantRun: false, wantError: true},
		{at: 5 * time.Second, job: "12", fail: true, wantRun: true, wantError: true}, // another job is not held
		{at: 59 * time.Second, job: "11", fail: false, wantRun: false, wantError: true},
		{at: 61 * time.Second, job: "11", fail: false, wantRun: true},
		{at: 62 * time.Second, job: "11", fail: false, wantRun: true},
	}
	inner := &countingActuator{}
	var now time.Time
	act := &trackingActuator{inner: inner, retryAfter: time.Minute, now: func() time.Time { return now }}
	for i, tt := range tests {
		now = t0.Add(tt.at)
		inner.fail = tt.fail
		act.reset()
		before := len(inner.calls)
		err := act.Requeue(tt.job, "r")
		if ran := len(inner.calls) > before; ran != tt.wantRun {
			t.Errorf("step %d (%v, job %s): ran %v, want %v", i, tt.at, tt.job, ran, tt.wantRun)
		}
		if (err != nil) != tt.wantError || act.failed(guard.Requeue, tt.job) != tt.wantError {
			t.Errorf("step %d: error %v, failed %v, want failure %v", i, err, act.failed(guard.Requeue, tt.job), tt.wantError)
		}
	}
}

// The round's early observations of pairs become rows in observation_dir that
// read back from disk; memory findings and findings next to several co-runners
// do not.
func TestGuardWritesEarlyObservations(t *testing.T) {
	cfg := guardTestSetup(t)
	cfg.ObservationDir = filepath.Join(t.TempDir(), "observations")
	svc, err := newGuardService(cfg, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	when := time.Date(2026, 12, 4, 10, 0, 0, 500, time.UTC)
	svc.writeObservations([]guard.Observation{
		{When: when, GPU: 0, Kind: guard.SpeedBelowFloor, JobID: "11", User: "root", Tag: "big", Class: profile.ClassTrain, CoTags: []string{"small"}, Speed: 0.55},
		{When: when, GPU: 0, Kind: guard.MemoryOverBudget, JobID: "12", User: "root", Tag: "small", CoTags: []string{"big"}, MemMiB: 9000},
		{When: when, GPU: 1, Kind: guard.SpeedBelowFloor, JobID: "12", User: "root", Tag: "small", CoTags: []string{"big", "small"}, Speed: 0.5},
		{When: when, GPU: 2, Kind: guard.SpeedBelowFloor, JobID: "13", User: "root", CoTags: []string{"big"}, Speed: 0.5},
	})
	obs, problems := observation.ReadDir(cfg.ObservationDir)
	if len(problems) > 0 {
		t.Fatalf("reading back: %v", problems)
	}
	want := observation.Observation{Tag: "big", Class: profile.ClassTrain, CoTags: []string{"small"}, Speed: 0.55, Source: "guard",
		JobID: "11", Node: "n1", When: when.Truncate(time.Second), UID: "0"}
	if len(obs) != 1 || !reflect.DeepEqual(obs[0], want) {
		t.Fatalf("observations %+v, want only %+v", obs, want)
	}
}

// With guard.emulated_metrics_dir the guard reads the emulated jobs' readings
// instead of NVML and acts through the same Actuator; a folder an ordinary user
// could write is refused, and nothing is acted on.
func TestGuardEmulatedMetrics(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      os.FileMode
		wantCalls []string
		wantLog   string
	}{
		{name: "trusted folder", mode: 0o755, wantCalls: []string{"scontrol update", "scontrol requeue 11"}, wantLog: "EVALUATION ONLY"},
		{name: "world-writable folder", mode: 0o777, wantLog: "writable by group or others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := standInSlurm(t)
			t.Setenv("FAKE_FAIL", "")
			t.Setenv("FAKE_HANG", "")
			cfg := guardTestSetup(t)
			dir := filepath.Join(t.TempDir(), "metrics")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			const mib = 1 << 20
			for _, r := range []struct {
				job string
				pid int
				mem uint64
			}{{"11", os.Getpid(), 125000}, {"12", os.Getppid(), 15000}} {
				if err := nvml.WriteDirReading(dir, "n1", 0, nvml.DirReading{JobID: r.job, PID: uint32(r.pid),
					MemBytes: r.mem * mib, MemTotal: 144384 * mib, SMUtil: 40, Busy: true, At: time.Now().UnixMicro()}); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			cfg.Guard.EmulatedMetricsDir = dir
			var logs logLines
			svc, err := newGuardService(cfg, "n1", logs.logf)
			if err != nil {
				t.Fatal(err)
			}
			svc.cfg.Guard.Period = 5 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); svc.run(ctx) }()
			deadline := time.After(10 * time.Second)
			for !logs.has(tc.wantLog) || (tc.wantCalls != nil && len(readCalls(t, calls)) < len(tc.wantCalls)) {
				select {
				case <-deadline:
					cancel()
					t.Fatalf("no %q (calls %q); log: %q", tc.wantLog, readCalls(t, calls), logs.lines)
				case <-time.After(5 * time.Millisecond):
				}
			}
			time.Sleep(50 * time.Millisecond) // rounds enough to act, had the folder been read
			cancel()
			<-done
			svc.close()
			got := readCalls(t, calls)
			if len(got) != len(tc.wantCalls) {
				t.Fatalf("commands %q, want %q", got, tc.wantCalls)
			}
			for i, w := range tc.wantCalls {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("command %d %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

// slowingNode is a go-nvml mock whose GPU 0 is busy with two jobs: pid 100
// (job 11) at an SM share of 30%, pid 200 (job 12) at 68%.
func slowingNode() nvml.Backend {
	srv := dgxh200.New()
	for i := range srv.Devices {
		d := srv.Devices[i].(*server.Device)
		var procs []gonvml.ProcessInfo
		sm := map[uint32]uint32{100: 30, 200: 68}
		if i == 0 {
			procs = []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1000 << 20}, {Pid: 200, UsedGpuMemory: 1000 << 20}}
		}
		d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Used: 2000 << 20, Total: 144384 << 20}, gonvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{Gpu: 98}, gonvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return procs, gonvml.SUCCESS }
		d.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
			var out []gonvml.ProcessUtilizationSample
			for _, p := range procs {
				out = append(out, gonvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: since + 1, SmUtil: sm[p.Pid]})
			}
			return out, gonvml.SUCCESS
		}
	}
	return nvml.Wrap(srv, "mock")
}

// A job the guard suspended is resumed when the job it protects ends, also
// when the guard restarted in between (an upgrade, a crash): suspensions are
// kept on disk, not only in memory.
func TestGuardResumesAfterRestart(t *testing.T) {
	calls := standInSlurm(t)
	t.Setenv("FAKE_FAIL", "")
	t.Setenv("FAKE_HANG", "")
	cfg := guardTestSetup(t)
	cfg.Guard.StateDir = filepath.Join(filepath.Dir(cfg.ResidencyDir), "guard-state")
	cfg.Guard.Window, cfg.Guard.SustainFor = 1, 0
	cfg.Guard.Actions.HPC.Floor = "suspend"
	procRoot := writeProcRoot(t, map[uint32]string{100: "11", 200: "12"})
	start := func() *guardService {
		svc, err := newGuardService(cfg, "n1", t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		svc.procRoot = procRoot
		svc.nvml = nvml.WithTimeout(slowingNode(), time.Second)
		return svc
	}
	svc := start()
	now := time.Now()
	svc.step(now)
	svc.close()
	if got := readCalls(t, calls); len(got) == 0 || got[len(got)-1] != "scontrol suspend 12" {
		t.Fatalf("commands %q: want job 12 (later, less protected) suspended for job 11", got)
	}
	// The guard restarts; meanwhile the protected job 11 ended.
	store, _ := residency.Open(cfg.ResidencyDir)
	if _, err := store.End("11", "n1", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	svc = start()
	defer svc.close()
	svc.step(now.Add(2 * time.Second))
	if got := readCalls(t, calls); got[len(got)-1] != "scontrol resume 12" {
		t.Fatalf("commands after the restart %q: want job 12 resumed", got)
	}
	// Resumed once: the file no longer holds it.
	svc.step(now.Add(3 * time.Second))
	n := 0
	for _, c := range readCalls(t, calls) {
		if c == "scontrol resume 12" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("job 12 resumed %d times", n)
	}
}

// The job's name is its owner's: one that reads like Slurm's own fields in
// `scontrol show job -o` must not steer which nodes the guard excludes. The
// requeue-elsewhere action asks squeue for Slurm's fields alone.
func TestRequeueElsewhereJobNameCannotSteer(t *testing.T) {
	calls := standInSlurm(t)
	t.Setenv("FAKE_FAIL", "")
	t.Setenv("FAKE_HANG", "")
	t.Setenv("FAKE_SINFO", "4")
	// What scontrol show job -o printed for `sbatch -J "x ExcNodeList=n[1-4]"`
	// (JobId=7 JobName=x ExcNodeList=n[1-4] ... ExcNodeList=(null) ...); squeue
	// prints only the partition and the real excluded nodes.
	t.Setenv("FAKE_SHOW", "gpu|(null)")
	act := &slurmActuator{timeout: time.Second, logf: t.Logf, node: "n1"}
	if err := act.RequeueElsewhere("7", "r"); err != nil {
		t.Fatal(err)
	}
	got := readCalls(t, calls)
	if got[len(got)-1] != "scontrol update jobid=7 ExcNodeList=n1" {
		t.Fatalf("commands %q: the node was not excluded", got)
	}
	for _, c := range got {
		if strings.HasPrefix(c, "scontrol show") {
			t.Errorf("read the job through scontrol show, where its name can forge fields: %q", c)
		}
	}
}

// FuzzParseJobPlacement: whatever squeue prints, the answer is a partition
// name of Slurm's characters and an excluded-node list without separators, or
// an error.
func FuzzParseJobPlacement(f *testing.F) {
	for _, s := range []string{"gpu|(null)\n", "gpu|n[1-4]", "gpu ExcNodeList=n1", "|", "a|b|c", "gpu|n1\nother|n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		part, exc, err := parseJobPlacement(in)
		if err != nil {
			return
		}
		if !partitionRE.MatchString(part) || strings.ContainsAny(exc, "|\n") || exc == "(null)" {
			t.Fatalf("accepted partition %q, excluded %q", part, exc)
		}
	})
}
