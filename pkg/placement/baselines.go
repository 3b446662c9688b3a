// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// The baselines Co-scheML is measured against. To be fair they run on the same
// engine and, when they share, under the same rules (MaxCoRunners, ShareSlots, the
// memory fit); they differ only in how they judge interference. None predicts speeds:
// their decisions report PredictedSpeed and MinResidentSpeed 1. Like Co-scheML, each
// sends a request without a profile to a whole idle GPU. Every baseline value holds
// scratch buffers: not safe for concurrent use.

// base is what every baseline shares: options, engine, and the words of its rule.
type base struct {
	name string
	rule string     // why the chosen GPU won, in words
	draw *rand.Rand // random baseline only: rank keys are drawn per acceptable GPU
	opts Options
	e    engine
}

func newBase(name, rule string, opts Options) (base, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return base{}, fmt.Errorf("%s policy: %w", name, err)
	}
	return base{name: name, rule: rule, opts: o, e: engine{shares: true}}, nil
}

// bind points the engine at the policy's options once the policy has its final
// address (the engine's filter reads them).
func (b *base) bind() { b.e.opts = &b.opts }

// Name is the policy's name as ByName knows it.
func (b *base) Name() string { return b.name }

func (b *base) place(c *Cluster, r *Request, sc scorer) Decision {
	if d, bad := badRequest(b.name, c, r); bad {
		return d
	}
	chosen, found := b.e.place(c, r, sc, b.draw)
	if chosen == nil {
		return Decision{Action: ActionWait, MinResidentSpeed: 1, Reason: b.e.waitReason(b.name, r, found)}
	}
	d := b.e.decisionFor(c, chosen)
	var s strings.Builder
	s.Grow(256)
	fmt.Fprintf(&s, "%s: %s: job %s (%s, %s)", b.name, d.Action, profile.Sanitize(r.JobID), tagOf(r), profile.Sanitize(string(classOf(r.Class, r.Profile))))
	for _, sl := range d.Placement {
		gpu := &c.Nodes[sl.Node].GPUs[sl.GPU]
		fmt.Fprintf(&s, "; %s taking %d of %d slots", gpuName(c, sl.Node, sl.GPU), sl.Slots, gpu.Slots)
		if len(gpu.Residents) > 0 {
			s.WriteString(" with ")
			describeResidents(&s, gpu)
		}
	}
	s.WriteString("; ")
	s.WriteString(b.rule)
	b.e.writeSteerNote(&s, c, &d)
	d.Reason = s.String()
	return d
}

// idle is the candidate for an idle GPU: ShareSlots for a profiled request when the
// policy shares, the whole GPU otherwise.
func (b *base) idle(st *gpuState, gi int32, r *Request, sharing bool) cand {
	cd := cand{gi: gi, node: st.node, speed: 1, minRes: 1, slots: st.slots}
	if sharing && r.Profile != nil {
		cd.slots = min(b.opts.shareSlots(st.slots), st.slots)
	}
	return cd
}

func (b *base) join(st *gpuState, gi int32) cand {
	return cand{gi: gi, node: st.node, speed: 1, minRes: 1, slots: b.opts.shareSlots(st.slots), share: true}
}

// Exclusive gives each job whole idle GPUs, the first in cluster order: Slurm's
// default without sharing.
type Exclusive struct{ base }

// NewExclusive returns the exclusive baseline.
func NewExclusive(opts Options) (*Exclusive, error) {
	b, err := newBase("exclusive", "whole idle GPU, first in cluster order (no sharing)", opts)
	if err != nil {
		return nil, err
	}
	b.e.shares = false
	p := &Exclusive{b}
	p.bind()
	return p, nil
}

// Place chooses GPUs for r without changing c.
func (p *Exclusive) Place(c *Cluster, r *Request) Decision { return p.place(c, r, p) }

// score: the filter passes only idle GPUs to a policy that never shares.
func (p *Exclusive) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	*cd = p.idle(st, gi, r, false)
	return rejNone
}

// Blind is interference-blind sharing: the first GPU in cluster order with enough
// free slots, idle or not, as Slurm's gres/shard does.
type Blind struct{ base }

