// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safetext"
)

// Decide decides for one job. It never panics and never blocks on I/O: every
// problem yields Unchanged (fail open), reported once through Log.
func (e *Engine) Decide(j JobFields) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Code: Unchanged}
			first := e.notes.get("panic") == ""
			if first {
				e.note("panic", fmt.Sprintf("internal error, job left unchanged (later ones are not logged): %v", r))
			}
			res.Log = e.notes.take()
		}
	}()
	res = e.decideOne(j)
	if notes := e.notes.take(); notes != "" {
		e.publishPass() // delivered: untagged jobs may pass in C again
		if res.Log != "" {
			res.Log = notes + "\n" + res.Log
		} else {
			res.Log = notes
		}
	}
	res.Log = cutLine(res.Log, e.opts.MaxLogLen)
	res.Line = cutLine(res.Line, e.opts.MaxLogLen)
	return res
}

// cutLine bounds s to at most n bytes and "...", cut where a character starts
// (a log line must stay valid UTF-8).
func cutLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// decideOne runs the two pure stages of a decision on the current snapshot and
// view, and applies what they return: the dropped and the new reservation, the
// decision ID taken, the decision log record.
//
// Before anything, the comment is screened: coscheml-id tokens the plugin did not
// issue for this job are removed (see idsign.go), also when the job passes
// through, so no user-written id reaches the Prolog. An update that sets the
// comment and keeps the job's placement keeps the job's own token in it.
func (e *Engine) decideOne(j JobFields) Result {
	snap := e.snap.Load()
	key := e.keyFor(snap)
	// Root, SlurmUser and admin_users may update any job with its token (the
	// re-decide loop's `scontrol update`: Slurm hands job_modify the updater's
	// uid, so no signature of the job's uid can be checked).
	admin := j.Admin || (snap != nil && snap.admins[j.SubmitUID])
	sc := screen(j, key, admin)
	j.Comment = sc.comment
	var res Result
	if e.ready.Load() {
		// Reservations expire even when the background refresh is stuck; at
		// most once a second here, the oldest first (expireAgedLocked).
		e.view.expireStale(e.opts.Now(), expireEvery)
	}
	if why := e.passReason(); why != "" {
		e.metrics.counters.Passthrough(why)
	} else {
		now := e.opts.Now()
		q := query{snap: snap, j: j, now: now, idPfx: e.idPfx, version: e.opts.SlurmVersion(), key: key, prevID: sc.prevID, admin: admin, down: e.downNow(now)}
		out := e.decideLocked(&q)
		if out.rec.Outcome != "" {
			e.metrics.counters.Decision(out.rec.Outcome, out.rec.Action, out.rejectWhy) // no I/O: the loop writes the file
		}
		if dl := e.refresh.dlog.current.Load(); dl != nil && out.logged {
			dl.Log(out.rec)
		}
		res = out.res
	}
	if snap != nil && res.Line != "" {
		res.LineLevel = snap.cfg.LogDecisions
	}
	// The placement is kept (no new token) but the update replaces the
	// comment: the job's own token goes back in, so the Prolog still finds the
	// decision the job was placed by.
	keepOwn := sc.own != "" && j.has(FieldComment) && !sc.ownKept
	if sc.stripped || keepOwn {
		fixed := sc.comment
		if keepOwn {
			fixed = comment.WithToken(sc.comment, sc.own)
		}
		switch res.Code {
		case Unchanged:
			res.Code, res.Comment = Rewrite, fixed
		case Rewrite:
			if res.Comment == "" {
				res.Comment = fixed
			}
		}
	}
	if sc.stripped {
		line := fmt.Sprintf("uid=%d: removed a coscheml-id token the plugin did not issue for this job from its comment", j.UserID)
		if res.Log != "" {
			line = res.Log + "\n" + line
		}
		res.Log = line
	}
	return res
}

// keyFor is the key that signs and verifies decision ids under snapshot st: the
// decision key when it loaded, else this engine's own.
func (e *Engine) keyFor(st *Snapshot) []byte {
	if st != nil && len(st.key) > 0 {
		return st.key
	}
	return e.ephemeral
}

