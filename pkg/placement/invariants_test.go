// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Whatever the state, a decision of any policy respects the sharing rules: the
// GPUs are distinct and as many as asked, slots and co-runner limits hold, memory
// fits on shared GPUs, exclusive takes idle GPUs only, and Co-scheML never puts an
// affected job below its floor by its own predictor.
func TestDecisionInvariants(t *testing.T) {
	cat := catalog(20, 11)
	opts, _ := Options{}.withDefaults()
	rng := rand.New(rand.NewPCG(5, 6))
	actions := map[Action]int{}
	for trial := 0; trial < 40; trial++ {
		c := NewCluster(1+rng.IntN(6), 1+rng.IntN(4), 16000+float64(rng.IntN(3))*16000, 4)
		if trial%2 == 1 {
			c.Reach = ReachFirstFit
			c.Reindex()
		}
		policies := map[string]Policy{}
		for _, name := range Names() {
			policies[name] = mustPolicy(t, name, Options{Seed: uint64(trial)})
		}
		for step := 0; step < 30; step++ {
			name := Names()[rng.IntN(len(Names()))]
			var p *profile.Profile
			if rng.IntN(10) > 0 {
				p = cat[rng.IntN(len(cat))]
			}
			gpus := 1 // mostly single-GPU jobs, the ones that may share
			if rng.IntN(3) == 0 {
				gpus = 2 + rng.IntN(2)
			}
			r := req(fmt.Sprintf("%d-%d", trial, step), p, gpus)
			d := policies[name].Place(c, r)
			actions[d.Action]++
			if d.Reason == "" {
				t.Fatalf("%s: decision without a reason", name)
			}
			if d.Action == ActionWait {
				if len(d.Placement) != 0 {
					t.Fatalf("%s: wait with a placement", name)
				}
				continue
			}
			checkDecision(t, c, r, d, name, &opts)
			c.Apply(r, d)
			if rng.IntN(3) == 0 { // churn
				c.Remove(fmt.Sprintf("%d-%d", trial, rng.IntN(step+1)))
			}
		}
	}
	for _, a := range []Action{ActionWait, ActionExclusive, ActionShare} {
		if actions[a] < 50 {
			t.Errorf("only %d %v decisions: %v", actions[a], a, actions)
		}
	}
}

func checkDecision(t *testing.T, c *Cluster, r *Request, d Decision, name string, o *Options) {
	t.Helper()
	if len(d.Placement) != r.GPUs {
		t.Fatalf("%s: %d GPUs for a request of %d", name, len(d.Placement), r.GPUs)
	}
	if r.GPUs > 1 {
		oneNode := true
		for _, s := range d.Placement {
			oneNode = oneNode && s.Node == d.Placement[0].Node
		}
		if c.Reach == ReachFirstFit || name == "exclusive" || !oneNode {
			// Where Slurm cannot name each GPU's shards, or over several nodes,
			// several GPUs are whole idle GPUs (gres/gpu): Slurm gives them only
			// where no shard is allocated, and no shard joins them.
			for _, s := range d.Placement {
				if g := &c.Nodes[s.Node].GPUs[s.GPU]; len(g.Residents) > 0 || s.Slots != g.Slots {
					t.Fatalf("%s: %d GPUs: n%d/gpu%d has %d residents, %d of %d slots taken: %s", name, r.GPUs, s.Node, s.GPU, len(g.Residents), s.Slots, g.Slots, d.Reason)
				}
			}
		} else {
			// On one node of a typed cluster: the same K shards on each GPU,
			// "gres/shard:gI:K,gres/shard:gJ:K"; each GPU is checked below.
			for _, s := range d.Placement {
				if s.Slots != d.Placement[0].Slots {
					t.Fatalf("%s: %d GPUs with different shard counts %v: %s", name, r.GPUs, d.Placement, d.Reason)
				}
			}
		}
	}
	if c.Reach == ReachFirstFit && len(d.Placement) == 1 {
		// Slurm's first-fit allocator must land exactly there with these slots:
		// more than every lower GPU's free slots, within the GPU's own.
		s := d.Placement[0]
		for g := 0; g <= s.GPU; g++ {
			gpu := &c.Nodes[s.Node].GPUs[g]
			free := gpu.Slots
			for _, res := range gpu.Residents {
				free -= res.Slots
			}
			if (g < s.GPU && s.Slots <= free) || (g == s.GPU && s.Slots > free) {
				t.Fatalf("%s: first-fit: %d slots do not land on GPU %d (GPU %d has %d free): %s", name, s.Slots, s.GPU, g, free, d.Reason)
			}
		}
	}
	seen := map[[2]int]bool{}
	share := false
	for _, s := range d.Placement {
		if seen[[2]int{s.Node, s.GPU}] {
			t.Fatalf("%s: GPU %v twice", name, s)
		}
		seen[[2]int{s.Node, s.GPU}] = true
		gpu := &c.Nodes[s.Node].GPUs[s.GPU]
		used, mem := 0, 0.0
		for _, res := range gpu.Residents {
			used += res.Slots
			if res.Profile != nil {
				mem += res.Profile.MemUsedMiB
			}
		}
		if s.Slots < 1 || used+s.Slots > gpu.Slots {
			t.Fatalf("%s: takes %d slots, %d of %d used", name, s.Slots, used, gpu.Slots)
		}
		if len(gpu.Residents) == 0 {
			if (r.Profile == nil || name == "exclusive") && s.Slots != gpu.Slots {
				t.Fatalf("%s: idle GPU with %d of %d slots for an exclusive placement", name, s.Slots, gpu.Slots)
			}
			continue
		}
		share = true
		switch {
		case name == "exclusive" || r.Profile == nil:
			t.Fatalf("%s: shares a busy GPU (profile %v)", name, r.Profile != nil)
		case len(gpu.Residents)+1 > o.MaxCoRunners:
			t.Fatalf("%s: %d jobs on one GPU", name, len(gpu.Residents)+1)
		case mem+r.Profile.MemUsedMiB > gpu.MemMiB:
			t.Fatalf("%s: memory %v + %v > %v", name, mem, r.Profile.MemUsedMiB, gpu.MemMiB)
		}
		if name == "coscheml" || name == "oracle" {
			co := []*profile.Profile{}
			for _, res := range gpu.Residents {
				co = append(co, res.Profile)
			}
			if s := pred.PredictSpeed(r.Profile, co); s < o.Floors.For(classOf(r.Class, r.Profile)) {
				t.Fatalf("%s: new job at %v below its floor: %s", name, s, d.Reason)
			}
			for i, res := range gpu.Residents {
				others := []*profile.Profile{r.Profile}
				for j, other := range gpu.Residents {
					if j != i {
						others = append(others, other.Profile)
					}
				}
				if s := pred.PredictSpeed(res.Profile, others); s < o.Floors.For(classOf(res.Class, res.Profile)) {
					t.Fatalf("%s: resident %s at %v below its floor: %s", name, res.JobID, s, d.Reason)
				}
			}
		}
	}
	if share != (d.Action == ActionShare) {
		t.Fatalf("%s: action %v, shares %v", name, d.Action, share)
	}
}
