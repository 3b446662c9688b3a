package submit

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
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
