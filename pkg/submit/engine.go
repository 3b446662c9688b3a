// Package submit is the decision logic of the job_submit plugin: it reads a job's
// comment and GPU request, asks the placement policy where the job should run, and
// turns the answer into a Slurm rewrite (a shard request pinned to a node). It is pure
// Go, testable without Slurm; cmd/libcoscheml only marshals its input and output.
//
// Everything is fail-open: an internal error, a missing model or an unreadable
// residency store leaves jobs unchanged, and the problem is reported once (not per
// job) through the next Result's Log.
package submit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/metrics"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/residency"
)

// NoVal is Slurm's "unset" for 32-bit fields (job_id at submit time).
const NoVal = 0xfffffffe

// Code is what the plugin does with the job.
type Code int

const (
	Unchanged Code = 0 // leave the job as submitted
	Rewrite   Code = 1 // apply the Result's non-empty fields
	Reject    Code = 2 // refuse the job; UserMsg says why
	// Deny refuses a request that would bypass placement (raw_requests); the
	// shim answers ESLURM_ACCESS_DENIED with UserMsg.
	Deny Code = 3
)

// FieldSet says which fields of a job description Slurm handed over at all:
// job_modify carries only the fields an update changes, and an empty node list
// there ("NodeList=") clears it, unlike a missing one.
type FieldSet uint32

// The fields a FieldSet names.
const (
	FieldComment FieldSet = 1 << iota
	FieldTres
	FieldPartition
	FieldReqNodes
	FieldExcNodes
)

// placementFields are the fields whose change decides placement again.
const placementFields = FieldComment | FieldTres | FieldPartition | FieldReqNodes | FieldExcNodes

// JobFields are the job's fields the shim hands over ("" for NULL).
type JobFields struct {
	Comment     string
	TresPerNode string
	Partition   string
	UserID      uint32
	MinNodes    uint32
	MaxNodes    uint32
	TimeLimit   uint32 // minutes; NoVal or 0xffffffff when unset/infinite
	JobID       uint32 // NoVal at submit time
	Modify      bool   // job_modify (scontrol update): only changed fields are set
	// BeginTime is job_desc's begin_time (unix seconds; 0: unset): at submit the
	// user's --begin, at job_modify the update's StartTime.
	BeginTime int64
	ReqNodes  string // -w / NodeList=
	ExcNodes  string // -x / ExcNodeList=
	SubmitUID uint32 // who submits or updates (an admin may update another user's job)
	// Set names the fields present (the shim sets it; 0 = derived from the
	// non-empty strings, for callers that never pass an empty-but-present field).
	Set FieldSet
	// Admin: SubmitUID is root or SlurmUser (the shim knows slurm.conf's SlurmUser).
	Admin bool

	// The job's other options that constrain a decision (see fields.go and the
	// table in docs/slurm-integration.md).
	TresPerJob    string // --gpus
	TresPerTask   string // --gpus-per-task
	TresPerSocket string // --gpus-per-socket
	NumTasks      uint32 // -n; NoVal when unset
	MemPerTres    string // --mem-per-gpu
	CpusPerTres   string // --cpus-per-gpu
	ArrayInx      string // --array; "" when the job is not an array
	Exclusive     bool   // --exclusive in any form (job_desc shared 0, user, mcs, topo)

	// StoredComment is the job's comment as slurmctld stores it (job_modify only; empty at submit)
	StoredComment string
}

// has says whether the job description carries field f.
func (j *JobFields) has(f FieldSet) bool {
	if j.Set != 0 {
		return j.Set&f != 0
	}
	var s FieldSet
	for _, x := range []struct {
		v string
		f FieldSet
	}{{j.Comment, FieldComment}, {j.TresPerNode, FieldTres}, {j.Partition, FieldPartition}, {j.ReqNodes, FieldReqNodes}, {j.ExcNodes, FieldExcNodes}} {
		if x.v != "" {
			s |= x.f
		}
	}
	return s&f != 0
}