// decideLocked runs both stages under the view's lock (released on a panic too).
func (e *Engine) decideLocked(q *query) outcome {
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	q.view, q.seq, q.req = &e.view.viewState, e.idSeq+1, &e.view.req
	jobID := q.jobID()
	ctxID := ""
	if q.j.Modify {
		// The update carries only what it changes: the job's node options come
		// from the decision that placed it, found by the job id (a token that
		// does not count must not lose them) or its verified token.
		q.ctx, ctxID = e.view.ctxForJobLocked(jobID, q.prevID)
	}
	in, out, ok := prepare(q)
	if ok && !q.j.Modify {
		e.view.lastPlaced, e.view.hasPlaced = q.j, true // a copy in place: no allocation
	}
	if ok {
		// job_modify decides again: without the job's earlier reservation (the
		// one its verified token names, or the one bound to its job id).
		dropped := e.view.dropLocked(q.prevID, q.j.UserID, q.admin, in.rec.JobID)
		out = place(q, &in)
		out.rec.Replaces = dropped
		ours := q.j.Modify && e.view.takeDeferredLocked(q.prevID)
		wait := q.snap.cfg.WaitDefer
		if !ours && !e.loopRunning(q.now) {
			wait = 0 // no loop would re-decide it: a deferral would only delay the job
		}
		out = deferral(q, out, ours, wait)
	}
	out = checkPassThrough(q, out)
	if out.usedID {
		e.idSeq++
	}
	if out.reserve {
		e.view.reserveLocked(out.rv)
	}
	// A user's update of a job whose context is unknown learnt nothing of its
	// node options (the update carries only what it changes): remembering the
	// update's would let a later update pin the job outside its own -w.
	if out.usedID && out.res.Code == Rewrite && !(q.j.Modify && q.ctx == nil && !q.isAdmin()) {
		c := jobCtx{partition: q.partition(), reqNodes: q.reqNodes(), excNodes: q.excNodes(), arrayInx: q.arrayInx(), at: q.now, mc: in.mc}
		c.minNodes, c.maxNodes = q.nodeRange()
		c.pinned = out.res.ReqNodes != "" && c.reqNodes == ""
		e.view.rememberLocked(out.rec.ID, c)
		for _, old := range [...]string{q.prevID, ctxID} {
			if old != "" && old != out.rec.ID {
				e.view.releaseCtxLocked(old)
			}
		}
		if jobID != "" {
			e.view.ctx.bind(out.rec.ID, jobID)
		}
	}
	if !out.deferUntil.IsZero() {
		e.view.deferLocked(out.rec.ID, out.deferUntil, q.now)
	}
	return out
}

// deferral applies wait_defer to a placed-or-waiting outcome (pure). A "wait"
// keeps its whole-GPU request as the fail-safe and, with wait > 0, is deferred to
// now+wait, so the re-decide loop (coscheml redecide) can decide it again on a
// fresh view before it starts. ours: the job is one of the plugin's own
// deferrals (job_modify of a deferred job); only those get their begin time
// changed, so a user's --begin is never overridden.
func deferral(q *query, out outcome, ours bool, wait time.Duration) outcome {
	if out.res.Code != Rewrite {
		return out
	}
	waiting := out.rec.Action == "wait"
	switch {
	case waiting && wait > 0 && (ours || !q.j.Modify && q.j.BeginTime == 0):
		until := q.now.Add(wait)
		out.res.BeginTime, out.deferUntil = until.Unix(), until
		out = reword(out, fmt.Sprintf(deferredPrefix+"%s for re-decision (wait_defer); ", wait))
	case !waiting && ours:
		// Placed at last: eligible now
		// (Slurm raises a past time to now).
		out.res.BeginTime = q.now.Unix()
		out = reword(out, "re-decided after a deferred wait, begin time now; ")
	}
	return out
}

// reword puts more in front of the decision's reason (so that a long reason's
// bound never cuts it off) and words the log line again.
func reword(out outcome, more string) outcome {
	out.rec.Reason = more + out.rec.Reason
	setLine(&out.res, &out.rec)
	return out
}

