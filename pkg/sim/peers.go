// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"slices"

	"github.com/coscheml/coscheml/pkg/placement"
)

// hookPeers gives a published peer (docs/peers.md) what it asks for beyond one
// placement: the run's jobs (placement.Planner), the time (Clocked), its queue
// order (Prioritizer) and reviews of the running jobs (Reviewer).
func (s *simulator) hookPeers() {
	if p, ok := s.pol.(placement.Planner); ok {
		planned := make([]placement.PlannedJob, len(s.jobs))
		for i, j := range s.jobs {
			planned[i] = placement.PlannedJob{Submit: j.Submit, GPUs: j.GPUs, Duration: j.Duration}
		}
		p.Plan(planned)
	}
	if c, ok := s.pol.(placement.Clocked); ok {
		s.clocked = c
	}
	if p, ok := s.pol.(placement.Prioritizer); ok {
		s.prio = make([]float64, len(s.st))
		for i := range s.st {
			s.prio[i] = p.Priority(&s.st[i].req)
		}
	}
	if r, ok := s.pol.(placement.Reviewer); ok && r.ReviewEvery() > 0 {
		s.review = r
		s.nextReview = r.ReviewEvery()
	}
}

// queuedAfter says whether job a waits behind job b: in submission order, or
// in the policy's priority order (ties: submission order).
func (s *simulator) queuedAfter(a, b int32) bool {
	if s.prio != nil {
		if c := cmp.Compare(s.prio[a], s.prio[b]); c != 0 {
			return c > 0
		}
	}
	return a > b
}

// enqueue puts a submitted job into the queue: at its end, or at its place in
// the policy's order.
func (s *simulator) enqueue(j int32) {
	if s.prio != nil {
		s.requeueAt(j)
		return
	}
	s.queue = append(s.queue, j)
	s.qlive++
}

// reviewMoves lets the reviewing policy move running jobs: onto other GPUs, or
// back into the queue, each losing the move's cost in work (a checkpoint and a
// restart). A move whose GPUs an earlier move of the same review took sends
// the job to the queue when it shares a GPU now (the move was to take it off),
// else leaves it where it runs.
func (s *simulator) reviewMoves() {
	s.nextReview = s.now + s.review.ReviewEvery()
	queued := 0
	for _, j := range s.queue[s.qhead:] {
		if j >= 0 {
			queued += s.st[j].req.GPUs
		}
	}
	running := func(id string) (*placement.Request, float64, bool) {
		j, ok := s.jobIndex(id)
		if !ok || !s.st[j].running || s.st[j].suspended {
			return nil, 0, false
		}
		return &s.st[j].req, s.st[j].rate, true
	}
	for _, m := range s.review.Review(s.cl, s.now, queued, running) {
		j, ok := s.jobIndex(m.JobID)
		if !ok || !s.st[j].running || s.st[j].suspended {
			continue
		}
		placed := m.To.Action != placement.ActionWait
		if placed && !s.fits(j, m.To) {
			if !s.sharesNow(j) {
				continue
			}
			placed = false
		}
		if s.cfg.OnStart != nil && placed {
			s.cfg.OnStart(s.st[j].req.JobID, m.To)
		}
		s.res[j].Migrated++
		st := &s.st[j]
		st.remaining = max(0, st.remaining-st.rate*(s.now-st.last)) // its checkpoint
		st.migrated = true
		s.release(j)
		// The move's cost is work done again, not useful work.
		s.st[j].remaining += m.Cost
		s.useInt -= m.Cost * float64(s.st[j].req.GPUs)
		s.dirty = true
		if !placed {
			// Back to the queue with its place by submission (or the
			// policy's order): a job taken off keeps its priority.
			s.requeueAt(int32(j))
			continue
		}
		s.start(j, m.To)
	}
}

// fits says whether decision d's GPUs can take job j now (the slots and the
// co-runner limit), j's own GPUs counted free.
func (s *simulator) fits(j int, d placement.Decision) bool {
	for _, p := range d.Placement {
		g := s.nodeOff[p.Node] + int32(p.GPU)
		used, others := s.used[g], int32(len(s.gpuOn[g]))
		if slices.Contains(s.gpuOn[g], int32(j)) {
			for k, own := range s.st[j].gpus {
				if own == g {
					used -= s.st[j].slots[k]
				}
			}
			others--
		}
		gpu := &s.cl.Nodes[p.Node].GPUs[p.GPU]
		if int(used)+p.Slots > gpu.Slots || others > 0 && int(others) >= s.cfg.MaxCoRunners {
			return false
		}
	}
	return true
}

// sharesNow says whether running job j shares one of its GPUs.
func (s *simulator) sharesNow(j int) bool {
	for _, g := range s.st[j].gpus {
		if len(s.gpuOn[g]) > 1 {
			return true
		}
	}
	return false
}
