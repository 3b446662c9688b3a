// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/submit"
)

// initWait bounds how long coscheml_init waits for the first load: a normal
// start reports its problems at once, a hung shared file system never holds
// slurmctld's start (jobs pass through until the load completes).
const initWait = 2 * time.Second

// initGo replaces the engine with one loading from path in the background; it
// returns 0 when everything loaded (or the load is still running), 1 when the
// engine runs degraded (pass-through for what is broken; the reasons go to the
// first job's log), and lines for slurmctld's log. slurmVer is the shim's
// SLURM_VERSION_NUMBER, slurmConf slurmctld's slurm.conf ("" when the shim could
// not tell).
func initGo(path string, slurmVer uint32, slurmConf string) (int, string) {
	// Pins stay inside the job's partitions and off nodes that cannot start jobs
	// (both read in the background: the partitions with each load, the node
	// states by their own poll).
	src := submit.WithPartitions(submit.DefaultSources(path), slurmConf)
	if fi, err := os.Stat(slurmConf); err == nil && fi.Mode().IsRegular() {
		// Only with slurmctld's own slurm.conf: sinfo must ask this cluster.
		src.NodeStates = submit.SinfoStates(slurmConf)
		src.QueueIDs = submit.SqueueIDs(slurmConf)
	}
	// Untagged jobs go to Go until the new engine opens the pass window.
	setPassWindow(nil, 0)
	var self atomic.Pointer[submit.Engine]
	opts := submit.Options{SlurmVersion: slurmVersion.Load,
		PassWindow: func(d time.Duration) { setPassWindow(self.Load(), d) }}
	e := submit.NewAsync(src, opts,
		func(src submit.Sources) (submit.Sources, string) { return submit.GuardPinning(src, slurmConf) })
	self.Store(e)
	// The old engine (slurmctld re-initialises plugins on reconfigure) is closed
	// first: its last decisions reach the decision log before the new engine
	// rebuilds its reservations from it. Close is bounded: it never waits on a
	// hung load; until the new engine is ready, jobs pass through.
	if old := engine.Swap(e); old != nil {
		old.Close()
	}
	// Again: the old engine may have opened it between the first shut and
	// the swap (its publishes are ignored from the swap on).
	setPassWindow(nil, 0)
	e.Start()
	if !e.WaitReady(initWait) {
		return 0, fmt.Sprintf("first load of %s still running after %v (shared file system slow?): "+
			"jobs pass through unchanged until it completes; its outcome is logged with the next job", path, initWait)
	}
	rc := 0
	if len(e.Problems()) > 0 {
		rc = 1
	}
	return rc, e.StartNote()
}

// testDecide replaces the engine's decision when set: tests only, to drive the
// real worker through a slow, panicking or long-answered decision.
var testDecide atomic.Pointer[func(submit.JobFields) submit.Result]

// decideGo asks the engine; without one (init failed or not called) every job is
// left unchanged, except that coscheml-id tokens are removed from its comment
// (no user-written id may reach the Prolog).
func decideGo(j submit.JobFields) submit.Result {
	if h := testDecide.Load(); h != nil {
		return (*h)(j)
	}
	e := engine.Load()
	if e == nil {
		res, _ := submit.StripTokens(j)
		return res
	}
	res := e.Decide(j)
	res.Log = strings.TrimSpace(res.Log)
	return res
}
