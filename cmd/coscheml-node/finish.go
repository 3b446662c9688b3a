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
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/jobprofile"
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
// keeps the run (profile, solo run, observation) only if it is COMPLETED, and
// removes the pending file. Exit 0 when it decided, 1 when it could not.
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
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
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
	state := func(jobID string) (string, error) {
		if lerr != nil {
			return "", fmt.Errorf("squeue not found (PATH=%q): %w", os.Getenv("PATH"), lerr)
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

// finish keeps or drops one pending run by its job's final state; the pending
// file is removed in every case.
func finish(cfg config.Config, pending string, state func(jobID string) (string, error), poll, wait time.Duration, log *logger) error {
	defer os.Remove(pending)
	run, err := jobprofile.LoadPending(pending)
	if err != nil {
		return fmt.Errorf("%w; nothing kept", err)
	}
	id := run.Env.JobID
	final, err := waitFinal(id, state, poll, wait)
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
// over, a job squeue no longer knows is given up after maxUnknown answers. The
// interval starts at poll and doubles up to maxPoll.
func waitFinal(jobID string, state func(string) (string, error), poll, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	unknown := 0
	var last error
	for {
		st, err := state(jobID)
		switch {
		case err == nil && st == "":
			unknown++
			last = errors.New("the controller no longer lists the job")
			if unknown >= maxUnknown {
				return "", last
			}
		case err != nil:
			unknown, last = 0, err
		case st == "COMPLETING" || st == "RUNNING" || st == "CONFIGURING" || st == "STAGE_OUT" || st == "SIGNALING":
			unknown, last = 0, fmt.Errorf("still %s", st)
		default:
			return st, nil
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

// squeueState asks the controller for a job's state with
// `squeue -h -t all -j ID -o %T`: one field the user cannot write into (unlike
// `scontrol show job`, where the job name comes first). No line means the
// controller no longer knows the job: "", nil.
func squeueState(squeue, jobID string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), squeueTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, squeue, "-h", "-t", "all", "-j", jobID, "-o", "%T")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// squeue exits 1 with "Invalid job id specified" for a purged job.
		if strings.Contains(errb.String(), "Invalid job id") {
			return "", nil
		}
		return "", fmt.Errorf("squeue: %w: %s", err, strings.TrimSpace(clip(errb.String(), 200)))
	}
	return parseState(out.String())
}

// parseState reads squeue's answer: no line, or exactly one state.
func parseState(s string) (string, error) {
	lines := strings.Fields(s)
	switch {
	case len(lines) == 0:
		return "", nil
	case len(lines) == 1 && stateRE.MatchString(lines[0]):
		return lines[0], nil
	}
	return "", fmt.Errorf("squeue: unexpected answer %q", clip(s, 80))
}
