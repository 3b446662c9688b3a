// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/placement"
)

// The node guard in the simulator. The guard's own rules decide (package guard:
// JudgeSpeed, Decide, the State's rate limits and observation caps); the
// simulator only stands in for what the node would read and do:
//
//   - readings: a job's SM share on a GPU is its solo SM utilization times its
//     true speed there, the device's utilization is truth.GPUUtil of the
//     running jobs. Between events these are constant, so instead of a round
//     every Period the simulator judges a GPU whenever its jobs change and, if a
//     job is in breach, checks again after the guard's detection delay (Window
//     periods to fill its smoothing window, then SustainFor): a breach still
//     there then is acted on, as the node's guard would at that round.
//   - a breach the rate limits keep from an action is checked again one
//     Cooldown later, while the GPU's jobs are unchanged.
//   - early observations: a finding on a GPU with exactly two running jobs
//     feeds Config.OnCoRunEnd (the pair memory), under the guard's per-user cap.
//   - actions: suspend holds the job on its GPUs (no progress, its slots and
//     memory kept, as Slurm's scontrol suspend keeps the allocation) until the
//     job it protects ends; requeue takes it off, loses its progress and puts
//     it back as a new submission, kept off the nodes it ran on (decided
//     again at submit under SubmitModel, else in the queue at its
//     submission's place, as Slurm keeps a requeued job's priority). Memory
//     findings are not simulated: jobs use their profile's memory.

// GuardStats counts what the guard did in a run.
type GuardStats struct {
	Checks       int `json:"checks"`       // breaches judged at the end of the detection delay
	Suspends     int `json:"suspends"`     // jobs suspended
	Requeues     int `json:"requeues"`     // jobs requeued
	Observed     int `json:"observed"`     // findings only observed (no co-runner to act on, rate limits)
	Observations int `json:"observations"` // early observations fed to the pair memory
}

type guardCheck struct {
	t       float64
	gpu     int32
	version uint32
}

type checkHeap []guardCheck

func (h checkHeap) Len() int { return len(h) }
func (h checkHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].gpu < h[j].gpu
}
func (h checkHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *checkHeap) Push(x any)   { *h = append(*h, x.(guardCheck)) }
func (h *checkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// simGuard is the guard's state in one run.
type simGuard struct {
	cfg       guard.Config
	state     *guard.State
	delay     float64  // seconds from a change on a GPU to the guard acting on it
	version   []uint32 // per GPU, bumped whenever its jobs change
	checks    checkHeap
	suspended int // jobs held now
	sinceTidy int // finishes since the state last forgot departed jobs
	stats     GuardStats
}

// epoch is the time the simulator's second 0 stands for in the guard's clock.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func newSimGuard(cfg guard.Config, floors placement.Floors, gpus int) (*simGuard, error) {
	cfg.Floors = floors // one set of floors: the cluster's
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("guard configuration: %w", err)
	}
	return &simGuard{cfg: cfg, state: guard.NewState(cfg), version: make([]uint32, gpus),
		delay: float64(cfg.Window)*cfg.Period.Seconds() + cfg.SustainFor.Seconds()}, nil
}

func (g *simGuard) next() float64 {
	if len(g.checks) == 0 {
		return math.Inf(1)
	}
	return g.checks[0].t
}

func (s *simulator) clock() time.Time {
	return epoch.Add(time.Duration(s.now * float64(time.Second)))
}

// guardWatch notes that GPU g's jobs changed and, when one of them is in
// breach, schedules the check the node's guard would make once its window
// fills and the breach has lasted SustainFor.
func (s *simulator) guardWatch(g int32) {
	s.gd.version[g]++
	if len(s.guardFindings(g, true)) > 0 {
		heap.Push(&s.gd.checks, guardCheck{t: s.now + s.gd.delay, gpu: g, version: s.gd.version[g]})
	}
}

// guardChecks runs the checks that are due.
func (s *simulator) guardChecks() {
	gd := s.gd
	for len(gd.checks) > 0 && gd.checks[0].t <= s.now {
		c := heap.Pop(&gd.checks).(guardCheck)
		if c.version != gd.version[c.gpu] {
			continue // the GPU's jobs changed since: a newer check stands
		}
		s.guardCheck(c.gpu)
	}
}

