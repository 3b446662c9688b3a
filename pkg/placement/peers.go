// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"slices"
	"sort"
)

// The published peers (Lucid, Gandiva, FGD; docs/peers.md) need more than one
// placement at a time: the run's submissions ahead (Lucid's forecast of load,
// FGD's task mix), the time, their own queue order (Lucid), and the running
// jobs to move (Gandiva). The simulator offers those through these optional
// interfaces; slurmctld does not, so the peers are simulator-only policies.

// PlannedJob is one job of a run as a peer may know it before the run.
type PlannedJob struct {
	Submit   float64 // seconds
	GPUs     int
	Duration float64 // seconds alone (the trace's)
}

// Planner is told the run's jobs before the run starts.
type Planner interface{ Plan(jobs []PlannedJob) }

// Clocked is told the time (seconds) before each decision.
type Clocked interface{ SetNow(t float64) }

// Prioritizer orders the queue: lower first (FIFO among equal ones); a policy
// without it is served first come, first served.
type Prioritizer interface{ Priority(r *Request) float64 }

// Move takes a running job off its GPUs: onto To when To places it, back to the
// queue (its work checkpointed) when To is a wait. Cost is the seconds of work
// the move costs it (a checkpoint and a restart).
type Move struct {
	JobID string
	To    Decision
	Cost  float64
}

// RunningJob gives a running job's request (its node filter and models
// included) and how fast it runs now, as measured (the simulator's truth); ok
// is false for a job that does not run.
type RunningJob func(jobID string) (r *Request, speed float64, ok bool)

// Reviewer looks at the running jobs every ReviewEvery seconds and moves some.
// queuedGPUs is what the queue asks for.
type Reviewer interface {
	Review(c *Cluster, now float64, queuedGPUs int, job RunningJob) []Move
	ReviewEvery() float64
}

// residentJob is one job the cluster holds, where and with what.
type residentJob struct {
	id     string
	prof   *Resident
	at     []Slot // its GPUs, in cluster order
	shared bool   // some GPU of it holds another job too
}

// residentJobs lists the cluster's running jobs in cluster order of their first
// GPU (reservations excluded).
func residentJobs(c *Cluster) []residentJob {
	idx := map[string]int{}
	var out []residentJob
	for n := range c.Nodes {
		for g := range c.Nodes[n].GPUs {
			gpu := &c.Nodes[n].GPUs[g]
			for i := range gpu.Residents {
				r := &gpu.Residents[i]
				if r.Kind != Running {
					continue
				}
				k, ok := idx[r.JobID]
				if !ok {
					k = len(out)
					idx[r.JobID] = k
					out = append(out, residentJob{id: r.JobID, prof: r})
				}
				out[k].at = append(out[k].at, Slot{Node: n, GPU: g, Slots: r.Slots})
				if len(gpu.Residents) > 1 {
					out[k].shared = true
				}
			}
		}
	}
	return out
}

// joinable says whether r may join every one of the GPUs at under the rules
// every sharing policy shares under (co-runner limit, ShareSlots free, memory).
func joinable(c *Cluster, o *Options, at []Slot, r *Request) bool {
	for _, s := range at {
		st := summarize(&c.Nodes[s.Node].GPUs[s.GPU], int32(s.Node), c.Nodes[s.Node].Model, nil)
		if st.nres == 0 || !profiledOn(c, s.Node, r) || shareFeasible(o, &st, r) != rejNone {
			return false
		}
		if _, ok := joinSlots(c, o, s); !ok {
			return false
		}
	}
	return true
}

// profiledOn says whether r's profile speaks for node n (the engine's
// ownModel rule, which every policy shares under): a profile of another named
// GPU model than the node's runs alone there.
func profiledOn(c *Cluster, n int, r *Request) bool {
	want, m := r.Profile.MeasuredOn(), c.Nodes[n].Model
	return want == "" || m == "" || m == want
}

// joinSlots is the shards r takes to join GPU s: ShareSlots, or under Slurm
// 22.05's first fit the smallest count from it that lands there (ok false:
// none does now).
func joinSlots(c *Cluster, o *Options, s Slot) (int, bool) {
	k := int(o.shareSlots(int32(c.Nodes[s.Node].GPUs[s.GPU].Slots)))
	if c.Reach == ReachFirstFit {
		return firstFitSlots(&c.Nodes[s.Node], s.GPU, k)
	}
	return k, true
}

// joinDecision is r sharing the GPUs at (joinable: every one has its slots).
func joinDecision(c *Cluster, o *Options, at []Slot) Decision {
	d := Decision{Action: ActionShare, PredictedSpeed: 1, MinResidentSpeed: 1}
	for _, s := range at {
		k, _ := joinSlots(c, o, s)
		d.Placement = append(d.Placement, Slot{Node: s.Node, GPU: s.GPU, Slots: k})
	}
	return d
}

// alone is the scorer of a peer's job that runs by itself: idle GPUs only,
// ShareSlots of each for a profiled job the peer may pack a later job with
// (Lucid: up to 8 GPUs; Gandiva: one GPU), so that the slots leave room; the
// whole GPUs otherwise.
type alone struct {
	b       *base
	maxPack int // most GPUs of a job the peer packs
}

func (a alone) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	if st.nres > 0 {
		return rejBusy
	}
	*cd = a.b.idle(st, gi, r, r.GPUs <= a.maxPack)
	return rejNone
}

// sortedSubmits is the submission times of jobs, sorted.
func sortedSubmits(jobs []PlannedJob) []float64 {
	out := make([]float64, len(jobs))
	for i, j := range jobs {
		out[i] = j.Submit
	}
	slices.Sort(out)
	return out
}

// countIn counts the sorted times in [from, to).
func countIn(sorted []float64, from, to float64) int {
	return sort.SearchFloat64s(sorted, to) - sort.SearchFloat64s(sorted, from)
}
