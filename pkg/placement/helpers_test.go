// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math/rand/v2"

	"github.com/coscheml/coscheml/pkg/profile"
)

// fakePred is a stand-in for the model: a job slows down in proportion to its
// co-runners' summed solo SM utilization, speed = 1 - k * sum/100, clipped to
// [0.05, 1]. It allocates nothing and is deterministic, like the real predictor.
type fakePred struct{ k float64 }

func (f fakePred) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	sum := 0.0
	for _, p := range co {
		sum += p.SMUtil.Mean
	}
	return min(1, max(0.05, 1-f.k*sum/100))
}

// countingPred counts calls, to show the memo works.
type countingPred struct {
	fakePred
	calls *int
}

func (c countingPred) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	*c.calls++
	return c.fakePred.PredictSpeed(job, co)
}

func prof(tag string, cl profile.Class, sm, memMiB float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: cl, SMUtil: profile.Stat{Mean: sm}, MemUsedMiB: memMiB}
}

func req(id string, p *profile.Profile, gpus int) *Request {
	r := &Request{JobID: id, Profile: p, GPUs: gpus}
	if p != nil {
		r.Tag, r.Class = p.Tag, p.Class
	}
	return r
}

// put makes job id resident on node n GPU g with slots slots.
func put(c *Cluster, id string, p *profile.Profile, n, g, slots int) {
	r := req(id, p, 1)
	c.Apply(r, Decision{Action: ActionShare, Placement: []Slot{{Node: n, GPU: g, Slots: slots}}})
}

// catalog returns n profiles with varied utilization and memory, as a catalog of
// applications would have.
func catalog(n int, seed uint64) []*profile.Profile {
	rng := rand.New(rand.NewPCG(seed, 1))
	classes := []profile.Class{profile.ClassTrain, profile.ClassHPC, profile.ClassInfer}
	out := make([]*profile.Profile, n)
	for i := range out {
		out[i] = prof(fmt.Sprintf("app%02d", i), classes[i%3], 5+rng.Float64()*90, 1000+rng.Float64()*20000)
		out[i].MemBWUtil = profile.Stat{Mean: out[i].SMUtil.Mean * (0.2 + 0.6*rng.Float64())}
		out[i].SMUtil.P95 = min(100, out[i].SMUtil.Mean*1.2)
		out[i].MemBWUtil.P95 = min(100, out[i].MemBWUtil.Mean*1.2)
	}
	return out
}

// busyCluster returns nodes x 8 GPUs of 80 GiB where about half the GPUs hold one or
// two residents drawn from cat.
func busyCluster(nodes int, cat []*profile.Profile, seed uint64) *Cluster {
	c := NewCluster(nodes, 8, 81920, DefaultSlots)
	rng := rand.New(rand.NewPCG(seed, 2))
	job := 0
	for n := range c.Nodes {
		for g := range c.Nodes[n].GPUs {
			if rng.IntN(2) == 0 {
				continue
			}
			k := 1 + rng.IntN(2)
			for range k {
				job++
				put(c, fmt.Sprintf("j%d", job), cat[rng.IntN(len(cat))], n, g, 2)
			}
		}
	}
	return c
}
