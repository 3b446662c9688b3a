// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Random Apply/Remove sequences, driven by the policies themselves and by hand-made
// decisions, keep every cache equal to a recomputation from the residents.
func TestApplyRemoveKeepsCachesConsistent(t *testing.T) {
	cat := catalog(12, 5)
	cat = append(cat, nil) // an unprofiled job now and then
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		// seed 4: up to three jobs per GPU, where float sums depend on order
		maxCo := 2
		if seed == 4 {
			maxCo = 3
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			c := NewCluster(6, 4, 24000, 4)
			if seed >= 5 { // Slurm's first-fit reachability kept in the caches too
				c.Reach = ReachFirstFit
				c.Reindex()
			}
			var live []string
			policies := []Policy{}
			for _, name := range Names() {
				policies = append(policies, mustPolicy(t, name, Options{Seed: seed, MaxCoRunners: maxCo}))
			}
			for step := 0; step < 600; step++ {
				switch {
				case len(live) > 0 && rng.IntN(3) == 0:
					i := rng.IntN(len(live))
					c.Remove(live[i])
					live = append(live[:i], live[i+1:]...)
				case rng.IntN(4) == 0:
					// a hand-made placement, possibly over-subscribing: the caches must
					// follow whatever the caller applies
					id := fmt.Sprintf("h%d", step)
					n, g := rng.IntN(len(c.Nodes)), rng.IntN(4)
					c.Apply(req(id, cat[rng.IntN(len(cat))], 1), Decision{Action: ActionShare, Placement: []Slot{{n, g, 1 + rng.IntN(4)}}})
					live = append(live, id)
				default:
					id := fmt.Sprintf("p%d", step)
					r := req(id, cat[rng.IntN(len(cat))], 1+rng.IntN(3))
					d := policies[rng.IntN(len(policies))].Place(c, r)
					c.Apply(r, d)
					if d.Action != ActionWait {
						live = append(live, id)
					}
				}
				if err := c.Check(); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if step%50 == 0 {
					// decisions on the incremental caches (bucket scan, memo) equal
					// those on an uncached copy (GPU-by-GPU scan, no memo)
					plain := &Cluster{Nodes: c.Clone().Nodes, Reach: c.Reach}
					for _, name := range Names() {
						for gpus := 1; gpus <= 3; gpus++ {
							r := req("q", cat[step%12], gpus)
							a := mustPolicy(t, name, Options{Seed: 4, MaxCoRunners: maxCo}).Place(c, r)
							b := mustPolicy(t, name, Options{Seed: 4, MaxCoRunners: maxCo}).Place(plain, r)
							if !reflect.DeepEqual(a, b) {
								t.Fatalf("step %d %s: cached and uncached decisions differ:\n%+v\n%+v", step, name, a, b)
							}
						}
					}
				}
				if step%50 == 0 { // the incremental caches equal a fresh index
					fresh := c.Clone()
					if !reflect.DeepEqual(c.ix.gpus, fresh.ix.gpus) && !sameButIDs(c, fresh) {
						t.Fatalf("step %d: incremental caches differ from a rebuild", step)
					}
				}
			}
			for _, id := range live {
				c.Remove(id)
			}
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
			if c.IdleGPUs() != c.NumGPUs() || len(c.ix.jobs) != 0 {
				t.Fatalf("after removing every job: %d of %d idle, %d indexed jobs", c.IdleGPUs(), c.NumGPUs(), len(c.ix.jobs))
			}
		})
	}
}

// sameButIDs compares caches except the signatures, whose interned IDs depend on the
// order profiles were first seen; signatures must still agree on equality.
func sameButIDs(a, b *Cluster) bool {
	for i := range a.ix.gpus {
		x, y := a.ix.gpus[i], b.ix.gpus[i]
		x.sig, y.sig = 0, 0
		if x != y {
			return false
		}
		for j := range a.ix.gpus {
			if (a.ix.gpus[i].sig == a.ix.gpus[j].sig) != (b.ix.gpus[i].sig == b.ix.gpus[j].sig) {
				return false
			}
		}
	}
	return true
}

