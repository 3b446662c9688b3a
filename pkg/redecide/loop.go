package redecide

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Runner runs a Slurm command (squeue, scontrol) and returns its stdout.
type Runner func(ctx context.Context, name string, args ...string) (string, error)

// Loop re-decides deferred jobs. Its zero value is not usable: set Run and
// Refresh. One Loop is used by one goroutine.
type Loop struct {
	Run      Runner
	Squeue   string // squeue program (default "squeue")
	Scontrol string // scontrol program (default "scontrol")
	// Refresh: a deferred job is re-decided at least this often even when nothing
	// changed, so that it is deferred again before its begin time passes (half of
	// wait_defer).
	Refresh time.Duration
	// MaxPerPass bounds the updates of one pass (0: no bound): each is an RPC to
	// slurmctld and a decision, and on a busy cluster jobs start and end every
	// few seconds. The jobs re-decided least recently go first, so all get turns.
	MaxPerPass int
	Log        func(format string, args ...any)
	// Heartbeat: the file Forever renews after every pass that listed the queue
	// (WriteHeartbeat) and removes when it ends, so that the plugin defers waits
	// only while a loop runs ("": none; the plugin then never defers).
	Heartbeat string

	lastRunning string
	hbErr       string // the last heartbeat error logged ("" none)
	changedLast bool
	tried       map[uint32]time.Time // job ID -> time of its last re-decision
}

// Pass is one round: list the queue, and re-decide in submit order every
// deferred job when the set of running jobs changed (in this pass or the one
// before: the plugin learns of an ended job from the residency store a moment
// after squeue does) or when its last re-decision is older than Refresh. It
// returns how many jobs it re-decided; a failed update is logged and the others
// go on.
func (l *Loop) Pass(ctx context.Context, now time.Time) (int, error) {
	marker, err := NewMarker()
	if err != nil {
		return 0, err
	}
	out, err := l.Run(ctx, l.prog(l.Squeue, "squeue"), "--noheader", "--states=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED", "-o", Format(marker))
	if err != nil {
		return 0, fmt.Errorf("listing the queue: %w", err)
	}
	jobs, err := ParseQueue(out, marker)
	if err != nil {
		return 0, err
	}
	running := Running(jobs)
	changed := running != l.lastRunning
	recent := changed || l.changedLast
	l.lastRunning, l.changedLast = running, changed
	if l.tried == nil {
		l.tried = make(map[uint32]time.Time)
	}
	deferred := Deferred(jobs, now)
	seen := make(map[uint32]bool, len(deferred))
	var due []Job
	for _, j := range deferred {
		seen[j.ID] = true
		if last, ok := l.tried[j.ID]; ok && !recent && now.Sub(last) < l.Refresh {
			continue
		}
		due = append(due, j)
	}
	if l.MaxPerPass > 0 && len(due) > l.MaxPerPass {
		// Least recently re-decided first (never: first of all), then submit order.
		sort.SliceStable(due, func(a, b int) bool { return l.tried[due[a].ID].Before(l.tried[due[b].ID]) })
		due = due[:l.MaxPerPass]
		sort.Slice(due, func(a, b int) bool { return due[a].ID < due[b].ID })
	}
	n := 0
	for _, j := range due {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		l.tried[j.ID] = now
		if _, err := l.Run(ctx, l.prog(l.Scontrol, "scontrol"), UpdateArgs(j)...); err != nil {
			l.logf("re-deciding job %d: %v", j.ID, err)
			continue
		}
		n++
	}
	for id := range l.tried {
		if !seen[id] {
			delete(l.tried, id) // started, placed or gone
		}
	}
	return n, nil
}

// Forever runs a pass every interval until ctx ends; a failed pass is logged.
func (l *Loop) Forever(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	if l.Heartbeat != "" {
		defer func() {
			if err := RemoveHeartbeat(l.Heartbeat); err != nil {
				l.logf("%v", err)
			}
		}()
	}
	for {
		n, err := l.Pass(ctx, time.Now())
		switch {
		case err != nil:
			l.logf("%v", err)
		case n > 0:
			l.logf("re-decided %d deferred job(s)", n)
		}
		if err == nil && l.Heartbeat != "" {
			l.beat(time.Now().Add(HeartbeatTTL(interval)))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// beat renews the heartbeat; a failure is logged when it first happens and when
// it changes, not every pass.
func (l *Loop) beat(until time.Time) {
	msg := ""
	if err := WriteHeartbeat(l.Heartbeat, until); err != nil {
		msg = err.Error() + ": the plugin will not defer waits while it is missing"
	}
	if msg != l.hbErr && msg != "" {
		l.logf("%s", msg)
	}
	l.hbErr = msg
}

func (l *Loop) prog(p, def string) string {
	if p == "" {
		return def
	}
	return p
}

func (l *Loop) logf(format string, args ...any) {
	if l.Log != nil {
		l.Log(format, args...)
	}
}
