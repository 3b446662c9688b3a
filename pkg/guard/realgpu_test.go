// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
)

// TestRealNVMLShared runs the guard against real processes sharing a real GPU:
// it profiles a training job, an inference job and a second training job alone,
// then runs them in pairs while the guard reads NVML every second, and keeps
// what NVML reported per process, what the guard estimated and decided, and what
// the jobs measured themselves (their step rate, their request latency). The
// second pair's training job grows until the GPU is nearly full: the guard must
// requeue it and leave its co-runner alone.
//
// It needs a GPU and PyTorch: COSCHEML_REAL_NVML=1; COSCHEML_REAL_NVML_OUT=DIR
// keeps the record (real-gpu-guard.json); COSCHEML_REAL_NVML_PYTHON names the
// Python (default python3). The record of one such run is kept in
// testdata/realgpu; no other test depends on a GPU.
func TestRealNVMLShared(t *testing.T) {
	raw := realBackend(t, "set COSCHEML_REAL_NVML=1 on a GPU node with PyTorch")
	out := os.Getenv("COSCHEML_REAL_NVML_OUT")
	if out == "" {
		out = t.TempDir()
	}
	b := &recordingBackend{Backend: raw}
	d, err := raw.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &realRecord{Started: time.Now().UTC()}
	rec.Device.Name, _ = d.Name()
	if m, err := d.MemoryInfo(); err == nil {
		rec.Device.MemTotalMiB = float64(m.Total) / float64(mib)
	}
	defer func() {
		data, _ := json.MarshalIndent(rec, "", " ")
		if err := os.WriteFile(filepath.Join(out, "real-gpu-guard.json"), data, 0o644); err != nil {
			t.Error(err)
		}
	}()
	lister := d.(nvml.ProcessLister)
	r := &realRun{t: t, dev: d, lister: lister, out: out}

	trainA := []string{"--mode", "train", "--mem-gib", "4", "--kernels", "16", "--host-ms", "15"}
	infer := []string{"--mode", "infer", "--mem-gib", "2", "--kernels", "4", "--interval-ms", "25"}
	trainB := []string{"--mode", "train", "--mem-gib", "6", "--kernels", "12", "--host-ms", "10"}
	solo := map[string]realSolo{}
	for _, w := range []struct {
		name string
		args []string
	}{{"train-a", trainA}, {"infer-i", infer}, {"train-b", trainB}} {
		p := r.start(w.name+"-solo", w.args...)
		solo[w.name] = r.measureSolo(p, 10*time.Second)
		p.stop()
		rec.Solo = append(rec.Solo, solo[w.name])
	}

	// Pair 1: training next to inference. Recorded, not asserted: how far the
	// guard's estimates are from what the jobs measured is the point.
	a, i := r.start("train-a-with-infer", trainA...), r.start("infer-i-with-train", infer...)
	ph := r.share("train+infer", 25*time.Second, b, []realJobSpec{
		{p: a, id: "101", class: profile.ClassTrain, user: "alice", solo: solo["train-a"]},
		{p: i, id: "102", class: profile.ClassInfer, user: "bob", solo: solo["infer-i"]},
	})
	rec.Phases = append(rec.Phases, ph)
	a.stop()
	i.stop()
	for _, act := range ph.Actions {
		if act.Kind == Requeue || act.Kind == Cancel {
			if strings.Contains(act.Reason, "over its budget") {
				t.Errorf("train+infer: memory action with no job over its budget: %+v", act)
			}
		}
	}

	// Pair 2: the later job grows until the GPU is nearly full.
	a = r.start("train-a-with-grower", trainA...)
	g := r.start("train-b-grower", append(slices.Clone(trainB), "--grow-at", "3")...)
	ph = r.share("train+grower", 25*time.Second, b, []realJobSpec{
		{p: a, id: "101", class: profile.ClassTrain, user: "alice", solo: solo["train-a"]},
		{p: g, id: "103", class: profile.ClassTrain, user: "bob", solo: solo["train-b"]},
	})
	rec.Phases = append(rec.Phases, ph)
	aliveA := a.progressing()
	a.stop()
	g.stop()
	var onGrower, onOther int
	for _, act := range ph.Actions {
		if act.Kind == Observe {
			continue
		}
		if act.JobID == "103" && act.Kind == Requeue && strings.Contains(act.Reason, "over its budget") {
			onGrower++
		} else {
			onOther++
		}
	}
	if onGrower != 1 || onOther != 0 {
		t.Errorf("train+grower: %d requeues of the grower, %d other actions; want 1 and 0: %+v", onGrower, onOther, ph.Actions)
	}
	if !aliveA {
		t.Error("train+grower: the co-runner did not survive the grower")
	}
}