// query is the input of one decision: what the shim handed over, the snapshot and
// view it is decided on (read only), and what a new decision ID would be.
type query struct {
	snap    *Snapshot
	view    *viewState
	j       JobFields
	now     time.Time
	idPfx   string
	seq     uint64             // the sequence number a new decision ID takes
	version uint32             // running Slurm's version (0: unknown), for the TRES syntax
	key     []byte             // signs decision ids
	prevID  string             // the earlier decision of this job (job_modify, verified token)
	admin   bool               // the update comes from root, SlurmUser or admin_users
	down    map[string]bool    // nodes that cannot start jobs now (nil: unknown)
	ctx     *jobCtx            // job_modify: what the job's earlier decision knew of it (nil: unknown)
	req     *placement.Request // scratch for the policy's request (the view's, under its lock); nil: none
}

// jobID is the Slurm job id of a job_modify ("" at submit: not known yet).
func (q *query) jobID() string {
	if q.j.JobID == 0 || q.j.JobID == NoVal {
		return ""
	}
	return strconv.FormatUint(uint64(q.j.JobID), 10)
}

// The job's node options as a decision sees them: the update's own when it sets
// them, else what the job's earlier decision knew (job_modify), else the job's.
func (q *query) partition() string {
	if q.ctx != nil && !q.j.has(FieldPartition) {
		return q.ctx.partition
	}
	return q.j.Partition
}

func (q *query) reqNodes() string {
	if q.ctx != nil && !q.j.has(FieldReqNodes) {
		return q.ctx.reqNodes
	}
	return q.j.ReqNodes
}

func (q *query) excNodes() string {
	if q.ctx != nil && !q.j.has(FieldExcNodes) {
		return q.ctx.excNodes
	}
	return q.j.ExcNodes
}

// nodeRange is the job's node count range (-N min[-max]; max NoVal: none
// given). An update hands the plugin min 1 when it names no count (the shim
// gives Slurm's default): the count is then the one its decision knew.
func (q *query) nodeRange() (minNodes, maxNodes uint32) {
	minNodes, maxNodes = q.j.MinNodes, q.j.MaxNodes
	if q.j.Modify && (minNodes <= 1 || minNodes == NoVal) && q.ctx != nil && q.ctx.minNodes > 1 {
		minNodes, maxNodes = q.ctx.minNodes, q.ctx.maxNodes
	}
	if minNodes == NoVal || minNodes < 1 {
		minNodes = 1 // sbatch leaves min_nodes unset (NoVal) without -N: one node
	}
	return minNodes, maxNodes
}

func (q *query) arrayInx() string {
	if q.ctx != nil {
		return q.ctx.arrayInx // an update cannot make a job an array
	}
	return q.j.ArrayInx
}

// ourPin: a job_modify of a job whose node list the plugin set (not the user),
// and the update sets none: an unpinned answer then empties the node list, so a
// job pinned to a node that drained can move.
func (q *query) ourPin() bool {
	return q.j.Modify && q.ctx != nil && q.ctx.pinned && !q.j.has(FieldReqNodes)
}

// id is the decision ID this query gives a decision that needs one, signed for
// the job's uid, the token's shards and (job_modify) the job id.
func (q *query) id(shards int) string {
	jobID := q.jobID()
	// The unsigned base on the stack: the signed id is the one allocation.
	var b [64]byte
	base := strconv.AppendUint(append(append(b[:0], q.idPfx...), '-'), q.seq, 36)
	return signIDBytes(q.key, base, shards, q.j.UserID, jobID)
}

// outcome is a decision: the answer to the shim, the record for the decision log,
// and the side effects for the engine to apply (none is applied here).
type outcome struct {
	res    Result
	rec    decisionlog.Record
	logged bool // write rec to the decision log
	usedID bool // the decision took q.id()
	// rv: slots to reserve until the job shows in the residency store (when
	// reserve); a value, not a pointer: reserveLocked copies it anyway.
	rv      reservation
	reserve bool
	// deferUntil (non-zero): the job was deferred (wait_defer) until then under
	// decision rec.ID; the engine remembers it for the job's re-decision.
	deferUntil time.Time
	// rejectWhy is the rule that refused the job, a fixed word for the metrics
	// (the reason in rec names the user's tag).
	rejectWhy string
}

