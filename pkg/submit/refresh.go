// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/residency"
)

// refresher is the background refresh's state: one refresh at a time (the
// background loop, Reload, the first load) holds mu and rebuilds the cluster
// view from the residency store, reopens the decision log when its path
// changes and reads the re-decide loop's heartbeat. Decisions never take mu:
// what they read of it is atomic (the decision log's current writer, the
// heartbeat's deadline, the watchdog's clock).
type refresher struct {
	mu sync.Mutex
	// prep, when set, wraps the sources before the first load (GuardPinning
	// reads slurm.conf: I/O that must not run in slurmctld's init).
	prep func(Sources) (Sources, string)
	// spare: the cluster the last install replaced, rebuilt in place by the
	// next one, so a rebuild leaves no cluster of garbage behind.
	spare     *placement.Cluster
	reader    *residency.Reader
	readerDir string // the residency directory reader lists
	// builtFor is the snapshot the installed cluster was built for, entries
	// the residency it holds; delta diffs them against the next read.
	builtFor  *Snapshot
	entries   []residency.Entry
	delta     deltaScratch
	dlog      decisionLogFile
	heartbeat heartbeat
	clock     refreshClock // when a refresh last completed (watchdog.go)
	// reloadRequests carries RequestReload to the loop (one pending at most).
	reloadRequests chan struct{}
	loopDone       chan struct{} // the loop ended
	running        atomic.Bool   // the loop runs
}

// heartbeat is what the last read of the re-decide loop's heartbeat said.
type heartbeat struct {
	// until is when the heartbeat stops counting (unix seconds; read by
	// decisions); readAt when it was last read (under the refresh lock).
	until  atomic.Int64
	readAt time.Time
}

// decisionLogFile is the decision log's writer, replaced under the refresh lock
// when decision_log changes; decisions write to current.
type decisionLogFile struct {
	w       *decisionlog.Writer
	path    string
	current atomic.Pointer[decisionlog.Writer]
}

// Reload re-reads configuration, model, profiles and residency now (scontrol
// reconfigure).
func (e *Engine) Reload() {
	e.refresh.mu.Lock()
	defer e.refresh.mu.Unlock()
	e.reloadLocked(false)
}

// reloadLocked loads a snapshot and refreshes the view on it; with restore it
// first rebuilds the pending reservations from the decision log (start).
// Caller holds the refresh lock.
func (e *Engine) reloadLocked(restore bool) {
	now := e.opts.Now()
	prev := e.snap.Load()
	l := loadSnapshot(&e.src, prev, now, e.metrics.since)
	e.metrics.countRuns(l)
	// A policy that panics here panics in decisions too, where each is caught
	// and the job passes through; the warm-up only must not take Reload down.
	e.safely(func() { warmPolicy(l, e.refresh.entries, e.view.reservations(), e.refresh.spare) })
	for _, n := range l.notes {
		e.note(n.key, n.msg)
	}
	e.snap.Store(l)
	if line := appliedLine(&e.src, prev, l); line != "" {
		// Logged with the next job, at info: the library writes slurmctld's
		// log only from the threads that call it.
		e.notes.push(line)
		e.publishPass()
	}
	if restore {
		e.restoreLocked(l, now)
	}
	e.refreshLocked(true)
}

// RequestReload asks the background loop to reload soon and returns at once, so a
// caller inside slurmctld's job_submit never waits for file I/O. Without a running
// loop it reloads synchronously.
func (e *Engine) RequestReload() {
	if !e.refresh.running.Load() {
		e.Reload()
		return
	}
	select {
	case e.refresh.reloadRequests <- struct{}{}:
	default: // a reload is already pending
	}
}

// loop refreshes the view every min(ReloadEvery, ResidencyEvery), and reloads
// when a file changed or on RequestReload, until Close.
func (e *Engine) loop() {
	defer close(e.refresh.loopDone)
	defer e.refresh.running.Store(false)
	if !e.ready.Load() {
		e.safely(e.firstLoad)
		if !e.ready.Load() { // the first load panicked: decide on what it left
			e.ready.Store(true)
		}
	}
	tick := time.NewTicker(min(e.opts.ReloadEvery, e.opts.ResidencyEvery))
	defer tick.Stop()
	lastCheck, lastObs := e.opts.Now(), e.opts.Now()
	for {
		select {
		case <-e.stop:
			return
		case <-e.refresh.reloadRequests:
			e.safely(e.Reload)
			continue
		case <-tick.C:
		}
		e.safely(func() {
			now := e.opts.Now()
			if now.Sub(lastCheck) >= e.opts.ReloadEvery {
				lastCheck = now
				cur := e.snap.Load()
				if cur == nil || changed(&e.src, cur) {
					e.Reload()
					return
				}
				// Epilogs append observations all the time: rebuild the pair
				// memory at most once per MemoryEvery, not on every append.
				if memoryOn(cur.cfg) && now.Sub(lastObs) >= e.opts.MemoryEvery {
					lastObs = now
					if obsStamp(cur.cfg.ObservationDir) != cur.stamps.observations {
						e.Reload()
						return
					}
				}
			}
			e.refresh.mu.Lock()
			e.refreshLocked(false)
			e.refresh.mu.Unlock()
		})
	}
}