// realRecord is what TestRealNVMLShared keeps.
type realRecord struct {
	Started time.Time
	Device  struct {
		Name        string
		MemTotalMiB float64
	}
	Solo   []realSolo
	Phases []realPhase
}

// realSolo is one job's solo profile as NVML and the job itself measured it.
type realSolo struct {
	Name       string
	OSPID      uint32
	NVMLPID    uint32 // the PID NVML lists for it (a different PID namespace shows here)
	SMUtil     float64
	SMSamples  int
	MemPeakMiB float64
	Rate       float64 // steps or requests per second
	LatencyMs  float64 // infer: mean request latency
}

type realPhase struct {
	Name    string
	Jobs    []realJobResult
	Rounds  []realRound
	Actions []Action
	Log     []string
}

type realJobResult struct {
	ID, Class, User string
	NVMLPID         uint32
	Rate, LatencyMs float64 // shared, while both ran
	// MeasuredSpeed is what the job measured: shared rate / solo rate, or for
	// infer solo latency / shared latency.
	MeasuredSpeed float64
	// GuardSpeed is the mean of the guard's estimates over the judged rounds.
	GuardSpeed  float64
	GuardRounds int
	Removed     bool    // the guard requeued or cancelled it (the test then stopped it)
	RateAfter   float64 // its rate after the co-runner was removed
}

type realRound struct {
	T            float64 // seconds since the pair started
	MemUsedMiB   float64
	DeviceSMUtil float64
	Procs        []nvml.ProcessMemory
	Samples      []nvml.ProcessSample
	Smoothed     map[string]float64
	Verdicts     map[string]string
	Findings     []string
	Actions      []string
}

type realRun struct {
	t      *testing.T
	dev    nvml.Device
	lister nvml.ProcessLister
	out    string
}

type realProc struct {
	r       *realRun
	name    string
	cmd     *exec.Cmd
	stats   string
	nvmlPID uint32
}

func (r *realRun) pids() map[uint32]bool {
	ps, err := r.lister.ComputeProcesses()
	if err != nil {
		r.t.Fatalf("compute processes: %v", err)
	}
	m := map[uint32]bool{}
	for _, p := range ps {
		m[p.PID] = true
	}
	return m
}

