// SPDX-License-Identifier: Apache-2.0

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
	"crypto/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/metrics"
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

	// StoredComment is the job's comment as slurmctld stores it now
	// (job_ptr->comment): at job_modify the comment before the update, "" at
	// submit. Its coscheml-id token is the only one an update may carry: a
	// token is bound to the job it was written into, not only to its uid.
	StoredComment string

	// Features is the job's --constraint (job_desc features): a plain feature or
	// features joined by '&' that cluster.groups name is placed among those
	// groups' nodes (docs/placement.md#several-gpu-models).
	Features string
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

// Engine makes decisions: it holds the current Snapshot (swapped as one value)
// and the cluster view (residency and reservations), and owns the background
// work that keeps them fresh (refresher, statePoller) and reports on them
// (engineMetrics, problemNotes, passWindow). Each decision is the pure
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
	// ephemeral signs decision ids when the decision key is unusable.
	ephemeral []byte

	// ready: the first load completed; before it every job passes through.
	ready atomic.Bool

	refresh refresher     // the background refresh and what it guards (refresh.go)
	metrics engineMetrics // counters and metrics_file (metricsfile.go)
	notes   *problemNotes // problems logged once each (notes.go)
	poll    statePoller   // node states and the queue check (nodestate.go)
	pass    passWindow    // the untagged pass window (passwindow.go)

	// stop ends every background goroutine (Close); startOnce makes Start
	// idempotent.
	stop      chan struct{}
	startOnce sync.Once
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
	e := &Engine{src: src, opts: opts.withDefaults(), notes: newProblemNotes()}
	e.refresh.prep = prep
	e.refresh.reloadRequests = make(chan struct{}, 1)
	e.refresh.clock.epoch = time.Now()
	e.metrics.since = e.opts.Now()
	e.metrics.counters = metrics.NewCounters(e.metrics.since)
	e.poll.nodeStates = src.NodeStates
	e.poll.queueIDs = src.QueueIDs
	e.view.res.ttl = e.opts.ReservationTTL
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

// firstLoad runs prep, loads everything and rebuilds the reservations, then
// marks the engine ready.
func (e *Engine) firstLoad() {
	note := ""
	func() {
		e.refresh.mu.Lock()
		defer e.refresh.mu.Unlock() // also on a panic: the loop goes on after it
		if e.refresh.prep != nil {
			e.src, note = e.refresh.prep(e.src)
		}
		e.reloadLocked(true)
	}()
	e.notes.setStartNote(note)
	e.ready.Store(true)
	if e.notes.startNoteMissed.Load() && note != "" {
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
			e.notes.startNoteMissed.Store(true)
			return e.ready.Load()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// StartNote is what prep said at the first load ("" when nothing).
func (e *Engine) StartNote() string {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	return e.notes.startNote
}

// Start runs the background refresh loop until Close (after the first load,
// for an engine from NewAsync), and the metrics writer.
func (e *Engine) Start() {
	e.startOnce.Do(func() {
		e.stop = make(chan struct{})
		e.refresh.loopDone = make(chan struct{})
		e.metrics.loopDone = make(chan struct{})
		e.refresh.running.Store(true)
		go e.loop()
		go e.metricsLoop()
		if e.poll.nodeStates != nil || e.poll.queueIDs != nil {
			e.poll.done = make(chan struct{})
			go e.pollStates()
		}
	})
}

// Close stops the background loop and flushes the decision log and metrics. It
// waits at most CloseWait for each: a loop stuck in a hung file system is left
// behind (slurmctld is stopping) rather than waited for.
func (e *Engine) Close() {
	e.pass.closed.Store(true)
	e.publishPass() // shut: from now on every job goes to Go
	if e.stop != nil {
		select {
		case <-e.stop:
		default:
			close(e.stop)
		}
		if !waitFor(e.refresh.loopDone, e.opts.CloseWait) {
			return // the loop holds the refresh lock in a hung load: nothing more can be flushed
		}
		waitFor(e.metrics.loopDone, e.opts.CloseWait)
		if e.poll.done != nil {
			waitFor(e.poll.done, e.opts.CloseWait)
		}
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		e.writeMetrics() // the last counts before slurmctld stops
		e.refresh.mu.Lock()
		if e.refresh.dlog.w != nil {
			e.refresh.dlog.w.Close()
		}
		e.refresh.mu.Unlock()
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
