// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
)

// realBackend is the node's real NVML, bounded and initialized, shut down when
// the test ends; the test is skipped (with skipMsg) unless COSCHEML_REAL_NVML is set.
func realBackend(t *testing.T, skipMsg string) nvml.Backend {
	t.Helper()
	if os.Getenv("COSCHEML_REAL_NVML") == "" {
		t.Skip(skipMsg)
	}
	b := nvml.WithTimeout(nvml.NewReal(), nvml.DefaultCallTimeout)
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown() })
	return b
}

// TestRealNVML runs the monitor and whole guard rounds on the node's real driver.
// It needs a GPU: set COSCHEML_REAL_NVML=1, and COSCHEML_REAL_NVML_PID to the
// host PID of a process holding a CUDA context on GPU 0 to check that the process
// is listed with its memory (and is unknown to the guard: it is in no Slurm job).
func TestRealNVML(t *testing.T) {
	b := realBackend(t, "set COSCHEML_REAL_NVML=1 on a GPU node")
	n, err := b.DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("device count %d: %v", n, err)
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := d.(nvml.ProcessLister).ComputeProcesses()
	if err != nil {
		t.Fatalf("compute processes: %v", err)
	}
	t.Logf("gpu 0: %d compute processes: %+v", len(procs), procs)
	if _, err := d.ProcessUtilization(0); err != nil {
		t.Logf("process utilization: %v", err)
	}
	var want uint32
	if s := os.Getenv("COSCHEML_REAL_NVML_PID"); s != "" {
		p, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		want = uint32(p)
		found := false
		for _, p := range procs {
			if p.PID == want {
				found = true
				if !p.Known || p.UsedBytes < 256<<20 {
					t.Errorf("pid %d listed with %+v, want at least 256 MiB", want, p)
				}
			}
		}
		if !found {
			t.Errorf("pid %d not among the compute processes (a PID namespace?)", want)
		}
	}

	jobs := []Job{job("1", profile.ClassTrain, "a", 0, 80, 1000, 0), job("2", profile.ClassTrain, "b", time.Hour, 80, 1000, 0)}
	mon := NewMonitor(b, CgroupMapper{}, t.Logf)
	rs := mon.Read(time.Now(), CoLocated(jobs))
	if len(rs) != 1 || !rs[0].Healthy {
		t.Fatalf("reading %+v", rs)
	}
	t.Logf("reading: used %d MiB of %d, util %.0f%%, per-process SM %v, unknown %v",
		rs[0].MemUsed>>20, rs[0].MemTotal>>20, rs[0].DeviceSMUtil, rs[0].HaveProcSM, rs[0].Unknown)
	if want != 0 {
		found := false
		for _, p := range rs[0].Unknown {
			found = found || p == want
		}
		if !found {
			t.Errorf("pid %d (in no Slurm job) not reported unknown: %v", want, rs[0].Unknown)
		}
	}

	// The guard's cost on the real driver: one co-located GPU read per round.
	g, err := New(Default(), mon, &staticJobs{jobs: jobs}, &recordingActuator{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 200
	cpu0, wall0 := processCPU(), time.Now()
	now := time.Now()
	for range rounds {
		res, err := g.Round(now)
		if err != nil || res.Unhealthy != 0 {
			t.Fatalf("round: %+v %v", res, err)
		}
		now = now.Add(5 * time.Second)
	}
	cpu := (processCPU() - cpu0) / rounds
	t.Logf("real NVML, 1 co-located GPU: %v CPU and %v wall per round, %.4f%% of one core at 5 s",
		cpu, time.Since(wall0)/rounds, 100*cpu.Seconds()/5)
}
