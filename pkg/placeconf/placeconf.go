// SPDX-License-Identifier: Apache-2.0

// Package placeconf is the one adapter from the configuration (pkg/config) to the
// placement pipeline (pkg/placement): policy options, the policy itself and how
// Slurm reaches a GPU. slurmctld's library, the CLI and the simulator all build
// their placement through it, so they read every knob the same way, and
// pkg/placement never depends on the configuration schema.
package placeconf

import (
	"fmt"

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
