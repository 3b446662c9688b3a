// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
)

const mib = uint64(1) << 20

// fakeGPU is what one mock GPU reports; tests change it between rounds.
type fakeGPU struct {
	mu       sync.Mutex
	memUsed  uint64 // bytes
	memTotal uint64
	util     uint32
	procs    []gonvml.ProcessInfo
	sm       map[uint32]uint32 // pid -> SM util
	noProcSM bool
	lost     bool
	hang     chan struct{} // non-nil: the memory read blocks until closed
	reads    int           // memory reads that reached the driver
}

func (f *fakeGPU) set(fn func(f *fakeGPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeNode builds a go-nvml mock DGX H200 whose GPUs report what gpus say.
func fakeNode(gpus []*fakeGPU) nvml.Backend {
	srv := dgxh200.New()
	srv.Devices = srv.Devices[:len(gpus)]
	for i, g := range gpus {
		d := srv.Devices[i].(*server.Device)
		d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			g.mu.Lock()
			g.reads++
			hang, lost := g.hang, g.lost
			m := gonvml.Memory{Used: g.memUsed, Total: g.memTotal}
			g.mu.Unlock()
			if hang != nil {
				<-hang
			}
			if lost {
				return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST
			}
			return m, gonvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return gonvml.Utilization{Gpu: g.util}, gonvml.SUCCESS
		}
		d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return append([]gonvml.ProcessInfo(nil), g.procs...), gonvml.SUCCESS
		}
		d.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.noProcSM {
				return nil, gonvml.ERROR_NOT_SUPPORTED
			}
			var out []gonvml.ProcessUtilizationSample
			for _, p := range g.procs {
				out = append(out, gonvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: since + 1, SmUtil: g.sm[p.Pid]})
			}
			return out, gonvml.SUCCESS
		}
	}
	return nvml.Wrap(srv, "mock")
}

// procRoot writes a /proc-like tree: pid -> cgroup v2 path of job id.
func procRoot(t testing.TB, pids map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, job := range pids {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%s/step_0/user/task_0\n", job)
		if job == "" {
			line = "0::/user.slice/user-1000.slice/session-3.scope\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type staticJobs struct {
	mu   sync.Mutex
	jobs []Job
	err  error
}

func (s *staticJobs) Jobs() ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Job(nil), s.jobs...), s.err
}

func (s *staticJobs) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.jobs[:0]
	for _, j := range s.jobs {
		if j.ID != id {
			out = append(out, j)
		}
	}
	s.jobs = out
}

type recordingActuator struct {
	calls []string
	fail  error
}

func (r *recordingActuator) do(kind, id, reason string) error {
	r.calls = append(r.calls, kind+" "+id)
	return r.fail
}
func (r *recordingActuator) Requeue(id, reason string) error { return r.do("requeue", id, reason) }
func (r *recordingActuator) Cancel(id, reason string) error  { return r.do("cancel", id, reason) }
func (r *recordingActuator) Suspend(id, reason string) error { return r.do("suspend", id, reason) }
func (r *recordingActuator) Resume(id, reason string) error  { return r.do("resume", id, reason) }

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

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// job returns a job with a profile of solo SM share soloSM and memory peak peakMiB.
func job(id string, cl profile.Class, user string, start time.Duration, soloSM, peakMiB float64, gpus ...int) Job {
	return Job{ID: id, Tag: "tag-" + id, Class: cl, User: user, Start: t0.Add(start), GPUs: gpus,
		Profile: &profile.Profile{Tag: "tag-" + id, Class: cl, SMUtil: profile.Stat{Mean: soloSM}, MemUsedMiB: peakMiB}}
}

var errFake = fmt.Errorf("scontrol failed")
