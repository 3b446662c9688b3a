// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/inferlatency"
	"github.com/coscheml/coscheml/pkg/profile"
)

// FindingKind names a breach of a job's budget.
type FindingKind string

const (
	MemoryOverBudget FindingKind = "memory-over-budget"
	SpeedBelowFloor  FindingKind = "speed-below-floor"
)

// Finding is one job over its budget on one GPU in one round.
type Finding struct {
	Kind FindingKind
	GPU  int
	Job  Job // the job whose budget is breached
	// Memory findings: the job's use and budget, MiB.
	MemMiB, BudgetMiB float64
	// Speed findings: the smoothed estimate, the class floor and when the breach began.
	Speed, Floor float64
	Since        time.Time
	Reason       string
}

// MemBudgetMiB is a job's memory budget: its profile's peak plus the margins;
// ok is false when the job has no profiled peak (no budget, never acted on).
func MemBudgetMiB(cfg Config, j Job) (budget float64, ok bool) {
	if j.Profile == nil || !(j.Profile.MemUsedMiB > 0) {
		return 0, false
	}
	return j.Profile.MemUsedMiB*(1+cfg.MemMarginFrac) + cfg.MemMarginMiB, true
}

// SpeedInput is what JudgeSpeed needs of one job on one GPU, all smoothed.
type SpeedInput struct {
	Class    profile.Class
	SoloSM   float64   // the job's solo SM utilization (profile mean), %
	OwnSM    float64   // its SM utilization now, %
	CoSM     []float64 // each co-runner's SM utilization now, %
	DeviceSM float64   // the device's utilization.gpu, %
}

// SpeedVerdict is JudgeSpeed's answer.
type SpeedVerdict struct {
	Judged bool    // false: nothing to judge by (no solo share)
	Speed  float64 // estimated speed against solo, (0, 1]
	Floor  float64
	Breach bool   // below the floor and slowed by co-runners (not idle)
	Why    string // why it is or is not a breach
}

