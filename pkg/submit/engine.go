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
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
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
)

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
	Log         string // for slurmctld's log: earlier problems (once each), then the decision line
}

// Options tune the engine; zero values take the defaults.
type Options struct {
	ReloadEvery    time.Duration // check the files' mtimes (default 2 s)
	ResidencyEvery time.Duration // re-list the residency store (default 500 ms)
	ReservationTTL time.Duration // forget an unconfirmed decision after (default 15 min)
	StaleGrace     time.Duration // residency entries past expiry+grace are ignored (default 10 min)
	DecisionLogMax int64         // rotation size of the decision log (default decisionlog.DefaultMaxBytes)
	Now            func() time.Time
	MaxLogLen      int // bound of one log line (default 1000)
}

func (o Options) withDefaults() Options {
	if o.ReloadEvery <= 0 {
		o.ReloadEvery = 2 * time.Second
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxLogLen <= 0 {
		o.MaxLogLen = 1000
	}
	return o
}

// Engine makes decisions. Decide may be called from any goroutine; decisions are
// serialized (slurmctld already calls job_submit under its job write lock).
type Engine struct {
	src  Sources
	opts Options

	state atomic.Pointer[loaded]

	// mu guards the decision state below; Decide holds it briefly, the background
	// refresh only to swap in a cluster built outside it.
	mu    sync.Mutex
	ds    decState
	idSeq uint64
	idPfx string
	// steerProf is the profile of steer pseudo-residents: a profile (not nil) keeps
	// the GPU's state representable, so the policy evaluates all blocked GPUs of
	// one state together instead of one by one. It is never predicted with: a
	// blocked GPU has no free slot, which every policy checks first.
	steerProf *profile.Profile

	// bgMu serializes refreshes (background loop, Reload).
	bgMu     sync.Mutex
	reader   *residency.Reader
	readerOf string
	builtFor *loaded
	entries  []residency.Entry
	dlog     *decisionlog.Writer
	dlogPath string
	dlogPtr  atomic.Pointer[decisionlog.Writer] // what Decide writes to

	notesMu sync.Mutex
	notes   map[string]string // key -> last reported message ("" = fine)
	pending []string

	stop   chan struct{}
	done   chan struct{}
	kick   chan struct{} // RequestReload -> loop
	once   sync.Once
	loopOn atomic.Bool
}

// decState is what decisions read and write.
type decState struct {
	cluster  *placement.Cluster
	st       *loaded // the state the cluster was built for
	resErr   error
	running  map[string]bool // job ids with a residency entry
	confirm  map[string]bool // decision ids with a residency entry
	reserved []reservation
}

// reservation is a decision not yet seen in the residency store: the job is queued
// or starting. Without it, two quick submissions would both see the same GPU idle.
type reservation struct {
	id    string // decision id
	jobID string // known for job_modify
	node  int
	gpus  []int // indexes into the node's GPUs
	slots int
	prof  *profile.Profile
	class profile.Class
	at    time.Time
}

func (r *reservation) residentID() string { return "res:" + r.id }

// New loads everything once and returns a ready engine. Call Start to keep it
// fresh in the background, and Close when done.
func New(src Sources, opts Options) *Engine {
	e := &Engine{src: src, opts: opts.withDefaults(), notes: map[string]string{}, kick: make(chan struct{}, 1),
		steerProf: &profile.Profile{Tag: "coscheml-steer-block"}}
	now := e.opts.Now()
	e.idPfx = strconv.FormatInt(now.UnixMilli(), 36)
	e.Reload()
	return e
}

// Reload re-reads configuration, model, profiles and residency now (scontrol
// reconfigure).
func (e *Engine) Reload() {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	l := e.load(e.state.Load())
	e.report(l)
	e.state.Store(l)
	e.refreshLocked(true)
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

// Start runs the background refresh loop until Close.
func (e *Engine) Start() {
	e.once.Do(func() {
		e.stop = make(chan struct{})
		e.done = make(chan struct{})
		e.loopOn.Store(true)
		go e.loop()
	})
}

// Close stops the background loop and flushes the decision log.
func (e *Engine) Close() {
	if e.stop != nil {
		select {
		case <-e.stop:
		default:
			close(e.stop)
		}
		<-e.done
	}
	e.bgMu.Lock()
	if e.dlog != nil {
		e.dlog.Close()
	}
	e.bgMu.Unlock()
}

func (e *Engine) loop() {
	defer close(e.done)
	defer e.loopOn.Store(false)
	tick := time.NewTicker(min(e.opts.ReloadEvery, e.opts.ResidencyEvery))
	defer tick.Stop()
	lastCheck := e.opts.Now()
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
				if cur := e.state.Load(); cur == nil || e.currentStamps(cur.cfg) != cur.stamps {
					e.Reload()
					return
				}
			}
			e.bgMu.Lock()
			e.refreshLocked(false)
			e.bgMu.Unlock()
		})
	}
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