// guardCheck judges GPU g as the guard's round would and takes its actions.
func (s *simulator) guardCheck(g int32) {
	gd := s.gd
	findings := s.guardFindings(g, false)
	if len(findings) == 0 {
		return
	}
	now := s.clock()
	resident, sm := s.guardResidents(g)
	acted := false
	for _, f := range findings {
		gd.stats.Checks++
		if len(resident) == 2 {
			s.guardObserve(f, resident, now)
		}
		a := guard.Decide(gd.cfg, f, resident, sm, gd.state, now)
		if a.Kind == guard.Observe {
			gd.stats.Observed++
			continue
		}
		j, ok := s.jobIndex(a.JobID)
		if !ok || !s.st[j].running || s.st[j].suspended {
			continue // an earlier action of this round took it off
		}
		gd.state.Record(a, now)
		acted = true
		switch a.Kind {
		case guard.Suspend:
			s.guardSuspend(j)
		case guard.Requeue, guard.Cancel:
			// Cancel is a memory action only, which the simulator does not model.
			s.guardRequeue(j)
		}
		break // the GPU's jobs changed: its next check judges them afresh
	}
	if !acted {
		// Held back by the rate limits: the node's guard keeps judging every
		// round; one cooldown later it may act.
		heap.Push(&gd.checks, guardCheck{t: s.now + gd.cfg.Cooldown.Seconds(), gpu: g, version: gd.version[g]})
	}
}

// guardFindings returns the speed findings on GPU g now: each running job whose
// steady readings JudgeSpeed finds in breach. probe only asks whether there is
// one.
func (s *simulator) guardFindings(g int32, probe bool) []guard.Finding {
	active := 0
	for _, o := range s.gpuOn[g] {
		if !s.st[o].suspended {
			active++
		}
	}
	if active < 2 {
		return nil
	}
	s.apps = s.apps[:0]
	for _, o := range s.gpuOn[g] {
		if !s.st[o].suspended {
			s.apps = append(s.apps, s.st[o].tag)
		}
	}
	device := s.tt.GPUUtil(s.apps)
	var out []guard.Finding
	for _, o := range s.gpuOn[g] {
		j := int(o)
		st := &s.st[j]
		if st.suspended {
			continue
		}
		in := guard.SpeedInput{Class: s.res[j].Class, SoloSM: s.tt.SoloUtil(int(st.tag)), DeviceSM: device}
		in.OwnSM = in.SoloSM * s.speedOn(j, g)
		in.CoSM = s.coShares(j, g, nil)
		v := guard.JudgeSpeed(s.gd.cfg, in)
		if !v.Breach {
			continue
		}
		if probe {
			return []guard.Finding{{}}
		}
		since := s.clock().Add(-s.gd.cfg.SustainFor)
		out = append(out, guard.Finding{Kind: guard.SpeedBelowFloor, GPU: int(g), Job: s.guardJob(j), Speed: v.Speed, Floor: v.Floor,
			Since: since, Reason: fmt.Sprintf("job %s on gpu %d: %s", st.req.JobID, g, v.Why)})
	}
	slices.SortFunc(out, func(a, b guard.Finding) int { return guard.CompareIDs(a.Job.ID, b.Job.ID) })
	return out
}

// guardResidents returns GPU g's running jobs as the guard sees them and their
// SM shares.
func (s *simulator) guardResidents(g int32) ([]guard.Job, map[string]float64) {
	var jobs []guard.Job
	sm := map[string]float64{}
	for _, o := range s.gpuOn[g] {
		j := int(o)
		if s.st[j].suspended {
			continue
		}
		gj := s.guardJob(j)
		jobs = append(jobs, gj)
		sm[gj.ID] = s.tt.SoloUtil(int(s.st[j].tag)) * s.speedOn(j, g)
	}
	return jobs, sm
}

func (s *simulator) guardJob(j int) guard.Job {
	st := &s.st[j]
	gpus := make([]int, len(st.gpus))
	for k, g := range st.gpus {
		gpus[k] = int(g)
	}
	return guard.Job{ID: st.req.JobID, Tag: st.req.Tag, Class: s.res[j].Class, User: userOf(st.req.JobID),
		Start: epoch.Add(time.Duration(s.res[j].Start * float64(time.Second))), GPUs: gpus, Profile: st.req.Profile}
}