// place is the second stage: the placement on the cluster view. It reads the view
// and returns the reservation to make; it changes nothing.
func place(q *query, in *placeIn) outcome {
	j, r := q.j, in.rec
	gpus := in.ask.gres.GPUs
	if gpus == 0 {
		gpus = 1 // a shard request: the job wants (part of) one GPU
	}
	// One decision cannot place the many tasks of an array: a pin would put every
	// task on one node. Each task gets a whole GPU of Slurm's choice instead.
	minNodes, maxNodes := q.nodeRange()
	if in.mc.typed && (q.arrayInx() != "" || minNodes > 1 || gpus > 1) {
		// The fallbacks below drop the request's GPU Type (a whole GPU of any
		// node): a typed request keeps it, whole GPUs of Slurm's choice.
		return finish(Result{}, r, "unchanged", "pass", "typed GPU request (type "+profile.Sanitize(in.ask.gres.Type)+") of an array, several nodes or several GPUs: left to Slurm")
	}
	if j.Modify && q.ctx == nil && !q.isAdmin() {
		// A user's update of a job whose earlier decision is not known for it
		// (a slurmctld restart, an evicted context, a token that does not count
		// before the queue listing bound it): its partition, -w and -x are not
		// known, so no pin may replace its node list. A whole GPU's shards,
		// where the job's own options put it, never shares and never moves it.
		if gpus > 1 {
			return finish(Result{}, r, "unchanged", "pass", "update of a job whose node options coscheml does not know, with several GPUs: left to Slurm")
		}
		r.Action, r.Reason = "exclusive", "update of a job whose node options coscheml does not know (its earlier decision is not bound to it): "+
			"not pinned, a whole GPU through shards within the job's own node list"
		return exclusiveUnpinned(q, &in.ask, r)
	}
	if q.arrayInx() != "" {
		if gpus > 1 {
			return finish(Result{}, r, "unchanged", "pass", "job array with several GPUs per task: left to Slurm")
		}
		r.Action, r.Reason = "exclusive", "job array: each task on a whole GPU through shards, not pinned (one decision cannot place many tasks)"
		return exclusiveUnpinned(q, &in.ask, r)
	}
	span := 1
	if minNodes > 1 {
		// A job of -N m with several GPUs per node may span m nodes at the same
		// GPUs; a range of node counts (-N 2-4) may not: Slurm could add nodes
		// the plugin did not choose.
		if gpus == 1 {
			r.Action, r.Reason = "exclusive", "multi-node job: one whole GPU per node through shards, not pinned"
			return exclusiveUnpinned(q, &in.ask, r)
		}
		if maxNodes != minNodes {
			return finish(Result{}, r, "unchanged", "pass", "multi-node job with several GPUs per node and a range of node counts: left to Slurm")
		}
		span = int(minNodes)
	}
	// A pin replaces the job's node list: it must lie inside what the job allows.
	mask, why := nodeMask(q, span)
	if why != "" {
		return finish(Result{}, r, "unchanged", "pass", why)
	}
	mask = narrowMask(mask, q.view.cluster.Nodes, &in.mc)
	if gpus > 1 {
		return multiGPU(q, in, gpus, span, mask)
	}
	return singleGPU(q, in, mask)
}

// request is the placement request of the job being decided, for gpus GPUs on
// the nodes of mask. It lives in the view's scratch when there is one (a local
// would move to the heap through Place's interface call: one allocation less).
func (q *query) request(in *placeIn, gpus int, mask []bool) *placement.Request {
	label := in.rec.JobID
	if label == "" {
		label = "new"
	}
	req := q.req
	if req == nil {
		req = new(placement.Request)
	}
	*req = placement.Request{JobID: label, Tag: in.prof.Tag, Profile: in.prof, Class: in.class, GPUs: gpus, Nodes: mask}
	return req
}

