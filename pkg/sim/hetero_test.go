// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/trace"
)

// heteroCluster: node "small" of 2 GPUs of 8 GiB (model S), node "big" of 4 GPUs
// of 80 GiB (model B, feature bf), node "mid" of 1 GPU of 24 GiB (no model).
func heteroCluster() *placement.Cluster {
	gpus := func(n int, mem float64) []placement.GPU {
		out := make([]placement.GPU, n)
		for i := range out {
			out[i] = placement.GPU{Index: i, MemMiB: mem, Slots: 4}
		}
		return out
	}
	c := &placement.Cluster{Nodes: []placement.Node{
		{Name: "small", Model: "S", GPUs: gpus(2, 8192)},
		{Name: "big", Model: "B", Features: []string{"bf"}, GPUs: gpus(4, 81920)},
		{Name: "mid", GPUs: gpus(1, 24576)},
	}}
	c.Reindex()
	return c
}

// TestHeterogeneousCluster: on a cluster of nodes with different GPU counts,
// memories and models, under every policy, every job ends, no GPU ever holds
// more profiled memory than it has (the invariant Run checks), a job asking
// for a model runs only on that model's GPUs, and a job asking for a model no
// node has is dropped.
func TestHeterogeneousCluster(t *testing.T) {
	tt := shipped(t)
	cl := heteroCluster()
	jobs := phillySample(t, 300, cl.NumGPUs(), 2, 3, tt)
	wantNodes := map[string][]int{} // job ID -> nodes it may use
	dropped := 0
	for i := range jobs {
		if jobs[i].GPUs > cl.NumGPUs() {
			dropped++
			continue
		}
		switch i % 5 {
		case 0:
			jobs[i].GPUModels = []string{"b"} // model names match ignoring case
			wantNodes[jobs[i].ID] = []int{1}
		case 1:
			jobs[i].GPUModels = []string{"S", "BF"} // a model or a feature
			wantNodes[jobs[i].ID] = []int{0, 1}
		case 2:
			if i%10 == 2 {
				jobs[i].GPUModels = []string{"nope"}
				dropped++
			}
		}
	}
	for _, name := range placement.Names() {
		t.Run(name, func(t *testing.T) {
			var pred model.Predictor
			switch name {
			case "coscheml":
				pred = testModel(t)
			case "oracle":
				pred = tt
			}
			placed := map[string][]placement.Slot{}
			cfg := Config{Cluster: cl, OnStart: func(id string, d placement.Decision) { placed[id] = d.Placement }}
			res, err := Run(cfg, jobs, tt, mustPolicy(t, name, pred))
			if err != nil {
				t.Fatal(err)
			}
			if res.GPUs != 7 {
				t.Errorf("%d GPUs, want 7", res.GPUs)
			}
			if len(res.Jobs) != len(jobs)-dropped || res.Dropped != dropped {
				t.Fatalf("%d jobs ran, %d dropped; want %d and %d", len(res.Jobs), res.Dropped, len(jobs)-dropped, dropped)
			}
			shared := 0
			for _, r := range res.Jobs {
				if r.Shared {
					shared++
				}
			}
			// The truth's profiles (Lucid's, of unknown GPU model) serve every
			// model: jobs share on the named models' GPUs.
			if name != "exclusive" && shared == 0 {
				t.Errorf("no job shared a GPU")
			}
			for _, r := range res.Jobs {
				if !(r.End > r.Start) {
					t.Fatalf("job %s did not end (start %v end %v)", r.ID, r.Start, r.End)
				}
				for _, s := range placed[r.ID] {
					if want, ok := wantNodes[r.ID]; ok && !containsInt(want, s.Node) {
						t.Errorf("job %s asking %v ran on node %s", r.ID, want, cl.Nodes[s.Node].Name)
					}
					if mem := tt.Profile(mustIndex(t, tt, r.Tag)).MemUsedMiB; mem > cl.Nodes[s.Node].GPUs[s.GPU].MemMiB {
						t.Errorf("job %s of %v MiB on a GPU of %v MiB", r.ID, mem, cl.Nodes[s.Node].GPUs[s.GPU].MemMiB)
					}
				}
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func mustIndex(t *testing.T, tt interface{ Index(string) (int, bool) }, tag string) int {
	t.Helper()
	i, ok := tt.Index(tag)
	if !ok {
		t.Fatalf("no truth for %s", tag)
	}
	return i
}

// TestMemoryInvariant: a policy that puts two jobs on a GPU whose memory they
// exceed together fails the run, naming the GPU.
func TestMemoryInvariant(t *testing.T) {
	tt := handTruth(t) // a: 4000 MiB, b: 2000 MiB
	jobs := []trace.Job{
		{ID: "A", Submit: 0, Duration: 10, GPUs: 1, Tag: "a", Class: "train"},
		{ID: "B", Submit: 1, Duration: 10, GPUs: 1, Tag: "b", Class: "train"},
	}
	for _, tc := range []struct {
		mem     float64
		wantErr bool
	}{{6000, false}, {5999, true}} {
		c := &placement.Cluster{Nodes: []placement.Node{{Name: "n", GPUs: []placement.GPU{{Index: 0, MemMiB: tc.mem, Slots: 4}}}}}
		c.Reindex()
		_, err := Run(Config{Cluster: c}, jobs, tt, &scripted{})
		if tc.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), "over-committed")) {
			t.Errorf("GPU of %v MiB: err %v, want error %v", tc.mem, err, tc.wantErr)
		}
	}
}
