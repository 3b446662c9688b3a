// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// TestClusterFromGroups: the plugin's cluster has each group's GPU count,
// memory, model and features per node, and the flat form gives one kind of node.
func TestClusterFromGroups(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spec       config.ClusterSpec
		wantGPUs   []int
		wantMem    []float64
		wantModels []string
	}{
		{"flat", config.ClusterSpec{Nodes: "n[1-2]", GPUsPerNode: 4, GPUMemoryMiB: 80000},
			[]int{4, 4}, []float64{80000, 80000}, []string{"", ""}},
		{"groups", config.ClusterSpec{Groups: []config.NodeGroup{
			{Nodes: "a[1-2]", GPUsPerNode: 4, GPUMemoryMiB: 40960, GPUModel: "A100-40", Feature: "a100"},
			{Nodes: "h1", GPUsPerNode: 8, GPUMemoryMiB: 81559, GPUModel: "H100", Feature: "h100"},
		}}, []int{4, 4, 8}, []float64{40960, 40960, 81559}, []string{"A100-40", "A100-40", "H100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) { c.Cluster = tc.spec })
			st := f.e.snap.Load()
			if st.clusterErr != nil {
				t.Fatal(st.clusterErr)
			}
			c := buildCluster(st, nil, nil)
			if len(c.Nodes) != len(tc.wantGPUs) {
				t.Fatalf("%d nodes, want %d", len(c.Nodes), len(tc.wantGPUs))
			}
			for n, node := range c.Nodes {
				if len(node.GPUs) != tc.wantGPUs[n] || node.GPUs[0].MemMiB != tc.wantMem[n] || node.Model != tc.wantModels[n] {
					t.Errorf("node %s: %d GPUs of %v MiB, model %q; want %d of %v, %q", node.Name, len(node.GPUs), node.GPUs[0].MemMiB, node.Model,
						tc.wantGPUs[n], tc.wantMem[n], tc.wantModels[n])
				}
			}
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestModelRequests: where cluster.groups name models and features, a job's
// --constraint and a typed --gres=gpu:<type>:N that a group names are placed on
// that group's nodes (the Type dropped: the pin chooses the model); what no
// group names, or a constraint that is not a plain feature list, is left to
// Slurm; without such groups a constraint is not read.
func TestModelRequests(t *testing.T) {
	groups := config.ClusterSpec{Groups: []config.NodeGroup{
		{Nodes: "a[1-2]", GPUsPerNode: 2, GPUMemoryMiB: 40960, GPUModel: "A100", Feature: "a100", GresType: "a100"},
		{Nodes: "h1", GPUsPerNode: 4, GPUMemoryMiB: 81920, GPUModel: "H100", Feature: "h100"},
	}}
	for _, tc := range []struct {
		name     string
		spec     config.ClusterSpec
		tres     string
		features string
		code     Code
		nodes    []string // allowed ReqNodes of a rewrite
		wantTres string
	}{
		{"constraint h100", groups, "gres:gpu:1", "h100", Rewrite, []string{"h1"}, "gres:shard:2"},
		{"constraint a100", groups, "gres:gpu:1", "a100", Rewrite, []string{"a1", "a2"}, "gres:shard:2"},
		{"typed a100", groups, "gres:gpu:a100:1", "", Rewrite, []string{"a1", "a2"}, "gres:shard:2"},
		{"typed a100 and constraint a100", groups, "gres:gpu:a100:1", "a100", Rewrite, []string{"a1", "a2"}, "gres:shard:2"},
		{"no node has both: a whole GPU, features kept by Slurm", groups, "gres:gpu:1", "a100&h100", Rewrite, []string{""}, "gres:shard:4"},
		{"unknown feature", groups, "gres:gpu:1", "ib", Unchanged, nil, ""},
		{"feature alternatives", groups, "gres:gpu:1", "a100|h100", Unchanged, nil, ""},
		{"unknown type", groups, "gres:gpu:k80:1", "", Unchanged, nil, ""},
		{"typed, several GPUs", groups, "gres:gpu:a100:2", "", Unchanged, nil, ""},
		{"flat form: constraint not read", config.ClusterSpec{Nodes: "n[1-2]", GPUsPerNode: 2, GPUMemoryMiB: 80000}, "gres:gpu:1", "h100", Rewrite, []string{"n1"}, "gres:shard:2"},
		{"flat form: typed left to Slurm", config.ClusterSpec{Nodes: "n[1-2]", GPUsPerNode: 2, GPUMemoryMiB: 80000}, "gres:gpu:a100:1", "", Unchanged, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) { c.Cluster = tc.spec })
			j := job("coscheml:app=light-a")
			j.TresPerNode, j.Features = tc.tres, tc.features
			res := f.e.Decide(j)
			if res.Code != tc.code {
				t.Fatalf("code %v, want %v: %+v", res.Code, tc.code, res)
			}
			if tc.code != Rewrite {
				return
			}
			if !slices.Contains(tc.nodes, res.ReqNodes) || res.TresPerNode != tc.wantTres {
				t.Errorf("rewrite to %q on %q; want %q on one of %q", res.TresPerNode, res.ReqNodes, tc.wantTres, tc.nodes)
			}
		})
	}
}