// NewBlind returns the interference-blind first-fit baseline.
func NewBlind(opts Options) (*Blind, error) {
	b, err := newBase("blind", "first GPU in cluster order with enough free slots (interference not considered)", opts)
	if err != nil {
		return nil, err
	}
	p := &Blind{b}
	p.bind()
	return p, nil
}

// Place chooses GPUs for r without changing c.
func (p *Blind) Place(c *Cluster, r *Request) Decision { return p.place(c, r, p) }

func (p *Blind) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	if st.nres == 0 {
		*cd = p.idle(st, gi, r, true)
		return rejNone
	}
	*cd = p.join(st, gi)
	return rejNone
}

// LeastLoaded puts the job on the feasible GPU with the fewest residents, then the
// lowest summed solo SM utilization: it shares only when no GPU is idle.
type LeastLoaded struct{ base }

// NewLeastLoaded returns the least-loaded baseline.
func NewLeastLoaded(opts Options) (*LeastLoaded, error) {
	b, err := newBase("least-loaded", "fewest residents, then lowest summed SM utilization", opts)
	if err != nil {
		return nil, err
	}
	p := &LeastLoaded{b}
	p.bind()
	return p, nil
}

// Place chooses GPUs for r without changing c.
func (p *LeastLoaded) Place(c *Cluster, r *Request) Decision { return p.place(c, r, p) }

func (p *LeastLoaded) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	if st.nres == 0 {
		*cd = p.idle(st, gi, r, true)
		return rejNone
	}
	*cd = p.join(st, gi)
	cd.key = -(float64(st.nres)*1000 + st.sm)
	return rejNone
}

// UtilSum is the utilization-sum heuristic: share a GPU when the summed solo SM
// utilization of its residents and the new job is at most the threshold (the lowest
// sum wins, and wins over an idle GPU, as Co-scheML's high tier does); otherwise an
// idle GPU; otherwise wait.
type UtilSum struct{ base }

// NewUtilSum returns the utilization-sum baseline; threshold <= 0 uses
// opts.UtilSumThreshold.
func NewUtilSum(threshold float64, opts Options) (*UtilSum, error) {
	if threshold > 0 {
		opts.UtilSumThreshold = threshold
	}
	b, err := newBase("utilsum", "", opts)
	if err != nil {
		return nil, err
	}
	b.rule = fmt.Sprintf("share when summed solo SM utilization <= %g%% (lowest sum first), else an idle GPU", b.opts.UtilSumThreshold)
	p := &UtilSum{b}
	p.bind()
	return p, nil
}

// Place chooses GPUs for r without changing c.
func (p *UtilSum) Place(c *Cluster, r *Request) Decision { return p.place(c, r, p) }

func (p *UtilSum) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	if st.nres == 0 {
		*cd = p.idle(st, gi, r, true)
		cd.key = keyTier
		return rejNone
	}
	if st.unknown > 0 {
		return rejUnknown
	}
	sum := st.sm + r.Profile.SMUtil.Mean
	if sum > p.opts.UtilSumThreshold {
		return rejThreshold
	}
	*cd = p.join(st, gi)
	cd.key = 2*keyTier - sum
	return rejNone
}

// Random puts the job on a feasible GPU (idle or shareable) drawn uniformly at
// random from a PCG generator seeded with the seed: one draw picks the k-th feasible
// GPU in cluster order (several GPUs: one draw per feasible GPU ranks them). The
// same seed and the same sequence of states give the same decisions.
type Random struct{ base }

// NewRandom returns the random baseline seeded with seed (ByName passes opts.Seed).
func NewRandom(seed uint64, opts Options) (*Random, error) {
	b, err := newBase("random", "drawn at random among feasible GPUs", opts)
	if err != nil {
		return nil, err
	}
	b.draw = rand.New(rand.NewPCG(seed, seed^0x5eed))
	p := &Random{base: b}
	p.bind()
	return p, nil
}

// Place chooses GPUs for r without changing c.
func (p *Random) Place(c *Cluster, r *Request) Decision { return p.place(c, r, p) }

func (p *Random) score(_ *Cluster, st *gpuState, _, gi int32, r *Request, cd *cand) reject {
	if st.nres == 0 {
		*cd = p.idle(st, gi, r, true)
	} else {
		*cd = p.join(st, gi)
	}
	return rejNone // the engine draws the rank key
}
