// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/residency"
)

// TestInPlaceUpdate: a small residency change is applied to the installed
// cluster in place (no new cluster), and the result equals a fresh build of
// the new residency with the pending reservations applied: the same residents
// on every GPU, consistent caches, the same placements. A large change, or
// entries that are not one per job and node, rebuild the cluster instead.
func TestInPlaceUpdate(t *testing.T) {
	edit := func(f func([]residency.Entry) []residency.Entry) func([]residency.Entry) []residency.Entry { return f }
	tests := []struct {
		name    string
		change  func([]residency.Entry) []residency.Entry
		inPlace bool
	}{
		{"nothing changed", edit(func(es []residency.Entry) []residency.Entry { return es }), true},
		{"jobs ended", edit(func(es []residency.Entry) []residency.Entry { return append(es[:3:3], es[10:]...) }), true},
		{"jobs started", edit(func(es []residency.Entry) []residency.Entry {
			return append(es, residency.Entry{V: 1, JobID: "90001", Node: "n2", GPUs: []int{0, 1}, Shards: 2, Tag: es[0].Tag},
				residency.Entry{V: 1, JobID: "90002", Node: "n3", GPUs: []int{7}, Tag: "unknown-tag"})
		}), true},
		{"a job's shards, GPUs and tag changed", edit(func(es []residency.Entry) []residency.Entry {
			es[0].Shards, es[1].GPUs, es[2].Tag = 4, []int{es[1].GPUs[0], 7}, es[5].Tag
			return es
		}), true},
		{"one node of a two-node job ended", edit(func(es []residency.Entry) []residency.Entry {
			es = append(es, residency.Entry{V: 1, JobID: "90003", Node: "n4", GPUs: []int{3}, Shards: 1, Tag: es[0].Tag},
				residency.Entry{V: 1, JobID: "90003", Node: "n5", GPUs: []int{3}, Shards: 1, Tag: es[0].Tag})
			return es[:len(es)-1]
		}), true},
		{"an unknown node", edit(func(es []residency.Entry) []residency.Entry {
			return append(es, residency.Entry{V: 1, JobID: "90004", Node: "elsewhere", GPUs: []int{0}, Tag: es[0].Tag})
		}), true},
		{"two entries for one job and node", edit(func(es []residency.Entry) []residency.Entry {
			return append(es, es[0])
		}), false},
		{"more jobs than an update takes", edit(func(es []residency.Entry) []residency.Entry {
			for i := range es[:maxDeltaJobs+1] {
				es[i].JobID = fmt.Sprintf("8%05d", i)
			}
			return es
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, tags := bigFixtureNodes(t, 64)
			measureDecide(t, f, tags, 20, true) // pending reservations
			prev := slices.Clone(f.e.refresh.entries)
			next := tt.change(cloneEntries(prev))
			st := f.e.snap.Load()
			before := f.e.view.cluster
			f.e.refresh.mu.Lock()
			f.e.install(st, next, nil, f.now)
			f.e.refresh.mu.Unlock()
			f.e.view.mu.Lock()
			got := f.e.view.cluster
			reserved := slices.Clone(f.e.view.res.list)
			f.e.view.mu.Unlock()
			if (got == before) != tt.inPlace {
				t.Fatalf("updated in place: %v, want %v", got == before, tt.inPlace)
			}
			if err := got.Check(); err != nil {
				t.Fatalf("caches after the update: %v", err)
			}
			want := buildCluster(st, next, nil)
			for i := range reserved {
				applyReservation(want, &reserved[i])
			}
			if diff := residentDiff(got, want); diff != "" {
				t.Fatalf("after the update, %s", diff)
			}
			if got.IdleGPUs() != want.IdleGPUs() {
				t.Errorf("idle GPUs %d, fresh build %d", got.IdleGPUs(), want.IdleGPUs())
			}
			for _, tag := range tags[:5] {
				pr := st.catalog[tag]
				r := &placement.Request{JobID: "probe", Tag: tag, Profile: pr, Class: pr.Class, GPUs: 1}
				f.e.view.mu.Lock()
				a := st.policy.Place(got, r)
				b := st.policy.Place(want, r)
				f.e.view.mu.Unlock()
				if !reflect.DeepEqual(a.Placement, b.Placement) {
					t.Errorf("%s: placed on the updated cluster %v, on a fresh one %v", tag, a.Placement, b.Placement)
				}
			}
			// The view's job index follows the new entries too.
			f.e.view.mu.Lock()
			defer f.e.view.mu.Unlock()
			for _, en := range next {
				if !f.e.view.running[en.JobID] {
					t.Fatalf("job %s of the new entries not known as running", en.JobID)
				}
			}
			if len(f.e.view.running) != len(jobIDs(next)) {
				t.Errorf("%d running jobs known, the entries hold %d", len(f.e.view.running), len(jobIDs(next)))
			}
		})
	}
}

// TestInPlaceUpdateAllocates: a refresh with a small change allocates nothing
// per GPU (its scratch is reused), unlike a rebuild.
func TestInPlaceUpdateAllocates(t *testing.T) {
	f, _ := bigFixtureNodes(t, 64)
	a := cloneEntries(f.e.refresh.entries)
	b := cloneEntries(a[1:])
	st := f.e.snap.Load()
	f.e.refresh.mu.Lock()
	defer f.e.refresh.mu.Unlock()
	flip := false
	allocs := testing.AllocsPerRun(20, func() {
		flip = !flip
		if flip {
			f.e.install(st, b, nil, f.now)
		} else {
			f.e.install(st, a, nil, f.now)
		}
	})
	t.Logf("allocations per refresh that ends or starts one job on 512 GPUs: %.0f", allocs)
	if allocs > 10 {
		t.Errorf("an in-place update made %.0f allocations", allocs)
	}
}

func cloneEntries(es []residency.Entry) []residency.Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].GPUs = slices.Clone(out[i].GPUs)
	}
	return out
}