// changed says whether the configuration, model or profiles changed since cur
// was loaded (the observations are checked on their own schedule).
func changed(src *Sources, cur *Snapshot) bool {
	st := currentStamps(src, cur.cfg)
	st.observations = cur.stamps.observations
	return st != cur.stamps
}

// safely runs f, turning a panic into a note: the background loop must survive.
func (e *Engine) safely(f func()) {
	defer func() {
		if r := recover(); r != nil {
			e.note("panic-bg", fmt.Sprintf("internal error in background refresh: %v", r))
		}
	}()
	f()
}

// refreshLocked re-reads the residency store and, when it or the snapshot changed
// (or force), rebuilds the cluster outside the view's lock and swaps it in.
// Caller holds the refresh lock.
func (e *Engine) refreshLocked(force bool) {
	// Whatever the outcome, a refresh that returns is not hung: the watchdog
	// only looks for refreshes that never complete.
	defer e.markFresh()
	st := e.snap.Load()
	e.checkLoop(st, force)
	if st == nil || st.cfgErr != nil {
		return
	}
	e.refresh.dlog.ensure(st.cfg.DecisionLog, e.opts.DecisionLogMax)
	if e.refresh.dlog.w != nil {
		if err := e.refresh.dlog.w.Err(); err != nil {
			e.note("decisionlog", fmt.Sprintf("decision log not written (coscheml explain will miss decisions): %v", err))
		}
	}
	now := e.opts.Now()
	if e.refresh.reader == nil || e.refresh.readerDir != st.cfg.ResidencyDir {
		s, err := residency.Open(st.cfg.ResidencyDir)
		if err != nil {
			e.setResErr(err)
			return
		}
		e.refresh.reader, e.refresh.readerDir = s.NewReader(), st.cfg.ResidencyDir
		force = true
	}
	res, err := e.refresh.reader.Read(now, e.opts.StaleGrace)
	if err != nil {
		e.refresh.reader = nil // start from scratch once it is readable again
		e.setResErr(fmt.Errorf("residency unreadable, tagged jobs pass through unchanged: %w", err))
		return
	}
	if len(res.NewProblems) > 0 {
		e.note("residency-files", fmt.Sprintf("%d unreadable residency entries skipped: %v", len(res.NewProblems), res.NewProblems[0]))
	}
	hadErr := e.notes.get("residency") != ""
	if !res.Changed && !force && e.refresh.builtFor == st && !hadErr && len(res.Entries) == len(e.refresh.entries) {
		e.view.expire(now)
		return
	}
	e.install(st, res.Entries, res.Done, now)
	e.note("residency", "")
}

// checkLoop reads the re-decide loop's heartbeat (at most once a second unless
// force) into heartbeat.until, which deferrals read: a "wait" is deferred only while a
// loop runs. A change of what is known is logged once. Caller holds the refresh lock.
func (e *Engine) checkLoop(st *Snapshot, force bool) {
	if st == nil || st.cfgErr != nil || st.cfg.WaitDefer <= 0 {
		e.refresh.heartbeat.until.Store(0)
		e.note("info-redecide", "")
		return
	}
	now := e.opts.Now()
	if !force && now.Sub(e.refresh.heartbeat.readAt) < time.Second && now.After(e.refresh.heartbeat.readAt) {
		return
	}
	e.refresh.heartbeat.readAt = now
	path := st.cfg.HeartbeatPath()
	var until time.Time
	err := errNoHeartbeatPath
	if path != "" {
		until, err = redecide.ReadHeartbeat(path)
	}
	alive := int64(0)
	if err == nil {
		alive = until.Unix()
	}
	e.refresh.heartbeat.until.Store(alive)
	// A site without the loop hears nothing (no heartbeat is its normal
	// state); a loop that appears, stops or cannot be trusted is said once.
	const off = ": a wait is not deferred (wait_defer applies while `coscheml redecide --loop` runs)"
	seen := e.notes.get("info-redecide") != ""
	switch {
	case errors.Is(err, redecide.ErrNoHeartbeat) && seen:
		e.note("info-redecide", "re-decide loop stopped (heartbeat "+path+" removed)"+off)
	case errors.Is(err, redecide.ErrNoHeartbeat):
	case err != nil:
		e.note("info-redecide", "no re-decide loop trusted: "+err.Error()+off)
	case until.Before(now) && seen:
		e.note("info-redecide", "re-decide loop stopped (heartbeat "+path+" expired)"+off)
	case until.Before(now):
	default:
		e.note("info-redecide", "re-decide loop running (heartbeat "+path+"): a wait is deferred "+st.cfg.WaitDefer.String()+" for re-decision")
	}
}