// Result is the decision for one job. Empty strings mean "leave as is". UserMsg may
// accompany Unchanged or Rewrite as a warning (the shim may pass it to the user as
// err_msg with success); with Reject it is the reason shown on the terminal.
type Result struct {
	Code        Code
	TresPerNode string
	ReqNodes    string
	Comment     string
	UserMsg     string
	Log         string // for slurmctld's log at info: earlier problems (once each), a refusal, a removed token
	// Line is the decision's line for slurmctld's log, at LineLevel (the
	// configuration's log_decisions: config.LogInfo, LogVerbose or LogDebug;
	// "" when no configuration loaded: verbose).
	Line      string
	LineLevel string
	// BeginTime, with Rewrite, is the job's new begin time (unix seconds; 0:
	// leave it): a deferred "wait", or now for a deferred job placed at last.
	BeginTime int64
	// TresPerJob and TresPerTask replace the job's fields where Replace says so
	// ("" clears them): a single GPU asked for with --gpus or --gpus-per-task
	// moves to tres_per_node. Replace may also hold ClearReqNodes.
	TresPerJob  string
	TresPerTask string
	Replace     AnswerField
}

// Options tune the engine; zero values take the defaults.
type Options struct {
	ReloadEvery    time.Duration // check the files' mtimes (default 2 s)
	MemoryEvery    time.Duration // check the observation files for the pair memory (default 1 min)
	MetricsEvery   time.Duration // rewrite metrics_file (default 30 s)
	ResidencyEvery time.Duration // re-list the residency store (default 500 ms)
	ReservationTTL time.Duration // forget an unconfirmed decision after (default 15 min)
	StaleGrace     time.Duration // residency entries past expiry+grace are ignored (default 10 min)
	// StaleAfter: the watchdog lets jobs through unchanged when the background
	// refresh has not completed for this long (a hung shared file system;
	// default 30 s). Measured on the monotonic clock, not Now.
	StaleAfter time.Duration
	// CloseWait bounds how long Close waits for the background loop and the
	// last writes (default 2 s): slurmctld's shutdown never waits on a hung load.
	CloseWait      time.Duration
	DecisionLogMax int64 // rotation size of the decision log (default decisionlog.DefaultMaxBytes)
	Now            func() time.Time
	MaxLogLen      int           // bound of one log line (default 1000)
	StatesEvery    time.Duration // poll the node states (default 5 s)
	StatesMaxAge   time.Duration // ignore node states older than (default 1 min)
	QueueEvery     time.Duration // list the queue to drop reservations of jobs gone (default 30 s)
	// SlurmVersion is the running slurmctld's SLURM_VERSION_NUMBER (0: unknown),
	// for the TRES syntax of a rewrite whose job gave none to follow.
	SlurmVersion func() uint32
	// PassWindow, when set, is told PassUntaggedFor whenever it may have
	// changed (passwindow.go); libcoscheml answers such jobs in C meanwhile.
	PassWindow func(time.Duration)
}

func (o Options) withDefaults() Options {
	if o.ReloadEvery <= 0 {
		o.ReloadEvery = 2 * time.Second
	}
	if o.MetricsEvery <= 0 {
		o.MetricsEvery = 30 * time.Second
	}
	if o.MemoryEvery <= 0 {
		o.MemoryEvery = time.Minute
	}
	if o.ResidencyEvery <= 0 {
		o.ResidencyEvery = 500 * time.Millisecond
	}
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = 15 * time.Minute
	}
	if o.StaleGrace <= 0 {
		o.StaleGrace = 10 * time.Minute
	}
	if o.StatesEvery <= 0 {
		o.StatesEvery = 5 * time.Second
	}
	if o.QueueEvery <= 0 {
		o.QueueEvery = 30 * time.Second
	}
	if o.StatesMaxAge <= 0 {
		o.StatesMaxAge = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.CloseWait <= 0 {
		o.CloseWait = 2 * time.Second
	}
	if o.MaxLogLen <= 0 {
		o.MaxLogLen = 1000
	}
	if o.SlurmVersion == nil {
		o.SlurmVersion = func() uint32 { return 0 }
	}
	return o
}

