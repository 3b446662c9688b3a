// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// Bounds of the finisher's wait for a job's final state.
const (
	// finishWait: slurmd's Epilogs of a job run in parallel and are bounded by
	// EpilogMsgTime and the site's own timeouts; a job still COMPLETING after this
	// is dropped (fail closed).
	finishWait = 10 * time.Minute
	finishPoll = time.Second
	// maxPoll caps the doubling poll interval, so a long Epilog elsewhere costs the
	// controller one small query every 15 s per waiting job.
	maxPoll = 15 * time.Second
	// squeueTimeout bounds one query of the controller.
	squeueTimeout = 20 * time.Second
	// maxUnknown: a job squeue no longer lists (purged after MinJobAge) is dropped
	// after this many answers in a row.
	maxUnknown = 3
)

// runFinish is `coscheml-node finish --pending FILE`: the detached process the
// Epilog starts. It waits until the controller reports the job's final state,
// keeps the run (profile, solo run, observation) only if that run itself ended
// COMPLETED (the job was not requeued since it started), and removes the pending
// file. Exit 0 when it decided, 1 when it could not.
func runFinish(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("finish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfig, "configuration file")
	pending := fs.String("pending", "", "the pending run file the Epilog wrote (required)")
	wait := fs.Duration("wait", finishWait, "give up (keep nothing) after this long")
	noSyslog := fs.Bool("no-syslog", false, "log to stderr only")
	if err := fs.Parse(args); err != nil || *pending == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: coscheml-node finish [--config FILE] [--wait D] --pending FILE")
		return 2
	}
	log := newLogger(stderr, !*noSyslog)
	defer log.close()
	explicit := configFlagSet(fs)
	cfg, err := loadConfig(*cfgPath, explicit)
	if err == nil {
		err = checkSharedFolders(cfg)
	}
	if err != nil {
		log.printf("finish: %v; nothing kept", err)
		os.Remove(*pending)
		return 1
	}
	squeue, lerr := exec.LookPath("squeue")
	state := func(jobID string) (jobStatus, error) {
		if lerr != nil {
			return jobStatus{}, fmt.Errorf("squeue not found (PATH=%q): %w", os.Getenv("PATH"), lerr)
		}
		return squeueState(squeue, jobID)
	}
	if err := finish(cfg, *pending, state, finishPoll, *wait, log); err != nil {
		log.printf("finish: %v", err)
		return 1 // the Epilog's log file of this run (FILE.log) stays for the admin
	}
	os.Remove(*pending + ".log")
	return 0
}

// jobStatus is what the controller says about a job: its state and its restart
// count (how often it was requeued). State "" means it no longer lists the job.
type jobStatus struct {
	State    string
	Restarts int
}

// errRequeued: the controller's restart count is not the run's own, so the job
// was requeued after this run started; whatever state follows is another run's.
var errRequeued = errors.New("requeued")

// finish keeps or drops one pending run by its job's final state; the pending
// file (this run's own) is removed in every case.
func finish(cfg config.Config, pending string, state func(jobID string) (jobStatus, error), poll, wait time.Duration, log *logger) error {
	defer os.Remove(pending)
	run, err := jobprofile.LoadPending(pending)
	if err != nil {
		return fmt.Errorf("%w; nothing kept", err)
	}
	id := run.Env.JobID
	final, err := waitFinal(id, run.Env.Restarts, state, poll, wait)
	if errors.Is(err, errRequeued) {
		log.printf("finish: job %s (%s): %v; nothing kept", id, run.Env.Tag, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("job %s: %w; nothing kept", id, err)
	}
	run.Env.EndState = final
	rep, err := jobprofile.Keep(cfg, run)
	for _, n := range rep.Notes {
		log.printf("finish: job %s (%s): %s", id, run.Env.Tag, n)
	}
	return err
}

// waitFinal polls state until the job is no longer COMPLETING (or RUNNING, for a
// node whose Epilog ran before the others'); errors are retried until wait is
// over, a job squeue no longer knows is given up after maxUnknown answers. A
// restart count other than run's ends the wait with errRequeued: a requeued job
// that already runs again (or completed again) must not pass for this run. The
// interval starts at poll and doubles up to maxPoll.
func waitFinal(jobID string, run int, state func(string) (jobStatus, error), poll, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	unknown := 0
	var last error
	for {
		st, err := state(jobID)
		switch {
		case err == nil && st.State == "":
			unknown++
			last = errors.New("the controller no longer lists the job")
			if unknown >= maxUnknown {
				return "", last
			}
		case err != nil:
			unknown, last = 0, err
		case st.Restarts != run:
			return "", fmt.Errorf("%w: this was run %d, the controller is at run %d (%s)", errRequeued, run, st.Restarts, st.State)
		case st.State == "COMPLETING" || st.State == "RUNNING" || st.State == "CONFIGURING" || st.State == "STAGE_OUT" || st.State == "SIGNALING":
			unknown, last = 0, fmt.Errorf("still %s", st.State)
		default:
			return st.State, nil
		}
		if time.Now().Add(poll).After(deadline) {
			return "", fmt.Errorf("final state unknown after %v: %w", wait, last)
		}
		time.Sleep(poll)
		poll = min(2*poll, max(maxPoll, poll))
	}
}

// stateRE is one job state as squeue's %T prints it (upper-case words).
var stateRE = regexp.MustCompile(`^[A-Z][A-Z_]{1,31}$`)

// squeueFormat asks squeue for two fields the user cannot write into (unlike
// `scontrol show job`, where the job name comes first): the state and the restart
// count, each padded to its width.
const squeueFormat = "State:32,RestartCnt:8"

// squeueState asks the controller for a job's state and restart count with
// `squeue -h -t all -j ID -O State:32,RestartCnt:8`. No line means the
// controller no longer knows the job: a zero jobStatus, nil.
func squeueState(squeue, jobID string) (jobStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), squeueTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, squeue, "-h", "-t", "all", "-j", jobID, "-O", squeueFormat)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// squeue exits 1 with "Invalid job id specified" for a purged job.
		if strings.Contains(errb.String(), "Invalid job id") {
			return jobStatus{}, nil
		}
		return jobStatus{}, fmt.Errorf("squeue: %w: %s", err, strings.TrimSpace(clip(errb.String(), 200)))
	}
	return parseStatus(out.String())
}

// parseStatus reads squeue's answer: nothing, or exactly one state and one
// restart count.
func parseStatus(s string) (jobStatus, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return jobStatus{}, nil
	}
	if len(f) == 2 && stateRE.MatchString(f[0]) && len(f[1]) <= 5 && strings.TrimLeft(f[1], "0123456789") == "" {
		if n, err := strconv.Atoi(f[1]); err == nil && n <= residency.MaxRestarts {
			return jobStatus{State: f[0], Restarts: n}, nil
		}
	}
	return jobStatus{}, fmt.Errorf("squeue: unexpected answer %q", clip(s, 80))
}
