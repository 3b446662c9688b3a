// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/policyname"
	"slices"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// TestRequestNodes: a decision never uses a node the request does not allow
// (partition, -w, -x, drained nodes), for every policy, one GPU and several, and
// says so in its reason when that leaves nothing.
func TestRequestNodes(t *testing.T) {
	p := prof("a", profile.ClassTrain, 20, 1000)
	cases := []struct {
		name  string
		nodes []bool // nil: all
		gpus  int
		want  []int // allowed result nodes; nil: wait
	}{
		{"all nodes", nil, 1, []int{0, 1, 2}},
		{"first excluded", []bool{false, true, true}, 1, []int{1, 2}},
		{"only last", []bool{false, false, true}, 1, []int{2}},
		{"short mask: missing nodes are not allowed", []bool{false, true}, 1, []int{1}},
		{"none allowed", []bool{false, false, false}, 1, nil},
		{"two GPUs, one node allowed", []bool{false, true, false}, 2, []int{1}},
		{"three GPUs, two nodes of two GPUs allowed", []bool{true, false, true}, 3, []int{0, 2}},
		{"three GPUs, one node allowed", []bool{false, false, true}, 3, nil},
	}
	for _, name := range Names() {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				pol, err := testByName(name, fakePred{k: 0.5}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				c := NewCluster(3, 2, 40000, 4)
				put(c, "busy", p, 0, 0, 1) // node 0 is the best place to share
				r := req("j", p, tc.gpus)
				r.Nodes = tc.nodes
				d := pol.Place(c, r)
				if tc.want == nil {
					if d.Action != ActionWait {
						t.Fatalf("placed %+v, want wait", d.Placement)
					}
					if !strings.Contains(d.Reason, "on a node the job may not use") {
						t.Errorf("reason %q does not name the node filter", d.Reason)
					}
					return
				}
				if d.Action == ActionWait || len(d.Placement) != tc.gpus {
					t.Fatalf("decision %v %+v (%s), want %d GPUs", d.Action, d.Placement, d.Reason, tc.gpus)
				}
				for _, s := range d.Placement {
					ok := false
					for _, n := range tc.want {
						ok = ok || s.Node == n
					}
					if !ok {
						t.Errorf("placed on node %d, allowed %v", s.Node, tc.want)
					}
				}
			})
		}
	}
}

// heteroCluster is three nodes of three kinds: n1 two "A" GPUs (40 GB, feature
// a), n2 four "B" GPUs (80 GB, features b and bx), n3 two "A" GPUs.
func heteroCluster() *Cluster {
	c := &Cluster{Nodes: []Node{
		{Name: "n1", Model: "A", Features: []string{"a"}, GPUs: []GPU{{Index: 0, MemMiB: 40000, Slots: 4}, {Index: 1, MemMiB: 40000, Slots: 4}}},
		{Name: "n2", Model: "B", Features: []string{"b", "bx"}, GPUs: []GPU{{Index: 0, MemMiB: 80000, Slots: 4}, {Index: 1, MemMiB: 80000, Slots: 4}, {Index: 2, MemMiB: 80000, Slots: 4}, {Index: 3, MemMiB: 80000, Slots: 4}}},
		{Name: "n3", Model: "A", Features: []string{"a"}, GPUs: []GPU{{Index: 0, MemMiB: 40000, Slots: 4}, {Index: 1, MemMiB: 40000, Slots: 4}}},
	}}
	c.Reindex()
	return c
}

