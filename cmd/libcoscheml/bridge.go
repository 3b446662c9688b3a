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
	if why := pinningImpossible(slurmConf); why != "" {
		// Said once, here at start; every tagged job then gets a GPU of its own
		// (all its shards, Slurm's choice of GPU), so nothing shares a GPU that
		// the policy did not choose.
		notes = append(notes, "SAFE MODE: "+why+"; tagged jobs run on a whole GPU each (no co-location) "+
			"until slurm.conf allows pinning (see docs/compatibility.md) and slurmctld restarts")
		src.NewPolicy = func(config.Config, model.Predictor) (placement.Policy, error) {
			return safePolicy{why: why}, nil
		}
	}
	e := submit.New(src, submit.Options{})
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

// pinningImpossible reads slurm.conf (and gres.conf beside it) and says why the plugin cannot make Slurm
// allocate the GPU its policy chose, or "" when it can (or slurm.conf cannot be
// read: then nothing is known against the default, and the reason is not ours to
// guess).
func pinningImpossible(slurmConf string) string {
	if slurmConf == "" {
		return ""
	}
	sc, err := slurmconf.LoadWithGres(slurmConf)
	if err != nil {
		return ""
	}
	if err := sc.CheckSteering(slurmconf.FirstFit); err != nil {
		return fmt.Sprintf("%s: %v", slurmConf, err)
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
