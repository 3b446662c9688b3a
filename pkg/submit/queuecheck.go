// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/residency"
)

// Reservations of jobs that left the queue without starting (cancelled, held
// then cancelled, rejected later by Slurm) would hold their GPU slots until the
// reservation TTL: job_submit plugins hear of no cancellation. After a slurmctld
// restart the reservations rebuilt from the decision log include such jobs too.
// So a background poll lists the decision ids still carried by the queue's jobs
// and drops the reservations whose id is gone. The same listing names each
// decision's job id, which binds the decision's job context to its job.

// queueCheckGrace: a reservation is made inside job_submit, under slurmctld's
// job write lock, in the same locked section that creates the job record; a
// listing started after it (squeue takes the read lock) sees the job. The grace
// only covers clock steps and the time between the listing's start and its RPC.
const queueCheckGrace = 5 * time.Second

// maxQueueBytes bounds what a listing may hand over (a comment is at most a few
// KiB; 100,000 jobs of short comments fit).
const maxQueueBytes = 64 << 20

// QueueListing maps the decision id each queued job's comment carries to that
// job's Slurm job id.
type QueueListing map[string]string

// queueFormat is squeue's -o format for a listing with record marker m: the
// job id, then the comment, which is the user's and may hold newlines or
// anything else; a marker drawn for each listing cannot appear in a comment
// written before it, so no comment can forge another job's record.
func queueFormat(m string) string { return m + "%i|%k" + m }

// ParseQueueIDs reads squeue's output in queueFormat(marker) and returns the
// decision id each job's comment carries, with its job id. Only the plugin's
// own token grammar is read from a comment (a forged token can at most keep a
// reservation until its TTL, never drop another's), and a decision id two jobs
// carry belongs to neither (its job id is left ""). Output not framed by the
// marker is an error: nothing is dropped on a listing that was not read.
func ParseQueueIDs(out []byte, marker string) (QueueListing, error) {
	if len(marker) < 8 {
		return nil, errors.New("queue listing: record marker too short")
	}
	parts := strings.Split(string(out), marker)
	if len(parts)%2 == 0 {
		return nil, errors.New("queue listing: unbalanced record markers")
	}
	ids := QueueListing{}
	for i, p := range parts {
		if i%2 == 0 {
			if strings.TrimSpace(p) != "" {
				return nil, fmt.Errorf("queue listing: text outside a record: %.40q", p)
			}
			continue
		}
		job, c, ok := strings.Cut(p, "|")
		if !ok || residency.ValidJobID(job) != nil {
			return nil, fmt.Errorf("queue listing: record without a job id: %.40q", p)
		}
		d := comment.ParseComment(c)
		if d.DecisionID == "" {
			continue
		}
		if prev, seen := ids[d.DecisionID]; seen && prev != job {
			job = ""
		}
		ids[d.DecisionID] = job
	}
	return ids, nil
}

// SqueueIDs lists the decision ids of the jobs in the queue (pending, running,
// suspended, completing) and their job ids with squeue, the one of the running
// Slurm when it sits beside slurmctld, against slurmConf.
func SqueueIDs(slurmConf string) func(ctx context.Context) (QueueListing, error) {
	bin := slurmClient("squeue")
	return func(ctx context.Context) (QueueListing, error) {
		marker, err := redecide.NewMarker()
		if err != nil {
			return nil, err
		}
		out, err := runClient(ctx, bin, slurmConf, maxQueueBytes, "-h", "-a", "-o", queueFormat(marker))
		if err != nil {
			return nil, err
		}
		return ParseQueueIDs(out, marker)
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
func (v *clusterView) dropGone(ids QueueListing, cutoff time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for i := 0; i < len(v.res.list); {
		if _, queued := ids[v.res.list[i].id]; v.res.list[i].at.Before(cutoff) && !queued {
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
// gone before its start was seen), and binds each other one to the job id
// that carries its decision id, walking them a chunk at a time.
func (v *clusterView) releaseGoneCtx(ids QueueListing, cutoff time.Time) int {
	gone := func(id string, c *jobCtx) (bool, string) {
		job, queued := ids[id]
		return c.at.Before(cutoff) && !queued, job
	}
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