// TestRequestModel: a request naming a GPU model or node features is placed only
// on nodes of that model with those features, for every policy, one GPU and
// several, also together with a node filter; a constraint no node meets waits.
func TestRequestModel(t *testing.T) {
	p := prof("a", profile.ClassTrain, 20, 1000)
	cases := []struct {
		name     string
		model    string
		features []string
		nodes    []bool
		gpus     int
		want     []int // allowed result nodes; nil: wait
	}{
		{"model A", "A", nil, nil, 1, []int{0, 2}},
		{"model B", "B", nil, nil, 1, []int{1}},
		{"feature b", "", []string{"b"}, nil, 1, []int{1}},
		{"features b and bx", "", []string{"b", "bx"}, nil, 1, []int{1}},
		{"features a and b: none has both", "", []string{"a", "b"}, nil, 1, nil},
		{"model A, feature b: none", "A", []string{"b"}, nil, 1, nil},
		{"unknown model", "C", nil, nil, 1, nil},
		{"model A, n1 excluded", "A", nil, []bool{false, true, true}, 1, []int{2}},
		{"model B, three GPUs", "B", nil, nil, 3, []int{1}},
		{"model A, three GPUs: on both A nodes", "A", nil, nil, 3, []int{0, 2}},
		{"model A, five GPUs: A has four", "A", nil, nil, 5, nil},
		{"model B, two GPUs", "B", []string{"bx"}, nil, 2, []int{1}},
	}
	for _, name := range Names() {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				pol, err := testByName(name, fakePred{k: 0.5}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				c := heteroCluster()
				put(c, "busy", p, 0, 0, 1)
				r := req("j", p, tc.gpus)
				r.Model, r.Features, r.Nodes = tc.model, tc.features, tc.nodes
				d := pol.Place(c, r)
				if tc.want == nil {
					if d.Action != ActionWait {
						t.Fatalf("placed %+v, want wait", d.Placement)
					}
					return
				}
				if d.Action == ActionWait || len(d.Placement) != tc.gpus {
					t.Fatalf("decision %v %+v (%s), want %d GPUs", d.Action, d.Placement, d.Reason, tc.gpus)
				}
				for _, s := range d.Placement {
					if !slices.Contains(tc.want, s.Node) {
						t.Errorf("placed on node %d, allowed %v", s.Node, tc.want)
					}
				}
				if r.Nodes != nil && len(r.Nodes) != len(tc.nodes) {
					t.Errorf("the caller's node filter was changed")
				}
			})
		}
	}
}

// TestCloneKeepsModel: a clone (what a never-indexed cluster is decided on) keeps
// the nodes' models and features.
func TestCloneKeepsModel(t *testing.T) {
	c := heteroCluster()
	d := c.Clone()
	for n := range c.Nodes {
		if d.Nodes[n].Model != c.Nodes[n].Model || !slices.Equal(d.Nodes[n].Features, c.Nodes[n].Features) {
			t.Errorf("node %d: clone %q %v, want %q %v", n, d.Nodes[n].Model, d.Nodes[n].Features, c.Nodes[n].Model, c.Nodes[n].Features)
		}
	}
}

// TestSmallGPUNotForBigJob: no policy puts a job on a GPU with less memory than
// its profile uses, even alone (the small GPUs of a heterogeneous cluster); a
// job that fits nowhere waits.
func TestSmallGPUNotForBigJob(t *testing.T) {
	for _, name := range Names() {
		for _, tc := range []struct {
			name string
			mem  float64
			gpus int
			want []int // allowed nodes; nil: wait
		}{
			{"fits the 40 GB GPUs", 30000, 1, []int{0, 1, 2}},
			{"only the 80 GB GPUs", 50000, 1, []int{1}},
			{"two GPUs, only the 80 GB node", 50000, 2, []int{1}},
			{"larger than every GPU", 90000, 1, nil},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				pol, err := testByName(name, fakePred{k: 0.5}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				c := heteroCluster()
				d := pol.Place(c, req("big", prof("big", profile.ClassTrain, 30, tc.mem), tc.gpus))
				if tc.want == nil {
					if d.Action != ActionWait {
						t.Fatalf("placed %+v, want wait", d.Placement)
					}
					return
				}
				if d.Action == ActionWait {
					t.Fatalf("wait (%s), want a placement", d.Reason)
				}
				for _, s := range d.Placement {
					if !slices.Contains(tc.want, s.Node) {
						t.Errorf("placed on node %d (%v MiB), allowed %v", s.Node, c.Nodes[s.Node].GPUs[s.GPU].MemMiB, tc.want)
					}
				}
			})
		}
	}
}