// JudgeSpeed estimates a job's speed and says whether it is a breach a
// co-runner can be held to. Its trust rules keep a user from faking a slowdown
// by idling their own job:
//
//   - throughput classes (hpc, train): speed is the job's SM share over its solo
//     share. A low share counts only when the GPU has no spare capacity (device
//     utilization at least BusySMUtil) and the job still gets at least
//     FairShareFrac of its fair time slice, min(solo share, 100 / active jobs):
//     under time-slicing a job that wants the GPU gets its slice, so one below
//     it is not asking for more, it is idle. Nor can it claim a slowdown that
//     the GPU's idle time could have absorbed: the speed of a breach is its
//     share plus the time neither the device nor any job used, over its solo
//     share.
//   - infer: speed is inferlatency's latency estimate from the co-runners'
//     shares, and counts only while the job's own share is at least
//     InferMinDemandFrac of its solo share (it is serving requests).
func JudgeSpeed(cfg Config, in SpeedInput) SpeedVerdict {
	v := SpeedVerdict{Floor: cfg.Floors.For(in.Class)}
	if !(in.SoloSM > 0) {
		v.Why = "no solo SM utilization in the profile"
		return v
	}
	v.Judged = true
	if in.Class == profile.ClassInfer {
		v.Speed = inferlatency.SpeedFromSMUtil(in.CoSM)
		if v.Speed >= v.Floor {
			v.Why = fmt.Sprintf("latency speed %.2f at or above floor %.2f", v.Speed, v.Floor)
			return v
		}
		if demand := cfg.InferMinDemandFrac * in.SoloSM; in.OwnSM < demand {
			v.Why = fmt.Sprintf("idle, not slowed: own SM %.0f%% below %.0f%% of its solo %.0f%%", in.OwnSM, 100*cfg.InferMinDemandFrac, in.SoloSM)
			return v
		}
		v.Breach = true
		v.Why = fmt.Sprintf("latency speed %.2f below floor %.2f (co-runners' SM %v%%)", v.Speed, v.Floor, roundAll(in.CoSM))
		return v
	}
	v.Speed = min(1, max(in.OwnSM, 0)/in.SoloSM)
	if v.Speed >= v.Floor {
		v.Why = fmt.Sprintf("speed %.2f at or above floor %.2f", v.Speed, v.Floor)
		return v
	}
	if in.DeviceSM < cfg.BusySMUtil {
		v.Why = fmt.Sprintf("idle, not slowed: GPU busy %.0f%% < %.0f%%, it has spare capacity", in.DeviceSM, cfg.BusySMUtil)
		return v
	}
	active := 1
	for _, c := range in.CoSM {
		if c >= cfg.MinCauseSMUtil {
			active++
		}
	}
	fair := min(in.SoloSM, 100/float64(active))
	if in.OwnSM < cfg.FairShareFrac*fair {
		v.Why = fmt.Sprintf("own demand dropped: SM %.0f%% below %.0f%% of its fair slice %.0f%%", in.OwnSM, 100*cfg.FairShareFrac, fair)
		return v
	}
	// The GPU's idle time is time the job could have run in: under
	// time-slicing a job that wants the GPU takes it when nobody else does. So
	// the speed a job can claim is its share plus the time neither the device
	// nor any job's share used (the shares are sampled apart from the device's
	// busy time, so the larger of the two counts as used).
	coSum := 0.0
	for _, c := range in.CoSM {
		coSum += max(c, 0)
	}
	idle := max(0, 100-max(in.DeviceSM, max(in.OwnSM, 0)+coSum))
	claim := min(1, (max(in.OwnSM, 0)+idle)/in.SoloSM)
	if claim >= v.Floor {
		v.Why = fmt.Sprintf("idle, not slowed: the GPU is %.0f%% idle, which would give it %.0f%% of its solo %.0f%% (speed %.2f, floor %.2f)",
			idle, 100*claim, in.SoloSM, claim, v.Floor)
		return v
	}
	v.Speed = claim
	v.Breach = true
	v.Why = fmt.Sprintf("speed %.2f below floor %.2f (SM %.0f%% of solo %.0f%%, GPU busy %.0f%%, idle %.0f%%)", v.Speed, v.Floor, in.OwnSM, in.SoloSM, in.DeviceSM, idle)
	return v
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x + 0.5))
	}
	return out
}

// memoryFinding returns the finding of the job most over its own budget on a GPU
// that nears full, if any. Only the job over its own budget is ever named: a job
// that inflates its memory can get only itself acted on, never a neighbour.
func memoryFinding(cfg Config, r GPUReading, resident []Job) (Finding, bool) {
	if r.MemTotal == 0 || float64(r.MemUsed) < cfg.NearFullFrac*float64(r.MemTotal) {
		return Finding{}, false
	}
	best, found := Finding{}, false
	bestOver := 0.0
	for _, j := range sortedJobs(resident) {
		budget, ok := MemBudgetMiB(cfg, j)
		if !ok {
			continue
		}
		used := float64(r.Jobs[j.ID].MemBytes) / (1 << 20)
		if over := used - budget; over > 0 && over > bestOver {
			bestOver, found = over, true
			best = Finding{Kind: MemoryOverBudget, GPU: r.GPU, Job: j, MemMiB: used, BudgetMiB: budget,
				Reason: fmt.Sprintf("job %s uses %.0f MiB on gpu %d, over its budget %.0f MiB (profile peak + margin), while the GPU is %.0f%% full",
					j.ID, used, r.GPU, budget, 100*float64(r.MemUsed)/float64(r.MemTotal))}
		}
	}
	return best, found
}

// sortedJobs orders jobs by id so that every decision is deterministic.
func sortedJobs(js []Job) []Job {
	out := slices.Clone(js)
	slices.SortFunc(out, func(a, b Job) int { return CompareIDs(a.ID, b.ID) })
	return out
}

// CompareIDs orders numeric job ids by value, then anything else by text.
func CompareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
