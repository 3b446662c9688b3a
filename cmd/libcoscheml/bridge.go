package main

import (
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/slurmconf"
	"github.com/coscheml/coscheml/pkg/submit"
)

// initGo replaces the engine with one loaded from path; it returns 0 when
// everything loaded, 1 when the engine runs degraded (pass-through for what is
// broken; the reasons go to the first job's log), and lines for slurmctld's log.
// slurmVer is the shim's SLURM_VERSION_NUMBER, slurmConf slurmctld's slurm.conf
// ("" when the shim could not tell).
func initGo(path string, slurmVer uint32, slurmConf string) (int, string) {
	src := submit.DefaultSources(path)
	var notes []string
	if sc := readSlurmConf(slurmConf); sc != nil {
		// Said once, here at start, for the pinning mode configured now; every
		// (re)load of the configuration is checked again below.
		mode := config.Default().ShardPinning
		if cfg, err := src.LoadConfig(path); err == nil {
			mode = cfg.ShardPinning
		}
		if why := pinningImpossible(sc, slurmConf, mode); why != "" {
			notes = append(notes, "SAFE MODE: "+why+"; tagged jobs run on a whole GPU each (no co-location) "+
				"until slurm.conf allows pinning (see docs/compatibility.md) and slurmctld restarts")
		}
		// In safe mode every tagged job gets a GPU of its own (all its shards,
		// Slurm's choice of GPU), so nothing shares a GPU the policy did not choose.
		inner := src.NewPolicy
		src.NewPolicy = func(cfg config.Config, pred model.Predictor) (placement.Policy, error) {
			if why := pinningImpossible(sc, slurmConf, cfg.ShardPinning); why != "" {
				return safePolicy{why: why}, nil
			}
			return inner(cfg, pred)
		}
	}
	e := submit.New(src, submit.Options{SlurmVersion: slurmVersion.Load})
	e.Start()
	if old := engine.Swap(e); old != nil {
		old.Close()
	}
	rc := 0
	if len(e.Problems()) > 0 {
		rc = 1
	}
	return rc, strings.Join(notes, "\n")
}

// readSlurmConf reads slurm.conf (and gres.conf beside it); nil when it cannot:
// then nothing is known against pinning, and the reason is not ours to guess.
func readSlurmConf(path string) *slurmconf.Conf {
	if path == "" {
		return nil
	}
	sc, err := slurmconf.LoadWithGres(path)
	if err != nil {
		return nil
	}
	return sc
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

// decideGo asks the engine; without one (init failed or not called) every job is
// left unchanged.
func decideGo(j submit.JobFields) submit.Result {
	e := engine.Load()
	if e == nil {
		return submit.Result{}
	}
	res := e.Decide(j)
	res.Log = strings.TrimSpace(res.Log)
	return res
}