// Engine makes decisions: it holds the current Snapshot (swapped as one value),
// the cluster view (residency and reservations), the problem notes and the
// decision log, and runs the background refresh. Each decision is the pure
// function decide on a snapshot and the view; the engine applies the reservation
// it returns and writes its record. Decide may be called from any goroutine;
// decisions are serialized (slurmctld already calls job_submit under its job write
// lock).
type Engine struct {
	src  Sources
	opts Options

	snap atomic.Pointer[Snapshot]
	view clusterView

	// ids: decision IDs are idPfx-<seq>; seq is guarded by view.mu.
	idSeq uint64
	idPfx string

	// bgMu serializes refreshes (background loop, Reload).
	bgMu sync.Mutex
	// spare: the cluster the last install replaced, rebuilt in place by the next
	// one (under bgMu).
	spare    *placement.Cluster
	reader   *residency.Reader
	readerOf string
	builtFor *Snapshot
	delta    deltaScratch // the in-place update's diff (install)
	entries  []residency.Entry
	dlog     *decisionlog.Writer
	dlogPath string
	dlogPtr  atomic.Pointer[decisionlog.Writer] // what Decide writes to

	// counters count every decision (no I/O); a goroutine of its own writes
	// them to metrics_file, so a hung refresh does not stop the metrics.
	counters *metrics.Counters
	metricMu sync.Mutex // serializes metrics file writes
	// countersSince is when the counters started: the finished runs measured
	// since then are counted (countRunsLocked), each once: counted holds the
	// keys of the runs counted and still in the observation files (bgMu).
	countersSince time.Time
	counted       map[uint64]struct{}

	// ephemeral signs decision ids when the decision key is unusable.
	ephemeral []byte
	// prep, when set, wraps the sources before the first load (GuardPinning
	// reads slurm.conf: I/O that must not run in slurmctld's init).
	prep      func(Sources) (Sources, string)
	startNote string // what prep said, for coscheml_init's log
	gaveUp    atomic.Bool
	// loopUntil is when the re-decide loop's heartbeat stops counting (unix
	// seconds; read by decisions), beatRead when it was last read (bgMu).
	loopUntil atomic.Int64
	beatRead  time.Time
	// ready: the first load completed; before it every job passes through.
	ready atomic.Bool
	// born and fresh (nanoseconds after born, monotonic) are when the last
	// refresh completed, for the watchdog.
	born  time.Time
	fresh atomic.Int64

	notesMu sync.Mutex
	notes   map[string]string // key -> last reported message ("" = fine)
	pending []string
	// raised counts the keys of notes whose message is not "" (written under
	// notesMu), so that clearing a note when none is raised, twice per
	// decision, takes neither the lock nor the map.
	raised atomic.Int32

	// states is the last poll of the node states (nodestate.go).
	states     atomic.Pointer[nodeStates]
	statesDone chan struct{}
	// queueFn is src.QueueIDs, copied at creation like pollFn.
	queueFn func(ctx context.Context) (map[string]bool, error)
	// pollFn is src.NodeStates, copied at creation: the first load may replace
	// src (prep) while Start reads this.
	pollFn func(ctx context.Context) (map[string]bool, error)

	stop   chan struct{}
	done   chan struct{}
	mdone  chan struct{} // the metrics loop ended
	kick   chan struct{} // RequestReload -> loop
	once   sync.Once
	loopOn atomic.Bool
	closed atomic.Bool // Close began: the pass window stays shut
	pass   passWindow
}

// New loads everything once and returns a ready engine. Call Start to keep it
// fresh in the background, and Close when done.
func New(src Sources, opts Options) *Engine {
	e := newEngine(src, opts, nil)
	e.firstLoad()
	return e
}

// NewAsync returns an engine that loads nothing yet: Start runs the first load
// in the background, and until it completes every job passes through unchanged
// (slurmctld starts even when a shared file system hangs). prep, when not nil,
// wraps the sources at the start of the first load; its note is StartNote.
func NewAsync(src Sources, opts Options, prep func(Sources) (Sources, string)) *Engine {
	return newEngine(src, opts, prep)
}

func newEngine(src Sources, opts Options, prep func(Sources) (Sources, string)) *Engine {
	e := &Engine{src: src, opts: opts.withDefaults(), notes: map[string]string{}, kick: make(chan struct{}, 1), prep: prep, born: time.Now()}
	e.countersSince = e.opts.Now()
	e.counters = metrics.NewCounters(e.countersSince)
	e.pollFn = src.NodeStates
	e.queueFn = src.QueueIDs
	e.view.ttl = e.opts.ReservationTTL
	now := e.opts.Now()
	e.idPfx = strconv.FormatInt(now.UnixMilli(), 36)
	e.ephemeral = make([]byte, keyMinLen)
	if _, err := rand.Read(e.ephemeral); err != nil {
		// Never expected; ids then verify only under a known key, so tokens are
		// stripped at job_modify (conservative) rather than trusted.
		e.ephemeral = nil
	}
	return e
}

