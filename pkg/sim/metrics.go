// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"sort"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Metrics summarise one run (or one class of its jobs). Times are in seconds.
type Metrics struct {
	Jobs      int     `json:"jobs"`
	AvgJCT    float64 `json:"avg_jct"`
	MedianJCT float64 `json:"median_jct"`
	P95JCT    float64 `json:"p95_jct"`
	AvgQueue  float64 `json:"avg_queue"`
	Makespan  float64 `json:"makespan"`
	// GPUUtil: allocated GPU-time over capacity (GPUs x makespan); a GPU counts
	// as allocated while at least one job holds it, once however many share it.
	GPUUtil float64 `json:"gpu_util"`
	// UsefulUtil: progress achieved (GPU-seconds of work at solo speed) over
	// capacity; above GPUUtil when sharing gets more work out of a GPU than one job.
	UsefulUtil float64 `json:"useful_util"`
	// KernelUtil: GPU kernel-busy time (NVML utilization.gpu, from measurements:
	// truth.GPUUtil) over capacity: what nvidia-smi would have shown, averaged.
	KernelUtil float64 `json:"kernel_util"`
	BelowFloor int     `json:"below_floor"` // jobs whose true speed fell under their class floor
	// BelowFloorHours: job-hours spent running below the class floor (a job
	// on several GPUs counts once).
	BelowFloorHours float64 `json:"below_floor_hours"`
	Shared          int     `json:"shared"` // jobs that had a co-runner at some time
	// SharedMultiGPU: jobs of several GPUs that had a co-runner on one of them
	// at some time.
	SharedMultiGPU int `json:"shared_multi_gpu"`
}

// Classes in report order.
var Classes = []profile.Class{profile.ClassHPC, profile.ClassTrain, profile.ClassInfer}

// Summarize computes the metrics of a run overall and per class. Per class,
// GPUUtil is 0 (allocation is a property of GPUs, not of classes) and UsefulUtil
// is the class's share of the work.
func Summarize(r *Result) (Metrics, map[profile.Class]Metrics) {
	capacity := float64(r.GPUs) * r.Makespan
	all := metricsOf(r.Jobs, func(JobResult) bool { return true }, capacity)
	all.Makespan = r.Makespan
	if capacity > 0 {
		all.GPUUtil = r.AllocGPUS / capacity
		all.UsefulUtil = r.Useful / capacity
		all.KernelUtil = r.Kernel / capacity
	}
	by := map[profile.Class]Metrics{}
	for _, c := range Classes {
		m := metricsOf(r.Jobs, func(j JobResult) bool { return j.Class == c }, capacity)
		if m.Jobs > 0 {
			by[c] = m
		}
	}
	return all, by
}

func metricsOf(jobs []JobResult, keep func(JobResult) bool, capacity float64) Metrics {
	var m Metrics
	var jct []float64
	var qsum, work, last float64
	for _, j := range jobs {
		if !keep(j) {
			continue
		}
		m.Jobs++
		jct = append(jct, j.JCT())
		qsum += j.Queue()
		work += j.Duration * float64(j.GPUs)
		last = max(last, j.End)
		if j.BelowFloor {
			m.BelowFloor++
		}
		m.BelowFloorHours += j.BelowFloorSec / 3600
		if j.Shared {
			m.Shared++
			if j.GPUs > 1 {
				m.SharedMultiGPU++
			}
		}
	}
	if m.Jobs == 0 {
		return m
	}
	sort.Float64s(jct)
	sum := 0.0
	for _, v := range jct {
		sum += v
	}
	m.AvgJCT = sum / float64(m.Jobs)
	m.MedianJCT = Quantile(jct, 0.5)
	m.P95JCT = Quantile(jct, 0.95)
	m.AvgQueue = qsum / float64(m.Jobs)
	m.Makespan = last
	if capacity > 0 {
		m.UsefulUtil = work / capacity
	}
	return m
}

// Quantile of sorted values by linear interpolation between closest ranks.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[hi]*f
}

// BelowFloorPer counts the jobs below their floor in each block of size
// consecutive jobs, taken in order of start (ties by submission, then ID): the
// first block is the first size jobs to start. A last, partial block is
// counted too. Jobs that never started (Start and End 0 in a dropped run) are
// not counted.
func BelowFloorPer(jobs []JobResult, size int) []int {
	if size < 1 {
		return nil
	}
	idx := make([]int, 0, len(jobs))
	for i := range jobs {
		if jobs[i].End > 0 || jobs[i].Start > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ja, jb := &jobs[idx[a]], &jobs[idx[b]]
		if ja.Start != jb.Start {
			return ja.Start < jb.Start
		}
		return ja.Submit < jb.Submit
	})
	var out []int
	for k, i := range idx {
		if k%size == 0 {
			out = append(out, 0)
		}
		if jobs[i].BelowFloor {
			out[len(out)-1]++
		}
	}
	return out
}