// singleGPU asks the policy for one GPU. The cluster carries Slurm's reachability
// (shard_pinning), so the chosen GPU is one the rewritten request lands on, with the
// shard count the decision names.
func singleGPU(q *query, in *placeIn, mask []bool) outcome {
	st, c, r := q.snap, q.view.cluster, in.rec
	req := q.request(in, 1, mask)
	defer func() { *req = placement.Request{} }() // keeps no profile or mask alive
	typed := c.Reach == placement.ReachTyped
	var d placement.Decision
	// A requeued job's stored request is typed already: 22.05 refuses an
	// untyped update of it ("with and without type identification") and
	// accepts a typed one (measured), so it is re-pinned typed on every release.
	untyped := typed && q.j.Modify && !TypedUpdates(q.version) && !in.ask.ownPin
	if untyped {
		// Slurm 22.05 refuses a typed shard request in an update of a pending
		// job ("Invalid GRES specification", measured), so a re-decision asks
		// for untyped shards that only the chosen GPU of the node can hold,
		// else that Slurm's first fit lands on it (per-GPU-type clusters
		// follow it: docs/compatibility.md); else the job stays deferred
		// until a later pass can name its GPU.
		d, _ = placement.PlaceUntypedUpdate(st.policy, c, req)
	} else {
		d = st.policy.Place(c, req)
	}
	k := 0
	if d.Action != placement.ActionWait && len(d.Placement) > 0 {
		k = d.Placement[0].Slots
	}
	if (d.Action == placement.ActionWait || len(d.Placement) == 0) && in.mc.typed {
		// The whole-GPU fallback would drop the Type: the request as submitted
		// is the fallback (a whole GPU of that Type, Slurm's choice).
		r.Action, r.Policy = "wait", st.policy.Name()
		return finish(Result{}, r, "unchanged", "wait", d.Reason+"; typed request kept: a whole GPU of that Type")
	}
	if d.Action == placement.ActionWait || len(d.Placement) == 0 {
		r.Action, r.Policy = "wait", st.policy.Name()
		r.Reason = d.Reason + "; queued for a whole GPU (shards of one GPU, any node)"
		return exclusiveUnpinned(q, &in.ask, r)
	}
	s := d.Placement[0]
	id := q.id(k)
	node := &c.Nodes[s.Node]
	gpu := &node.GPUs[s.GPU]
	r.ID, r.Action, r.Policy = id, d.Action.String(), st.policy.Name()
	r.Node, r.GPU, r.Shards = node.Name, gpu.Index, k
	r.PredictedSpeed, r.MinResidentSpeed = d.PredictedSpeed, d.MinResidentSpeed
	for _, res := range gpu.Residents {
		if res.Profile != nil {
			r.CoRunners = append(r.CoRunners, res.Profile.Tag)
		} else {
			r.CoRunners = append(r.CoRunners, "unprofiled")
		}
	}
	tres := in.ask.gres.WithShards(k)
	if typed && !untyped {
		tres = in.ask.gres.WithTypedShards(TypeName(st.cfg.ShardTypePrefix, gpu.Index), k, q.version)
	}
	res := Result{Code: Rewrite, TresPerNode: tres, ReqNodes: node.Name,
		Comment: comment.WithToken(q.j.Comment, comment.FormatToken(id, k))}
	in.ask.apply(&res)
	out := finish(res, r, "rewrite", r.Action, d.Reason)
	out.usedID = true
	out.rv = reservation{id: id, jobID: r.JobID, uid: q.j.UserID, node: s.Node, gpus: []int{s.GPU}, slots: k, prof: in.prof, class: in.class, at: q.now}
	out.reserve = true
	return out
}

// slurmTypedUpdate is the first Slurm release (SLURM_VERSION_NUMBER) that
// honours a typed shard request set by an update of a pending job
// (TresPerNode=gres/shard:g1:2: the job then starts on GPU 1). Measured on the
// suite's per-GPU-type cluster by TestTypedUpdate on every release of the
// matrix: 23.11.11, 24.11.7, 25.11.7 and 26.05.3 honour it; 22.05.8 refuses
// its own spelling ("gres:shard:g1:2": "Invalid GRES specification") and
// stores the newer one without honouring it (the job starts on GPU 0; in a
// replay 62% of such re-decisions landed as intended).
const slurmTypedUpdate = 23<<16 | 11<<8

// TypedUpdates reports whether Slurm release v (SLURM_VERSION_NUMBER, 0:
// unknown) honours a typed shard request in an update; unknown counts as no
// (the untyped steering works on all). The e2e replay's simulator twin reads it too.
func TypedUpdates(v uint32) bool { return v >= slurmTypedUpdate }

// usedSlots is the shards a GPU's residents hold.
func usedSlots(g *placement.GPU) int {
	used := 0
	for _, r := range g.Residents {
		used += r.Slots
	}
	return used
}

