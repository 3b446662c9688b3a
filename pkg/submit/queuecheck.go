// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
)

// Reservations of jobs that left the queue without starting (cancelled, held
// then cancelled, rejected later by Slurm) would hold their GPU slots until the
// reservation TTL: job_submit plugins hear of no cancellation. After a slurmctld
// restart the reservations rebuilt from the decision log include such jobs too.
// So a background poll lists the decision ids still carried by the queue's jobs
// and drops the reservations whose id is gone.

// queueCheckGrace: a reservation is made inside job_submit, under slurmctld's
// job write lock, in the same locked section that creates the job record; a
// listing started after it (squeue takes the read lock) sees the job. The grace
// only covers clock steps and the time between the listing's start and its RPC.
const queueCheckGrace = 5 * time.Second

// maxQueueBytes bounds what a listing may hand over (a comment is at most a few
// KiB; 100,000 jobs of short comments fit).
const maxQueueBytes = 64 << 20

// ParseQueueIDs reads `squeue -h -a -o '%k'` (one job comment per line) and
// returns the decision ids the comments carry. Every line is a user's comment:
// only the plugin's own token grammar is read from it (a forged token can at
// most keep a reservation until its TTL, never drop another's).
func ParseQueueIDs(out []byte) map[string]bool {
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if d := comment.ParseComment(sc.Text()); d.DecisionID != "" {
			ids[d.DecisionID] = true
		}
	}
	return ids
}

// SqueueIDs lists the decision ids of the jobs in the queue (pending, running,
// suspended, completing) with squeue, the one of the running Slurm when it sits
// beside slurmctld, against slurmConf.
func SqueueIDs(slurmConf string) func(ctx context.Context) (map[string]bool, error) {
	bin := slurmClient("squeue")
	return func(ctx context.Context) (map[string]bool, error) {
		out, err := runClient(ctx, bin, slurmConf, maxQueueBytes, "-h", "-a", "-o", "%k")
		if err != nil {
			return nil, err
		}
		return ParseQueueIDs(out), nil
	}
}

// checkQueue runs one listing and drops the reservations it shows gone. A
// failed listing drops nothing. It says whether the listing succeeded.
func (e *Engine) checkQueue() (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			e.note("info-queuecheck", fmt.Sprintf("internal error listing the queue: %v", r))
		}
	}()
	started := e.opts.Now()
	ctx, cancel := e.stopBound(e.opts.QueueEvery)
	defer cancel()
	ids, err := e.poll.queueIDs(ctx)
	if err != nil {
		e.note("info-queuecheck", fmt.Sprintf("queue not listed (reservations of cancelled jobs last their TTL): %v", err))
		return false
	}
	e.note("info-queuecheck", "")
	e.view.dropGone(ids, started.Add(-queueCheckGrace))
	e.view.releaseGoneCtx(ids, started.Add(-queueCheckGrace))
	return true
}

// dropGone drops the reservations made before cutoff whose decision id no job of
// the queue carries any more.
func (v *clusterView) dropGone(ids map[string]bool, cutoff time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for i := 0; i < len(v.res.list); {
		if rv := &v.res.list[i]; rv.at.Before(cutoff) && !ids[rv.id] {
			v.unreserveLocked(i)
			n++
			continue
		}
		i++
	}
	return n
}

// ctxSweepChunk is how many job contexts the queue check looks at per hold of
// the view's lock: a decision waits for at most one chunk (tens of µs), not for
// the whole walk.
const ctxSweepChunk = 512

// releaseGoneCtx releases the job contexts recorded before cutoff whose
// decision id no job of the queue carries any more (cancelled, ended, or
// gone before its start was seen), walking them a chunk at a time.
func (v *clusterView) releaseGoneCtx(ids map[string]bool, cutoff time.Time) int {
	gone := func(id string, c *jobCtx) bool { return c.at.Before(cutoff) && !ids[id] }
	v.mu.Lock()
	v.ctx.sweepStart()
	v.mu.Unlock()
	total := 0
	for {
		v.mu.Lock()
		n, end := v.ctx.sweepStep(ctxSweepChunk, gone)
		v.mu.Unlock()
		total += n
		if end {
			return total
		}
	}
}
