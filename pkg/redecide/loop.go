// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Runner runs a Slurm command (squeue, scontrol) and returns its stdout.
type Runner func(ctx context.Context, name string, args ...string) (string, error)

// Loop re-decides deferred jobs. Its zero value is not usable: set Run and
// Refresh. Pass is called by one goroutine at a time (Forever's); Forever
// adds one that watches the controllers (Host).
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
	// Host: this machine's name. When set, the loop asks `scontrol ping` which
	// controller is in control and does nothing (no update, no heartbeat)
	// while another one is (InControl): with a backup controller the service
	// runs on both hosts and only the active one's loop acts. Forever asks
	// every CheckEvery (default 10 s) on a goroutine of its own, so that a
	// ping waiting on an unreachable controller never delays a pass.
	Host       string
	CheckEvery time.Duration

	ctlMu       sync.Mutex
	watching    bool // Forever's watchControl asks; passes never do
	ctlKnown    bool
	standby     string // why the loop stands by ("": it acts)
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
	if l.Host != "" && l.standingBy(ctx) != "" {
		return 0, nil
	}
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
	if l.Host != "" {
		l.ctlMu.Lock()
		l.watching = true
		l.ctlMu.Unlock()
		go l.watchControl(ctx)
	}
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
		if err == nil && l.Heartbeat != "" && (l.Host == "" || l.standingBy(ctx) == "") {
			l.beat(time.Now().Add(HeartbeatTTL(interval)))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// standingBy is why the loop stands by now ("": it acts), from the last
// answer of `scontrol ping`. Under Forever, before the watcher's first answer
// it stands by (two loops acting would re-decide every job twice; a loop that
// waits a moment costs nothing); a single pass asks itself.
func (l *Loop) standingBy(ctx context.Context) string {
	l.ctlMu.Lock()
	known, why, watching := l.ctlKnown, l.standby, l.watching
	l.ctlMu.Unlock()
	switch {
	case known:
		return why
	case watching:
		return "which controller is in control is not known yet"
	}
	return l.checkControl(ctx)
}

// watchControl asks `scontrol ping` now and then every CheckEvery until ctx
// ends.
func (l *Loop) watchControl(ctx context.Context) {
	every := l.CheckEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		l.checkControl(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkControl asks `scontrol ping` whether this host's controller is the one
// in control (InControl), records the answer and logs each change between
// acting and standing by. An unanswered ping keeps the loop acting: its own
// squeue then fails and says why.
func (l *Loop) checkControl(ctx context.Context) string {
	out, err := l.Run(ctx, l.prog(l.Scontrol, "scontrol"), "ping")
	why := ""
	if err == nil {
		_, why = InControl(ParsePing(out), l.Host)
	}
	l.ctlMu.Lock()
	was, known := l.standby, l.ctlKnown
	l.standby, l.ctlKnown = why, true
	l.ctlMu.Unlock()
	switch {
	case why != "" && (was == "" || !known):
		l.logf("standing by: this host (%s) is a standby controller and %s; re-deciding resumes if it takes over", l.Host, why)
	case why == "" && was != "":
		l.logf("this host (%s) is in control now: re-deciding", l.Host)
	}
	return why
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
