// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"testing"

	"github.com/coscheml/coscheml/internal/racebuild"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// BenchmarkCoScheMLPlace measures one Co-scheML decision on clusters of 8-GPU nodes
// with about half the GPUs busy (one or two residents from a catalog of 50
// applications). The target is < 100 µs at 1,000 nodes, with allocs/op independent
// of the cluster size. "warm": the policy's prediction memo persists across
// decisions, as it does in a running scheduler; "cold": it is emptied before each
// decision, so every distinct resident set is predicted again. Run:
//
//	go test -run x -bench CoScheMLPlace -benchmem ./pkg/placement/
func BenchmarkCoScheMLPlace(b *testing.B) {
	cat := catalog(50, 1)
	for _, nodes := range []int{100, 500, 1000} {
		c := busyCluster(nodes, cat, 2)
		for _, cold := range []bool{false, true} {
			name := fmt.Sprintf("nodes=%d/warm", nodes)
			if cold {
				name = fmt.Sprintf("nodes=%d/cold", nodes)
			}
			b.Run(name, func(b *testing.B) { benchPlace(b, c, fakePred{k: 0.5}, cat, cold) })
		}
	}
}

func benchPlace(b *testing.B, c *Cluster, pred model.Predictor, cat []*profile.Profile, cold bool) {
	p, err := NewCoScheML(pred, Options{})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*Request, len(cat))
	for i, pr := range cat {
		reqs[i] = req("bench", pr, 1)
	}
	b.ReportAllocs()
	cpu, n := cpuTimeNS(), 0
	for i := 0; b.Loop(); i++ {
		if cold {
			p.memo.forget()
		}
		p.Place(c, reqs[i%len(reqs)])
		n++
	}
	reportCPU(b, cpu, n)
	b.ReportMetric(float64(c.states()), "states")
}

// reportCPU adds cpu-ns/op: process CPU time per decision (0 where unsupported).
func reportCPU(b *testing.B, start int64, n int) {
	if end := cpuTimeNS(); start > 0 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkCoScheMLPlaceDefaultModel is the same decision at 1,000 nodes with the
// shipped model (models/default.model) instead of the fake predictor.
func BenchmarkCoScheMLPlaceDefaultModel(b *testing.B) {
	m, err := model.Default()
	if err != nil {
		b.Skip("no default model:", err)
	}
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	b.Run("warm", func(b *testing.B) { benchPlace(b, c, m, cat, false) })
	b.Run("cold", func(b *testing.B) { benchPlace(b, c, m, cat, true) })
}

// BenchmarkPlace compares every policy on the 1,000-node cluster.
func BenchmarkPlace(b *testing.B) {
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			p := mustPolicy(b, name, Options{Seed: 1})
			r := req("bench", cat[7], 1)
			benchDecisions(b, p, c, r)
		})
	}
}

// BenchmarkPlaceMultiGPU: an 8-GPU request on the 1,000-node cluster.
func BenchmarkPlaceMultiGPU(b *testing.B) {
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	p := mustPolicy(b, "coscheml", Options{})
	benchDecisions(b, p, c, req("bench", cat[7], 8))
}

// benchDecisions places r on c over and over, reporting allocations and CPU.
func benchDecisions(b *testing.B, p Policy, c *Cluster, r *Request) {
	b.ReportAllocs()
	cpu, n := cpuTimeNS(), 0
	for b.Loop() {
		p.Place(c, r)
		n++
	}
	reportCPU(b, cpu, n)
}

// BenchmarkPlaceSpan: a job of -N m with 4 GPUs per node on the 1,000-node
// cluster (8,000 GPUs), m = 2 and 4: the span search compares at most
// maxSpanSeeds starting nodes with every node.
func BenchmarkPlaceSpan(b *testing.B) {
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	p := mustPolicy(b, "coscheml", Options{})
	for _, span := range []int{2, 4} {
		b.Run(fmt.Sprintf("nodes=%d", span), func(b *testing.B) {
			r := req("bench", cat[7], 4*span)
			r.SpanNodes = span
			benchDecisions(b, p, c, r)
		})
	}
}

// BenchmarkApplyRemove: the simulator's churn.
func BenchmarkApplyRemove(b *testing.B) {
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	p := mustPolicy(b, "coscheml", Options{})
	r := req("churn", cat[3], 1)
	d := p.Place(c, r)
	b.ReportAllocs()
	cpu, n := cpuTimeNS(), 0
	for b.Loop() {
		c.Apply(r, d)
		c.Remove("churn")
		n++
	}
	reportCPU(b, cpu, n)
}