// multiGPU places a job of n GPUs per node on span nodes (1: one node). With
// several-GPU sharing (share_multi_gpu, resolved at load: typed pinning and a
// shard Type on every gres.conf shard line) the policy chooses n GPUs on each
// node, at the same GPU indices on every node of a span, each idle or shared
// within the floors, and the job asks for K shards of each chosen GPU's Type
// (a per-node request: the same Types on each of its nodes) on exactly those
// nodes; a wait keeps its whole-GPU request and is deferred for the re-decide
// loop where an update can name several Types (23.11 and later; on 22.05 only
// the submit can place such a job). Without it, wholeNode on one node, and a
// job of several nodes is left to Slurm.
func multiGPU(q *query, in *placeIn, n, span int, mask []bool) outcome {
	st, c, r := q.snap, q.view.cluster, in.rec
	if !st.cfg.ShareMultiGPU || c.Reach != placement.ReachTyped {
		if span > 1 {
			return finish(Result{}, r, "unchanged", "pass", "multi-node job with several GPUs per node where several-GPU jobs do not share: left to Slurm")
		}
		return wholeNode(q, in, n, mask)
	}
	if q.j.Modify && !TypedUpdates(q.version) {
		return finish(Result{}, r, "unchanged", "pass", fmt.Sprintf("%d GPUs in an update: Slurm 22.05 does not honour an update naming several shard Types, so only the submit places a several-GPU job; its request is kept", n))
	}
	req := q.request(in, n*span, mask)
	req.OneNode = span == 1
	if span > 1 {
		req.SpanNodes = span
	}
	defer func() { *req = placement.Request{} }()
	d := st.policy.Place(c, req)
	nodes, shaped := spanOf(c, d.Placement, n, span)
	placed := d.Action != placement.ActionWait && shaped
	if !placed && !TypedUpdates(q.version) {
		r.Action, r.Policy = "wait", st.policy.Name()
		return finish(Result{}, r, "unchanged", "wait", waitReason(d, span)+"; whole GPUs of Slurm's choice (on this release no update can place a several-GPU job later)")
	}
	if !placed {
		// The job keeps its whole-GPU request (Slurm's choice of node and
		// GPUs, the fail-safe) under a decision id, so that the re-decide
		// loop recognises its deferral and places it when GPUs free up.
		id := q.id(0)
		r.ID, r.Action, r.Policy = id, "wait", st.policy.Name()
		res := Result{Code: Rewrite, TresPerNode: in.ask.gres.WithGPUs(n), Comment: comment.WithToken(q.j.Comment, comment.FormatToken(id, 0))}
		in.ask.apply(&res)
		out := finish(res, r, "rewrite", "wait", waitReason(d, span)+"; queued for whole GPUs of Slurm's choice")
		out.usedID = true
		return out
	}
	k := d.Placement[0].Slots
	first := &c.Nodes[nodes[0]]
	id := q.id(k)
	types := make([]string, n)
	rv := reservation{id: id, jobID: r.JobID, uid: q.j.UserID, node: nodes[0], more: nodes[1:], slots: k, prof: in.prof, class: in.class, at: q.now}
	for i, sl := range d.Placement[:n] {
		gpu := &first.GPUs[sl.GPU]
		types[i] = TypeName(st.cfg.ShardTypePrefix, gpu.Index)
		rv.gpus = append(rv.gpus, sl.GPU)
		r.GPUs = append(r.GPUs, gpu.Index)
	}
	names := make([]string, len(nodes))
	for i, ni := range nodes {
		names[i] = c.Nodes[ni].Name
	}
	for _, sl := range d.Placement {
		for _, res := range c.Nodes[sl.Node].GPUs[sl.GPU].Residents {
			tag := "unprofiled"
			if res.Profile != nil {
				tag = res.Profile.Tag
			}
			if !slices.Contains(r.CoRunners, tag) {
				r.CoRunners = append(r.CoRunners, tag)
			}
		}
	}
	r.ID, r.Action, r.Policy = id, d.Action.String(), st.policy.Name()
	r.Node, r.GPU, r.Shards = first.Name, r.GPUs[0], k
	if span > 1 {
		r.Nodes = names
	}
	r.PredictedSpeed, r.MinResidentSpeed = d.PredictedSpeed, d.MinResidentSpeed
	// The token names the GPUs: Slurm's Prolog environment names only the
	// last GPU of a job of several shard Types. The node list is exactly the
	// job's node count (-N m), so Slurm adds no node the plugin did not choose.
	res := Result{Code: Rewrite, TresPerNode: in.ask.gres.WithTypedShardsOn(types, k, q.version), ReqNodes: strings.Join(names, ","),
		Comment: comment.WithToken(q.j.Comment, comment.FormatTokenOn(id, k, r.GPUs))}
	in.ask.apply(&res)
	out := finish(res, r, "rewrite", r.Action, d.Reason)
	out.usedID, out.rv, out.reserve = true, rv, true
	return out
}

