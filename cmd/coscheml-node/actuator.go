package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/safetext"
)

// slurmActuator carries out the guard's actions with Slurm's commands, found on
// PATH: `scontrol requeue`, `scancel`, `scontrol suspend`, `scontrol resume`.
// Before each it sets the job's AdminComment to the reason: only an operator or
// administrator can set it, so the job's owner cannot forge or erase it, and the
// owner sees it in `scontrol show job` and, once the job ended, in
// `sacct -o AdminComment`. (Comment is the owner's own field and carries
// coscheml's decision token; Reason is only shown for pending jobs.) The guard's
// reason replaces any AdminComment the job had.
type slurmActuator struct {
	timeout time.Duration // each command
	logf    func(string, ...any)
}

// maxAdminComment bounds the reason written to Slurm (the full one is in the
// guard's event log).
const maxAdminComment = 900

func (s *slurmActuator) Requeue(jobID, reason string) error {
	return s.act(jobID, reason, "scontrol", "requeue", jobID)
}
func (s *slurmActuator) Cancel(jobID, reason string) error {
	return s.act(jobID, reason, "scancel", jobID)
}
func (s *slurmActuator) Suspend(jobID, reason string) error {
	return s.act(jobID, reason, "scontrol", "suspend", jobID)
}
func (s *slurmActuator) Resume(jobID, reason string) error {
	return s.act(jobID, reason, "scontrol", "resume", jobID)
}

// act writes the reason and then runs the action. A reason that cannot be
// written is logged and does not stop the action: the event log has it too.
func (s *slurmActuator) act(jobID, reason string, cmd ...string) error {
	if err := residency.ValidJobID(jobID); err != nil {
		return err
	}
	comment := safetext.Limit(strings.Join(strings.Fields(reason), " "), maxAdminComment)
	if err := s.run("scontrol", "update", "jobid="+jobID, "admincomment="+comment); err != nil && s.logf != nil {
		s.logf("guard: job %s: writing the reason: %v", jobID, err)
	}
	return s.run(cmd[0], cmd[1:]...)
}

// run runs one command, killed after the timeout.
func (s *slurmActuator) run(name string, args ...string) error {
	timeout := s.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	// A child that keeps the output pipe open must not hold us past the timeout.
	c.WaitDelay = time.Second
	err := c.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: no answer within %v", name, strings.Join(args[:1], " "), timeout)
	}
	if err != nil {
		msg := safetext.Limit(strings.Join(strings.Fields(out.String()), " "), 300)
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args[:1], " "), err, msg)
	}
	return nil
}

// trackingActuator remembers which of a round's actions failed, so that the
// event log and the metrics can say so.
type trackingActuator struct {
	inner guard.Actuator
	mu    sync.Mutex
	fails map[string]bool
}

func (t *trackingActuator) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fails = nil
}

func (t *trackingActuator) failed(kind guard.ActionKind, jobID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fails[string(kind)+" "+jobID]
}

func (t *trackingActuator) track(kind guard.ActionKind, jobID string, err error) error {
	if err != nil {
		t.mu.Lock()
		if t.fails == nil {
			t.fails = map[string]bool{}
		}
		t.fails[string(kind)+" "+jobID] = true
		t.mu.Unlock()
	}
	return err
}

func (t *trackingActuator) Requeue(id, reason string) error {
	return t.track(guard.Requeue, id, t.inner.Requeue(id, reason))
}
func (t *trackingActuator) Cancel(id, reason string) error {
	return t.track(guard.Cancel, id, t.inner.Cancel(id, reason))
}
func (t *trackingActuator) Suspend(id, reason string) error {
	return t.track(guard.Suspend, id, t.inner.Suspend(id, reason))
}
func (t *trackingActuator) Resume(id, reason string) error {
	return t.track(guard.Resume, id, t.inner.Resume(id, reason))
}
