// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// TestMain lets the test binary serve as the sampler program: Prolog starts
// os.Executable() with "sampler ...", which lands here.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sampler" {
		os.Exit(testSampler(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// testSampler is the sampler program for these tests: the flags the launcher
// passes (the real program is cmd/coscheml-node's), and SIGTERM ends it.
func testSampler(args []string) int {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	var o SamplerOptions
	fs.StringVar(&o.Dir, "dir", "", "")
	fs.StringVar(&o.Backend, "backend", "", "")
	fs.DurationVar(&o.Interval, "interval", 0, "")
	gpus := fs.String("gpus", "", "")
	fs.IntVar(&o.MaxRounds, "max-rounds", 0, "")
	fs.DurationVar(&o.MaxLife, "max-life", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if o.GPUs, err = nvml.ParseGPUList(*gpus); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunSampler(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func testConfig(t *testing.T) config.Config {
	t.Helper()
	root := t.TempDir()
	cfg := config.Default()
	cfg.ProfileDir = filepath.Join(root, "profiles")
	cfg.ObservationDir = filepath.Join(root, "observations")
	cfg.Profiling.Backend = "mock"
	cfg.Profiling.Interval = 10 * time.Millisecond
	cfg.Profiling.StaleAfter = time.Hour
	// These tests follow one run from Prolog to profile; how much evidence a
	// profile needs is TestProfileEvidence's subject.
	cfg.Profiling.MinRuns, cfg.Profiling.MinUsers = 1, 1
	return cfg
}

// waitRounds waits (bounded) until the job's sampler has written n rounds.
func waitRounds(t *testing.T, cfg config.Config, jobID string, n int) {
	t.Helper()
	dir, _ := jobDir(cfg, jobID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var sum nvml.Summary
		if f, err := os.Open(filepath.Join(dir, samplesFile)); err == nil {
			_ = nvml.ReadSamples(f, &sum)
			f.Close()
		}
		if sum.Rounds() >= n {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, logFile))
			t.Fatalf("sampler of job %s wrote %d rounds, want %d; log: %s", jobID, sum.Rounds(), n, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func samplerPID(t *testing.T, cfg config.Config, jobID string) int {
	t.Helper()
	dir, _ := jobDir(cfg, jobID)
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// expectedSM computes by hand what the mock's GPU 0 shows over n rounds
// (utilization.gpu = 35,50,65,80,95,80,65,50 repeating): mean, nearest-rank p95, max.
func expectedSM(n int) profile.Stat {
	seq := []float64{35, 50, 65, 80, 95, 80, 65, 50}
	vals := make([]float64, n)
	sum := 0.0
	for k := range vals {
		vals[k] = seq[k%len(seq)]
		sum += vals[k]
	}
	sort.Float64s(vals)
	rank := int(math.Ceil(0.95*float64(n) - 1e-9))
	return profile.Stat{Mean: sum / float64(n), P95: vals[rank-1], Max: vals[n-1]}
}

func TestPrologEpilogEndToEnd(t *testing.T) {
	cfg := testConfig(t)
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	job := JobEnv{JobID: "101", Node: "n1", Tag: "stream-a", Class: profile.ClassHPC, GPUs: []int{0}, UID: "1000", EndState: Completed}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

	// 1. No profile yet, job alone: the Prolog starts a sampler.
	if err := Prolog(cfg, job, true); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, cfg, "101", 6)
	pid := samplerPID(t, cfg, "101")
	rep, err := RunEpilog(cfg, job, at(0), at(0).Add(100*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first solo run is its own solo reference: a solo observation at speed 1.
	if !rep.Sampled || !rep.ProfileWritten || !rep.SoloRun || rep.Observation == nil || rep.Observation.Speed != 1 ||
		len(rep.Observation.CoTags) != 0 || rep.Observation.Source != "epilog solo reference" || rep.Observation.UID != "1000" {
		t.Fatalf("report %+v (observation %+v)", rep, rep.Observation)
	}
	if isSampler(pid, filepath.Join(RunDir(cfg), "101")) {
		t.Error("sampler still running after the Epilog")
	}
	if _, err := os.Stat(filepath.Join(RunDir(cfg), "101")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job folder left behind: %v", err)
	}
	store, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.Get("stream-a")
	if err != nil {
		t.Fatal(err)
	}
	if p.Samples < 6 {
		t.Fatalf("profile has %d samples, want >= 6", p.Samples)
	}
	want := expectedSM(p.Samples)
	if math.Abs(p.SMUtil.Mean-want.Mean) > 1e-9 || p.SMUtil.P95 != want.P95 || p.SMUtil.Max != want.Max {
		t.Errorf("sm util %+v, want %+v over %d samples", p.SMUtil, want, p.Samples)
	}
	// Memory used: 8192 + 512*(n%4) MiB, so the max over >= 4 reads is 9728. One
	// solo run is no solo reference yet.
	if p.MemUsedMiB != 9728 || p.PowerW.Max != 190 || p.Class != profile.ClassHPC || p.SoloRuntimeS != 0 {
		t.Errorf("profile %+v", p)
	}
	if !strings.Contains(p.Source, "mock") || p.GPUModel != "NVIDIA H200 141GB HBM3e" || p.CollectedOn != "n1" || p.Partial {
		t.Errorf("provenance: source %q model %q on %q partial %v (%s)", p.Source, p.GPUModel, p.CollectedOn, p.Partial, p.PartialNote)
	}

	// 2. Two more solo runs, by other users: the reference is the median, 100 s.
	for i, run := range []struct {
		id, uid string
		secs    int
	}{{"102", "1001", 90}, {"103", "1002", 110}} {
		j := job
		j.JobID, j.UID = run.id, run.uid
		if _, err := RunEpilog(cfg, j, at(1+i), at(1+i).Add(time.Duration(run.secs)*time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := store.Get("stream-a"); p.SoloRuntimeS != 100 || p.Samples < 6 {
		t.Fatalf("solo reference %v after three solo runs (100, 90, 110 s), want the median 100 (profile %+v)", p.SoloRuntimeS, p)
	}

	// 3. The job shares its GPU with bert-b all along and takes 125 s: speed 0.8.
	job2 := job
	job2.JobID = "104"
	if started, err := (launcher{now: func() time.Time { return at(0).Add(10 * time.Minute) }}).prolog(cfg, job2, true); err != nil || started {
		t.Fatalf("fresh profile: started=%v err=%v", started, err)
	}
	co := []CoRunInterval{{Start: at(3), End: at(3).Add(125 * time.Second), CoTags: []string{"bert-b"}}}
	rep, err = RunEpilog(cfg, job2, at(3), at(3).Add(125*time.Second), co)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sampled || rep.ProfileWritten || rep.SoloRun || rep.Observation == nil {
		t.Fatalf("report %+v", rep)
	}
	obs, err := observation.ReadFile(filepath.Join(cfg.ObservationDir, "n1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	last := obs[len(obs)-1]
	if len(obs) != 4 || last.Tag != "stream-a" || strings.Join(last.CoTags, ",") != "bert-b" ||
		math.Abs(last.Speed-0.8) > 1e-9 || last.JobID != "104" || last.Class != profile.ClassHPC || last.UID != "1000" {
		t.Fatalf("observations %+v", obs)
	}

	// 4. The job reports throughput: 450 against a solo 600 is speed 0.75 whatever
	// the run time. The solo throughput is the median of three solo runs' reports.
	tp := filepath.Join(t.TempDir(), "tp")
	job3 := job
	job3.ThroughputFile = tp
	for i, v := range []string{"600\n", "590", "610"} {
		os.WriteFile(tp, []byte(v), 0o644)
		job3.JobID, job3.UID = fmt.Sprint(110+i), fmt.Sprint(2000+i)
		if _, err := RunEpilog(cfg, job3, at(4+i), at(4+i).Add(100*time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := store.Get("stream-a"); p.SoloThroughput != 600 {
		t.Fatalf("solo throughput %v, want 600", p.SoloThroughput)
	}
	os.WriteFile(tp, []byte("450"), 0o644)
	job3.JobID = "120"
	co = []CoRunInterval{{Start: at(8), End: at(9), CoTags: []string{"lstm-c", "bert-b"}}}
	rep, err = RunEpilog(cfg, job3, at(8), at(8).Add(300*time.Second), co)
	if err != nil || rep.Observation == nil {
		t.Fatalf("report %+v err %v", rep, err)
	}
	if math.Abs(rep.Observation.Speed-0.75) > 1e-9 || strings.Join(rep.Observation.CoTags, ",") != "bert-b,lstm-c" {
		t.Errorf("throughput observation %+v", rep.Observation)
	}

	// 5. Co-runners changed half way: no set covers 80%: no observation.
	job4 := job
	job4.JobID = "121"
	co = []CoRunInterval{
		{Start: at(9), End: at(9).Add(50 * time.Second), CoTags: []string{"bert-b"}},
		{Start: at(9).Add(50 * time.Second), End: at(9).Add(100 * time.Second), CoTags: []string{"lstm-c"}},
	}
	rep, err = RunEpilog(cfg, job4, at(9), at(9).Add(100*time.Second), co)
	if err != nil || rep.Observation != nil || len(rep.Notes) == 0 {
		t.Errorf("changing co-runners: report %+v err %v", rep, err)
	}

	// 5b. An untagged job shared the GPU the whole run: its interference is unknown,
	// so the run is not recorded as solo, nor observed.
	job4b := job
	job4b.JobID = "122"
	co = []CoRunInterval{{Start: at(10), End: at(10).Add(100 * time.Second), CoTags: []string{""}}}
	rep, err = RunEpilog(cfg, job4b, at(10), at(10).Add(100*time.Second), co)
	if err != nil || rep.Observation != nil || rep.SoloRun || !strings.Contains(strings.Join(rep.Notes, ";"), "untagged") {
		t.Errorf("untagged co-runner: report %+v err %v", rep, err)
	}

	// 6. A failed job records nothing.
	job5 := job
	job5.JobID, job5.ExitCode = "123", 1
	rep, err = RunEpilog(cfg, job5, at(11), at(11).Add(100*time.Second), nil)
	if err != nil || rep.Observation != nil || rep.ProfileWritten || rep.SoloRun {
		t.Errorf("failed job: report %+v err %v", rep, err)
	}

	obs, err = observation.ReadFile(filepath.Join(cfg.ObservationDir, "n1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// 101-103 (solo, speed 1: no reference yet at their end), 104 (shared),
	// 110-112 (solo: run time 100 against 100), 120 (shared, by throughput).
	if len(obs) != 8 || obs[4].JobID != "110" || len(obs[4].CoTags) != 0 || obs[4].Speed != 1 || obs[4].Source != "epilog run time" {
		t.Errorf("observations on disk: %+v", obs)
	}
}

// Only a run that ended COMPLETED with exit code 0 leaves a profile, a solo run or
// an observation; every other end state, and an unknown one, keeps nothing.
func TestEpilogKeepsOnlyCompletedRuns(t *testing.T) {
	tests := []struct {
		state string
		exit  int
		keep  bool
	}{
		{Completed, 0, true},
		{Completed, 1, false},
		{"FAILED", 0, false},
		{"CANCELLED", 0, false},
		{"TIMEOUT", 0, false},
		{"NODE_FAIL", 0, false},
		{"PREEMPTED", 0, false},
		{"OUT_OF_MEMORY", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s exit %d", tc.state, tc.exit), func(t *testing.T) {
			cfg := testConfig(t)
			store, _ := profile.Open(cfg.ProfileDir)
			// A stored profile with a solo reference, and a new tag to be profiled.
			old := &profile.Profile{Tag: "known", Class: profile.ClassInfer, SoloRuntimeS: 100, CollectedAt: time.Now()}
			if err := store.Put(old); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(cfg.ProfileDir, "known.prof"))
			t0 := time.Unix(100_000, 0)
			fresh := JobEnv{JobID: "31", Node: "n1", Tag: "fresh", Class: profile.ClassTrain, GPUs: []int{0}, UID: "1000", EndState: tc.state, ExitCode: tc.exit}
			if err := Prolog(cfg, fresh, true); err != nil {
				t.Fatal(err)
			}
			waitRounds(t, cfg, "31", 2)
			rep1, err1 := RunEpilog(cfg, fresh, t0, t0.Add(120*time.Second), nil)
			known := fresh
			known.JobID, known.Tag = "32", "known"
			co := []CoRunInterval{{Start: t0, End: t0.Add(125 * time.Second), CoTags: []string{"fresh"}}}
			rep2, err2 := RunEpilog(cfg, known, t0, t0.Add(125*time.Second), co)
			solo := known
			solo.JobID = "33"
			rep3, err3 := RunEpilog(cfg, solo, t0, t0.Add(90*time.Second), nil)
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			obs, _ := observation.ReadDir(cfg.ObservationDir)
			runs, _ := store.SoloRuns("known")
			_, ferr := store.Get("fresh")
			after, _ := os.ReadFile(filepath.Join(cfg.ProfileDir, "known.prof"))
			if !tc.keep {
				if len(obs) != 0 || len(runs) != 0 || !errors.Is(ferr, profile.ErrNotFound) || string(after) != string(before) ||
					rep1.ProfileWritten || rep2.Observation != nil || rep3.SoloRun {
					t.Errorf("kept something: %d observations, %d solo runs, new profile %v, stored profile changed %v",
						len(obs), len(runs), ferr, string(after) != string(before))
				}
				if !strings.Contains(strings.Join(rep1.Notes, ";"), "no profile, no observation") {
					t.Errorf("notes %q do not say why", rep1.Notes)
				}
				return
			}
			if !rep1.ProfileWritten || ferr != nil || rep2.Observation == nil || rep2.Observation.Speed != 0.8 || len(runs) != 1 {
				t.Errorf("completed run kept too little: %+v %+v %+v, %d solo runs, profile %v", rep1, rep2, rep3, len(runs), ferr)
			}
		})
	}
}

// class= in a job's comment sets that job's floor; it never changes the class of a
// stored profile, neither by a new sample nor by a solo run.
func TestCommentNeverChangesStoredClass(t *testing.T) {
	cfg := testConfig(t)
	cfg.Profiling.StaleAfter = time.Minute
	store, _ := profile.Open(cfg.ProfileDir)
	t0 := time.Unix(200_000, 0)
	if err := store.Put(&profile.Profile{Tag: "svc", Class: profile.ClassInfer, SoloRuntimeS: 100, CollectedAt: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	job := JobEnv{JobID: "41", Node: "n1", Tag: "svc", Class: profile.ClassHPC, GPUs: []int{0}, EndState: Completed}
	// Stale: the Prolog samples it again; the comment says hpc.
	if err := Prolog(cfg, job, true); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, cfg, "41", 2)
	rep, err := RunEpilog(cfg, job, t0, t0.Add(100*time.Second), nil)
	if err != nil || !rep.ProfileWritten {
		t.Fatalf("report %+v err %v", rep, err)
	}
	p, _ := store.Get("svc")
	if p.Class != profile.ClassInfer || rep.Observation == nil || rep.Observation.Class != profile.ClassInfer {
		t.Errorf("class after a class=hpc job: profile %s, observation %+v; want infer", p.Class, rep.Observation)
	}
}

// One short run (a `sleep 5` under someone's tag) can neither reset the solo
// reference nor turn the next honest co-run into a bogus observation.
func TestShortRunCannotResetSoloReference(t *testing.T) {
	cfg := testConfig(t)
	store, _ := profile.Open(cfg.ProfileDir)
	t0 := time.Unix(300_000, 0)
	if err := store.Put(&profile.Profile{Tag: "sim", Class: profile.ClassHPC, SoloRuntimeS: 3600, CollectedAt: t0}); err != nil {
		t.Fatal(err)
	}
	short := JobEnv{JobID: "51", Node: "n1", Tag: "sim", EndState: Completed, UID: "666"}
	rep, err := RunEpilog(cfg, short, t0, t0.Add(5*time.Second), nil)
	if err != nil || rep.SoloRun || rep.ProfileWritten || rep.Observation != nil {
		t.Fatalf("short run: report %+v err %v", rep, err)
	}
	if !strings.Contains(strings.Join(rep.Notes, ";"), "sane bounds") || !strings.Contains(strings.Join(rep.Notes, ";"), "shorter than") {
		t.Errorf("notes %q", rep.Notes)
	}
	// Even many runs of one user: they count as that one user.
	for i := 0; i < 5; i++ {
		j := short
		j.JobID = fmt.Sprint(60 + i)
		if _, err := RunEpilog(cfg, j, t0.Add(time.Duration(i)*time.Hour), t0.Add(time.Duration(i)*time.Hour+61*time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := store.Get("sim"); p.SoloRuntimeS != 3600 {
		t.Fatalf("one user's runs set the solo reference to %v", p.SoloRuntimeS)
	}
	honest := JobEnv{JobID: "70", Node: "n1", Tag: "sim", EndState: Completed, UID: "1000"}
	co := []CoRunInterval{{Start: t0, End: t0.Add(2 * time.Hour), CoTags: []string{"x"}}}
	rep, err = RunEpilog(cfg, honest, t0, t0.Add(4000*time.Second), co)
	if err != nil || rep.Observation == nil || math.Abs(rep.Observation.Speed-0.9) > 1e-9 {
		t.Errorf("honest co-run: report %+v err %v", rep, err)
	}
}

// Speeds outside the sane bounds are refused, not recorded.
func TestEpilogRefusesInsaneSpeeds(t *testing.T) {
	for _, tc := range []struct {
		secs float64
		keep bool
	}{{50, false}, {66, false}, {67, true}, {1999, true}, {2000, false}} {
		cfg := testConfig(t)
		store, _ := profile.Open(cfg.ProfileDir)
		t0 := time.Unix(400_000, 0)
		store.Put(&profile.Profile{Tag: "k", Class: profile.ClassHPC, SoloRuntimeS: 100, CollectedAt: t0})
		co := []CoRunInterval{{Start: t0, End: t0.Add(time.Hour), CoTags: []string{"x"}}}
		env := JobEnv{JobID: "81", Node: "n1", Tag: "k", EndState: Completed}
		rep, err := RunEpilog(cfg, env, t0, t0.Add(time.Duration(tc.secs*float64(time.Second))), co)
		if err != nil || (rep.Observation != nil) != tc.keep {
			t.Errorf("run of %vs against 100 s: report %+v err %v, want kept %v", tc.secs, rep, err, tc.keep)
		}
	}
}

func TestStaleProfileIsRefreshed(t *testing.T) {
	cfg := testConfig(t)
	store, _ := profile.Open(cfg.ProfileDir)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := store.Put(&profile.Profile{Tag: "gemm", Class: profile.ClassHPC, SoloRuntimeS: 80, CollectedAt: old}); err != nil {
		t.Fatal(err)
	}
	job := JobEnv{JobID: "7", Node: "n2", Tag: "gemm", GPUs: []int{0, 1}, EndState: Completed}
	l := launcher{now: func() time.Time { return old.Add(30 * time.Minute) }}
	if started, err := l.prolog(cfg, job, true); err != nil || started {
		t.Fatalf("fresh: started %v err %v", started, err)
	}
	if started, err := l.prolog(cfg, job, false); err != nil || started {
		t.Fatalf("not alone: started %v err %v", started, err)
	}
	l.now = func() time.Time { return old.Add(2 * time.Hour) }
	if started, err := l.prolog(cfg, job, true); err != nil || !started {
		t.Fatalf("stale: started %v err %v", started, err)
	}
	waitRounds(t, cfg, "7", 4)
	rep, err := RunEpilog(cfg, job, old, old.Add(100*time.Second), nil)
	if err != nil || !rep.ProfileWritten {
		t.Fatalf("report %+v err %v", rep, err)
	}
	p, err := store.Get("gemm")
	if err != nil {
		t.Fatal(err)
	}
	// Class kept from the old profile; two GPUs pooled: memory max is GPU1's
	// 8192+1024+512*3; one solo run does not move the old 80 s reference, and the
	// solo observation compares with it.
	if p.Class != profile.ClassHPC || p.MemUsedMiB != 10752 || p.SoloRuntimeS != 80 || !p.CollectedAt.Equal(old.Add(100*time.Second)) {
		t.Errorf("refreshed profile %+v", p)
	}
	if rep.Observation == nil || rep.Observation.Speed != 0.8 || len(rep.Observation.CoTags) != 0 {
		t.Errorf("solo observation %+v", rep.Observation)
	}
}

// TestSamplerWithoutNVML: the real backend on this GPU-less machine. The sampler
// process fails cleanly, and the Epilog says why without failing anything.
func TestSamplerWithoutNVML(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has a GPU")
	}
	cfg := testConfig(t)
	cfg.Profiling.Backend = "nvml"
	job := JobEnv{JobID: "9", Node: "n1", Tag: "x", Class: profile.ClassTrain, GPUs: []int{0}}
	if err := Prolog(cfg, job, true); err != nil {
		t.Fatal(err)
	}
	dir, _ := jobDir(cfg, "9")
	// Wait (bounded) for the sampler to give up.
	pid := samplerPID(t, cfg, "9")
	if !waitGone(pid, dir, 20*time.Second) {
		t.Fatal("sampler without NVML did not exit")
	}
	rep, err := RunEpilog(cfg, job, time.Unix(1000, 0), time.Unix(1100, 0), nil)
	if err == nil || !strings.Contains(err.Error(), "NVML not available") {
		t.Fatalf("epilog error %v, want one saying NVML is not available", err)
	}
	if rep.ProfileWritten {
		t.Error("profile written without samples")
	}
}

func TestPrologSkips(t *testing.T) {
	base := JobEnv{JobID: "5", Tag: "a", Class: profile.ClassTrain, GPUs: []int{0}}
	cases := []struct {
		name    string
		mod     func(*config.Config, *JobEnv)
		alone   bool
		wantErr bool
	}{
		{"disabled", func(c *config.Config, _ *JobEnv) { c.Profiling.Enabled = false }, true, false},
		{"untagged", func(_ *config.Config, e *JobEnv) { e.Tag = "" }, true, false},
		{"no gpus", func(_ *config.Config, e *JobEnv) { e.GPUs = nil }, true, false},
		{"shared gpu", func(*config.Config, *JobEnv) {}, false, false},
		{"bad tag", func(_ *config.Config, e *JobEnv) { e.Tag = "../x" }, true, true},
		{"bad job id", func(_ *config.Config, e *JobEnv) { e.JobID = "../../etc" }, true, true},
		{"bad backend", func(c *config.Config, _ *JobEnv) { c.Profiling.Backend = "cuda" }, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			env := base
			tc.mod(&cfg, &env)
			started, err := launcher{now: time.Now}.prolog(cfg, env, tc.alone)
			if started || (err != nil) != tc.wantErr {
				t.Fatalf("started %v err %v", started, err)
			}
			if _, err := os.Stat(RunDir(cfg)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("run folder created: %v", err)
			}
		})
	}
}

func TestEpilogDiscardsSharedProfile(t *testing.T) {
	cfg := testConfig(t)
	job := JobEnv{JobID: "11", Node: "n1", Tag: "infer-z", Class: profile.ClassInfer, GPUs: []int{0}, EndState: Completed}
	if err := Prolog(cfg, job, true); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, cfg, "11", 2)
	t0 := time.Unix(10_000, 0)
	co := []CoRunInterval{{Start: t0.Add(50 * time.Second), End: t0.Add(100 * time.Second), CoTags: []string{"big"}}}
	rep, err := RunEpilog(cfg, job, t0, t0.Add(100*time.Second), co)
	if err != nil || rep.ProfileWritten || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "discarded") {
		t.Fatalf("report %+v err %v", rep, err)
	}
	store, _ := profile.Open(cfg.ProfileDir)
	if _, err := store.Get("infer-z"); !errors.Is(err, profile.ErrNotFound) {
		t.Errorf("profile written: %v", err)
	}
}

func TestCoverage(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name string
		runs []CoRunInterval
		key  string
		frac float64
	}{
		{"alone", nil, "", 1},
		{"one co-runner all along", []CoRunInterval{{at(-10), at(200), []string{"b"}}}, "b", 1},
		{"per co-runner intervals overlap", []CoRunInterval{
			{at(0), at(100), []string{"b"}}, {at(10), at(100), []string{"a"}},
		}, "a,b", 0.9},
		{"late joiner", []CoRunInterval{{at(70), at(100), []string{"c"}}}, "", 0.7},
		{"duplicates", []CoRunInterval{{at(0), at(100), []string{"b", "b"}}}, "b", 1},
		{"untagged co-runner is kept", []CoRunInterval{{at(0), at(100), []string{"b", ""}}}, untaggedCoRunner + ",b", 1},
		{"outside the run", []CoRunInterval{{at(200), at(300), []string{"b"}}}, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := coverage(at(0), at(100), tc.runs)
			if got[0].key != tc.key || math.Abs(got[0].frac-tc.frac) > 1e-9 {
				t.Errorf("dominant %q %.3f, want %q %.3f (all %+v)", got[0].key, got[0].frac, tc.key, tc.frac, got)
			}
			total := 0.0
			for _, c := range got {
				total += c.frac
			}
			if math.Abs(total-1) > 1e-9 {
				t.Errorf("fractions add up to %v", total)
			}
		})
	}
}

func TestReadThroughput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(" 123.5\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("1", 100)), 0o644)
	for _, tc := range []struct {
		path    string
		want    float64
		wantErr bool
	}{
		{"", 0, false},
		{good, 123.5, false},
		{filepath.Join(dir, "missing"), 0, false},
		{link, 0, true},
		{fifo, 0, true}, // and it must not block
		{big, 0, true},
	} {
		got, err := ReadThroughputFile(tc.path)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ReadThroughputFile(%s) = %v, %v", filepath.Base(tc.path), got, err)
		}
	}
}

func FuzzParseThroughput(f *testing.F) {
	for _, s := range []string{"1", "12.5\n", "1e3", "-1", "NaN", "inf", "0x10", "", "1 2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseThroughput(s)
		if err != nil {
			return
		}
		if !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("ParseThroughput(%q) = %v", s, v)
		}
	})
}

// TestRunSamplerStopsAtLimit runs the sampler in-process to its round limit and
// checks the file it leaves.
func TestRunSamplerStopsAtLimit(t *testing.T) {
	dir := t.TempDir()
	o := SamplerOptions{Dir: dir, Backend: "mock", Interval: 10 * time.Millisecond, GPUs: []int{2, 5}, MaxRounds: 4, MaxLife: time.Minute}
	if err := RunSampler(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, samplesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum nvml.Summary
	if err := nvml.ReadSamples(bufio.NewReader(f), &sum); err != nil {
		t.Fatal(err)
	}
	var p profile.Profile
	sum.Fill(&p)
	// GPU 2 reads mockSM[(k+2)%8] = 65,80,95,80 and GPU 5 reads 80,65,50,35.
	if p.Samples != 4 || p.SMUtil.Max != 95 || p.SMUtil.Mean != (320.0+230)/8 {
		t.Errorf("profile %+v", p)
	}
}
