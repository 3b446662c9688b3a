// SPDX-License-Identifier: Apache-2.0

// Package replay prepares, measures and reports the end-to-end trace replay on a
// real Slurm cluster (make e2e, docs/evaluation.md "On real Slurm: trace
// replay"): the job list (sampled and time-compressed the way the simulator's is,
// so both see the same jobs), the metrics of a real run read back from the
// emulated jobs' result records (package emulate), the simulator's figures for
// the same jobs, and the comparison table and results.json.
package replay

import (
	"fmt"
	"math"

	"github.com/coscheml/coscheml/pkg/trace"
)

// Spec says how a replay's jobs are drawn from a trace.
type Spec struct {
	Jobs int   // jobs sampled (trace.Sample)
	Seed int64 // the sample, applications and classes (trace.Assign)
	// MaxDuration leaves out jobs running longer than this alone, in trace
	// seconds (0: keep all), as the simulator's --max-duration.
	MaxDuration float64
	// Load compresses arrivals so that the offered load on GPUs is this (0: as
	// in the trace), as the simulator's --load, with each job's GPUs.
	Load float64
	GPUs int // the cluster's GPUs, for Load
	// MaxGPUs caps each job's GPUs (0 or 1: one GPU each): a job of several
	// GPUs runs on one node, so a cluster of n GPUs per node replays the
	// trace's larger jobs on n.
	MaxGPUs int
	// Compress divides every time of the trace (submissions and durations):
	// 600 replays ten trace minutes in one second.
	Compress float64
	// MinWork is the least work of a job after compression, in seconds: Slurm's
	// own latencies (Prolog, launch, Epilog) are a second or so, and a job much
	// shorter than that measures them rather than the placement.
	MinWork float64
}

// Prepare draws the replay's jobs from the trace's jobs: MaxDuration, Sample,
// every job capped at MaxGPUs GPUs (one node's), Load, the
// seeded applications and classes of trace.Assign over tags, then Compress and
// MinWork. The result is sorted by submission, starting at 0.
func Prepare(all []trace.Job, tags []string, s Spec) ([]trace.Job, error) {
	if s.Jobs < 1 {
		return nil, fmt.Errorf("replay: %d jobs: want at least 1", s.Jobs)
	}
	if !(s.Compress > 0) || math.IsInf(s.Compress, 0) {
		return nil, fmt.Errorf("replay: compression %v: want a positive number", s.Compress)
	}
	if s.MinWork < 0 || math.IsNaN(s.MinWork) || s.Load < 0 || math.IsNaN(s.Load) {
		return nil, fmt.Errorf("replay: min work %v, load %v: want >= 0", s.MinWork, s.Load)
	}
	jobs := trace.MaxDuration(all, s.MaxDuration)
	if len(jobs) < s.Jobs {
		return nil, fmt.Errorf("replay: the trace has %d usable jobs, %d wanted", len(jobs), s.Jobs)
	}
	jobs = trace.Sample(jobs, s.Jobs, s.Seed)
	for i := range jobs {
		jobs[i].GPUs = min(jobs[i].GPUs, max(s.MaxGPUs, 1))
	}
	if s.Load > 0 {
		if s.GPUs < 1 {
			return nil, fmt.Errorf("replay: load %v needs the cluster's GPU count", s.Load)
		}
		if _, err := trace.SetLoad(jobs, s.GPUs, s.Load); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	if err := trace.Assign(jobs, tags, trace.DefaultClassMix, s.Seed); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	for i := range jobs {
		jobs[i].Submit /= s.Compress
		jobs[i].Duration = max(jobs[i].Duration/s.Compress, s.MinWork)
	}
	return jobs, nil
}

// TimeLimitMinutes is the Slurm time limit given to a job of work seconds: the
// work stretched by slack (a co-located job runs slower), in whole minutes (Slurm's
// unit), at least 1. EASY backfill plans with it, as the simulator plans with
// the trace duration.
func TimeLimitMinutes(work, slack float64) int {
	return max(1, int(math.Ceil(work*slack/60)))
}
