// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"regexp"
	"strconv"
)

// The suite's job accounting: after a test that submits many jobs through
// reconfigures and restarts, every job must be where it belongs. Slurm's own
// recoveries are told from lost jobs here, so the suite neither fails on them
// nor hides a lost job behind them. No build tag: the rules are unit-tested in
// the ordinary test run, on states recorded from real daemons.

// jobEnd is what the suite knows of one submitted job when it accounts for it.
type jobEnd struct {
	ID       int
	Ran      bool   // submitted to run to completion (the others were held)
	State    string // squeue's state; "" when squeue no longer lists the job
	Restarts int    // requeues by Slurm (scontrol's Restarts)
	// Launched: a slurmd logged the job's batch launch.
	Launched bool
	// StartedBeforeStop: Slurm allocated the job before the suite stopped
	// slurmctld for a restart (StartTime at or before the stop).
	StartedBeforeStop bool
}

// verdict is how the suite counts one job.
type verdict int

const (
	verdictDone       verdict = iota // ran and completed
	verdictHeld                      // held and still pending
	verdictRetry                     // Slurm requeued it (failed launch) and will run it again
	verdictLostLaunch                // Slurm's batch launch lost across a controller stop
	verdictLost                      // not accounted for: the test fails
)

func (v verdict) String() string {
	return [...]string{"done", "held", "retry", "lost-launch", "lost"}[v]
}

// judge counts one job.
//
// A lost launch is Slurm's, not the plugin's: slurmctld's scheduler may still
// allocate a job after SIGTERM arrived (seen on 22.05.8: "Terminate signal"
// then "sched: Allocate JobId=840" 1 ms later), saves it as RUNNING, and exits
// before its agent sends the batch launch. The restarted slurmctld recovers it
// as RUNNING on a node that never heard of it. Slurm's remedy
// (_purge_missing_jobs in job_mgr.c) runs when that node registers, once
// BatchStartTimeout (10 s) plus MessageTimeout (10 s) have passed since the
// start: the job is requeued ("Batch JobId=... missing from batch node"), or
// failed if not requeueable. Nodes re-register only when slurmd starts or
// every 20 pings (SlurmdTimeout/3 each: 2,000 s by default), so within a test
// the job stays RUNNING. It is accounted for when all three hold: RUNNING, no
// slurmd logged its launch, and it was allocated before a controller stop.
func judge(j jobEnd) verdict {
	switch {
	case j.State == "":
		return verdictLost
	case !j.Ran && j.State == "PENDING":
		return verdictHeld
	case !j.Ran:
		return verdictLost
	case j.State == "COMPLETED":
		return verdictDone
	case j.State == "PENDING" && j.Restarts > 0:
		return verdictRetry
	case j.State == "RUNNING" && !j.Launched && j.StartedBeforeStop:
		return verdictLostLaunch
	}
	return verdictLost
}

// launchRE matches slurmd's batch launch line: "Launching batch job 840 for
// UID 0" (22.05-25.11), "Launching batch JobId=840 for UID 0" (26.05).
var launchRE = regexp.MustCompile(`Launching batch (?:job |JobId=|StepId=)(\d+)[ .]`)

// launchedJobs reads a slurmd log and returns the jobs whose batch launch it logged.
func launchedJobs(log []byte, into map[int]bool) {
	for _, line := range bytes.Split(log, []byte("\n")) {
		m := launchRE.FindSubmatch(line)
		if m == nil {
			continue
		}
		if id, err := strconv.Atoi(string(m[1])); err == nil && id > 0 {
			into[id] = true
		}
	}
}
