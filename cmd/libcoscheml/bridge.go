package main

import (
	"strings"

	"github.com/coscheml/coscheml/pkg/submit"
)

// initGo replaces the engine with one loaded from path; it returns 0 when
// everything loaded, 1 when the engine runs degraded (pass-through for what is
// broken; the reasons go to the first job's log).
func initGo(path string) int {
	e := submit.New(submit.DefaultSources(path), submit.Options{SlurmVersion: slurmVersion.Load})
	e.Start()
	if old := engine.Swap(e); old != nil {
		old.Close()
	}
	if len(e.Problems()) > 0 {
		return 1
	}
	return 0
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