// start runs the workload and waits until it is on the GPU and NVML lists it.
func (r *realRun) start(name string, args ...string) *realProc {
	r.t.Helper()
	before := r.pids()
	py := os.Getenv("COSCHEML_REAL_NVML_PYTHON")
	if py == "" {
		py = "python3"
	}
	p := &realProc{r: r, name: name, stats: filepath.Join(r.out, name+".jsonl")}
	_ = os.Remove(p.stats)
	p.cmd = exec.Command(py, append([]string{filepath.Join("testdata", "realgpu", "workload.py"), "--stats", p.stats}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	if err := p.cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(p.lines("ready")) == 0 {
		if time.Now().After(deadline) || !p.alive() {
			p.stop()
			r.t.Fatalf("%s: not ready", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for p.nvmlPID == 0 {
		for pid := range r.pids() {
			if !before[pid] {
				p.nvmlPID = pid
			}
		}
		if p.nvmlPID == 0 {
			if time.Now().After(deadline) {
				p.stop()
				r.t.Fatalf("%s (pid %d) never appeared among NVML's compute processes", name, p.cmd.Process.Pid)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.t.Logf("%s: pid %d, NVML lists it as %d", name, p.cmd.Process.Pid, p.nvmlPID)
	return p
}

func (p *realProc) alive() bool {
	return p.cmd.ProcessState == nil && p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// progressing: the job wrote a stats line in the last few seconds.
func (p *realProc) progressing() bool {
	ls := p.lines("")
	return len(ls) > 0 && float64(time.Now().UnixNano())/1e9-ls[len(ls)-1].T < 3
}

// stop kills the workload and waits until NVML no longer lists it.
func (p *realProc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !p.r.pids()[p.nvmlPID] {
			return
		}
	}
}

type statLine struct {
	Event string   `json:"event"`
	T     float64  `json:"t"`
	Done  float64  `json:"done"`
	LatMs *float64 `json:"lat_ms"`
	N     float64  `json:"n"`
}

func (p *realProc) lines(event string) []statLine {
	f, err := os.Open(p.stats)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []statLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l statLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event == event {
			out = append(out, l)
		}
	}
	return out
}

// rate returns the job's steps (or requests) per second and mean latency
// between two wall-clock times, from its own stats lines.
func (p *realProc) rate(from, to time.Time) (rate, latMs float64) {
	var first, last *statLine
	var latSum, n float64
	ls := p.lines("")
	for k := range ls {
		l := &ls[k]
		if l.T < float64(from.UnixNano())/1e9 || l.T > float64(to.UnixNano())/1e9 {
			continue
		}
		if first == nil {
			first = l
		}
		last = l
		if l.LatMs != nil && l.N > 0 && l != first {
			latSum += *l.LatMs * l.N
			n += l.N
		}
	}
	if first == nil || last == first {
		return 0, 0
	}
	rate = (last.Done - first.Done) / (last.T - first.T)
	if n > 0 {
		latMs = latSum / n
	}
	return rate, latMs
}

func (r *realRun) measureSolo(p *realProc, d time.Duration) realSolo {
	s := realSolo{Name: p.name, OSPID: uint32(p.cmd.Process.Pid), NVMLPID: p.nvmlPID}
	time.Sleep(2 * time.Second) // past the first kernels
	from := time.Now()
	var since uint64
	var sum float64
	for end := from.Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		if ps, err := r.lister.ComputeProcesses(); err == nil {
			for _, q := range ps {
				if q.PID == p.nvmlPID {
					s.MemPeakMiB = max(s.MemPeakMiB, float64(q.UsedBytes)/float64(mib))
				}
			}
		}
		samples, err := r.dev.ProcessUtilization(since)
		if err != nil {
			r.t.Logf("%s: process utilization: %v", p.name, err)
			continue
		}
		for _, x := range samples {
			since = max(since, x.TimeStamp)
			if x.PID == p.nvmlPID {
				sum += float64(x.SMUtil)
				s.SMSamples++
			}
		}
	}
	if s.SMSamples > 0 {
		s.SMUtil = sum / float64(s.SMSamples)
	}
	s.Rate, s.LatencyMs = p.rate(from, time.Now())
	r.t.Logf("solo %s: SM %.1f%% (%d samples), peak %.0f MiB, %.2f/s, latency %.1f ms", p.name, s.SMUtil, s.SMSamples, s.MemPeakMiB, s.Rate, s.LatencyMs)
	if s.MemPeakMiB < 256 {
		r.t.Errorf("%s: NVML reported %.0f MiB for it, want at least 256", p.name, s.MemPeakMiB)
	}
	return s
}

type realJobSpec struct {
	p        *realProc
	id, user string
	class    profile.Class
	solo     realSolo
}

// share runs guard rounds every second for d over the running jobs, each mapped
// from its NVML PID through a cgroup file as Slurm's task/cgroup writes it. An
// action that removes a job is carried out by stopping the job, as Slurm would.
func (r *realRun) share(name string, d time.Duration, b *recordingBackend, specs []realJobSpec) realPhase {
	ph := realPhase{Name: name}
	pids := map[uint32]string{}
	var jobs []Job
	start := time.Now()
	for k, s := range specs {
		pids[s.p.nvmlPID] = s.id
		jobs = append(jobs, Job{ID: s.id, Tag: s.solo.Name, Class: s.class, User: s.user, Start: start.Add(time.Duration(k) * time.Minute), GPUs: []int{0},
			Profile: &profile.Profile{Tag: s.solo.Name, Class: s.class, SMUtil: profile.Stat{Mean: s.solo.SMUtil}, MemUsedMiB: s.solo.MemPeakMiB}})
	}
	src := &staticJobs{jobs: jobs}
	cfg := Default()
	cfg.Period, cfg.Window, cfg.SustainFor = time.Second, 3, 5*time.Second
	var logMu sync.Mutex
	logf := func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		ph.Log = append(ph.Log, fmt.Sprintf(f, a...))
	}
	act := &recordingActuator{}
	g, err := New(cfg, NewMonitor(b, CgroupMapper{Root: procRoot(r.t, pids)}, logf), src, act, logf)
	if err != nil {
		r.t.Fatal(err)
	}
	speeds := map[string][]float64{}
	removedAt := map[string]time.Time{}
	for end := start.Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		now := time.Now()
		res, err := g.Round(now)
		if err != nil {
			r.t.Fatalf("%s: round: %v", name, err)
		}
		rd := realRound{T: now.Sub(start).Seconds(), Procs: b.procs, Samples: b.samples,
			MemUsedMiB: float64(b.mem.Used) / float64(mib), DeviceSMUtil: float64(b.util.GPU),
			Smoothed: map[string]float64{}, Verdicts: map[string]string{}}
		if res.Unhealthy > 0 {
			r.t.Errorf("%s: GPU unhealthy in a round: %v", name, ph.Log)
		}
		current, _ := src.Jobs()
		for _, j := range current {
			sm, full := g.State().SmoothedSM(j.ID, 0)
			rd.Smoothed[j.ID] = sm
			gt := g.State().gpus[0]
			if !full || gt == nil {
				continue
			}
			in := SpeedInput{Class: j.Class, SoloSM: j.Profile.SMUtil.Mean, OwnSM: sm, DeviceSM: gt.sm}
			for _, c := range current {
				if c.ID != j.ID {
					co, _ := g.State().SmoothedSM(c.ID, 0)
					in.CoSM = append(in.CoSM, co)
				}
			}
			v := JudgeSpeed(cfg, in)
			rd.Verdicts[j.ID] = v.Why
			if v.Judged {
				speeds[j.ID] = append(speeds[j.ID], v.Speed)
			}
		}
		for _, f := range res.Findings {
			rd.Findings = append(rd.Findings, f.Reason)
		}
		for _, a := range res.Actions {
			rd.Actions = append(rd.Actions, fmt.Sprintf("%s %s: %s", a.Kind, a.JobID, a.Reason))
			ph.Actions = append(ph.Actions, a)
			if a.Kind != Requeue && a.Kind != Cancel {
				continue
			}
			for _, s := range specs {
				if s.id == a.JobID {
					s.p.stop()
					src.remove(s.id)
					removedAt[s.id] = time.Now()
				}
			}
		}
		ph.Rounds = append(ph.Rounds, rd)
	}
	end := time.Now()
	bothUntil := end
	for _, t := range removedAt {
		bothUntil = t
	}
	for _, s := range specs {
		jr := realJobResult{ID: s.id, Class: string(s.class), User: s.user, NVMLPID: s.p.nvmlPID}
		jr.Rate, jr.LatencyMs = s.p.rate(start.Add(3*time.Second), bothUntil)
		if s.class == profile.ClassInfer {
			if jr.LatencyMs > 0 {
				jr.MeasuredSpeed = s.solo.LatencyMs / jr.LatencyMs
			}
		} else if s.solo.Rate > 0 {
			jr.MeasuredSpeed = jr.Rate / s.solo.Rate
		}
		if _, ok := removedAt[s.id]; ok {
			jr.Removed = true
		} else if bothUntil.Before(end) {
			jr.RateAfter, _ = s.p.rate(bothUntil.Add(time.Second), end)
		}
		for _, v := range speeds[s.id] {
			jr.GuardSpeed += v
		}
		if n := len(speeds[s.id]); n > 0 {
			jr.GuardSpeed /= float64(n)
			jr.GuardRounds = n
		}
		r.t.Logf("%s: job %s (%s): measured speed %.2f (rate %.2f/s, latency %.1f ms), guard's estimate %.2f over %d rounds, removed %v, rate after %.2f/s",
			name, s.id, s.class, jr.MeasuredSpeed, jr.Rate, jr.LatencyMs, jr.GuardSpeed, jr.GuardRounds, jr.Removed, jr.RateAfter)
		ph.Jobs = append(ph.Jobs, jr)
	}
	for _, a := range ph.Actions {
		r.t.Logf("%s: %s %s: %s", name, a.Kind, a.JobID, a.Reason)
	}
	return ph
}

// recordingBackend keeps what the guard's monitor last read from NVML.
type recordingBackend struct {
	nvml.Backend
	procs   []nvml.ProcessMemory
	samples []nvml.ProcessSample
	mem     nvml.Memory
	util    nvml.Utilization
}

func (b *recordingBackend) Device(i int) (nvml.Device, error) {
	d, err := b.Backend.Device(i)
	if err != nil {
		return nil, err
	}
	return &recordingDevice{Device: d, b: b}, nil
}

type recordingDevice struct {
	nvml.Device
	b *recordingBackend
}

func (d *recordingDevice) MemoryInfo() (nvml.Memory, error) {
	m, err := d.Device.MemoryInfo()
	d.b.mem = m
	return m, err
}

func (d *recordingDevice) Utilization() (nvml.Utilization, error) {
	u, err := d.Device.Utilization()
	d.b.util = u
	return u, err
}

func (d *recordingDevice) ProcessUtilization(since uint64) ([]nvml.ProcessSample, error) {
	s, err := d.Device.ProcessUtilization(since)
	d.b.samples = s
	return s, err
}

func (d *recordingDevice) ComputeProcesses() ([]nvml.ProcessMemory, error) {
	p, err := d.Device.(nvml.ProcessLister).ComputeProcesses()
	d.b.procs = p
	return p, err
}
