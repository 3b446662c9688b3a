// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// FGD re-implements fragmentation gradient descent (Weng et al., USENIX ATC'23)
// from its paper (docs/peers.md), on the shared slot model: a one-GPU job that
// may share takes ShareSlots of a GPU (a fractional GPU task), a job of several
// GPUs or without a profile takes whole idle GPUs.
//
// A node's fragmentation for a task type m is the free GPU capacity of the node
// that a task of type m could not use: all of it when the task fits nowhere on
// the node, else the free capacity of the GPUs that cannot host it (a fractional
// task needs a GPU with ShareSlots free and room for another job; a task of k
// GPUs needs k idle GPUs, so partly used GPUs are fragments to it). The node's
// expected fragmentation weighs the task types by their share of the trace's
// jobs (its own task mix, Plan). FGD places each job where its placement makes
// the expected fragmentation grow least (ties: cluster order). It is
// interference-blind.
type FGD struct {
	base
	mix []fgdTask
	// scratch, reused across decisions
	gs         []gpuFree
	idle, best []int
}

type fgdTask struct {
	gpus int // 1: a fractional (ShareSlots) task; >1: whole GPUs
	p    float64
}

// NewFGD returns the FGD peer; Plan gives it the task mix (until then every
// task counts as a fractional one-GPU task).
func NewFGD(opts Options) (*FGD, error) {
	b, err := newBase("fgd", "FGD: where the expected fragmentation of the trace's task mix grows least (interference not considered)", opts)
	if err != nil {
		return nil, err
	}
	p := &FGD{base: b, mix: []fgdTask{{gpus: 1, p: 1}}}
	p.bind()
	return p, nil
}

// Plan takes the run's task mix: the share of jobs of each GPU count.
func (p *FGD) Plan(jobs []PlannedJob) {
	if len(jobs) == 0 {
		return
	}
	count := map[int]int{}
	for _, j := range jobs {
		count[max(j.GPUs, 1)]++
	}
	p.mix = p.mix[:0]
	for g, n := range count {
		p.mix = append(p.mix, fgdTask{gpus: g, p: float64(n) / float64(len(jobs))})
	}
	slices.SortFunc(p.mix, func(a, b fgdTask) int { return a.gpus - b.gpus })
}

// gpuFree is one GPU as fragmentation sees it.
type gpuFree struct {
	free, slots int32
	nres        int32
}

// frag is node n's expected fragmentation, in GPUs, for GPUs gs.
func (p *FGD) frag(gs []gpuFree) float64 {
	total := 0.0
	for _, g := range gs {
		total += float64(g.free) / float64(g.slots)
	}
	f := 0.0
	for _, m := range p.mix {
		unusable, usable := 0.0, 0
		for _, g := range gs {
			ok := false
			if m.gpus == 1 {
				ok = g.free >= p.opts.shareSlots(g.slots) && int(g.nres) < p.opts.MaxCoRunners
			} else {
				ok = g.nres == 0
			}
			if ok {
				usable++
			} else {
				unusable += float64(g.free) / float64(g.slots)
			}
		}
		if usable < min(m.gpus, len(gs)) || m.gpus > len(gs) {
			unusable = total // the task fits nowhere on this node
		}
		f += m.p * unusable
	}
	return f
}

