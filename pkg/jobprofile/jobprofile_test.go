package jobprofile

import (
	"bufio"
	"errors"
	"math"
	"os"
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
		os.Exit(SamplerMain(os.Args[2:]))
	}
	os.Exit(m.Run())
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
	job := JobEnv{JobID: "101", Node: "n1", Tag: "stream-a", Class: profile.ClassHPC, GPUs: []int{0}}

	// 1. No profile yet, job alone: the Prolog starts a sampler.
	if err := Prolog(cfg, job, true); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, cfg, "101", 6)
	pid := samplerPID(t, cfg, "101")
	rep, err := RunEpilog(cfg, job, t0, t0.Add(100*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first solo run is its own solo reference: a solo observation at speed 1.
	if !rep.Sampled || !rep.ProfileWritten || rep.Observation == nil || rep.Observation.Speed != 1 ||
		len(rep.Observation.CoTags) != 0 || rep.Observation.Source != "epilog solo reference" {
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
	// Memory used: 8192 + 512*(n%4) MiB, so the max over >= 4 reads is 9728.
	if p.MemUsedMiB != 9728 || p.PowerW.Max != 190 || p.Class != profile.ClassHPC || p.SoloRuntimeS != 100 {
		t.Errorf("profile %+v", p)
	}
	if !strings.Contains(p.Source, "mock") || p.GPUModel != "NVIDIA H200 141GB HBM3e" || p.CollectedOn != "n1" || p.Partial {
		t.Errorf("provenance: source %q model %q on %q partial %v (%s)", p.Source, p.GPUModel, p.CollectedOn, p.Partial, p.PartialNote)
	}

	// 2. Profile fresh: no sampler; the job shares its GPU with bert-b all along
	// and takes 125 s instead of 100: speed 0.8.
	job2 := job
	job2.JobID = "102"
	if started, err := (launcher{now: func() time.Time { return t0.Add(200 * time.Second) }}).prolog(cfg, job2, true); err != nil || started {
		t.Fatalf("fresh profile: started=%v err=%v", started, err)
	}
	co := []CoRunInterval{{Start: t0, End: t0.Add(125 * time.Second), CoTags: []string{"bert-b"}}}
	rep, err = RunEpilog(cfg, job2, t0, t0.Add(125*time.Second), co)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sampled || rep.ProfileWritten || rep.Observation == nil {
		t.Fatalf("report %+v", rep)
	}
	obs, err := observation.ReadFile(filepath.Join(cfg.ObservationDir, "n1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 2 || obs[1].Tag != "stream-a" || strings.Join(obs[1].CoTags, ",") != "bert-b" ||
		math.Abs(obs[1].Speed-0.8) > 1e-9 || obs[1].JobID != "102" || obs[1].Class != profile.ClassHPC {
		t.Fatalf("observations %+v", obs)
	}

	// 3. The job reports throughput: 450 against a solo 600 is speed 0.75 whatever
	// the run time. Needs a solo throughput: a solo run with a report sets it.
	tp := filepath.Join(t.TempDir(), "tp")
	os.WriteFile(tp, []byte("600\n"), 0o644)
	job3 := job
	job3.JobID, job3.ThroughputFile = "103", tp
	if _, err := RunEpilog(cfg, job3, t0, t0.Add(100*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if p, _ := store.Get("stream-a"); p.SoloThroughput != 600 {
		t.Fatalf("solo throughput %v, want 600", p.SoloThroughput)
	}
	os.WriteFile(tp, []byte("450"), 0o644)
	job3.JobID = "104"
	co = []CoRunInterval{{Start: t0, End: t0.Add(time.Hour), CoTags: []string{"lstm-c", "bert-b"}}}
	rep, err = RunEpilog(cfg, job3, t0, t0.Add(300*time.Second), co)
	if err != nil || rep.Observation == nil {
		t.Fatalf("report %+v err %v", rep, err)
	}
	if math.Abs(rep.Observation.Speed-0.75) > 1e-9 || strings.Join(rep.Observation.CoTags, ",") != "bert-b,lstm-c" {
		t.Errorf("throughput observation %+v", rep.Observation)
	}

	// 4. Co-runners changed half way: no set covers 80%: no observation.
	job4 := job
	job4.JobID = "105"
	co = []CoRunInterval{
		{Start: t0, End: t0.Add(50 * time.Second), CoTags: []string{"bert-b"}},
		{Start: t0.Add(50 * time.Second), End: t0.Add(100 * time.Second), CoTags: []string{"lstm-c"}},
	}
	rep, err = RunEpilog(cfg, job4, t0, t0.Add(100*time.Second), co)
	if err != nil || rep.Observation != nil || len(rep.Notes) == 0 {
		t.Errorf("changing co-runners: report %+v err %v", rep, err)
	}

	// 4b. An untagged job shared the GPU the whole run: its interference is unknown,
	// so the run is not recorded as solo, nor observed.
	job4b := job
	job4b.JobID = "105b"
	co = []CoRunInterval{{Start: t0, End: t0.Add(100 * time.Second), CoTags: []string{""}}}
	rep, err = RunEpilog(cfg, job4b, t0, t0.Add(100*time.Second), co)
	if err != nil || rep.Observation != nil || !strings.Contains(strings.Join(rep.Notes, ";"), "untagged") {
		t.Errorf("untagged co-runner: report %+v err %v", rep, err)
	}

	// 5. A failed job records nothing.
	job5 := job
	job5.JobID, job5.ExitCode = "106", 1
	rep, err = RunEpilog(cfg, job5, t0, t0.Add(100*time.Second), nil)
	if err != nil || rep.Observation != nil || rep.ProfileWritten {
		t.Errorf("failed job: report %+v err %v", rep, err)
	}

	obs, err = observation.ReadFile(filepath.Join(cfg.ObservationDir, "n1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// 101 (solo reference), 102 (shared), 103 (solo: run time 100 against 100),
	// 104 (shared, by throughput).
	if len(obs) != 4 || obs[2].JobID != "103" || len(obs[2].CoTags) != 0 || obs[2].Speed != 1 || obs[2].Source != "epilog run time" {
		t.Errorf("observations on disk: %+v", obs)
	}
}

func TestStaleProfileIsRefreshed(t *testing.T) {
	cfg := testConfig(t)
	store, _ := profile.Open(cfg.ProfileDir)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := store.Put(&profile.Profile{Tag: "gemm", Class: profile.ClassHPC, SoloRuntimeS: 80, CollectedAt: old}); err != nil {
		t.Fatal(err)
	}
	job := JobEnv{JobID: "7", Node: "n2", Tag: "gemm", GPUs: []int{0, 1}}
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
	// 8192+1024+512*3; the solo observation compares with the old 80 s.
	if p.Class != profile.ClassHPC || p.MemUsedMiB != 10752 || p.SoloRuntimeS != 100 || !p.CollectedAt.Equal(old.Add(100*time.Second)) {
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
	job := JobEnv{JobID: "11", Node: "n1", Tag: "infer-z", Class: profile.ClassInfer, GPUs: []int{0}}
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

func TestSamplerMainUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--dir", "relative"},
		{"--dir", "/tmp", "--interval", "1ms"},
		{"--dir", "/tmp", "--gpus", "x"},
		{"--dir", "/tmp", "extra"},
	} {
		var out strings.Builder
		if code := samplerMain(args, &out); code != 2 {
			t.Errorf("samplerMain(%q) = %d, want 2", args, code)
		}
	}
}

// TestSamplerMainStopsAtLimit runs the sampler body in-process to its round limit
// and checks the file it leaves.
func TestSamplerMainStopsAtLimit(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	code := samplerMain([]string{"--dir", dir, "--backend", "mock", "--interval", "10ms", "--gpus", "2,5", "--max-rounds", "4"}, &out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
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
