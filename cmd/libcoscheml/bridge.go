package main

import (
	"strings"

	"github.com/coscheml/coscheml/pkg/submit"
)

// initGo replaces the engine with one loaded from path; it returns 0 when
// everything loaded, 1 when the engine runs degraded (pass-through for what is
// broken; the reasons go to the first job's log), and lines for slurmctld's log.
// slurmVer is the shim's SLURM_VERSION_NUMBER, slurmConf slurmctld's slurm.conf
// ("" when the shim could not tell).
func initGo(path string, slurmVer uint32, slurmConf string) (int, string) {
	src, note := submit.GuardPinning(submit.DefaultSources(path), slurmConf)
	// Pins stay inside the job's partitions and off nodes that cannot start jobs.
	src = submit.WithPartitions(src, slurmConf)
	src.NodeStates = submit.SinfoStates(slurmConf)
	e := submit.New(src, submit.Options{SlurmVersion: slurmVersion.Load})
	e.Start()
	if old := engine.Swap(e); old != nil {
		old.Close()
	}
	rc := 0
	if len(e.Problems()) > 0 {
		rc = 1
	}
	return rc, note
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