// waitReason is a decision's reason when it placed nothing the job can be
// given: a spread of whole GPUs over nodes is not a span.
func waitReason(d placement.Decision, span int) string {
	if d.Action != placement.ActionWait && span > 1 {
		return fmt.Sprintf("no %d nodes with the same GPUs free or shareable", span)
	}
	return d.Reason
}

// spanOf returns the nodes of a placement of n GPUs on each of span nodes and
// whether it has that shape: span distinct nodes, n slots of one shard count
// on each, the same GPU indices on every node (the only placement a per-node
// typed request expresses).
func spanOf(c *placement.Cluster, pl []placement.Slot, n, span int) ([]int, bool) {
	if len(pl) != n*span || n < 1 {
		return nil, false
	}
	nodes := make([]int, 0, span)
	for i := 0; i < len(pl); i += n {
		ni := pl[i].Node
		if ni < 0 || ni >= len(c.Nodes) || slices.Contains(nodes, ni) {
			return nil, false
		}
		nodes = append(nodes, ni)
		for k, sl := range pl[i : i+n] {
			ref := pl[k]
			if sl.Node != ni || sl.Slots != pl[0].Slots || sl.GPU != ref.GPU || sl.GPU < 0 || sl.GPU >= len(c.Nodes[ni].GPUs) ||
				c.Nodes[ni].GPUs[sl.GPU].Index != c.Nodes[ref.Node].GPUs[ref.GPU].Index {
				return nil, false
			}
		}
	}
	return nodes, true
}

// wholeNode pins a several-GPU job to a node with no resident at all, for
// clusters where Slurm cannot express K shards on each of several GPUs: the job
// keeps whole GPUs (gres/gpu), and a node without shard jobs avoids 22.05's bug
// of giving a whole-GPU job a GPU that shards use. The simulator's policies
// follow the same rule there (pkg/placement: whole idle GPUs).
func wholeNode(q *query, in *placeIn, n int, mask []bool) outcome {
	c, r := q.view.cluster, in.rec
	for ni := range c.Nodes {
		node := &c.Nodes[ni]
		if len(node.GPUs) < n || mask != nil && (ni >= len(mask) || !mask[ni]) {
			continue
		}
		empty := true
		for g := range node.GPUs {
			if usedSlots(&node.GPUs[g]) != 0 {
				empty = false
				break
			}
		}
		if !empty {
			continue
		}
		id := q.id(0)
		r.ID, r.Action, r.Node, r.GPU = id, "exclusive", node.Name, node.GPUs[0].Index
		reason := fmt.Sprintf("%d GPUs: whole GPUs on %s, a node without other jobs (Slurm's shard requests fit on one GPU per node)", n, profile.Sanitize(node.Name))
		rv := reservation{id: id, jobID: r.JobID, uid: q.j.UserID, node: ni, slots: node.GPUs[0].Slots, prof: in.prof, class: in.class, at: q.now}
		for g := 0; g < n; g++ {
			rv.gpus = append(rv.gpus, g)
		}
		r.GPUs = rv.gpus // for rebuilding the reservation after a restart
		res := Result{Code: Rewrite, TresPerNode: in.ask.gres.WithGPUs(n), ReqNodes: node.Name, Comment: comment.WithToken(q.j.Comment, comment.FormatToken(id, 0))}
		in.ask.apply(&res)
		out := finish(res, r, "rewrite", r.Action, reason)
		out.usedID, out.rv, out.reserve = true, rv, true
		return out
	}
	return finish(Result{}, r, "unchanged", "pass", fmt.Sprintf("%d GPUs: no node is free of other jobs (of the nodes the job may use); left to Slurm", n))
}

