package submit

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/slurmconf"
)

// GuardPinning checks slurmctld's slurm.conf (and the gres.conf beside it) against
// the configured shard_pinning mode. Where Slurm's allocator cannot be made to land
// on the GPU the policy chose (LL_SHARED_GRES, GPUs bound to cores), the returned
// Sources build a safe-mode policy instead: every tagged job gets a GPU of its own
// (all its shards, Slurm's choice of GPU), so nothing shares a GPU the policy did
// not choose. Every (re)load of the configuration is checked again; note is the one
// line to log at start ("" when pinning works or slurm.conf is unreadable: then
// nothing is known against pinning, and the reason is not ours to guess).
func GuardPinning(src Sources, slurmConfPath string) (guarded Sources, note string) {
	if slurmConfPath == "" {
		return src, ""
	}
	sc, err := slurmconf.LoadWithGres(slurmConfPath)
	if err != nil {
		return src, ""
	}
	mode := config.Default().ShardPinning
	if cfg, err := src.LoadConfig(src.ConfigPath); err == nil {
		mode = cfg.ShardPinning
	}
	if why := pinningImpossible(sc, slurmConfPath, mode); why != "" {
		note = "SAFE MODE: " + why + "; tagged jobs run on a whole GPU each (no co-location) " +
			"until slurm.conf allows pinning (see docs/compatibility.md) and slurmctld restarts"
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
