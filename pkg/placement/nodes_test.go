// SPDX-License-Identifier: Apache-2.0

package placement

import (
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
				pol, err := ByName(name, fakePred{k: 0.5}, Options{})
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