// No allocation per GPU scanned: a decision on 10x the GPUs allocates the same. The
// large cluster repeats the small one ten times, so every policy but random makes
// the same decision (ties go to the lowest GPU) and words the same reason.
func TestAllocsDoNotGrowWithCluster(t *testing.T) {
	if racebuild.Enabled {
		t.Skip("allocation counts differ under the race detector (make race); checked by make unit")
	}
	cat := catalog(50, 1)
	small := busyCluster(100, cat, 2)
	large := tile(small, 10)
	for _, name := range Names() {
		if name == "random" {
			continue
		}
		for _, gpus := range []int{1, 4} {
			var allocs [2]float64
			for i, c := range []*Cluster{small, large} {
				p := mustPolicy(t, name, Options{})
				r := req("a", cat[7], gpus)
				p.Place(c, r) // size the scratch buffers
				allocs[i] = testing.AllocsPerRun(5, func() { p.Place(c, r) })
			}
			if allocs[1] != allocs[0] {
				t.Errorf("%s, %d GPUs: %v allocations at 100 nodes, %v at 1,000", name, gpus, allocs[0], allocs[1])
			}
		}
	}
	// A full cluster: every policy waits, and the reason counts 800 or 8,000 GPUs.
	full := NewCluster(100, 8, 81920, 4)
	for n := range full.Nodes {
		for g := range full.Nodes[n].GPUs {
			put(full, fmt.Sprintf("f%d-%d", n, g), cat[(n+g)%len(cat)], n, g, 4)
		}
	}
	fullLarge := tile(full, 10)
	for _, name := range Names() {
		var allocs [2]float64
		for i, c := range []*Cluster{full, fullLarge} {
			p := mustPolicy(t, name, Options{})
			r := req("a", cat[7], 1)
			if d := p.Place(c, r); d.Action != ActionWait {
				t.Fatalf("%s placed on a full cluster: %s", name, d.Reason)
			}
			allocs[i] = testing.AllocsPerRun(5, func() { p.Place(c, r) })
		}
		if allocs[1] != allocs[0] {
			t.Errorf("%s, wait: %v allocations at 100 nodes, %v at 1,000", name, allocs[0], allocs[1])
		}
	}
}

// tile returns k copies of c's nodes side by side (residents get new job IDs).
func tile(c *Cluster, k int) *Cluster {
	n := len(c.Nodes)
	out := NewCluster(n*k, len(c.Nodes[0].GPUs), c.Nodes[0].GPUs[0].MemMiB, c.Nodes[0].GPUs[0].Slots)
	for i := range out.Nodes {
		for g, gpu := range c.Nodes[i%n].GPUs {
			for _, res := range gpu.Residents {
				id := res.JobID // the first copy keeps its IDs: reasons name them
				if i >= n {
					id = fmt.Sprintf("%s-%d", id, i/n)
				}
				r := &Request{JobID: id, Profile: res.Profile, Class: res.Class, GPUs: 1}
				out.Apply(r, Decision{Action: ActionShare, Placement: []Slot{{i, g, res.Slots}}})
			}
		}
	}
	return out
}

// BenchmarkCoScheMLPlaceWorstCase: 1,000 nodes, half the GPUs busy, every busy GPU
// running a different application (a catalog of 4,000), so no two GPUs share a
// state; requests come from the first 50 applications.
func BenchmarkCoScheMLPlaceWorstCase(b *testing.B) {
	cat := catalog(4000, 1)
	c := NewCluster(1000, 8, 81920, DefaultSlots)
	k := 0
	for n := range c.Nodes {
		for g := 0; g < 8; g += 2 {
			put(c, fmt.Sprint("w", k), cat[k], n, g, 2)
			k++
		}
	}
	b.Run("warm", func(b *testing.B) { benchPlace(b, c, fakePred{k: 0.5}, cat[:50], false) })
	b.Run("cold", func(b *testing.B) { benchPlace(b, c, fakePred{k: 0.5}, cat[:50], true) })
}

// states counts the distinct GPU states (non-empty buckets) of an indexed cluster.
func (c *Cluster) states() int {
	n := 0
	for _, b := range c.ix.buckets {
		if len(b.members) > 0 {
			n++
		}
	}
	return n
}

// BenchmarkWithReach: a re-decision on releases that refuse typed updates, on
// the 1,000 x 8 cluster of BenchmarkPlace (typed): "view" is the first-fit view
// alone (no indexing), "redecide" the view and a coscheml decision on it, to
// compare with BenchmarkPlace/coscheml (the same decision on the typed cluster).
func BenchmarkWithReach(b *testing.B) {
	cat := catalog(50, 1)
	c := busyCluster(1000, cat, 2)
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		cpu, n := cpuTimeNS(), 0
		for b.Loop() {
			_ = c.WithReach(ReachFirstFit)
			n++
		}
		reportCPU(b, cpu, n)
	})
	b.Run("redecide", func(b *testing.B) {
		p := mustPolicy(b, "coscheml", Options{})
		r := req("bench", cat[7], 1)
		b.ReportAllocs()
		cpu, n := cpuTimeNS(), 0
		for b.Loop() {
			p.Place(c.WithReach(ReachFirstFit), r)
			n++
		}
		reportCPU(b, cpu, n)
	})
}