// refreshLocked re-reads the residency store and, when it or the loaded state
// changed (or force), rebuilds the cluster outside the decision lock and swaps it in.
func (e *Engine) refreshLocked(force bool) {
	st := e.state.Load()
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
		e.mu.Lock()
		e.expireLocked(now)
		e.mu.Unlock()
		return
	}
	e.install(st, res.Entries, res.Done, now)
	e.note("residency", "")
}

// install builds the cluster for st and entries outside the decision lock, then
// swaps it in with the pending reservations applied. Caller holds bgMu.
func (e *Engine) install(st *loaded, entries []residency.Entry, done []string, now time.Time) {
	e.entries = entries
	e.builtFor = st
	var c *placement.Cluster
	if st.clusterErr == nil {
		c = buildCluster(st, entries, e.steerProf)
	}
	running := make(map[string]bool, len(entries))
	confirm := make(map[string]bool, len(entries))
	for _, en := range entries {
		running[en.JobID] = true
		if en.DecisionID != "" {
			confirm[en.DecisionID] = true
		}
	}
	for _, id := range done {
		confirm[id] = true // started and already ended
	}
	e.mu.Lock()
	e.ds.cluster, e.ds.st, e.ds.resErr = c, st, nil
	e.ds.running, e.ds.confirm = running, confirm
	e.expireLocked(now)
	for i := range e.ds.reserved {
		e.applyReservation(&e.ds.reserved[i])
	}
	for i := range e.ds.reserved {
		e.resteer(e.ds.reserved[i].node)
	}
	e.mu.Unlock()
}

func (e *Engine) setResErr(err error) {
	e.mu.Lock()
	e.ds.resErr = err
	e.mu.Unlock()
	e.note("residency", err.Error())
}

func (e *Engine) ensureDecisionLog(path string) {
	if path == e.dlogPath && e.dlog != nil {
		return
	}
	old := e.dlog
	e.dlog, e.dlogPath = nil, path
	if path != "" {
		e.dlog = decisionlog.NewWriter(path, e.opts.DecisionLogMax, 0)
	}
	e.dlogPtr.Store(e.dlog)
	if old != nil {
		old.Close()
	}
}

// expireLocked drops reservations that the residency store confirmed (the job
// started) or that are older than the TTL. Caller holds mu.
func (e *Engine) expireLocked(now time.Time) {
	kept := e.ds.reserved[:0]
	for _, r := range e.ds.reserved {
		gone := e.ds.confirm[r.id] || (r.jobID != "" && e.ds.running[r.jobID]) || now.Sub(r.at) > e.opts.ReservationTTL
		if gone {
			if e.ds.cluster != nil {
				e.ds.cluster.Remove(r.residentID())
				e.resteer(r.node)
			}
			continue
		}
		kept = append(kept, r)
	}
	e.ds.reserved = kept
}

// applyReservation makes r resident in the current cluster. Caller holds mu.
func (e *Engine) applyReservation(r *reservation) {
	c := e.ds.cluster
	if c == nil || r.node >= len(c.Nodes) {
		return
	}
	d := placement.Decision{Action: placement.ActionShare}
	for _, g := range r.gpus {
		if g < len(c.Nodes[r.node].GPUs) {
			d.Placement = append(d.Placement, placement.Slot{Node: r.node, GPU: g, Slots: r.slots})
		}
	}
	c.Apply(&placement.Request{JobID: r.residentID(), Tag: tagOfProf(r.prof), Profile: r.prof, Class: r.class}, d)
}

func tagOfProf(p *profile.Profile) string {
	if p == nil {
		return ""
	}
	return p.Tag
}

