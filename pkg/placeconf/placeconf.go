// SPDX-License-Identifier: Apache-2.0

// Package placeconf is the one adapter from the configuration (pkg/config) to the
// placement pipeline (pkg/placement): policy options, the policy itself and how
// Slurm reaches a GPU. slurmctld's library, the CLI and the simulator all build
// their placement through it, so they read every knob the same way, and
// pkg/placement never depends on the configuration schema.
package placeconf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// Options maps the configuration's placement knobs onto placement.Options.
func Options(cfg config.Config) placement.Options {
	o := placement.DefaultOptions()
	o.Floors = cfg.SpeedFloor
	if cfg.MaxCoRunners > 0 {
		o.MaxCoRunners = cfg.MaxCoRunners
	}
	o.PreferShareSpeed = cfg.PreferShareSpeed
	o.MemReserveMiB = cfg.MemReserveMiB
	o.UtilSumThreshold = cfg.UtilSumThreshold
	o.FloorConfidence = cfg.FloorConfidence
	o.WholeMultiGPU = !cfg.ShareMultiGPU
	return o
}

// Reach is the configuration's shard_pinning as the cluster's reachability:
// "typed" (one Slurm GPU Type per GPU index) reaches every GPU; anything else is
// Slurm's first-fit shard allocator, the safe default (the plugin resolves auto
// on slurm.conf before this, ResolvePinning).
func Reach(cfg config.Config) placement.Reach {
	if cfg.ShardPinning == config.PinTyped {
		return placement.ReachTyped
	}
	return placement.ReachFirstFit
}

// ModelReach is Reach for the tools that model a cluster instead of reading its
// slurm.conf (coscheml simulate, coscheml place): auto is the cluster docs/install.md
// sets up, one GPU Type per GPU, so typed.
func ModelReach(cfg config.Config) placement.Reach {
	if cfg.ShardPinning == config.PinAuto {
		return placement.ReachTyped
	}
	return Reach(cfg)
}

// ResolvePinning is cfg's shard_pinning with auto resolved on slurm.conf (sc,
// with its gres.conf; nil: unknown, so first-fit, which needs nothing of it): typed
// where every node with shards gives each GPU its own Type <shard_type_prefix><index>
// and gres.conf gives each GPU's shards a line of their own, else first-fit
// (slurmconf.AutoSteering). why says what ruled typed out. The plugin (at every load) and
// `coscheml preflight` resolve it here, so they agree.
func ResolvePinning(sc *slurmconf.Conf, cfg config.Config) (mode, why string) {
	if cfg.ShardPinning != config.PinAuto {
		return cfg.ShardPinning, ""
	}
	if sc == nil {
		return config.PinFirstFit, "slurm.conf is unknown"
	}
	return sc.AutoSteering(cfg.ShardTypePrefix)
}

// ResolveShareMultiGPU is cfg's share_multi_gpu as Slurm can honour it: on only
// with typed pinning (cfg.ShardPinning resolved) and the layout that names each
// GPU's shards by its Type on every shard line (slurmconf.MultiGPUShards; sc nil:
// unknown, so off). why says what turned it off ("" when the site did).
func ResolveShareMultiGPU(sc *slurmconf.Conf, cfg config.Config) (on bool, why string) {
	switch {
	case !cfg.ShareMultiGPU:
		return false, ""
	case cfg.ShardPinning != config.PinTyped:
		return false, "shard_pinning is " + cfg.ShardPinning + " (several GPUs need each GPU named by its Type)"
	case sc == nil:
		return false, "slurm.conf is unknown"
	}
	if ok, why := sc.MultiGPUShards(cfg.ShardTypePrefix); !ok {
		return false, why
	}
	return true, ""
}

// Policy returns the configured policy with pred as its predictor.
func Policy(cfg config.Config, pred model.Predictor) (placement.Policy, error) {
	return PolicyNamed(cfg.Policy, cfg, pred)
}

// PolicyNamed is Policy for another policy name (the CLI's --policy).
func PolicyNamed(name string, cfg config.Config, pred model.Predictor) (placement.Policy, error) {
	p, err := placement.ByName(name, pred, Options(cfg))
	if err != nil {
		return nil, fmt.Errorf("placement policy from the configuration: %w", err)
	}
	return p, nil
}

// Nodes is the configured inventory (cluster.groups, or the flat keys) as
// placement nodes without residents: each with its group's GPU count, per-GPU
// memory, model, and the names a job selects it by (the group's feature and
// gres_type). nil and no error when no node is configured.
func Nodes(cfg config.Config) ([]placement.Node, error) {
	hosts, err := cfg.Cluster.Hosts()
	if err != nil {
		return nil, fmt.Errorf("cluster inventory: %w", err)
	}
	groups := cfg.Cluster.NodeGroups()
	slots := cfg.SlotsPerGPU
	if slots <= 0 {
		slots = placement.DefaultSlots
	}
	feats := make([][]string, len(groups))
	for gi, g := range groups {
		for _, f := range []string{g.Feature, g.GresType} {
			if f != "" && !slices.Contains(feats[gi], f) {
				feats[gi] = append(feats[gi], f)
			}
		}
	}
	out := make([]placement.Node, len(hosts))
	for i, h := range hosts {
		g := groups[h.Group]
		n := placement.Node{Name: h.Name, Model: g.GPUModel, Features: feats[h.Group], GPUs: make([]placement.GPU, g.GPUsPerNode)}
		for gi := range n.GPUs {
			n.GPUs[gi] = placement.GPU{Index: gi, MemMiB: g.GPUMemoryMiB, Slots: slots}
		}
		out[i] = n
	}
	return out, nil
}

// Cluster is the configured inventory as an indexed cluster without residents,
// reached as the modelling tools reach it (ModelReach).
func Cluster(cfg config.Config) (*placement.Cluster, error) {
	nodes, err := Nodes(cfg)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("cluster inventory: no node configured (cluster.nodes or cluster.groups)")
	}
	c := &placement.Cluster{Nodes: nodes, Reach: ModelReach(cfg)}
	c.Reindex()
	return c, nil
}

// ModelOf resolves a job's model request against the inventory: the GPU Type of
// its --gres=gpu:<type>:N (gresType) and the features of its --constraint. A
// Type a group names (gres_type, or the model itself) becomes that group's
// model, or its feature when the group names no model; features a group names
// are kept. ok is false when the request names something no group has: coscheml
// cannot tell which nodes qualify, so the job is not placed.
func ModelOf(cfg config.Config, gresType string, features []string) (model string, feats []string, ok bool) {
	groups := cfg.Cluster.NodeGroups()
	if gresType != "" {
		found := false
		for _, g := range groups {
			if strings.EqualFold(g.GresType, gresType) || (g.GPUModel != "" && strings.EqualFold(g.GPUModel, gresType)) {
				found = true
				if g.GPUModel != "" {
					model = g.GPUModel
				} else {
					feats = append(feats, g.GresType)
				}
				break
			}
		}
		if !found {
			return "", nil, false
		}
	}
	for _, f := range features {
		found := false
		for _, g := range groups {
			if g.Feature == f {
				found = true
				break
			}
		}
		if !found {
			return "", nil, false
		}
		if !slices.Contains(feats, f) {
			feats = append(feats, f)
		}
	}
	return model, feats, true
}
