// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
)

// GPUReading is one GPU's state in one round.
type GPUReading struct {
	GPU int
	// Healthy is false when a read failed (timed out, GPU lost, NVML error): the
	// round says nothing about the GPU's jobs then, and no rule judges them.
	Healthy bool
	Problem string // why not healthy
	// MemUsed and MemTotal are the device's memory in bytes.
	MemUsed, MemTotal uint64
	// DeviceSMUtil is utilization.gpu (%): the time any kernel ran.
	DeviceSMUtil float64
	// HaveProcSM: the driver reported per-process SM utilization this round.
	HaveProcSM bool
	Jobs       map[string]JobUsage // resident job id -> its processes' use
	// Unknown lists processes that map to no job resident on this GPU; their
	// memory counts towards the GPU's fullness but no rule attributes it to a job.
	Unknown []uint32
}

// JobUsage is one job's use of one GPU, summed over its processes.
type JobUsage struct {
	MemBytes uint64
	SMUtil   float64 // percent, summed over the job's processes
	Procs    int
}

// Monitor reads the GPUs that hold two or more coscheml jobs. It is not safe for
// concurrent use; the guard calls it once per round.
type Monitor struct {
	backend nvml.Backend
	mapper  ProcessMapper
	logf    func(format string, args ...any)

	devices map[int]nvml.Device
	since   map[int]uint64 // NVML timestamp of the newest process sample seen
	noted   map[string]time.Time
}

// NewMonitor returns a Monitor over an initialized backend (wrap it in
// nvml.WithTimeout so that no call can hang the guard). logf receives the lines
// an operator should see; each distinct line at most once per noteEvery.
func NewMonitor(b nvml.Backend, m ProcessMapper, logf func(string, ...any)) *Monitor {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Monitor{backend: b, mapper: m, logf: logf,
		devices: map[int]nvml.Device{}, since: map[int]uint64{}, noted: map[string]time.Time{}}
}

// noteEvery limits repeats of one log line: a stuck condition is logged, not
// logged every period.
const noteEvery = 10 * time.Minute

func (m *Monitor) note(now time.Time, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if last, ok := m.noted[line]; ok && now.Sub(last) < noteEvery {
		return
	}
	m.noted[line] = now
	if len(m.noted) > 4096 {
		for k, t := range m.noted {
			if now.Sub(t) >= noteEvery {
				delete(m.noted, k)
			}
		}
	}
	m.logf("%s", line)
}

// CoLocated returns, per GPU index, the jobs resident on it, keeping only GPUs
// with two or more: the guard does nothing on a GPU a job has to itself.
func CoLocated(jobs []Job) map[int][]Job {
	by := map[int][]Job{}
	for _, j := range jobs {
		for _, g := range j.GPUs {
			by[g] = append(by[g], j)
		}
	}
	for g, js := range by {
		if len(js) < 2 {
			delete(by, g)
		}
	}
	return by
}

// Read reads each GPU of gpus (index -> its resident jobs) once. A GPU whose
// reads fail comes back unhealthy with the reason; the others are unaffected.
func (m *Monitor) Read(now time.Time, gpus map[int][]Job) []GPUReading {
	idx := make([]int, 0, len(gpus))
	for g := range gpus {
		idx = append(idx, g)
	}
	slices.Sort(idx)
	out := make([]GPUReading, 0, len(idx))
	for _, g := range idx {
		r := m.readGPU(now, g, gpus[g])
		if !r.Healthy {
			m.note(now, "guard: gpu %d skipped this round: %s", g, r.Problem)
		}
		out = append(out, r)
	}
	// Forget devices no longer co-located, so a GPU that comes back is reopened.
	for g := range m.devices {
		if _, ok := gpus[g]; !ok {
			delete(m.devices, g)
			delete(m.since, g)
		}
	}
	return out
}

func (m *Monitor) readGPU(now time.Time, g int, resident []Job) GPUReading {
	r := GPUReading{GPU: g}
	fail := func(err error) GPUReading {
		r.Healthy, r.Problem = false, err.Error()
		// A lost or hung device is reopened next round rather than trusted.
		if errors.Is(err, nvml.ErrGPULost) || errors.Is(err, nvml.ErrTimeout) {
			delete(m.devices, g)
		}
		return r
	}
	d, ok := m.devices[g]
	if !ok {
		var err error
		if d, err = m.backend.Device(g); err != nil {
			return fail(fmt.Errorf("opening: %w", err))
		}
		m.devices[g] = d
	}
	mem, err := d.MemoryInfo()
	if err != nil {
		return fail(err)
	}
	util, err := d.Utilization()
	if err != nil {
		return fail(err)
	}
	pl, ok := d.(nvml.ProcessLister)
	if !ok {
		return fail(fmt.Errorf("gpu %d: backend cannot list processes: %w", g, nvml.ErrNotSupported))
	}
	procs, err := pl.ComputeProcesses()
	if err != nil {
		return fail(err)
	}
	r.MemUsed, r.MemTotal, r.DeviceSMUtil = mem.Used, mem.Total, float64(util.GPU)

	// Per-process SM utilization is optional: without it memory is still judged.
	smByPID := map[uint32]float64{}
	samples, err := d.ProcessUtilization(m.since[g])
	switch {
	case err == nil:
		r.HaveProcSM = true
		n := map[uint32]int{}
		for _, s := range samples {
			smByPID[s.PID] += float64(s.SMUtil)
			n[s.PID]++
			m.since[g] = max(m.since[g], s.TimeStamp)
		}
		for pid, k := range n {
			smByPID[pid] /= float64(k) // mean over the interval's samples
		}
	case errors.Is(err, nvml.ErrTimeout) || errors.Is(err, nvml.ErrGPULost):
		return fail(err)
	default:
		m.note(now, "guard: gpu %d: no per-process SM utilization (%v); speed is not judged there", g, err)
	}

	isResident := make(map[string]bool, len(resident))
	for _, j := range resident {
		isResident[j.ID] = true
	}
	r.Jobs = make(map[string]JobUsage, len(resident))
	for _, p := range procs {
		id, err := m.mapper.JobOf(p.PID)
		if err == nil && !isResident[id] {
			err = fmt.Errorf("pid %d is in job %s, which is not resident on gpu %d", p.PID, id, g)
		}
		if err != nil {
			r.Unknown = append(r.Unknown, p.PID)
			m.note(now, "guard: gpu %d: unknown process: %v", g, err)
			continue
		}
		u := r.Jobs[id]
		u.MemBytes += p.UsedBytes
		u.SMUtil += smByPID[p.PID]
		u.Procs++
		r.Jobs[id] = u
	}
	r.Healthy = true
	return r
}
