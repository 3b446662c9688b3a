// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
)

func initBackend(t testing.TB, b nvml.Backend) nvml.Backend {
	t.Helper()
	b = nvml.WithTimeout(b, 50*time.Millisecond)
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMonitorMapsProcessesToJobs(t *testing.T) {
	g0 := &fakeGPU{memUsed: 30 << 30, memTotal: 140 << 30, util: 95,
		procs: []gonvml.ProcessInfo{{Pid: 101, UsedGpuMemory: 10 << 30}, {Pid: 102, UsedGpuMemory: 2 << 30},
			{Pid: 201, UsedGpuMemory: 15 << 30}, {Pid: 301, UsedGpuMemory: 3 << 30}, {Pid: 401, UsedGpuMemory: 1 << 30}},
		sm: map[uint32]uint32{101: 30, 102: 10, 201: 50, 301: 5, 401: 1}}
	g1 := &fakeGPU{memUsed: 1 << 30, memTotal: 140 << 30}
	// 101, 102: job 11; 201: job 22; 301: outside Slurm; 401: job 33, resident elsewhere.
	root := procRoot(t, map[uint32]string{101: "11", 102: "11", 201: "22", 301: "", 401: "33"})
	var log logLines
	m := NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0, g1})), CgroupMapper{Root: root}, log.logf)
	jobs := []Job{
		job("11", profile.ClassTrain, "alice", 0, 80, 12000, 0),
		job("22", profile.ClassTrain, "bob", time.Minute, 80, 12000, 0),
		job("33", profile.ClassTrain, "carol", 0, 80, 12000, 1),
	}
	byGPU := CoLocated(jobs)
	if len(byGPU) != 1 || len(byGPU[0]) != 2 {
		t.Fatalf("co-located %v, want gpu 0 with two jobs", byGPU)
	}
	rs := m.Read(t0, byGPU)
	if len(rs) != 1 || !rs[0].Healthy {
		t.Fatalf("readings %+v", rs)
	}
	r := rs[0]
	if got := r.Jobs["11"]; got.MemBytes != 12<<30 || got.SMUtil != 40 || got.Procs != 2 {
		t.Errorf("job 11 %+v, want 12 GiB, 40%% SM, 2 procs", got)
	}
	if got := r.Jobs["22"]; got.MemBytes != 15<<30 || got.SMUtil != 50 || got.Procs != 1 {
		t.Errorf("job 22 %+v, want 15 GiB, 50%% SM, 1 proc", got)
	}
	if len(r.Unknown) != 2 || r.Unknown[0] != 301 || r.Unknown[1] != 401 {
		t.Errorf("unknown %v, want [301 401]", r.Unknown)
	}
	if !log.has("unknown process: pid 301") || !log.has("pid 401 is in job 33, which is not resident on gpu 0") {
		t.Errorf("log lines %q lack the unknown processes", log.lines)
	}
	// The GPU a job has to itself is never read.
	if g1.reads != 0 {
		t.Errorf("gpu 1 (one job) read %d times, want 0", g1.reads)
	}
}

func TestMonitorHungCallMarksUnhealthyAndKeepsGoing(t *testing.T) {
	hang := make(chan struct{})
	g0 := &fakeGPU{memTotal: 100, hang: hang}
	g1 := &fakeGPU{memUsed: 10, memTotal: 100, util: 20}
	var log logLines
	m := NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0, g1})), CgroupMapper{Root: t.TempDir()}, log.logf)
	jobs := []Job{job("1", profile.ClassTrain, "a", 0, 50, 1, 0, 1), job("2", profile.ClassTrain, "b", 0, 50, 1, 0, 1)}
	start := time.Now()
	rs := m.Read(t0, CoLocated(jobs))
	if time.Since(start) > 2*time.Second {
		t.Fatalf("a hung GPU held the round for %v", time.Since(start))
	}
	if rs[0].Healthy || !rs[1].Healthy {
		t.Fatalf("healthy gpu0=%v gpu1=%v, want false, true", rs[0].Healthy, rs[1].Healthy)
	}
	if !log.has("gpu 0 skipped this round") || !log.has("timed out") {
		t.Errorf("log %q lacks the timeout line", log.lines)
	}
	// Next round: still hung, still bounded, no second call into the driver.
	rs = m.Read(t0.Add(5*time.Second), CoLocated(jobs))
	if rs[0].Healthy {
		t.Error("gpu 0 healthy while its call still hangs")
	}
	g0.mu.Lock()
	reads := g0.reads
	g0.mu.Unlock()
	if reads != 1 {
		t.Errorf("%d memory reads reached the hung driver, want 1", reads)
	}
	g0.set(func(f *fakeGPU) { f.hang = nil })
	close(hang)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs = m.Read(t0.Add(10*time.Second), CoLocated(jobs))
		if rs[0].Healthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpu 0 never recovered: %s", rs[0].Problem)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMonitorProblems(t *testing.T) {
	jobs := []Job{job("1", profile.ClassTrain, "a", 0, 50, 1, 0), job("2", profile.ClassTrain, "b", 0, 50, 1, 0)}
	cases := []struct {
		name    string
		backend func() nvml.Backend
		want    error
	}{
		{"no NVML (not initialized)", func() nvml.Backend { return fakeNode([]*fakeGPU{{}}) }, nvml.ErrNotInitialized},
		{"GPU lost", func() nvml.Backend {
			return initBackend(t, fakeNode([]*fakeGPU{{lost: true}}))
		}, nvml.ErrGPULost},
		{"GPU vanished", func() nvml.Backend {
			return initBackend(t, fakeNode([]*fakeGPU{}))
		}, nvml.ErrGPULost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log logLines
			m := NewMonitor(c.backend(), CgroupMapper{Root: t.TempDir()}, log.logf)
			rs := m.Read(t0, CoLocated(jobs))
			if len(rs) != 1 || rs[0].Healthy {
				t.Fatalf("readings %+v, want one unhealthy", rs)
			}
			if !log.has("gpu 0 skipped this round") {
				t.Errorf("log %q lacks the skip line", log.lines)
			}
			// The problem is text (it goes to the log): it names the cause.
			if !strings.Contains(rs[0].Problem, c.want.Error()) {
				t.Errorf("problem %q does not say %q", rs[0].Problem, c.want)
			}
		})
	}
}

func TestMonitorWithoutProcessSM(t *testing.T) {
	g := &fakeGPU{memUsed: 139 << 30, memTotal: 140 << 30, noProcSM: true,
		procs: []gonvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 100 << 30}, {Pid: 2, UsedGpuMemory: 39 << 30}}}
	var log logLines
	m := NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g})), CgroupMapper{Root: procRoot(t, map[uint32]string{1: "1", 2: "2"})}, log.logf)
	jobs := []Job{job("1", profile.ClassTrain, "a", 0, 50, 20000, 0), job("2", profile.ClassTrain, "b", 0, 50, 40000, 0)}
	rs := m.Read(t0, CoLocated(jobs))
	if !rs[0].Healthy || rs[0].HaveProcSM {
		t.Fatalf("healthy %v procSM %v, want true false", rs[0].Healthy, rs[0].HaveProcSM)
	}
	if !log.has("no per-process SM utilization") {
		t.Errorf("log %q", log.lines)
	}
	// Memory is still judged without per-process SM.
	st := NewState(Default())
	fs := st.Observe(t0, rs, CoLocated(jobs))
	if len(fs) != 1 || fs[0].Kind != MemoryOverBudget || fs[0].Job.ID != "1" {
		t.Errorf("findings %+v, want job 1 over its memory budget", fs)
	}
}