// TestModelRedecision: the re-decide loop's update carries only the comment and
// the GPU request; the re-decision keeps the constraint the job was submitted
// with (its context): a deferred h100 job is not pinned to an idle A100.
func TestModelRedecision(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{
			{Nodes: "a1", GPUsPerNode: 2, GPUMemoryMiB: 40960, GPUModel: "A100", Feature: "a100"},
			{Nodes: "h1", GPUsPerNode: 1, GPUMemoryMiB: 81920, GPUModel: "H100", Feature: "h100"},
		}}
		c.WaitDefer = 30 * time.Second
	})
	f.loopRuns(t)
	first := job("coscheml:app=heavy-a")
	first.Features = "h100"
	if r := f.e.Decide(first); r.ReqNodes != "h1" {
		t.Fatalf("first h100 job on %q: %+v", r.ReqNodes, r)
	}
	second := job("coscheml:app=heavy-b")
	second.Features = "h100"
	w := f.e.Decide(second)
	if w.BeginTime == 0 || w.ReqNodes != "" {
		t.Fatalf("second h100 job not deferred: %+v", w)
	}
	f.advance(10 * time.Second)
	m := JobFields{Comment: w.Comment, StoredComment: w.Comment, TresPerNode: w.TresPerNode, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
	r := f.e.Decide(m)
	if r.ReqNodes == "a1" {
		t.Fatalf("re-decision pinned the h100 job to the A100 node: %+v", r)
	}
	if r.BeginTime == 0 {
		t.Errorf("re-decision did not defer the job again: %+v", r)
	}
}

// FuzzModelConstraint: whatever a user writes in --constraint and the GPU
// request, a decision never panics, and a pinned job lands on a node with every
// feature of a constraint it was placed under.
func FuzzModelConstraint(f *testing.F) {
	for _, s := range [][2]string{{"h100", "gres:gpu:1"}, {"a100&h100", "gres:gpu:1"}, {"a100|h100", "gres:gpu:a100:1"}, {"[a100*2]", "gres:gpu:2"}, {"", "gres:gpu:h100:1"}, {"&&", "gres:gpu:a100:0"}} {
		f.Add(s[0], s[1])
	}
	fx := newFixture(f, func(c *config.Config) {
		c.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{
			{Nodes: "a[1-2]", GPUsPerNode: 2, GPUMemoryMiB: 40960, GPUModel: "A100", Feature: "a100", GresType: "a100"},
			{Nodes: "h1", GPUsPerNode: 4, GPUMemoryMiB: 81920, GPUModel: "H100", Feature: "h100"},
		}}
	})
	nodeFeature := map[string]string{"a1": "a100", "a2": "a100", "h1": "h100"}
	f.Fuzz(func(t *testing.T, features, tres string) {
		j := job("coscheml:app=light-a")
		j.Features, j.TresPerNode = features, tres
		res := fx.e.Decide(j)
		if res.Code != Rewrite || res.ReqNodes == "" {
			return
		}
		have := nodeFeature[res.ReqNodes]
		if have == "" {
			t.Fatalf("pinned to %q, not a configured node", res.ReqNodes)
		}
		if features != "" && !strings.ContainsAny(features, "|[]*!()") {
			for _, want := range strings.Split(features, "&") {
				if want != have {
					t.Fatalf("constraint %q placed on %s (feature %s)", features, res.ReqNodes, have)
				}
			}
		}
	})
}

// TestPairMemoryByModel: where node groups name GPU models, the pair memory
// learns a pair only from runs on the model its job's profile was measured on
// (or of unknown model); a run on another model is not learned from.
func TestPairMemoryByModel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		profModel string // the job's profile's gpu_model
		learned   bool
	}{
		{"same model", "A", true},
		{"another model", "B", false},
		{"profile of unknown model", profile.LucidGPUModel, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMemSite(t)
			s.cfg.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{{Nodes: "n1", GPUsPerNode: 2, GPUMemoryMiB: 80000, GPUModel: "A"}}}
			a := *s.a
			a.GPUModel = tc.profModel
			s.cat[a.Tag], s.a = &a, &a
			want := s.measured()
			obs := make([]observation.Observation, 6)
			for i := range obs {
				obs[i] = observation.Observation{Tag: s.a.Tag, CoTags: []string{s.b.Tag}, Speed: want, Source: "epilog", Node: "n1",
					JobID: strconv.Itoa(100 + i), UID: strconv.Itoa(2000 + i), When: time.Date(2026, 11, 30, 1, i, 0, 0, time.UTC)}
			}
			if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"), obs...); err != nil {
				t.Fatal(err)
			}
			l := loadSnapshot(&s.src, nil, time.Now(), time.Time{})
			got := l.pred.PredictSpeed(s.a, []*profile.Profile{s.b})
			if learned := math.Abs(got-want) < 1e-9; learned != tc.learned {
				t.Errorf("prediction %.4f, measured %.4f: learned %v, want %v", got, want, learned, tc.learned)
			}
		})
	}
}
