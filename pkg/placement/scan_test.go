// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/policyname"
	"math/rand/v2"
	"testing"
)

// refScan is a straightforward reference for the engine's single-GPU scan: every
// GPU in cluster order, its state recomputed from its residents, its reach
// brute-forced from its node's free slots, filtered and scored on its own (no
// buckets, no summaries, no rows), the best by rank key then lowest index.
func refScan(c *Cluster, r *Request, e *engine, sc scorer) (best cand, found bool, ok int, rejects [nReject]int) {
	firstFit := c.Reach == ReachFirstFit
	gi := int32(0)
	for n := range c.Nodes {
		for g := range c.Nodes[n].GPUs {
			gpu := &c.Nodes[n].GPUs[g]
			st := summarize(gpu, int32(n), c.Nodes[n].Model, c.ix)
			cur := gi
			gi++
			switch {
			case !r.allows(int32(n)):
				rejects[rejNode]++
				continue
			case firstFit && freeSlots(gpu) > 0 && !reachable(&c.Nodes[n], g):
				rejects[rejUnreachable]++
				continue
			}
			why := rejNone
			switch {
			case st.nres == 0:
			case !e.shares:
				why = rejBusy
			default:
				why = shareFeasible(e.opts, &st, r)
			}
			var cd cand
			if why == rejNone {
				why = sc.score(c, &st, -1, cur, r, &cd)
			}
			if why != rejNone {
				rejects[why]++
				continue
			}
			ok++
			if !found || better(&cd, &best) {
				best, found = cd, true
			}
		}
	}
	return best, found, ok, rejects
}

// The scan over packed bucket summaries and per-request rows decides exactly as the reference GPU-by-GPU scan on random clusters:
// the same GPU, speeds, count of acceptable GPUs and rejections by reason, for
// every deterministic policy, typed and first-fit, with and without a node
// filter, and again after the clusters change (rows and summaries kept
// incrementally, a rebuild renumbering the buckets).
func TestScanMatchesReference(t *testing.T) {
	var placed, waits, multi int
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		c := churnCluster(rng)
		cat := catalog(8, 3)
		pols := map[string]Policy{}
		for _, name := range Names() {
			// random draws (pinned by TestRandomIsSeededAndFeasible); the peers
			// have rules of their own (peers_test.go).
			if name != "random" && !policyname.Peer(name) {
				pols[name] = mustPolicy(t, name, Options{Seed: seed})
			}
		}
		for round := 0; round < 3; round++ {
			if round == 2 {
				c.Reindex() // renumbered buckets: the rows must only miss
			}
			if err := c.Check(); err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
			for _, b := range c.ix.buckets {
				if len(b.members) > 1 {
					multi++
				}
			}
			for ri := 0; ri < 8; ri++ {
				r := req("q", cat[rng.IntN(len(cat))], 1)
				if ri%4 == 3 {
					r.Nodes = make([]bool, len(c.Nodes))
					for n := range r.Nodes {
						r.Nodes[n] = rng.IntN(2) == 0
					}
				}
				for _, reach := range []Reach{ReachTyped, ReachFirstFit} {
					view := c.WithReach(reach)
					for name, pol := range pols {
						got := pol.Place(view, r)
						e, sc := policyEngine(pol)
						// The reference scores with the same policy value, as a
						// fresh decision (CoScheML's cycle as Place left it for
						// this request, its closest refusal cleared).
						if p, ok := pol.(*CoScheML); ok {
							p.cycle.fail.ok, p.cycle.lowShare = false, false
						}
						best, found, ok, rejects := refScan(view, r, e, sc)
						if rejects != e.rejects {
							t.Fatalf("seed %d %s %v: rejections %v, reference %v", seed, name, reach, e.rejects, rejects)
						}
						if !found {
							if got.Action != ActionWait {
								t.Fatalf("seed %d %s %v: %v, reference waits\n%s", seed, name, reach, got.Action, got.Reason)
							}
							waits++
							continue
						}
						if got.Action == ActionWait {
							t.Fatalf("seed %d %s %v: waits, reference GPU %d\n%s", seed, name, reach, best.gi, got.Reason)
						}
						placed++
						s := got.Placement[0]
						gi := view.ix.nodeOff[s.Node] + int32(s.GPU)
						if gi != best.gi || got.PredictedSpeed != best.speed || got.MinResidentSpeed != best.minRes ||
							(got.Action == ActionShare) != best.share || int32(s.Node) != best.node {
							t.Fatalf("seed %d %s %v: GPU %d %+v, reference %+v (%d acceptable)", seed, name, reach, gi, got, best, ok)
						}
					}
				}
			}
			// Change the cluster between rounds through Apply and Remove.
			for k := 0; k < 5; k++ {
				n := rng.IntN(len(c.Nodes))
				g := rng.IntN(len(c.Nodes[n].GPUs))
				id := fmt.Sprintf("x%d-%d", round, k)
				c.Apply(req(id, cat[rng.IntN(len(cat))], 1), Decision{Action: ActionShare, Placement: []Slot{{n, g, 1}}})
				if k%2 == 1 {
					c.Remove(fmt.Sprintf("x%d-%d", round, k-1))
				}
			}
		}
	}
	if placed == 0 || waits == 0 || multi == 0 {
		t.Fatalf("draws too narrow: %d placed, %d waits, %d multi-GPU buckets", placed, waits, multi)
	}
	t.Logf("%d placements, %d waits; %d buckets of several GPUs", placed, waits, multi)
}