// errNoHeartbeatPath: neither redecide_heartbeat nor decision_log names where
// the loop's heartbeat would be, so no loop is ever seen running.
var errNoHeartbeatPath = errors.New("no redecide_heartbeat or decision_log configured")

// loopRunning says whether the re-decide loop's last heartbeat still counts at now.
func (e *Engine) loopRunning(now time.Time) bool {
	return e.refresh.heartbeat.until.Load() >= now.Unix()
}

// install builds the cluster for st and entries outside the view's lock, then
// swaps it in. Caller holds the refresh lock.
func (e *Engine) install(st *Snapshot, entries []residency.Entry, done []string, now time.Time) {
	if e.refresh.builtFor == st && st.clusterErr == nil {
		// The same snapshot: a small change is applied in place (delta.go).
		if changed, ok := e.refresh.delta.diff(e.refresh.entries, entries); ok {
			// Until the update completes: should it panic half-way, the next
			// refresh rebuilds rather than diff against a cluster it left behind.
			e.refresh.builtFor = nil
			if e.view.update(st, changed, entries, done, now) {
				e.refresh.entries, e.refresh.builtFor = entries, st
				e.warmDecision()
				return
			}
		}
	}
	e.refresh.entries = entries
	e.refresh.builtFor = st
	var c *placement.Cluster
	if st.clusterErr == nil {
		c, e.refresh.spare = buildCluster(st, entries, e.refresh.spare), nil
	}
	e.refresh.spare = e.view.install(st, c, entries, done, now)
	e.warmDecision()
}

func (e *Engine) setResErr(err error) {
	e.view.setErr(err)
	e.note("residency", err.Error())
}

// decisionLogLinger: in a burst of submissions the decision log's writer wakes
// at most twice per linger instead of once per record (each wake-up cost a
// tagged submission about 100 us of slurmctld's CPU); records reach the file
// at most this late, and a slurmctld crash loses at most this much of them.
const decisionLogLinger = 100 * time.Millisecond

// ensure opens the writer for path (none for ""), closing the previous one
// when the path changed.
func (d *decisionLogFile) ensure(path string, maxBytes int64) {
	if path == d.path && d.w != nil {
		return
	}
	old := d.w
	d.w, d.path = nil, path
	if path != "" {
		d.w = decisionlog.NewWriterLinger(path, maxBytes, 0, decisionLogLinger)
	}
	d.current.Store(d.w)
	if old != nil {
		old.Close()
	}
}

// appliedLine is the line slurmctld's log gets when a reload applies a changed
// configuration, model or profile store ("" for the first load, an unchanged
// reload, or a configuration that did not load: its error is logged instead).
// It names what changed and the settings that decide placement, so an admin
// sees that (and how) a change took effect.
func appliedLine(src *Sources, prev, l *Snapshot) string {
	if prev == nil || l.cfgErr != nil {
		return ""
	}
	var what []string
	if prev.cfgErr != nil || prev.stamps.config != l.stamps.config || !reflect.DeepEqual(prev.cfg, l.cfg) {
		what = append(what, "configuration")
	}
	if prev.stamps.model != l.stamps.model || (prev.modelErr != nil) != (l.modelErr != nil) {
		what = append(what, "model")
	}
	if prev.stamps.profiles != l.stamps.profiles || len(prev.catalog) != len(l.catalog) {
		what = append(what, "profiles")
	}
	if len(what) == 0 {
		return ""
	}
	c := &l.cfg
	model := c.ModelPath
	if model == "" {
		model = "(embedded)"
	}
	if l.modelErr != nil {
		model += " UNUSABLE"
	}
	cfgPath := src.ConfigPath
	if cfgPath == "" {
		cfgPath = "(built-in defaults)"
	}
	return fmt.Sprintf("applied a new %s from %s: policy=%s model=%s profiles=%d nodes=%d gpus_per_node=%d slots_per_gpu=%d "+
		"shard_pinning=%s untagged=%s unknown_profile=%s invalid_tag=%s raw_requests=%s wait_defer=%s log_decisions=%s",
		strings.Join(what, ", "), cfgPath, c.Policy, model, len(l.catalog), len(l.nodes), c.Cluster.GPUsPerNode, c.SlotsPerGPU,
		c.ShardPinning, c.Untagged, c.UnknownProfile, c.InvalidTag, c.RawRequests, c.WaitDefer, c.LogDecisions)
}
