// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// GuardPinning checks slurmctld's slurm.conf (and the gres.conf beside it) against
// the configured shard_pinning mode. shard_pinning auto is resolved here, on every
// (re)load of coscheml.yaml, against the slurm.conf read at start (slurmctld
// re-initialises plugins when it rereads its own): typed where slurm.conf and
// gres.conf pin a typed request (placeconf.ResolvePinning), else first-fit (also
// when slurm.conf cannot be read: first-fit needs nothing of it). Where Slurm's allocator cannot be made to
// land on the GPU the policy chose (LL_SHARED_GRES, GPUs bound to cores), the
// returned Sources build a safe-mode policy instead: every tagged job gets a GPU of
// its own (all its shards, Slurm's choice of GPU), so nothing shares a GPU the
// policy did not choose. note is the line to log at start: safe mode, or what auto
// resolved to ("" when pinning works as configured or slurm.conf is unreadable:
// then nothing is known against pinning, and the reason is not ours to guess).
func GuardPinning(src Sources, slurmConfPath string) (guarded Sources, note string) {
	var sc *slurmconf.Conf
	if slurmConfPath != "" {
		sc, _ = slurmconf.LoadWithGres(slurmConfPath)
	}
	load := src.LoadConfig
	src.LoadConfig = func(path string) (config.Config, error) {
		cfg, err := load(path)
		if err == nil {
			cfg.ShardPinning, _ = placeconf.ResolvePinning(sc, cfg)
			cfg.ShareMultiGPU, _ = placeconf.ResolveShareMultiGPU(sc, cfg)
		}
		return cfg, err
	}
	if sc == nil {
		return src, ""
	}
	cfg, err := load(src.ConfigPath)
	if err != nil {
		cfg = config.Default()
	}
	mode, autoWhy := placeconf.ResolvePinning(sc, cfg)
	switch why := pinningImpossible(sc, slurmConfPath, mode); {
	case why != "":
		note = "SAFE MODE: " + why + "; tagged jobs run on a whole GPU each (no co-location) " +
			"until slurm.conf allows pinning (see docs/compatibility.md) and slurmctld restarts"
	case cfg.ShardPinning == config.PinAuto && mode == config.PinTyped:
		note = "shard_pinning auto: typed (every GPU of every shard node has its own Type " + cfg.ShardTypePrefix + "<index>)"
	case cfg.ShardPinning == config.PinAuto:
		note = "shard_pinning auto: first-fit, because " + autoWhy + " (per-GPU types pin exactly: docs/compatibility.md#pinning)"
	}
	if note == "" || !strings.HasPrefix(note, "SAFE MODE") {
		resolved := cfg
		resolved.ShardPinning = mode
		if multi, why := placeconf.ResolveShareMultiGPU(sc, resolved); multi {
			note = joinNote(note, "share_multi_gpu: several-GPU jobs share GPU by GPU (K shards of each GPU's Type)")
		} else if cfg.ShareMultiGPU {
			note = joinNote(note, "share_multi_gpu: several-GPU jobs take whole GPUs, because "+why)
		}
	}
	inner := src.NewPolicy
	src.NewPolicy = func(cfg config.Config, pred model.Predictor) (placement.Policy, error) {
		if why := pinningImpossible(sc, slurmConfPath, cfg.ShardPinning); why != "" {
			return safePolicy{why: why}, nil
		}
		return inner(cfg, pred)
	}
	return src, note
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// pinningImpossible says why the plugin cannot make Slurm allocate the GPU its
// policy chose with this pinning mode ("" when it can).
func pinningImpossible(sc *slurmconf.Conf, path, mode string) string {
	if err := sc.CheckSteering(mode); err != nil {
		return fmt.Sprintf("%s: %v", path, err)
	}
	return ""
}

// safePolicy answers "no GPU to share": the engine then asks Slurm for all shards
// of one GPU on any node, which needs no steering.
type safePolicy struct{ why string }

func (safePolicy) Name() string { return "safe-mode" }

func (p safePolicy) Place(*placement.Cluster, *placement.Request) placement.Decision {
	return placement.Decision{Action: placement.ActionWait, Reason: "safe mode: slurm.conf makes pinning impossible (logged at start)"}
}