// TestProfileOfAnotherModel: a job whose profile was measured on GPU model B
// never shares a GPU of a node of another named model (it may run there alone),
// shares on B's nodes as before; a profile naming no model shares anywhere. A
// resident profiled on another model than its GPU's counts as unprofiled: a
// policy that never joins unprofiled jobs does not join it.
func TestProfileOfAnotherModel(t *testing.T) {
	light := func(model string) *profile.Profile {
		p := prof("light", profile.ClassTrain, 5, 1000)
		p.GPUModel = model
		return p
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name       string
				jobModel   string
				residentOn int // node of the only busy GPU (its GPU 0)
				resModel   string
				mayShare   bool // the busy GPU is acceptable to share
				unknown    bool // only to a policy that joins unprofiled jobs (the blind baselines)
			}{
				{"B job, busy GPU on an A node", "B", 0, "A", false, false},
				{"A job, busy GPU on an A node", "A", 0, "A", true, false},
				{"B job, busy GPU on the B node", "B", 1, "B", true, false},
				{"job of no model, busy GPU on an A node", "", 0, "A", true, false},
				{"job of unknown model (imported from Lucid), busy GPU on an A node", profile.LucidGPUModel, 0, "A", true, false},
				{"resident of unknown model on an A node", "A", 0, profile.LucidGPUModel, true, false},
				{"resident of model B on an A node", "A", 0, "B", false, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					pol, err := testByName(name, fakePred{k: 0.1}, Options{})
					if err != nil {
						t.Fatal(err)
					}
					c := heteroCluster()
					put(c, "res", light(tc.resModel), tc.residentOn, 0, 1)
					shared := false
					// Place jobs until one shares or the cluster is full of jobs alone.
					for i := 0; i < 9; i++ {
						r := req(fmt.Sprintf("j%d", i), light(tc.jobModel), 1)
						d := pol.Place(c, r)
						if d.Action == ActionWait {
							break
						}
						s := d.Placement[0]
						if s.Node == tc.residentOn && s.GPU == 0 {
							shared = true
							break
						}
						c.Apply(r, Decision{Action: ActionExclusive, Placement: []Slot{{Node: s.Node, GPU: s.GPU, Slots: 4}}})
					}
					joinsUnknown := name == "blind" || name == "least-loaded" || name == "random"
					if shared && !tc.mayShare && !(tc.unknown && joinsUnknown) {
						t.Errorf("joined the busy GPU of node %d", tc.residentOn)
					}
					// Lucid packs only next to its own jobs while busy, Gandiva
					// only in its reviews: at Place they run jobs alone.
					packsLater := name == policyname.Lucid || name == policyname.Gandiva
					if !shared && tc.mayShare && name != "exclusive" && !packsLater {
						t.Errorf("never joined the busy GPU, which it may share")
					}
				})
			}
		})
	}
}

// TestBestFit: among equally good GPUs Co-scheML (and the oracle) takes the one
// with the least memory the job fits, leaving the large GPUs to jobs that need
// them; a job too large for the small GPUs still gets a large one; the
// baselines keep Slurm's first fit (the lowest GPU in cluster order).
func TestBestFit(t *testing.T) {
	// n1: two 80 GB GPUs first in cluster order, n2: two 40 GB GPUs.
	cluster := func() *Cluster {
		c := &Cluster{Nodes: []Node{
			{Name: "n1", GPUs: []GPU{{Index: 0, MemMiB: 80000, Slots: 4}, {Index: 1, MemMiB: 80000, Slots: 4}}},
			{Name: "n2", GPUs: []GPU{{Index: 0, MemMiB: 40000, Slots: 4}, {Index: 1, MemMiB: 40000, Slots: 4}}},
		}}
		c.Reindex()
		return c
	}
	small := prof("small", profile.ClassTrain, 20, 10000)
	large := prof("large", profile.ClassTrain, 20, 60000)
	cases := []struct {
		policy string
		job    *profile.Profile
		gpus   int
		node   int
	}{
		{"coscheml", small, 1, 1},
		{"oracle", small, 1, 1},
		{"coscheml", large, 1, 0},
		{"coscheml", small, 2, 1},
		{"exclusive", small, 1, 0},
		{"blind", small, 1, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s/%d", tc.policy, tc.job.Tag, tc.gpus), func(t *testing.T) {
			pol, err := testByName(tc.policy, fakePred{k: 0.5}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			d := pol.Place(cluster(), req("j", tc.job, tc.gpus))
			if d.Action == ActionWait || len(d.Placement) != tc.gpus {
				t.Fatalf("decision %v %+v (%s)", d.Action, d.Placement, d.Reason)
			}
			for _, s := range d.Placement {
				if s.Node != tc.node {
					t.Errorf("placed on node %d, want %d (%s)", s.Node, tc.node, d.Reason)
				}
			}
		})
	}
}