// guardObserve feeds an early observation of a pair to the pair memory, under
// the guard's per-user cap, with the measurement noise of a co-run's end.
func (s *simulator) guardObserve(f guard.Finding, resident []guard.Job, now time.Time) {
	if s.cfg.OnCoRunEnd == nil {
		return
	}
	var co guard.Job
	for _, r := range resident {
		if r.ID != f.Job.ID {
			co = r
		}
	}
	if !s.gd.state.AllowObservation(f.Job, []string{co.Tag}, now) {
		return
	}
	s.gd.stats.Observations++
	sp := f.Speed + s.tt.NoiseSD()*s.noise.NormFloat64()
	s.cfg.OnCoRunEnd(f.Job.Profile, co.Profile, f.Job.User, min(max(sp, 0.01), 1.2))
}

func (s *simulator) guardSuspend(j int) {
	s.st[j].suspended = true
	s.res[j].Suspended++
	s.gd.suspended++
	s.gd.stats.Suspends++
	s.refresh(s.st[j].gpus)
}

// guardRequeue takes job j off and submits it again, its progress lost.
func (s *simulator) guardRequeue(j int) {
	s.gd.stats.Requeues++
	s.res[j].Requeued++
	s.excludeNodes(j)
	s.release(j)
	s.st[j].remaining = s.jobs[j].Duration
	s.dirty = true
	// The job has left its node: the guard's state forgets it now, as the
	// node's next round would, so that its next placement is judged afresh.
	s.gd.sinceTidy = tidyEvery
	s.guardResumes()
	if s.cfg.Submit != nil && !s.st[j].whole {
		s.arrive(j)
		return
	}
	s.requeueAt(int32(j))
}

// requeueAt puts job j back into the queue in submission order, as Slurm keeps
// a requeued job's priority (its age counts from its submission); in the
// policy's order when it orders the queue (placement.Prioritizer).
func (s *simulator) requeueAt(j int32) {
	i := len(s.queue)
	for i > s.qhead && (s.queue[i-1] < 0 || s.queuedAfter(s.queue[i-1], j)) {
		i--
	}
	for i < len(s.queue) && s.queue[i] < 0 {
		i++ // after the tombstones at the spot: the head stays first
	}
	s.queue = slices.Insert(s.queue, i, j)
	if i < s.newFrom {
		s.newFrom++
	}
	s.qlive++
}

// excludeNodes keeps requeued job j off the nodes it ran on, as the guard's
// requeue asks Slurm (the job's excluded nodes), so that it does not start
// again next to the same co-runner. As the guard does, it leaves the job's
// nodes as they are when too few GPUs would be left for it (its models,
// memory and GPU count).
func (s *simulator) excludeNodes(j int) {
	st := &s.st[j]
	allowed := make([]bool, len(s.cl.Nodes))
	for n := range allowed {
		allowed[n] = st.req.Nodes == nil || (n < len(st.req.Nodes) && st.req.Nodes[n])
	}
	for _, g := range st.gpus {
		allowed[s.nodeOfGPU(g)] = false
	}
	if s.roomIn(allowed, st.req.Profile.MemUsedMiB) < st.req.GPUs {
		return
	}
	st.req.Nodes = allowed
}

// nodeOfGPU is the node of global GPU index g.
func (s *simulator) nodeOfGPU(g int32) int {
	n, _ := slices.BinarySearch(s.nodeOff, g+1)
	return n - 1
}

// tidyEvery is how many finishes may pass before the guard's state forgets
// departed jobs when none is suspended.
const tidyEvery = 1024

// guardResumes resumes the jobs whose protected job has left, through the
// guard's own State (which also forgets what it knew of departed jobs).
func (s *simulator) guardResumes() {
	gd := s.gd
	gd.sinceTidy++
	if gd.suspended == 0 && gd.sinceTidy < tidyEvery {
		return
	}
	gd.sinceTidy = 0
	present := make([]guard.Job, 0, len(s.byEnd))
	for _, j := range s.byEnd {
		present = append(present, guard.Job{ID: s.st[j].req.JobID})
	}
	now := s.clock()
	for _, a := range gd.state.Resumes(present) {
		gd.state.Record(a, now)
		j, ok := s.jobIndex(a.JobID)
		if !ok || !s.st[j].suspended {
			continue
		}
		s.st[j].suspended = false
		gd.suspended--
		s.refresh(s.st[j].gpus)
	}
}

// jobIndex finds a job by ID: the simulator's IDs are the trace's, unique per
// run; an index is built on first use.
func (s *simulator) jobIndex(id string) (int, bool) {
	if s.byID == nil {
		s.byID = make(map[string]int32, len(s.st))
		for i := range s.st {
			s.byID[s.st[i].req.JobID] = int32(i)
		}
	}
	j, ok := s.byID[id]
	return int(j), ok
}
