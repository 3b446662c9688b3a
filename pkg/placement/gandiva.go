// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Gandiva re-implements the introspective packing of Gandiva (Xiao et al.,
// OSDI'18) from its paper (docs/peers.md):
//
//   - a new job runs alone (idle GPUs; a one-GPU job on ShareSlots of its GPU,
//     so that another may be packed next to it later);
//   - only under overload (the queue asks for more GPUs than are idle), every
//     review packs the running one-GPU job of the lowest GPU utilization (its
//     profile's, measured while it ran alone) onto the GPU of the lowest
//     utilization that holds one other one-GPU job, if memory and the shared
//     rules allow, one GPU freed for the queue, and again while the overload
//     lasts (a job takes part in one move per review, and is packed once);
//   - after a probe period the pair's measured speeds (the simulator's truth)
//     decide: if their sum is below 1 (worse than time-slicing) the packed job
//     is moved back out, onto an idle GPU or into the queue, and the pair is
//     never packed again; each move costs MigrationCost seconds of work (a
//     checkpoint and a restart).
//
// No model at all: it tries and reverts.
type Gandiva struct {
	base
	probes map[string]probe   // packed job -> its pair's probe
	bad    map[[2]string]bool // application pairs found worse than time-slicing
	moved  map[string]bool    // jobs packed once (never packed again)
}

type probe struct {
	with  string  // the job it was packed next to
	until float64 // end of the probe period
	pair  [2]string
}

// Gandiva's settings.
const (
	GandivaProbe  = 300.0 // seconds a packed pair runs before it is judged
	GandivaReview = 60.0  // seconds between reviews
	// MigrationCost is the seconds of work a move costs a job (their simulators
	// use 40-60 s).
	MigrationCost = 50.0
)

// NewGandiva returns the Gandiva peer.
func NewGandiva(opts Options) (*Gandiva, error) {
	b, err := newBase("gandiva", "Gandiva: alone on idle GPUs; packed under overload, unpacked when the pair runs worse than time-slicing", opts)
	if err != nil {
		return nil, err
	}
	p := &Gandiva{base: b, probes: map[string]probe{}, bad: map[[2]string]bool{}, moved: map[string]bool{}}
	p.bind()
	return p, nil
}

// Place runs a new job alone.
func (p *Gandiva) Place(c *Cluster, r *Request) Decision { return p.place(c, r, alone{&p.base, 1}) }

// ReviewEvery is the time between reviews.
func (p *Gandiva) ReviewEvery() float64 { return GandivaReview }

// Review unpacks the pairs whose probe found them worse than time-slicing,
// then, under overload, packs one job.
func (p *Gandiva) Review(c *Cluster, now float64, queuedGPUs int, job RunningJob) []Move {
	var moves []Move
	jobs := residentJobs(c)
	byID := map[string]*residentJob{}
	for i := range jobs {
		byID[jobs[i].id] = &jobs[i]
	}
	for id, pr := range p.probes {
		j, ok := byID[id]
		if !ok || byID[pr.with] == nil {
			delete(p.probes, id) // one of the pair ended
			continue
		}
		if now < pr.until {
			continue
		}
		delete(p.probes, id)
		req, s1, ok1 := job(id)
		_, s2, ok2 := job(pr.with)
		if !ok1 || !ok2 || s1+s2 >= 1 {
			continue // as good as time-slicing or better: keep the pair
		}
		p.bad[pr.pair] = true
		to := Decision{Action: ActionWait}
		if d := p.placeExcept(c, req, j.at); d.Action != ActionWait {
			to = d
		}
		to.Reason = fmt.Sprintf("gandiva: unpack: job %s and job %s ran at %.2f + %.2f < 1 together", profile.Sanitize(id), profile.Sanitize(pr.with), s1, s2)
		moves = append(moves, Move{JobID: id, To: to, Cost: MigrationCost})
	}
	if len(moves) > 0 || queuedGPUs <= c.IdleGPUs() {
		return moves
	}
	// Overload: while the queue asks for more GPUs than are idle, the
	// lowest-utilization job running alone on one GPU is packed onto the
	// lowest-utilization GPU that holds one other one-GPU job (each pack frees
	// a GPU; a job takes part in one move per review).
	used := map[string]bool{}
	for freed := 0; queuedGPUs > c.IdleGPUs()+freed; {
		m, ok := p.pack(c, now, jobs, used, job)
		if !ok {
			break
		}
		moves = append(moves, m)
		freed++
	}
	return moves
}

// pack finds the next pack of an overload review: the lowest-utilization
// candidate with a GPU to join; ok is false when none has one.
func (p *Gandiva) pack(c *Cluster, now float64, jobs []residentJob, used map[string]bool, job RunningJob) (Move, bool) {
	alone1 := func(j *residentJob) bool {
		return !j.shared && len(j.at) == 1 && j.prof.Profile != nil && !used[j.id]
	}
	tried := map[string]bool{}
	for {
		var mover *residentJob
		for i := range jobs {
			j := &jobs[i]
			if !alone1(j) || tried[j.id] || p.moved[j.id] || p.inProbe(j.id) {
				continue
			}
			if mover == nil || j.prof.Profile.SMUtil.Mean < mover.prof.Profile.SMUtil.Mean {
				mover = j
			}
		}
		if mover == nil {
			return Move{}, false
		}
		tried[mover.id] = true
		req, _, ok := job(mover.id)
		if !ok {
			continue
		}
		var target *residentJob
		for i := range jobs {
			j := &jobs[i]
			if j == mover || !alone1(j) || p.bad[pairOf(mover, j)] || !allowsAll(req, j.at) || !joinable(c, &p.opts, j.at, req) {
				continue
			}
			if target == nil || j.prof.Profile.SMUtil.Mean < target.prof.Profile.SMUtil.Mean {
				target = j
			}
		}
		if target == nil {
			continue
		}
		d := joinDecision(c, &p.opts, target.at)
		d.Reason = fmt.Sprintf("gandiva: pack: job %s (SM %.0f%%) next to job %s (SM %.0f%%) under overload",
			profile.Sanitize(mover.id), mover.prof.Profile.SMUtil.Mean, profile.Sanitize(target.id), target.prof.Profile.SMUtil.Mean)
		p.moved[mover.id] = true
		p.probes[mover.id] = probe{with: target.id, until: now + GandivaProbe, pair: pairOf(mover, target)}
		used[mover.id], used[target.id] = true, true
		return Move{JobID: mover.id, To: d, Cost: MigrationCost}, true
	}
}

func (p *Gandiva) inProbe(id string) bool {
	if _, ok := p.probes[id]; ok {
		return true
	}
	for _, pr := range p.probes {
		if pr.with == id {
			return true
		}
	}
	return false
}

// placeExcept places r alone on an idle GPU other than those of except.
func (p *Gandiva) placeExcept(c *Cluster, r *Request, except []Slot) Decision {
	d := p.place(c, r, alone{&p.base, 1})
	for _, s := range d.Placement {
		for _, e := range except {
			if s.Node == e.Node && s.GPU == e.GPU {
				return Decision{Action: ActionWait}
			}
		}
	}
	return d
}

// pairOf is the application pair of two jobs, in order.
func pairOf(a, b *residentJob) [2]string {
	x, y := a.prof.Profile.Tag, b.prof.Profile.Tag
	if x > y {
		x, y = y, x
	}
	return [2]string{x, y}
}