// Reload re-reads configuration, model, profiles and residency now (scontrol
// reconfigure).
func (e *Engine) Reload() {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	e.reloadLocked(false)
}

// reloadLocked loads a snapshot and refreshes the view on it; with restore it
// first rebuilds the pending reservations from the decision log (start).
// Caller holds bgMu.
func (e *Engine) reloadLocked(restore bool) {
	now := e.opts.Now()
	l := loadSnapshot(&e.src, e.snap.Load(), now, e.countersSince)
	e.countRunsLocked(l)
	// A policy that panics here panics in decisions too, where each is caught
	// and the job passes through; the warm-up only must not take Reload down.
	e.safely(func() { warmPolicy(l, e.entries, e.view.reservations(), e.spare) })
	for _, n := range l.notes {
		e.note(n.key, n.msg)
	}
	e.snap.Store(l)
	if restore {
		e.restoreLocked(l, now)
	}
	e.refreshLocked(true)
}

// countRunsLocked feeds the metrics (jobs below floor, the model's error) with
// the co-located runs the Epilog measured since the counters started, each
// once: a reload reads every observation again, so only new ones are
// predicted. The floor is the stored profile's class's, as in decisions; the
// prediction the model's own (l.bare). Caller holds bgMu.
func (e *Engine) countRunsLocked(l *Snapshot) {
	seen := make(map[uint64]struct{}, len(l.mem.runs))
	for _, r := range l.mem.runs {
		seen[r.key] = struct{}{}
		if _, ok := e.counted[r.key]; ok || l.bare == nil {
			continue
		}
		cl := r.job.Class
		e.counters.Measured(string(cl), l.bare.PredictSpeed(r.job, r.co), r.speed, l.cfg.SpeedFloor.For(cl))
	}
	if l.mem.pred != nil && !l.mem.partial {
		// A complete load: keys it did not read are dropped (their files
		// are gone).
		e.counted = seen
	} else {
		// Files left unread (bounds, errors) may be read next time: keep
		// every key, so a run is never counted twice.
		if e.counted == nil {
			e.counted = seen
		} else {
			maps.Copy(e.counted, seen)
		}
	}
	l.mem.runs = nil // counted: the snapshot need not keep them
}

// firstLoad runs prep, loads everything and rebuilds the reservations, then
// marks the engine ready.
func (e *Engine) firstLoad() {
	note := ""
	func() {
		e.bgMu.Lock()
		defer e.bgMu.Unlock() // also on a panic: the loop goes on after it
		if e.prep != nil {
			e.src, note = e.prep(e.src)
		}
		e.reloadLocked(true)
	}()
	e.notesMu.Lock()
	e.startNote = note
	e.notesMu.Unlock()
	e.ready.Store(true)
	if e.gaveUp.Load() && note != "" {
		e.note("info-start", note) // coscheml_init returned before it was known
	}
	e.publishPass()
}

// Ready says whether the first load completed.
func (e *Engine) Ready() bool { return e.ready.Load() }

