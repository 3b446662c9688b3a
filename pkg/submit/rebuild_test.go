// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"reflect"
	"testing"

	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/residency"
)

// TestRebuildReusesSpare: the background loop rebuilds the cluster into the one
// the previous install replaced. The result must equal a fresh build of the same
// residency (nodes, residents, caches), whatever the spare held before, and the
// rebuild must reuse the spare's memory rather than allocate a new cluster.
func TestRebuildReusesSpare(t *testing.T) {
	f, _ := bigFixtureNodes(t, 16)
	st := f.e.snap.Load()
	full := f.e.refresh.entries
	for _, tc := range []struct {
		name        string
		spare, want []residency.Entry
	}{
		{"busy spare, fewer jobs", full, full[:len(full)/3]},
		{"empty spare, all jobs", nil, full},
		{"same residency", full, full},
		{"busy spare, no jobs", full, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spare := buildCluster(st, tc.spare, nil)
			got := buildCluster(st, tc.want, spare)
			fresh := buildCluster(st, tc.want, nil)
			if got != spare {
				t.Error("the rebuild did not reuse the spare cluster")
			}
			if err := got.Check(); err != nil {
				t.Fatalf("rebuilt cluster's caches: %v", err)
			}
			if !sameNodes(got.Nodes, fresh.Nodes) {
				t.Fatal("rebuilt into a spare, the nodes differ from a fresh build")
			}
			if got.IdleGPUs() != fresh.IdleGPUs() || got.NumGPUs() != fresh.NumGPUs() {
				t.Errorf("idle/total GPUs %d/%d, fresh build %d/%d", got.IdleGPUs(), got.NumGPUs(), fresh.IdleGPUs(), fresh.NumGPUs())
			}
			// The same request lands on the same GPUs on both.
			pr := st.catalog[full[0].Tag]
			r := &placement.Request{JobID: "probe", Tag: pr.Tag, Profile: pr, Class: pr.Class, GPUs: 1}
			a, b := st.policy.Place(got, r), st.policy.Place(fresh, r)
			if !reflect.DeepEqual(a.Placement, b.Placement) {
				t.Errorf("placement on the rebuilt cluster %v, on a fresh one %v", a.Placement, b.Placement)
			}
		})
	}
	// A spare of another shape (nodes added) is not reused.
	small := buildCluster(st, nil, nil)
	small.Nodes = small.Nodes[:4]
	if got := buildCluster(st, full, small); got == small || len(got.Nodes) != 16 {
		t.Errorf("a spare of 4 nodes was reused for 16 (%d nodes)", len(got.Nodes))
	}
	// Rebuilding into the spare allocates a small fraction of a fresh build.
	spare := buildCluster(st, full, nil)
	inPlace := testing.AllocsPerRun(5, func() { spare = buildCluster(st, full, spare) })
	fresh := testing.AllocsPerRun(5, func() { buildCluster(st, full, nil) })
	t.Logf("allocations per rebuild of 128 GPUs: %.0f in place, %.0f fresh", inPlace, fresh)
	if inPlace*4 > fresh {
		t.Errorf("a rebuild in place made %.0f allocations, a fresh one %.0f: the spare's memory is not reused", inPlace, fresh)
	}
}

// sameNodes compares nodes GPU by GPU; an empty resident list equals a nil one
// (a reused GPU keeps its list's memory).
func sameNodes(a, b []placement.Node) bool {
	if len(a) != len(b) {
		return false
	}
	for n := range a {
		if a[n].Name != b[n].Name || len(a[n].GPUs) != len(b[n].GPUs) {
			return false
		}
		for g := range a[n].GPUs {
			x, y := a[n].GPUs[g], b[n].GPUs[g]
			if len(x.Residents) != len(y.Residents) || (len(x.Residents) > 0 && !reflect.DeepEqual(x.Residents, y.Residents)) {
				return false
			}
			x.Residents, y.Residents = nil, nil
			if !reflect.DeepEqual(x, y) {
				return false
			}
		}
	}
	return true
}
