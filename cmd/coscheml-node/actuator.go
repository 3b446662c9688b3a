// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/hostlist"
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
	node    string // this node, which RequeueElsewhere excludes
}

// maxAdminComment bounds the reason written to Slurm (the full one is in the
// guard's event log).
const maxAdminComment = 900

func (s *slurmActuator) Requeue(jobID, reason string) error {
	return s.act(jobID, reason, "scontrol", "requeue", jobID)
}

// RequeueElsewhere requeues the job and adds this node to its excluded nodes
// (ExcNodeList, merged with the job's own), so that when the re-decide loop
// places it again it starts away from the co-runner it was acted on for. The
// node is added only while the job's partition keeps another node it may use;
// otherwise, or when the update fails, the requeue stands and a line says why.
// The job's partition and excluded nodes come from squeue (jobPlacementFormat).
func (s *slurmActuator) RequeueElsewhere(jobID, reason string) error {
	if err := s.Requeue(jobID, reason); err != nil {
		return err
	}
	if err := s.excludeNode(jobID); err != nil && s.logf != nil {
		s.logf("guard: job %s requeued; node %s not excluded: %v", jobID, s.node, err)
	}
	return nil
}

func (s *slurmActuator) excludeNode(jobID string) error {
	if s.node == "" {
		return fmt.Errorf("the guard's node is unknown")
	}
	out, err := s.output("squeue", "--noheader", "--states=all", "-j", jobID, "-o", jobPlacementFormat)
	if err != nil {
		return err
	}
	part, exc, err := parseJobPlacement(out)
	if err != nil {
		return err
	}
	var names []string
	if exc != "" {
		if names, err = hostlist.Expand(exc); err != nil {
			return fmt.Errorf("the job's excluded nodes %q: %w", safetext.Limit(exc, 100), err)
		}
	}
	if slices.Contains(names, s.node) {
		return nil
	}
	names = append(names, s.node)
	total, err := s.partitionNodes(part)
	if err != nil {
		return err
	}
	if len(names) >= total {
		return fmt.Errorf("partition %s has %d node(s) and the job would exclude %d: none would be left", part, total, len(names))
	}
	return s.run("scontrol", "update", "jobid="+jobID, "ExcNodeList="+strings.Join(names, ","))
}

// partitionNodes counts the nodes of partition part (sinfo, one count per line).
func (s *slurmActuator) partitionNodes(part string) (int, error) {
	out, err := s.output("sinfo", "-h", "-p", part, "-o", "%D")
	if err != nil {
		return 0, err
	}
	total := 0
	for _, f := range strings.Fields(out) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("sinfo's node count %q is not a number", safetext.Limit(f, 20))
		}
		total += n
	}
	return total, nil
}

// jobPlacementFormat asks squeue for a job's partition and excluded nodes:
// Slurm's own fields only. `scontrol show job -o` prints the job's name (its
// owner's words) before them, and a name such as "x ExcNodeList=n[1-4]" read
// as the job's excluded nodes.
const jobPlacementFormat = "%P|%x"

var (
	partitionRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	nodeListRE  = regexp.MustCompile(`^[A-Za-z0-9_.,\[\]-]*$`)
)

// parseJobPlacement reads squeue's answer in jobPlacementFormat: the first
// line, the partition and the excluded nodes ("" for none).
func parseJobPlacement(out string) (part, exc string, err error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	part, exc, ok := strings.Cut(line, "|")
	switch {
	case !ok || !partitionRE.MatchString(part):
		return "", "", fmt.Errorf("squeue's answer %q is not a partition and excluded nodes", safetext.Limit(line, 100))
	case exc == "(null)":
		exc = ""
	case !nodeListRE.MatchString(exc):
		return "", "", fmt.Errorf("squeue's excluded nodes %q are not a node list", safetext.Limit(exc, 100))
	}
	return part, exc, nil
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
	_, err := s.output(name, args...)
	return err
}

// output runs one command, killed after the timeout, and returns its output.
func (s *slurmActuator) output(name string, args ...string) (string, error) {
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
		return "", fmt.Errorf("%s %s: no answer within %v", name, strings.Join(args[:1], " "), timeout)
	}
	if err != nil {
		msg := safetext.Limit(strings.Join(strings.Fields(out.String()), " "), 300)
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args[:1], " "), err, msg)
	}
	return out.String(), nil
}

// trackingActuator remembers which of a round's actions failed, so that the
// event log and the metrics can say so, and holds back an action that failed
// for retryAfter: an action Slurm refuses (a job that may not be requeued) would
// otherwise run two commands against slurmctld every period.
type trackingActuator struct {
	inner      guard.Actuator
	retryAfter time.Duration
	now        func() time.Time
	mu         sync.Mutex
	fails      map[string]bool      // this round
	lastFail   map[string]time.Time // kind and job -> when it last failed
}

// defaultRetryAfter is how long a failed action waits before it is tried again.
const defaultRetryAfter = time.Minute

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

func (t *trackingActuator) do(kind guard.ActionKind, jobID string, run func() error) error {
	key := string(kind) + " " + jobID
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	at := now()
	t.mu.Lock()
	if t.fails == nil {
		t.fails = map[string]bool{}
	}
	if t.lastFail == nil {
		t.lastFail = map[string]time.Time{}
	}
	last, held := t.lastFail[key]
	held = held && at.Sub(last) < t.retryAfter
	t.mu.Unlock()
	var err error
	if held {
		err = fmt.Errorf("it failed less than %v ago; tried again after that", t.retryAfter)
	} else {
		err = run()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		t.fails[key] = true
		if !held {
			t.lastFail[key] = at
		}
	default:
		delete(t.lastFail, key)
	}
	if len(t.lastFail) > 4096 {
		for k, f := range t.lastFail {
			if at.Sub(f) >= t.retryAfter {
				delete(t.lastFail, k)
			}
		}
	}
	return err
}

func (t *trackingActuator) Requeue(id, reason string) error {
	return t.do(guard.Requeue, id, func() error { return t.inner.Requeue(id, reason) })
}
func (t *trackingActuator) RequeueElsewhere(id, reason string) error {
	if r, ok := t.inner.(guard.ElsewhereRequeuer); ok {
		return t.do(guard.Requeue, id, func() error { return r.RequeueElsewhere(id, reason) })
	}
	return t.Requeue(id, reason)
}
func (t *trackingActuator) Cancel(id, reason string) error {
	return t.do(guard.Cancel, id, func() error { return t.inner.Cancel(id, reason) })
}
func (t *trackingActuator) Suspend(id, reason string) error {
	return t.do(guard.Suspend, id, func() error { return t.inner.Suspend(id, reason) })
}
func (t *trackingActuator) Resume(id, reason string) error {
	return t.do(guard.Resume, id, func() error { return t.inner.Resume(id, reason) })
}