// WaitReady waits up to d for the first load. When it gives up, what the load
// finds is logged with the next job instead of by the caller.
func (e *Engine) WaitReady(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !e.ready.Load() {
		if time.Now().After(deadline) {
			e.gaveUp.Store(true)
			return e.ready.Load()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// StartNote is what prep said at the first load ("" when nothing).
func (e *Engine) StartNote() string {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	return e.startNote
}

// RequestReload asks the background loop to reload soon and returns at once, so a
// caller inside slurmctld's job_submit never waits for file I/O. Without a running
// loop it reloads synchronously.
func (e *Engine) RequestReload() {
	if !e.loopOn.Load() {
		e.Reload()
		return
	}
	select {
	case e.kick <- struct{}{}:
	default: // a reload is already pending
	}
}

// Start runs the background refresh loop until Close (after the first load,
// for an engine from NewAsync), and the metrics writer.
func (e *Engine) Start() {
	e.once.Do(func() {
		e.stop = make(chan struct{})
		e.done = make(chan struct{})
		e.mdone = make(chan struct{})
		e.loopOn.Store(true)
		go e.loop()
		go e.metricsLoop()
		if e.pollFn != nil || e.queueFn != nil {
			e.statesDone = make(chan struct{})
			go e.pollStates()
		}
	})
}

// Close stops the background loop and flushes the decision log and metrics. It
// waits at most CloseWait for each: a loop stuck in a hung file system is left
// behind (slurmctld is stopping) rather than waited for.
func (e *Engine) Close() {
	e.closed.Store(true)
	e.publishPass() // shut: from now on every job goes to Go
	if e.stop != nil {
		select {
		case <-e.stop:
		default:
			close(e.stop)
		}
		if !waitFor(e.done, e.opts.CloseWait) {
			return // the loop holds bgMu in a hung load: nothing more can be flushed
		}
		waitFor(e.mdone, e.opts.CloseWait)
		if e.statesDone != nil {
			waitFor(e.statesDone, e.opts.CloseWait)
		}
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		e.writeMetrics() // the last counts before slurmctld stops
		e.bgMu.Lock()
		if e.dlog != nil {
			e.dlog.Close()
		}
		e.bgMu.Unlock()
	}()
	waitFor(flushed, e.opts.CloseWait)
}

// waitFor waits for ch to close, at most d; false when it did not.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// metricsLoop writes metrics_file every MetricsEvery until Close, apart from the
// refresh loop: a hung refresh is exactly when the metrics must still come.
func (e *Engine) metricsLoop() {
	defer close(e.mdone)
	tick := time.NewTicker(e.opts.MetricsEvery)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.safely(e.writeMetrics)
		}
	}
}

// writeMetrics replaces metrics_file with the counters and the engine's state,
// atomically (a failure is logged once; it never affects decisions). It runs
// only in the metrics loop and Close, never on the decision path.
func (e *Engine) writeMetrics() {
	e.metricMu.Lock()
	defer e.metricMu.Unlock()
	now := e.opts.Now()
	st := e.snap.Load()
	if st == nil || st.cfgErr != nil || st.cfg.MetricsFile == "" {
		return
	}
	fams := append(e.counters.Families(now), e.stateFamilies()...)
	if err := metrics.WriteFile(st.cfg.MetricsFile, fams); err != nil {
		e.note("info-metrics", fmt.Sprintf("metrics file not written: %v", err))
		return
	}
	e.note("info-metrics", "")
}

func (e *Engine) loop() {
	defer close(e.done)
	defer e.loopOn.Store(false)
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
		case <-e.kick:
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
			e.bgMu.Lock()
			e.refreshLocked(false)
			e.bgMu.Unlock()
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
// Caller holds bgMu.
func (e *Engine) refreshLocked(force bool) {
	// Whatever the outcome, a refresh that returns is not hung: the watchdog
	// only looks for refreshes that never complete.
	defer e.markFresh()
	st := e.snap.Load()
	e.checkLoop(st, force)
	if st == nil || st.cfgErr != nil {
		return
	}
	e.ensureDecisionLog(st.cfg.DecisionLog)
	if e.dlog != nil {
		if err := e.dlog.Err(); err != nil {
			e.note("decisionlog", fmt.Sprintf("decision log not written (coscheml explain will miss decisions): %v", err))
		}
	}
	now := e.opts.Now()
	if e.reader == nil || e.readerOf != st.cfg.ResidencyDir {
		s, err := residency.Open(st.cfg.ResidencyDir)
		if err != nil {
			e.setResErr(err)
			return
		}
		e.reader, e.readerOf = s.NewReader(), st.cfg.ResidencyDir
		force = true
	}
	res, err := e.reader.Read(now, e.opts.StaleGrace)
	if err != nil {
		e.reader = nil // start from scratch once it is readable again
		e.setResErr(fmt.Errorf("residency unreadable, tagged jobs pass through unchanged: %w", err))
		return
	}
	if len(res.NewProblems) > 0 {
		e.note("residency-files", fmt.Sprintf("%d unreadable residency entries skipped: %v", len(res.NewProblems), res.NewProblems[0]))
	}
	e.notesMu.Lock()
	hadErr := e.notes["residency"] != ""
	e.notesMu.Unlock()
	if !res.Changed && !force && e.builtFor == st && !hadErr && len(res.Entries) == len(e.entries) {
		e.view.expire(now)
		return
	}
	e.install(st, res.Entries, res.Done, now)
	e.note("residency", "")
}

// checkLoop reads the re-decide loop's heartbeat (at most once a second unless
// force) into loopUntil, which deferrals read: a "wait" is deferred only while a
// loop runs. A change of what is known is logged once. Caller holds bgMu.
func (e *Engine) checkLoop(st *Snapshot, force bool) {
	if st == nil || st.cfgErr != nil || st.cfg.WaitDefer <= 0 {
		e.loopUntil.Store(0)
		e.note("info-redecide", "")
		return
	}
	now := e.opts.Now()
	if !force && now.Sub(e.beatRead) < time.Second && now.After(e.beatRead) {
		return
	}
	e.beatRead = now
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
	e.loopUntil.Store(alive)
	// A site without the loop hears nothing (no heartbeat is its normal
	// state); a loop that appears, stops or cannot be trusted is said once.
	const off = ": a wait is not deferred (wait_defer applies while `coscheml redecide --loop` runs)"
	e.notesMu.Lock()
	seen := e.notes["info-redecide"] != ""
	e.notesMu.Unlock()
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
	return e.loopUntil.Load() >= now.Unix()
}

// install builds the cluster for st and entries outside the view's lock, then
// swaps it in. Caller holds bgMu.
func (e *Engine) install(st *Snapshot, entries []residency.Entry, done []string, now time.Time) {
	if e.builtFor == st && st.clusterErr == nil {
		// The same snapshot: a small change is applied in place (delta.go).
		if changed, ok := e.delta.diff(e.entries, entries); ok {
			// Until the update completes: should it panic half-way, the next
			// refresh rebuilds rather than diff against a cluster it left behind.
			e.builtFor = nil
			if e.view.update(st, changed, entries, done, now) {
				e.entries, e.builtFor = entries, st
				e.warmDecision()
				return
			}
		}
	}
	e.entries = entries
	e.builtFor = st
	var c *placement.Cluster
	if st.clusterErr == nil {
		c, e.spare = buildCluster(st, entries, e.spare), nil
	}
	e.spare = e.view.install(st, c, entries, done, now)
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

func (e *Engine) ensureDecisionLog(path string) {
	if path == e.dlogPath && e.dlog != nil {
		return
	}
	old := e.dlog
	e.dlog, e.dlogPath = nil, path
	if path != "" {
		e.dlog = decisionlog.NewWriterLinger(path, e.opts.DecisionLogMax, 0, decisionLogLinger)
	}
	e.dlogPtr.Store(e.dlog)
	if old != nil {
		old.Close()
	}
}

// note records a problem under key; it is logged once (with the next Result) and
// again only when the message changes. An empty msg marks the problem solved.
func (e *Engine) note(key, msg string) {
	if msg == "" && e.raised.Load() == 0 {
		return // nothing to clear
	}
	if e.addNote(key, msg) {
		e.publishPass() // the next job must go to Go to log it
	}
}

// addNote records the note; true when it changed anything.
func (e *Engine) addNote(key, msg string) bool {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	prev := e.notes[key]
	if prev == msg {
		return false
	}
	e.notes[key] = msg
	switch {
	case prev == "":
		e.raised.Add(1)
	case msg == "":
		e.raised.Add(-1)
	}
	switch {
	case msg != "":
		e.pending = append(e.pending, msg)
	case prev != "" && key != "panic" && key != "panic-bg":
		e.pending = append(e.pending, key+" ok again")
	}
	if len(e.pending) > 20 {
		e.pending = append(e.pending[:19], "more problems not shown")
	}
	return true
}

// takeNotes returns the pending problems, one per line, and clears them.
func (e *Engine) takeNotes() string {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	if len(e.pending) == 0 {
		return ""
	}
	s := strings.Join(e.pending, "\n")
	e.pending = e.pending[:0]
	return s
}

// Problems returns the problems in effect now (for CLIs and tests). Notes
// under an "info-" key are logged like problems but degrade nothing (the pair
// memory: without it the model alone decides), so they are not listed.
func (e *Engine) Problems() []string {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	var out []string
	for k, m := range e.notes {
		if m != "" && !strings.HasPrefix(k, "info-") {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}