func TestApplyRemoveBasics(t *testing.T) {
	p := prof("a", profile.ClassTrain, 30, 5000)
	c := NewCluster(2, 2, 24000, 4)
	if c.NumGPUs() != 4 || c.IdleGPUs() != 4 || c.Nodes[1].Name != "n2" || c.Nodes[1].GPUs[1].Slots != 4 {
		t.Fatalf("new cluster: %d GPUs, %d idle, %+v", c.NumGPUs(), c.IdleGPUs(), c.Nodes[1])
	}
	r := req("j1", p, 2)
	c.Apply(r, Decision{Action: ActionExclusive, Placement: []Slot{{0, 1, 4}, {1, 0, 4}}})
	c.Apply(req("j2", p, 1), Decision{Action: ActionShare, Placement: []Slot{{0, 1, 2}}})
	c.Apply(req("w", p, 1), Decision{Action: ActionWait})
	st := c.ix.gpus[1]
	if st.used != 6 || st.nres != 2 || st.mem != 10000 || st.sm != 60 || c.IdleGPUs() != 2 {
		t.Fatalf("after apply: %+v, idle %d", st, c.IdleGPUs())
	}
	c.Remove("j1")
	if got := c.Nodes[0].GPUs[1].Residents; len(got) != 1 || got[0].JobID != "j2" {
		t.Fatalf("after remove: %+v", got)
	}
	if c.IdleGPUs() != 3 {
		t.Fatalf("idle %d, want 3", c.IdleGPUs())
	}
	c.Remove("nobody")
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// A cluster written as a literal (as a state file loader might) works without
// Reindex: Apply and Remove index it on first use, Place reads it uncached.
func TestLiteralCluster(t *testing.T) {
	a := prof("a", profile.ClassTrain, 20, 1000)
	c := &Cluster{Nodes: []Node{{Name: "x", GPUs: []GPU{
		{Index: 0, MemMiB: 24000, Slots: 4, Residents: []Resident{{JobID: "1", Profile: a, Class: a.Class, Slots: 2}}},
		{Index: 1, MemMiB: 24000, Slots: 4},
	}}}}
	d := mustPolicy(t, "coscheml", Options{}).Place(c, req("2", a, 1))
	if d.Action != ActionShare || d.Placement[0] != (Slot{0, 0, 2}) {
		t.Fatalf("%+v", d)
	}
	c.Remove("1")
	if err := c.Check(); err != nil || c.IdleGPUs() != 2 {
		t.Fatalf("%v, idle %d", err, c.IdleGPUs())
	}
}

// Signatures are equal exactly when resident sets are equal (order does not matter,
// the class does).
func TestSignatures(t *testing.T) {
	a, b := prof("a", profile.ClassTrain, 20, 1000), prof("b", profile.ClassTrain, 30, 1000)
	c := NewCluster(1, 5, 24000, 8)
	put(c, "1", a, 0, 0, 1)
	put(c, "2", b, 0, 0, 1)
	put(c, "3", b, 0, 1, 1)
	put(c, "4", a, 0, 1, 1)
	put(c, "5", a, 0, 2, 1)
	c.Apply(&Request{JobID: "6", Profile: a, Class: profile.ClassInfer, GPUs: 1}, Decision{Action: ActionShare, Placement: []Slot{{0, 3, 1}}})
	put(c, "7", a, 0, 4, 1)
	g := c.ix.gpus
	if g[0].sig == 0 || g[0].sig != g[1].sig || g[0].sig == g[2].sig || g[2].sig == g[3].sig || g[2].sig != g[4].sig {
		t.Fatalf("signatures %x %x %x %x %x", g[0].sig, g[1].sig, g[2].sig, g[3].sig, g[4].sig)
	}
	for i := 0; i < sigLanes; i++ { // more residents than lanes: no signature
		put(c, fmt.Sprint("x", i), a, 0, 4, 1)
	}
	if c.ix.gpus[4].sig != 0 {
		t.Fatal("over-full GPU got a signature")
	}
}

// Slurm 22.05's first-fit shard choice: which GPU a count lands on, and the count
// closest to the wanted one that lands on a given GPU (formerly the plugin's
// steer), on cached and uncached clusters alike.
func TestFirstFitReach(t *testing.T) {
	tests := []struct {
		free    []int
		g, want int
		k       int // 0: GPU g is unreachable
	}{
		{[]int{4, 4}, 0, 2, 2},
		{[]int{2, 4}, 1, 2, 3}, // skip GPU 0's 2 free shards
		{[]int{2, 4}, 0, 2, 2}, // join GPU 0 with exactly its free shards
		{[]int{4, 2}, 1, 2, 0}, // an idle lower GPU always wins
		{[]int{0, 0, 4}, 2, 2, 2},
		{[]int{1, 3, 4}, 2, 2, 4},
		{[]int{3, 2}, 1, 2, 0},
		{[]int{4, 4}, 1, 2, 0}, // idle GPUs above an idle one: interchangeable, hidden
	}
	for _, tc := range tests {
		c := NewCluster(1, len(tc.free), 24000, 4)
		c.Reach = ReachFirstFit
		for g, f := range tc.free {
			if f < 4 {
				put(c, fmt.Sprintf("j%d", g), nil, 0, g, 4-f)
			}
		}
		c.Reindex()
		plain := &Cluster{Nodes: c.Clone().Nodes, Reach: ReachFirstFit}
		gi := c.ix.nodeOff[0] + int32(tc.g)
		if hidden := c.ix.gpus[gi].hidden; hidden != (tc.k == 0) {
			t.Errorf("free %v: GPU %d hidden %v, want %v", tc.free, tc.g, hidden, tc.k == 0)
		}
		if tc.k == 0 {
			continue
		}
		for _, cl := range []*Cluster{c, plain} {
			if k := steerSlots(cl, 0, tc.g, int32(tc.want)); int(k) != tc.k {
				t.Errorf("free %v gpu %d want %d (indexed %v): %d shards, want %d", tc.free, tc.g, tc.want, cl.indexed(), k, tc.k)
			}
		}
	}
}

// WithReach: the same residents and caches seen through another reach (no
// indexing); the cluster it came from keeps its reach, and the view follows its
// changes. A never-indexed cluster is not indexed by it.
func TestWithReach(t *testing.T) {
	tests := []struct {
		free   []int
		hidden []bool // under first fit
	}{
		{[]int{2, 4}, []bool{false, false}},
		{[]int{4, 2}, []bool{false, true}},
		{[]int{2, 2}, []bool{false, true}},
		{[]int{0, 1, 3}, []bool{false, false, false}},
	}
	for _, tc := range tests {
		c := NewCluster(1, len(tc.free), 24000, 4)
		for g, f := range tc.free {
			if f < 4 {
				put(c, fmt.Sprintf("j%d", g), nil, 0, g, 4-f)
			}
		}
		firstFit := c.WithReach(ReachFirstFit)
		if firstFit.Reach != ReachFirstFit || firstFit.ix != c.ix {
			t.Fatalf("free %v: first-fit view does not share the caches (reach %v)", tc.free, firstFit.Reach)
		}
		for g, want := range tc.hidden {
			if got := firstFit.ix.gpus[firstFit.ix.nodeOff[0]+int32(g)].hidden; got != want {
				t.Errorf("free %v: GPU %d hidden %v under first fit, want %v", tc.free, g, got, want)
			}
		}
		if c.Reach != ReachTyped || !c.indexed() {
			t.Errorf("free %v: the cluster changed (reach %v, indexed %v)", tc.free, c.Reach, c.indexed())
		}
		put(c, "later", nil, 0, 0, 1) // the view follows
		if err := firstFit.Check(); err != nil {
			t.Errorf("free %v: view after a change: %v", tc.free, err)
		}
		plain := &Cluster{Nodes: c.Clone().Nodes}
		if v := plain.WithReach(ReachFirstFit); plain.ix != nil || !v.indexed() {
			t.Errorf("free %v: view of a never-indexed cluster: source indexed %v, view indexed %v", tc.free, plain.ix != nil, v.indexed())
		}
	}
}

// TestRejectSummaryWords: a wait reason's counts read as words a user follows,
// the first-fit count included: what it means and why.
func TestRejectSummaryWords(t *testing.T) {
	var e engine
	e.rejects[rejBusy] = 1
	e.rejects[rejUnreachable] = 6
	var b strings.Builder
	e.rejectSummary(&b, " (")
	want := " (1 busy, 6 unreachable with first-fit pinning (Slurm would give the shards to a lower GPU))"
	if b.String() != want {
		t.Errorf("summary %q, want %q", b.String(), want)
	}
}
