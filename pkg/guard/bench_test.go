// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coscheml/coscheml/pkg/profile"
)

// BenchmarkGuardRound measures one guard round on a node with 8 GPUs and 16
// co-located jobs (two per GPU, two processes each) on go-nvml's mocks, through
// the timeout wrapper and the cgroup mapper reading a /proc-like tree: the
// guard's own cost. It reports CPU time per round (user + system), the share of
// one core that is at the default 5 s period, and the heap in use after the run.
// Targets: under 1% of one core and under 50 MiB.
func BenchmarkGuardRound(b *testing.B) {
	const gpus, perGPU, procsPerJob = 8, 2, 2
	fakes := make([]*fakeGPU, gpus)
	pids := map[uint32]string{}
	var jobs []Job
	for g := range gpus {
		f := &fakeGPU{memUsed: 60 << 30, memTotal: 141 << 30, util: 97, sm: map[uint32]uint32{}}
		for k := range perGPU {
			id := fmt.Sprint(1000 + g*perGPU + k)
			jobs = append(jobs, job(id, profile.ClassTrain, "user"+id, time.Duration(k)*time.Hour, 90, 30000, g))
			for p := range procsPerJob {
				pid := uint32(10000 + 100*g + 10*k + p)
				pids[pid] = id
				f.procs = append(f.procs, gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: 10 << 30})
				f.sm[pid] = 22
			}
		}
		fakes[g] = f
	}
	root := procRoot(b, pids)
	cfg := Default()
	g, err := New(cfg, NewMonitor(initBackend(b, fakeNode(fakes)), CgroupMapper{Root: root}, nil), &staticJobs{jobs: jobs}, &recordingActuator{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	b.ReportAllocs()
	runtime.GC()
	cpu0 := processCPU()
	b.ResetTimer()
	for b.Loop() {
		res, err := g.Round(now)
		if err != nil || res.GPUs != gpus || res.Unhealthy != 0 {
			b.Fatalf("round: %+v %v", res, err)
		}
		now = now.Add(cfg.Period)
	}
	b.StopTimer()
	cpuPerRound := float64(processCPU()-cpu0) / float64(b.N)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(cpuPerRound, "cpu-ns/round")
	b.ReportMetric(100*cpuPerRound/float64(cfg.Period.Nanoseconds()), "%core@5s")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}
