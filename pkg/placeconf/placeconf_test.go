// SPDX-License-Identifier: Apache-2.0

package placeconf

import (
	"slices"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/policyname"
	"github.com/coscheml/coscheml/pkg/profile"
)

// The configuration's defaults are placement's defaults, and its slots too.
func TestDefaultsMatchConfig(t *testing.T) {
	cfg := config.Default()
	d := placement.DefaultOptions()
	got := Options(cfg)
	if got != d || cfg.SlotsPerGPU != placement.DefaultSlots {
		t.Fatalf("config defaults %+v with %d slots; placement %+v with %d", got, cfg.SlotsPerGPU, d, placement.DefaultSlots)
	}
	if Reach(cfg) != placement.ReachFirstFit {
		t.Fatalf("default reach %v, want first-fit (Slurm 22.05's allocator)", Reach(cfg))
	}
}

func TestOptionsAndReach(t *testing.T) {
	cfg := config.Default()
	cfg.SpeedFloor.Infer = 0.95
	cfg.MaxCoRunners = 3
	cfg.MemReserveMiB = 512
	cfg.FloorConfidence = 1.5
	cfg.ShardPinning = config.PinTyped
	o := Options(cfg)
	if o.Floors.Infer != 0.95 || o.MaxCoRunners != 3 || o.MemReserveMiB != 512 || o.FloorConfidence != 1.5 {
		t.Fatalf("options %+v do not follow the configuration", o)
	}
	if Reach(cfg) != placement.ReachTyped {
		t.Fatalf("shard_pinning typed: reach %v", Reach(cfg))
	}
}

// Every configurable policy name builds through the adapter; a bad name names it.
func TestPolicy(t *testing.T) {
	for _, name := range policyname.Configurable() {
		cfg := config.Default()
		cfg.Policy = name
		p, err := Policy(cfg, constPred(0.9))
		if err != nil || p.Name() != name {
			t.Fatalf("%s: %v, %v", name, p, err)
		}
	}
	if _, err := PolicyNamed("fifo", config.Default(), constPred(1)); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

type constPred float64

func (c constPred) PredictSpeed(_ *profile.Profile, co []*profile.Profile) float64 {
	if len(co) == 0 {
		return 1
	}
	return float64(c)
}

func heteroConfig() config.Config {
	cfg := config.Default()
	cfg.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{
		{Nodes: "a[1-2]", GPUsPerNode: 4, GPUMemoryMiB: 40960, GPUModel: "NVIDIA A100-SXM4-40GB", Feature: "a100", GresType: "a100"},
		{Nodes: "h1", GPUsPerNode: 8, GPUMemoryMiB: 81559, GPUModel: "NVIDIA H100 80GB HBM3", Feature: "h100"},
		{Nodes: "v1", GPUsPerNode: 2, GPUMemoryMiB: 16384, Feature: "v100", GresType: "v100"},
	}}
	return cfg
}

// TestNodesFromGroups: every node has its group's GPUs, model and features.
func TestNodesFromGroups(t *testing.T) {
	c, err := Cluster(heteroConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, model string
		gpus        int
		mem         float64
		feats       []string
	}{
		{"a1", "NVIDIA A100-SXM4-40GB", 4, 40960, []string{"a100"}},
		{"a2", "NVIDIA A100-SXM4-40GB", 4, 40960, []string{"a100"}},
		{"h1", "NVIDIA H100 80GB HBM3", 8, 81559, []string{"h100"}},
		{"v1", "", 2, 16384, []string{"v100"}},
	}
	if len(c.Nodes) != len(want) || c.NumGPUs() != 18 {
		t.Fatalf("%d nodes, %d GPUs; want %d nodes, 18 GPUs", len(c.Nodes), c.NumGPUs(), len(want))
	}
	for i, w := range want {
		n := c.Nodes[i]
		if n.Name != w.name || n.Model != w.model || len(n.GPUs) != w.gpus || n.GPUs[w.gpus-1].MemMiB != w.mem || !slices.Equal(n.Features, w.feats) {
			t.Errorf("node %d = %s %q %d GPUs %v MiB %v; want %+v", i, n.Name, n.Model, len(n.GPUs), n.GPUs[0].MemMiB, n.Features, w)
		}
	}
}

// TestModelOf: a model-named gres Type or a known feature becomes the request's
// constraint; anything no group names is not placeable.
func TestModelOf(t *testing.T) {
	cfg := heteroConfig()
	for _, tc := range []struct {
		name, gresType string
		features       []string
		model          string
		feats          []string
		ok             bool
	}{
		{"none", "", nil, "", nil, true},
		{"gres type of a modelled group", "a100", nil, "NVIDIA A100-SXM4-40GB", nil, true},
		{"gres type, other case", "A100", nil, "NVIDIA A100-SXM4-40GB", nil, true},
		{"gres type of an unmodelled group", "v100", nil, "", []string{"v100"}, true},
		{"unknown gres type", "k80", nil, "", nil, false},
		{"per-GPU pinning type", "g0", nil, "", nil, false},
		{"feature", "", []string{"h100"}, "", []string{"h100"}, true},
		{"unknown feature", "", []string{"ib"}, "", nil, false},
		{"type and feature", "a100", []string{"a100"}, "NVIDIA A100-SXM4-40GB", []string{"a100"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model, feats, ok := ModelOf(cfg, tc.gresType, tc.features)
			if ok != tc.ok || (ok && (model != tc.model || !slices.Equal(feats, tc.feats))) {
				t.Errorf("ModelOf = %q %v %v; want %q %v %v", model, feats, ok, tc.model, tc.feats, tc.ok)
			}
		})
	}
}