// buildCluster turns the inventory and the residency entries into a cluster. Jobs
// without a known profile (untagged, or a tag whose profile is gone) are residents
// with a nil profile: the policy will not share their GPU.
func buildCluster(st *loaded, entries []residency.Entry, steerProf *profile.Profile) *placement.Cluster {
	cfg := st.cfg
	slots := cfg.SlotsPerGPU
	c := &placement.Cluster{Nodes: make([]placement.Node, len(st.nodes))}
	for i, name := range st.nodes {
		gpus := make([]placement.GPU, cfg.Cluster.GPUsPerNode)
		for g := range gpus {
			gpus[g] = placement.GPU{Index: g, MemMiB: cfg.Cluster.GPUMemoryMiB, Slots: slots}
		}
		c.Nodes[i] = placement.Node{Name: name, GPUs: gpus}
	}
	for _, en := range entries {
		n, ok := st.nodeIdx[en.Node]
		if !ok {
			continue
		}
		var prof *profile.Profile
		if en.Tag != "" {
			prof = st.catalog[en.Tag]
		}
		class := en.Class
		if class == "" && prof != nil {
			class = prof.Class
		}
		held := en.Shards
		if held <= 0 || held > slots {
			held = slots // whole GPU, or more shards than we think a GPU has
		}
		for _, g := range en.GPUs {
			if g < len(c.Nodes[n].GPUs) {
				gpu := &c.Nodes[n].GPUs[g]
				gpu.Residents = append(gpu.Residents, placement.Resident{JobID: "job:" + en.JobID, Profile: prof, Class: class, Slots: held})
			}
		}
	}
	for n := range c.Nodes {
		for _, b := range steerBlocks(&c.Nodes[n]) {
			gpu := &c.Nodes[n].GPUs[b.GPU]
			gpu.Residents = append(gpu.Residents, placement.Resident{JobID: steerID(n, b.GPU), Profile: steerProf, Slots: b.Slots})
		}
	}
	c.Reindex()
	return c
}

// Slurm 22.05 gives a shard request to the lowest-index GPU of the node with enough
// free shards. A GPU is reachable only if some count K fits in its free shards and
// exceeds the free shards of every lower GPU; other GPUs are hidden from the policy
// by a "steer" pseudo-resident that fills them (so a decision is one policy scan,
// not a retry per unreachable GPU). Idle GPUs above an idle one are hidden too;
// they are interchangeable with it.

func steerID(node, gpu int) string { return "steer:" + strconv.Itoa(node) + ":" + strconv.Itoa(gpu) }

func isSteer(jobID string) bool { return strings.HasPrefix(jobID, "steer:") }

// steerBlocks returns the GPUs of node that no shard count can reach, with the
// slots that fill them.
func steerBlocks(node *placement.Node) []placement.Slot {
	var out []placement.Slot
	highest := 0 // most free shards on a lower GPU
	for g := range node.GPUs {
		free := freeSlots(&node.GPUs[g])
		if free > 0 && free <= highest {
			out = append(out, placement.Slot{GPU: g, Slots: free})
		}
		highest = max(highest, free)
	}
	return out
}

// resteer recomputes the steer blocks of node n after its residents changed.
// Caller holds mu.
func (e *Engine) resteer(n int) {
	c := e.ds.cluster
	if c == nil || n < 0 || n >= len(c.Nodes) {
		return
	}
	node := &c.Nodes[n]
	for g := range node.GPUs {
		for _, r := range node.GPUs[g].Residents {
			if isSteer(r.JobID) {
				c.Remove(r.JobID)
				break
			}
		}
	}
	for _, b := range steerBlocks(node) {
		c.Apply(&placement.Request{JobID: steerID(n, b.GPU), Profile: e.steerProf}, placement.Decision{Action: placement.ActionShare,
			Placement: []placement.Slot{{Node: n, GPU: b.GPU, Slots: b.Slots}}})
	}
}

// note records a problem under key; it is logged once (with the next Result) and
// again only when the message changes. An empty msg marks the problem solved.
func (e *Engine) note(key, msg string) {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	prev := e.notes[key]
	if prev == msg {
		return
	}
	e.notes[key] = msg
	switch {
	case msg != "":
		e.pending = append(e.pending, msg)
	case prev != "" && key != "panic" && key != "panic-bg":
		e.pending = append(e.pending, key+" ok again")
	}
	if len(e.pending) > 20 {
		e.pending = append(e.pending[:19], "more problems not shown")
	}
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

// Problems returns the problems in effect now (for CLIs and tests).
func (e *Engine) Problems() []string {
	e.notesMu.Lock()
	defer e.notesMu.Unlock()
	var out []string
	for _, m := range e.notes {
		if m != "" {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

func (e *Engine) newID() string {
	e.idSeq++
	return e.idPfx + "-" + strconv.FormatUint(e.idSeq, 36)
}