// Place chooses GPUs for r without changing c.
func (p *FGD) Place(c *Cluster, r *Request) Decision {
	if d, bad := badRequest(p.name, c, r); bad {
		return d
	}
	if r.GPUs > 1 || r.Profile == nil {
		return p.whole(c, r)
	}
	if r.constrained() {
		r = p.e.constrain(c, r)
	}
	bestN, bestG, best := -1, -1, math.Inf(1)
	var slots int32
	for n := range c.Nodes {
		if !r.allows(int32(n)) {
			continue
		}
		gs := p.nodeFree(c, n)
		before := p.frag(gs)
		for g := range gs {
			gpu := &c.Nodes[n].GPUs[g]
			st := summarize(gpu, int32(n), c.Nodes[n].Model, nil)
			if r.Profile.MemUsedMiB > st.memCap || st.unknown > 0 || st.nres > 0 && (!profiledOn(c, n, r) || shareFeasible(&p.opts, &st, r) != rejNone) {
				continue
			}
			k := min(p.opts.shareSlots(st.slots), st.slots)
			if c.Reach == ReachFirstFit {
				// Slurm 22.05's shards land by first fit: the smallest count
				// at least k that lands here, as every policy asks.
				ff, ok := firstFitSlots(&c.Nodes[n], g, int(k))
				if !ok {
					continue
				}
				k = int32(ff)
			}
			saved := gs[g]
			gs[g].free -= k
			gs[g].nres++
			delta := p.frag(gs) - before
			gs[g] = saved
			if delta < best-1e-12 {
				bestN, bestG, best, slots = n, g, delta, k
			}
		}
	}
	if bestN < 0 {
		// Nothing fits: the engine words why (node filter, memory, slots).
		return p.place(c, r, alone{&p.base, 1})
	}
	gpu := &c.Nodes[bestN].GPUs[bestG]
	d := Decision{Action: ActionExclusive, PredictedSpeed: 1, MinResidentSpeed: 1, Placement: []Slot{{Node: bestN, GPU: bestG, Slots: int(slots)}}}
	if len(gpu.Residents) > 0 {
		d.Action = ActionShare
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fgd: %s: job %s (%s); %s taking %d of %d slots; expected fragmentation %+.3f GPU", d.Action, profile.Sanitize(r.JobID), tagOf(r),
		gpuName(c, bestN, bestG), slots, gpu.Slots, best)
	d.Reason = b.String()
	return d
}

// nodeFree is node n's GPUs as fragmentation sees them (in p's scratch).
func (p *FGD) nodeFree(c *Cluster, n int) []gpuFree {
	p.gs = p.gs[:0]
	for g := range c.Nodes[n].GPUs {
		st := summarize(&c.Nodes[n].GPUs[g], int32(n), c.Nodes[n].Model, nil)
		p.gs = append(p.gs, gpuFree{free: st.free(), slots: st.slots, nres: st.nres})
	}
	return p.gs
}

// whole places r on whole idle GPUs of the node where taking them makes the
// expected fragmentation grow least; a job no node can hold alone spreads over
// idle GPUs as the other policies' do.
func (p *FGD) whole(c *Cluster, r *Request) Decision {
	if r.constrained() {
		r = p.e.constrain(c, r)
	}
	bestN, best := -1, math.Inf(1)
	for n := range c.Nodes {
		if !r.allows(int32(n)) {
			continue
		}
		gs := p.nodeFree(c, n)
		p.idle = p.idle[:0]
		for g := range gs {
			if gs[g].nres == 0 && (r.Profile == nil || r.Profile.MemUsedMiB <= c.Nodes[n].GPUs[g].MemMiB) {
				p.idle = append(p.idle, g)
			}
		}
		if len(p.idle) < r.GPUs {
			continue
		}
		before := p.frag(gs)
		for _, g := range p.idle[:r.GPUs] {
			gs[g].free, gs[g].nres = 0, 1
		}
		if delta := p.frag(gs) - before; delta < best-1e-12 {
			bestN, best = n, delta
			p.best = append(p.best[:0], p.idle[:r.GPUs]...)
		}
	}
	if bestN < 0 {
		// No node holds it: whole idle GPUs over the fewest nodes, as every policy.
		return p.place(c, r, alone{&p.base, 1})
	}
	d := Decision{Action: ActionExclusive, PredictedSpeed: 1, MinResidentSpeed: 1}
	for _, g := range p.best {
		d.Placement = append(d.Placement, Slot{Node: bestN, GPU: g, Slots: c.Nodes[bestN].GPUs[g].Slots})
	}
	d.Reason = fmt.Sprintf("fgd: exclusive: job %s (%s); %d whole GPU(s) of %s; expected fragmentation %+.3f GPU", profile.Sanitize(r.JobID), tagOf(r),
		r.GPUs, profile.Sanitize(c.Nodes[bestN].Name), best)
	return d
}