func jobIDs(es []residency.Entry) map[string]bool {
	m := map[string]bool{}
	for _, en := range es {
		m[en.JobID] = true
	}
	return m
}

// residentDiff compares two clusters GPU by GPU, residents as a set (an
// in-place update appends where a build keeps the entries' order); "" when equal.
func residentDiff(a, b *placement.Cluster) string {
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("%d nodes, want %d", len(a.Nodes), len(b.Nodes))
	}
	byJob := func(x, y placement.Resident) int { return cmp.Compare(x.JobID, y.JobID) }
	for n := range a.Nodes {
		for g := range a.Nodes[n].GPUs {
			x := slices.SortedFunc(slices.Values(a.Nodes[n].GPUs[g].Residents), byJob)
			y := slices.SortedFunc(slices.Values(b.Nodes[n].GPUs[g].Residents), byJob)
			if len(x) != len(y) || (len(x) > 0 && !reflect.DeepEqual(x, y)) {
				return fmt.Sprintf("node %d GPU %d holds %+v, a fresh build %+v", n, g, x, y)
			}
		}
	}
	return ""
}

// TestInPlaceUpdateWhileDeciding: residency changes applied in place by the
// background goroutine while decisions reserve and drop GPUs on another leave
// the cluster as a fresh build of the last residency with the reservations
// still pending (run under -race too).
func TestInPlaceUpdateWhileDeciding(t *testing.T) {
	f, tags := bigFixtureNodes(t, 32)
	st := f.e.snap.Load()
	base := cloneEntries(f.e.refresh.entries)
	f.e.view.mu.Lock()
	installed := f.e.view.cluster
	f.e.view.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			f.e.refresh.mu.Lock()
			f.e.install(st, churn(base, 1+i%8, i), nil, f.now)
			f.e.refresh.mu.Unlock()
		}
	}()
	kept := 0
	for i := 0; ; i++ {
		select {
		case <-done:
			f.e.view.mu.Lock()
			defer f.e.view.mu.Unlock()
			c := f.e.view.cluster
			if c != installed {
				t.Fatal("the updates replaced the cluster instead of updating it in place")
			}
			if err := c.Check(); err != nil {
				t.Fatalf("caches after concurrent updates: %v", err)
			}
			want := buildCluster(st, f.e.refresh.entries, nil)
			for j := range f.e.view.res.list {
				applyReservation(want, &f.e.view.res.list[j])
			}
			if diff := residentDiff(c, want); diff != "" {
				t.Fatalf("after %d decisions (%d kept) and 200 updates, %s", i, kept, diff)
			}
			return
		default:
		}
		if i%3 == 0 {
			f.e.Decide(job("coscheml:app=" + tags[i%len(tags)])) // kept: a pending reservation
			kept++
		} else {
			decideAndForget(f, job("coscheml:app="+tags[i%len(tags)]))
		}
	}
}
