// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/policyname"
	"math/rand/v2"
	"reflect"
	"testing"
)

// firstFitLands is Slurm 22.05's shard allocator, brute force: the lowest GPU of
// the node with at least k free slots (-1: none).
func firstFitLands(node *Node, k int) int {
	for g := range node.GPUs {
		if freeSlots(&node.GPUs[g]) >= k {
			return g
		}
	}
	return -1
}

func freeSlots(gpu *GPU) int {
	f := gpu.Slots
	for _, r := range gpu.Residents {
		f -= r.Slots
	}
	return f
}

// reachable: some shard count lands on GPU g of node (brute force over every count).
func reachable(node *Node, g int) bool {
	for k := 1; k <= node.GPUs[g].Slots; k++ {
		if firstFitLands(node, k) == g {
			return true
		}
	}
	return false
}

// churnCluster is a random cluster built and changed through Apply and Remove
// (so the open lists are the incrementally kept ones): 1-6 nodes of 1-8 GPUs,
// 2-8 slots, residents of random sizes (sometimes over-subscribing), some
// unprofiled, some reservations.
func churnCluster(rng *rand.Rand) *Cluster {
	cat := catalog(8, 3)
	cat = append(cat, nil)
	c := NewCluster(1+rng.IntN(6), 1+rng.IntN(8), 24000, 2+rng.IntN(7))
	var live []string
	for step := 0; step < 20+rng.IntN(60); step++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			c.Remove(live[i])
			live = append(live[:i], live[i+1:]...)
			continue
		}
		id := fmt.Sprint("j", step)
		n := rng.IntN(len(c.Nodes))
		g := rng.IntN(len(c.Nodes[n].GPUs))
		r := req(id, cat[rng.IntN(len(cat))], 1)
		if rng.IntN(4) == 0 {
			r.Kind = Reserved
		}
		c.Apply(r, Decision{Action: ActionShare, Placement: []Slot{{n, g, 1 + rng.IntN(c.Nodes[n].GPUs[g].Slots)}}})
		live = append(live, id)
	}
	return c
}

// perGPUNodes copies c with each GPU on a node of its own (same global order),
// typed, so a node mask can select exactly the GPUs first fit reaches.
func perGPUNodes(c *Cluster) *Cluster {
	d := &Cluster{}
	for _, node := range c.Nodes {
		for _, gpu := range node.GPUs {
			gpu.Residents = append([]Resident(nil), gpu.Residents...)
			d.Nodes = append(d.Nodes, Node{Name: node.Name, GPUs: []GPU{gpu}})
		}
	}
	d.Reindex()
	return d
}

// A decision through WithReach(ReachFirstFit) on a typed cluster is the decision
// on the same cluster made first-fit, and it equals a brute-force oracle: every
// policy, asked on a copy with one GPU per node and a node mask of exactly the
// GPUs some shard count reaches (Slurm's allocator simulated count by count),
// picks the same GPU with the same predictions; the shard count is the smallest
// one at least the policy's that first fit lands on that GPU.
func TestWithReachMatchesBruteForce(t *testing.T) {
	var placed, steered, waits, hidden int // the draws must exercise each case
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 12))
		c := churnCluster(rng)
		if err := c.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		view := c.WithReach(ReachFirstFit)
		native := c.Clone()
		native.Reach = ReachFirstFit
		split := perGPUNodes(c)
		var nodeOf []int // original node of each global GPU
		for n, node := range c.Nodes {
			for g := range node.GPUs {
				nodeOf = append(nodeOf, n)
				if !reachable(&c.Nodes[n], g) && freeSlots(&node.GPUs[g]) > 0 {
					if gi := c.ix.nodeOff[n] + int32(g); !c.ix.gpus[gi].hidden {
						t.Fatalf("seed %d: node %d GPU %d unreachable but not hidden", seed, n, g)
					}
					hidden++
				}
			}
		}
		cat := catalog(8, 3)
		for ri := 0; ri < 6; ri++ {
			r := req("q", cat[rng.IntN(len(cat))], 1)
			if ri%3 == 2 { // a node filter too
				r.Nodes = make([]bool, len(c.Nodes))
				for n := range r.Nodes {
					r.Nodes[n] = rng.IntN(2) == 0
				}
			}
			mask := make([]bool, len(split.Nodes))
			for gi := range mask {
				n := nodeOf[gi]
				mask[gi] = r.allows(int32(n)) && reachable(&c.Nodes[n], gi-int(c.ix.nodeOff[n]))
			}
			sr := *r
			sr.Nodes = mask
			for _, name := range Names() {
				if policyname.Peer(name) {
					continue // simulator-only schedulers of their own: no Slurm first fit to steer
				}
				got := mustPolicy(t, name, Options{Seed: seed}).Place(view, r)
				if same := mustPolicy(t, name, Options{Seed: seed}).Place(native, r); !reflect.DeepEqual(got, same) {
					t.Fatalf("seed %d %s: view and first-fit cluster differ:\n%+v\n%+v", seed, name, got, same)
				}
				want := mustPolicy(t, name, Options{Seed: seed}).Place(split, &sr)
				if (got.Action == ActionWait) != (want.Action == ActionWait) {
					t.Fatalf("seed %d %s: %v, oracle %v\n%s\n%s", seed, name, got.Action, want.Action, got.Reason, want.Reason)
				}
				if got.Action == ActionWait {
					waits++
					continue
				}
				placed++
				s := got.Placement[0]
				gi := int(c.ix.nodeOff[s.Node]) + s.GPU
				if gi != want.Placement[0].Node || got.Action != want.Action ||
					got.PredictedSpeed != want.PredictedSpeed || got.MinResidentSpeed != want.MinResidentSpeed {
					t.Fatalf("seed %d %s: GPU %d %+v, oracle GPU %d %+v", seed, name, gi, got, want.Placement[0].Node, want)
				}
				k := want.Placement[0].Slots
				for firstFitLands(&c.Nodes[s.Node], k) != s.GPU {
					k++
				}
				if k != want.Placement[0].Slots {
					steered++
				}
				if s.Slots != k {
					t.Fatalf("seed %d %s: %d shards, the smallest count from %d landing on GPU %d is %d", seed, name, s.Slots, want.Placement[0].Slots, s.GPU, k)
				}
			}
		}
		if c.Reach != ReachTyped {
			t.Fatalf("seed %d: the view changed the cluster's reach", seed)
		}
	}
	if placed == 0 || steered == 0 || waits == 0 || hidden == 0 {
		t.Fatalf("draws too narrow: %d placed, %d steered, %d waits, %d hidden GPUs", placed, steered, waits, hidden)
	}
	t.Logf("%d placed (%d steered), %d waits, %d hidden GPUs", placed, steered, waits, hidden)
}