// policyEngine is a policy's engine and scorer.
func policyEngine(p Policy) (*engine, scorer) {
	switch p := p.(type) {
	case *CoScheML:
		return &p.e, p
	case *Exclusive:
		return &p.e, p
	case *Blind:
		return &p.e, p
	case *LeastLoaded:
		return &p.e, p
	case *UtilSum:
		return &p.e, p
	case *Random:
		return &p.e, p
	}
	panic(fmt.Sprintf("unknown policy %T", p))
}

// A bucket with no member the request may use (all on nodes its filter
// refuses, or all out of first fit's reach) is refused in the bucket results
// the multi-GPU and random selections read, never left as an acceptable
// bucket with the candidate of another bucket or decision.
func TestEvalBucketsNoEligibleMember(t *testing.T) {
	lone := prof("lone", "train", 30, 2000)
	tests := []struct {
		name  string
		reach Reach
		nodes []bool
		gpus  int
	}{
		// node 1's GPU 0 holds a resident: its bucket has members on node 1 only
		{"node filter, one GPU", ReachTyped, []bool{true, false}, 1},
		{"node filter, several GPUs", ReachTyped, []bool{true, false}, 2},
		// residents on both nodes' GPU 1 instead: behind idle GPUs 0 with more
		// free slots, both are hidden from first fit
		{"first fit, one GPU", ReachFirstFit, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster(2, 2, 81920, DefaultSlots)
			if tc.reach == ReachFirstFit {
				put(c, "r0", lone, 0, 1, 2)
				put(c, "r1", lone, 1, 1, 2)
			} else {
				put(c, "r1", lone, 1, 0, 2)
			}
			c.Reach = tc.reach
			pol := mustPolicy(t, "coscheml", Options{})
			p := pol.(*CoScheML)
			r := req("new", prof("new", "train", 20, 2000), tc.gpus)
			r.Nodes = tc.nodes
			// a first evaluation that accepts every bucket leaves candidates behind
			p.e.evalBuckets(c, req("any", prof("any", "train", 20, 2000), 1), p, true)
			p.cycle = cycle{floorNew: p.opts.Floors.For(classOf(r.Class, r.Profile))}
			p.e.evalBuckets(c, r, p, true)
			for bi := range c.ix.buckets {
				b := &c.ix.buckets[bi]
				eligible := 0
				for _, gi := range b.members {
					if r.allows(c.ix.gpus[gi].node) && !(tc.reach == ReachFirstFit && tc.gpus == 1 && c.ix.gpus[gi].hidden) {
						eligible++
					}
				}
				if eligible == 0 && len(b.members) > 0 && p.e.bucketResults[bi].why == rejNone {
					t.Errorf("bucket %d (members %v): no eligible member, marked acceptable with candidate %+v", bi, b.members, p.e.bucketResults[bi].cd)
				}
			}
		})
	}
}