// exclusiveUnpinned asks for all shards of one GPU on any node: Slurm then picks an
// idle GPU and nothing can join it.
func exclusiveUnpinned(q *query, ask *gpuAsk, r decisionlog.Record) outcome {
	slots := q.snap.cfg.SlotsPerGPU
	id := q.id(slots)
	r.ID, r.Shards = id, slots
	res := Result{Code: Rewrite, TresPerNode: ask.gres.WithShards(slots), Comment: comment.WithToken(q.j.Comment, comment.FormatToken(id, slots))}
	ask.apply(&res)
	if q.ourPin() {
		// A pending job pinned earlier (its node may have drained) is free to
		// move: the update empties the node list the plugin set.
		res.Replace |= ClearReqNodes
	}
	out := finish(res, r, "rewrite", r.Action, r.Reason)
	out.usedID = true
	return out
}

// finish completes the record and words the log line; the record goes to the
// decision log when the job is ours or was changed.
func finish(res Result, r decisionlog.Record, outcomeName, action, reason string) outcome {
	r.Outcome, r.Action, r.Reason = outcomeName, action, reason
	r.TresOut = res.TresPerNode
	setLine(&res, &r)
	return outcome{res: res, rec: r, logged: r.Tag != "" || outcomeName != "unchanged"}
}

// setLine words r for slurmctld's log: a refusal in res.Log (always at info: a
// user's job was refused), any other decision in res.Line (at log_decisions).
func setLine(res *Result, r *decisionlog.Record) {
	if r.Outcome == "reject" {
		res.Log, res.Line = formatLog(r), ""
		return
	}
	res.Line = formatLog(r)
}

// formatLog words the decision for slurmctld's log. It runs on slurmctld's
// submit thread for every job: appends into one buffer, no fmt (which was about a
// third of a decision's CPU time).
func formatLog(r *decisionlog.Record) string {
	b := make([]byte, 0, 256+len(r.Reason))
	job := r.JobID
	if job == "" {
		job = "new"
	}
	b = append(b, r.Op...)
	b = append(b, " job="...)
	b = append(b, job...)
	b = append(b, " uid="...)
	b = strconv.AppendInt(b, int64(r.UserID), 10)
	if r.Tag != "" {
		b = append(append(b, " tag="...), profile.Sanitize(r.Tag)...)
	}
	if r.Class != "" {
		b = append(append(b, " class="...), profile.Sanitize(r.Class)...)
	}
	if r.ID != "" {
		b = append(append(b, " decision="...), r.ID...)
	}
	b = append(append(b, " outcome="...), r.Outcome...)
	b = append(append(b, " action="...), r.Action...)
	if r.Node != "" {
		b = append(append(b, " node="...), profile.Sanitize(r.Node)...)
		for _, n := range r.Nodes[min(1, len(r.Nodes)):] {
			b = append(append(b, ','), profile.Sanitize(n)...) // a span: every node, the same GPUs on each
		}
		b = strconv.AppendInt(append(b, " gpu="...), int64(r.GPU), 10)
		if len(r.GPUs) > 1 {
			b = append(b, " gpus="...)
			for i, g := range r.GPUs {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(g), 10)
			}
		}
	}
	if r.Shards > 0 {
		b = strconv.AppendInt(append(b, " shards="...), int64(r.Shards), 10)
	}
	if r.PredictedSpeed > 0 {
		b = strconv.AppendFloat(append(b, " speed="...), r.PredictedSpeed, 'f', 2, 64)
		b = strconv.AppendFloat(append(b, " min_resident="...), r.MinResidentSpeed, 'f', 2, 64)
	}
	if r.TresOut != "" {
		b = append(append(b, " tres="...), profile.Sanitize(r.TresIn)...)
		b = append(append(b, "->"...), profile.Sanitize(r.TresOut)...)
	}
	b = appendQuote(append(b, " reason="...), sanitizeLong(r.Reason))
	// b is never written again: the string takes its memory, as
	// strings.Builder does (one allocation per line instead of two).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendQuote is strconv.AppendQuote with a fast path for printable ASCII (what
// a reason is after sanitizing), where Go quoting escapes only '"' and '\\':
// strconv's rune-by-rune walk was a tenth of a decision run with cold caches.
func appendQuote(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return strconv.AppendQuote(b, s)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// sanitizeLong bounds a reason (ours, but it may quote user input).
func sanitizeLong(s string) string { return safetext.Limit(s, 600) }
