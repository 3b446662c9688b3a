package submit

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/comment"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safetext"
)

// steerAttempts bounds how often a GPU that Slurm's shard choice cannot be steered
// to is blocked and the policy asked again.
const steerAttempts = 4

// Decide decides for one job. It never panics and never blocks on I/O: every
// problem yields Unchanged (fail open), reported once through Log.
func (e *Engine) Decide(j JobFields) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Code: Unchanged}
			e.notesMu.Lock()
			first := e.notes["panic"] == ""
			e.notesMu.Unlock()
			if first {
				e.note("panic", fmt.Sprintf("internal error, job left unchanged (later ones are not logged): %v", r))
			}
			res.Log = e.takeNotes()
		}
	}()
	res = e.decide(j)
	if notes := e.takeNotes(); notes != "" {
		if res.Log != "" {
			res.Log = notes + "\n" + res.Log
		} else {
			res.Log = notes
		}
	}
	if len(res.Log) > e.opts.MaxLogLen {
		res.Log = res.Log[:e.opts.MaxLogLen] + "..."
	}
	return res
}

// rec accumulates one decision's facts for the log line and the decision log.
type rec struct {
	decisionlog.Record
}

func (e *Engine) decide(j JobFields) Result {
	st := e.state.Load()
	if st == nil || st.cfgErr != nil {
		return Result{}
	}
	if j.Modify && j.Comment == "" {
		return Result{} // job_modify without a new comment: nothing of ours changed
	}
	cfg := st.cfg
	dir := comment.ParseComment(j.Comment)
	gres, gresErr := ParseTres(j.TresPerNode)
	r := rec{decisionlog.Record{Time: e.opts.Now(), Op: "submit", UserID: j.UserID, GPU: -1, TresIn: j.TresPerNode}}
	if j.Modify {
		r.Op = "modify"
	}
	if j.JobID != 0 && j.JobID != NoVal {
		r.JobID = strconv.FormatUint(uint64(j.JobID), 10)
	}
	partOK := cfg.Cluster.Partition == "" || j.Partition == "" || j.Partition == cfg.Cluster.Partition

	if !dir.Present {
		if cfg.Untagged != "exclusive" || gresErr != nil || !gres.HasGPU() || !partOK || gres.GPUs > 1 || j.Modify && j.TresPerNode == "" {
			return Result{}
		}
		r.Action, r.Reason = "exclusive", "untagged job: untagged=exclusive routes it to a whole GPU through shards"
		return e.exclusiveUnpinned(j, gres, cfg.SlotsPerGPU, r, "")
	}
	if dir.Err != nil {
		return e.badInput(j, cfg.InvalidTag, dir.Err.Error(), gres, gresErr, cfg.SlotsPerGPU, r)
	}
	r.Tag, r.Class = dir.Tag, string(dir.Class)
	switch {
	case j.Modify && j.TresPerNode == "":
		return e.finish(Result{}, r, "unchanged", "pass", "comment changed by job_modify; the GPU request is not part of the update, placement kept")
	case gresErr != nil:
		return e.finish(Result{}, r, "unchanged", "pass", "GPU request not understood: "+gresErr.Error())
	case !gres.HasGPU():
		return e.finish(Result{}, r, "unchanged", "pass", "no GPU requested")
	case !partOK:
		return e.finish(Result{}, r, "unchanged", "pass", "partition "+profile.Sanitize(j.Partition)+" is not managed by coscheml")
	}
	// The tag is checked against the profiles whenever they loaded, so a user gets
	// the same answer whether or not the model is healthy.
	prof, ok := st.catalog[dir.Tag]
	if st.catErr == nil && (!ok || prof == nil) {
		msg := fmt.Sprintf("unknown application profile '%s'; see `coscheml profile list`", profile.Sanitize(dir.Tag))
		return e.badInput(j, cfg.UnknownProfile, msg, gres, gresErr, cfg.SlotsPerGPU, r)
	}
	if what := st.degraded(); what != "" {
		return e.finish(Result{}, r, "unchanged", "pass", "degraded ("+what+" unusable, logged when it happened): left unchanged")
	}
	class := dir.Class
	if class == "" {
		class = prof.Class
	}
	r.Class = string(class)

	e.mu.Lock()
	defer e.mu.Unlock()
	ds := &e.ds
	switch {
	case ds.resErr != nil:
		return e.finish(Result{}, r, "unchanged", "pass", "degraded (residency unreadable, logged when it happened): left unchanged")
	case ds.cluster == nil || ds.st != st:
		return e.finish(Result{}, r, "unchanged", "pass", "degraded: cluster state not loaded yet")
	case r.JobID != "" && ds.running[r.JobID]:
		return e.finish(Result{}, r, "unchanged", "pass", "job is running; its placement is kept")
	}
	e.dropReservation(dir.DecisionID, r.JobID)

	gpus := gres.GPUs
	if gpus == 0 {
		gpus = 1 // a shard request: the job wants (part of) one GPU
	}
	// sbatch leaves min_nodes unset (NoVal) without -N: that is one node.
	if j.MinNodes > 1 && j.MinNodes != NoVal {
		if gpus > 1 {
			return e.finish(Result{}, r, "unchanged", "pass", "multi-node job with several GPUs per node: left to Slurm")
		}
		r.Action, r.Reason = "exclusive", "multi-node job: one whole GPU per node through shards, not pinned"
		return e.exclusiveUnpinnedLocked(j, gres, cfg.SlotsPerGPU, r, "")
	}
	if gpus > 1 {
		return e.multiGPU(j, gres, gpus, prof, class, r)
	}
	return e.singleGPU(j, gres, prof, class, st, r)
}

// singleGPU asks the policy and steers Slurm's shard choice to the chosen GPU.
func (e *Engine) singleGPU(j JobFields, gres GresRequest, prof *profile.Profile, class profile.Class, st *loaded, r rec) Result {
	c := e.ds.cluster
	id := e.newID()
	req := placement.Request{JobID: "new:" + id, Tag: prof.Tag, Profile: prof, Class: class, GPUs: 1}
	var blocks []string
	defer func() {
		for _, b := range blocks {
			c.Remove(b)
		}
	}()
	var (
		d      placement.Decision
		k      int
		s      placement.Slot
		steers []string
	)
	for attempt := 0; ; attempt++ {
		d = st.policy.Place(c, &req)
		if d.Action == placement.ActionWait || len(d.Placement) == 0 {
			r.Action, r.Policy = "wait", st.policy.Name()
			r.Reason = d.Reason + "; queued for a whole GPU (shards of one GPU, any node)"
			if len(steers) > 0 {
				r.Reason += "; " + strings.Join(steers, "; ")
			}
			return e.exclusiveUnpinnedLocked(j, gres, st.cfg.SlotsPerGPU, r, id)
		}
		s = d.Placement[0]
		var ok bool
		k, ok = steer(&c.Nodes[s.Node], s.GPU, s.Slots)
		if ok {
			break
		}
		node := &c.Nodes[s.Node]
		steers = append(steers, fmt.Sprintf("%s/gpu%d skipped: Slurm's first-fit shard choice cannot be steered to it", profile.Sanitize(node.Name), node.GPUs[s.GPU].Index))
		if attempt+1 == steerAttempts {
			r.Action, r.Policy = "wait", st.policy.Name()
			r.Reason = d.Reason + "; " + strings.Join(steers, "; ") + "; queued for a whole GPU"
			return e.exclusiveUnpinnedLocked(j, gres, st.cfg.SlotsPerGPU, r, id)
		}
		block := "block:" + strconv.Itoa(attempt)
		blocks = append(blocks, block)
		free := freeSlots(&node.GPUs[s.GPU])
		c.Apply(&placement.Request{JobID: block}, placement.Decision{Action: placement.ActionShare,
			Placement: []placement.Slot{{Node: s.Node, GPU: s.GPU, Slots: max(free, 1)}}})
	}
	node := &c.Nodes[s.Node]
	gpu := &node.GPUs[s.GPU]
	r.ID, r.Action, r.Policy = id, d.Action.String(), st.policy.Name()
	r.Node, r.GPU, r.Shards = node.Name, gpu.Index, k
	r.PredictedSpeed, r.MinResidentSpeed = d.PredictedSpeed, d.MinResidentSpeed
	for _, res := range gpu.Residents {
		if strings.HasPrefix(res.JobID, "block:") || isSteer(res.JobID) {
			continue
		}
		if res.Profile != nil {
			r.CoRunners = append(r.CoRunners, res.Profile.Tag)
		} else {
			r.CoRunners = append(r.CoRunners, "unprofiled")
		}
	}
	r.Reason = d.Reason
	if k != s.Slots {
		r.Reason += fmt.Sprintf("; %d shards instead of %d so that Slurm's first-fit choice lands on gpu%d", k, s.Slots, gpu.Index)
	}
	if len(steers) > 0 {
		r.Reason += "; " + strings.Join(steers, "; ")
	}
	res := Result{Code: Rewrite, TresPerNode: gres.WithShards(k), ReqNodes: node.Name,
		Comment: comment.WithToken(j.Comment, comment.FormatToken(id, k))}
	rv := reservation{id: id, jobID: r.JobID, node: s.Node, gpus: []int{s.GPU}, slots: k, prof: prof, class: class, at: e.opts.Now()}
	for _, b := range blocks { // before the node's steer blocks are recomputed
		c.Remove(b)
	}
	blocks = nil
	e.ds.reserved = append(e.ds.reserved, rv)
	e.applyReservation(&e.ds.reserved[len(e.ds.reserved)-1])
	e.resteer(s.Node)
	return e.finish(res, r, "rewrite", r.Action, r.Reason)
}

// steer returns the shard count that makes Slurm 22.05 pick GPU g of node: Slurm
// gives a shard request to the lowest-index GPU with enough free shards, so the
// count must exceed the free shards of every lower GPU and fit in g's. Within that
// range it stays as close to want as possible.
func steer(node *placement.Node, g, want int) (int, bool) {
	low := 1
	for j := 0; j < g; j++ {
		low = max(low, freeSlots(&node.GPUs[j])+1)
	}
	free := freeSlots(&node.GPUs[g])
	if low > free {
		return 0, false
	}
	return min(max(want, low), free), true
}

// freeSlots is a GPU's free shards as Slurm sees them (steer blocks are ours only).
func freeSlots(g *placement.GPU) int {
	used := 0
	for _, r := range g.Residents {
		if !isSteer(r.JobID) {
			used += r.Slots
		}
	}
	return g.Slots - used
}

// multiGPU pins a several-GPU job to a node with no resident at all: 22.05 shard
// requests cover one GPU, so the job keeps whole GPUs, and a node without shard
// jobs avoids 22.05's bug of giving a whole-GPU job a GPU that shards use.
func (e *Engine) multiGPU(j JobFields, gres GresRequest, n int, prof *profile.Profile, class profile.Class, r rec) Result {
	c := e.ds.cluster
	for ni := range c.Nodes {
		node := &c.Nodes[ni]
		if len(node.GPUs) < n {
			continue
		}
		empty := true
		for g := range node.GPUs {
			if freeSlots(&node.GPUs[g]) != node.GPUs[g].Slots {
				empty = false
				break
			}
		}
		if !empty {
			continue
		}
		id := e.newID()
		r.ID, r.Action, r.Node, r.GPU = id, "exclusive", node.Name, node.GPUs[0].Index
		r.Reason = fmt.Sprintf("%d GPUs: whole GPUs on %s, a node without other jobs (shard requests cover one GPU in Slurm 22.05)", n, profile.Sanitize(node.Name))
		rv := reservation{id: id, jobID: r.JobID, node: ni, slots: node.GPUs[0].Slots, prof: prof, class: class, at: e.opts.Now()}
		for g := 0; g < n; g++ {
			rv.gpus = append(rv.gpus, g)
		}
		e.ds.reserved = append(e.ds.reserved, rv)
		e.applyReservation(&e.ds.reserved[len(e.ds.reserved)-1])
		e.resteer(ni)
		res := Result{Code: Rewrite, TresPerNode: gres.WithGPUs(n), ReqNodes: node.Name, Comment: comment.WithToken(j.Comment, comment.FormatToken(id, 0))}
		return e.finish(res, r, "rewrite", r.Action, r.Reason)
	}
	return e.finish(Result{}, r, "unchanged", "pass", fmt.Sprintf("%d GPUs: no node is free of other jobs; left to Slurm", n))
}

// badInput applies invalid_tag / unknown_profile: "reject" refuses the job with
// msg; "exclusive" accepts it on a whole GPU and warns.
func (e *Engine) badInput(j JobFields, mode, msg string, gres GresRequest, gresErr error, slots int, r rec) Result {
	if mode != "exclusive" {
		res := Result{Code: Reject, UserMsg: "coscheml: " + msg}
		return e.finish(res, r, "reject", "pass", msg)
	}
	r.Action = "exclusive"
	r.Reason = msg + "; accepted on a whole GPU (" + mode + " by configuration)"
	if gresErr != nil || !gres.HasGPU() || gres.GPUs > 1 || j.Modify && j.TresPerNode == "" {
		res := Result{UserMsg: "coscheml: warning: " + msg + "; the job is not shared"}
		return e.finish(res, r, "unchanged", "pass", r.Reason)
	}
	res := e.exclusiveUnpinned(j, gres, slots, r, "")
	res.UserMsg = "coscheml: warning: " + msg + "; the job runs on a GPU of its own"
	return res
}

func (e *Engine) exclusiveUnpinned(j JobFields, gres GresRequest, slots int, r rec, id string) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exclusiveUnpinnedLocked(j, gres, slots, r, id)
}

// exclusiveUnpinnedLocked asks for all shards of one GPU on any node: Slurm then
// picks an idle GPU and nothing can join it. Caller holds mu (for the id counter).
func (e *Engine) exclusiveUnpinnedLocked(j JobFields, gres GresRequest, slots int, r rec, id string) Result {
	if id == "" {
		id = e.newID()
	}
	r.ID, r.Shards = id, slots
	res := Result{Code: Rewrite, TresPerNode: gres.WithShards(slots), Comment: comment.WithToken(j.Comment, comment.FormatToken(id, slots))}
	return e.finish(res, r, "rewrite", r.Action, r.Reason)
}

// dropReservation forgets the reservation of an earlier decision for this job
// (job_modify decides again). Caller holds mu.
func (e *Engine) dropReservation(id, jobID string) {
	if id == "" && jobID == "" {
		return
	}
	kept := e.ds.reserved[:0]
	for _, rv := range e.ds.reserved {
		if (id != "" && rv.id == id) || (jobID != "" && rv.jobID == jobID) {
			e.ds.cluster.Remove(rv.residentID())
			e.resteer(rv.node)
			continue
		}
		kept = append(kept, rv)
	}
	e.ds.reserved = kept
}

// finish completes the record, queues it for the decision log and words the log line.
func (e *Engine) finish(res Result, r rec, outcome, action, reason string) Result {
	r.Outcome, r.Action, r.Reason = outcome, action, reason
	r.TresOut = res.TresPerNode
	if dl := e.dlogPtr.Load(); dl != nil && (r.Tag != "" || outcome != "unchanged") {
		dl.Log(r.Record)
	}
	res.Log = formatLog(&r.Record)
	return res
}

func formatLog(r *decisionlog.Record) string {
	var b strings.Builder
	job := r.JobID
	if job == "" {
		job = "new"
	}
	fmt.Fprintf(&b, "%s job=%s uid=%d", r.Op, job, r.UserID)
	if r.Tag != "" {
		fmt.Fprintf(&b, " tag=%s", profile.Sanitize(r.Tag))
	}
	if r.Class != "" {
		fmt.Fprintf(&b, " class=%s", profile.Sanitize(r.Class))
	}
	if r.ID != "" {
		fmt.Fprintf(&b, " decision=%s", r.ID)
	}
	fmt.Fprintf(&b, " outcome=%s action=%s", r.Outcome, r.Action)
	if r.Node != "" {
		fmt.Fprintf(&b, " node=%s gpu=%d", profile.Sanitize(r.Node), r.GPU)
	}
	if r.Shards > 0 {
		fmt.Fprintf(&b, " shards=%d", r.Shards)
	}
	if r.PredictedSpeed > 0 {
		fmt.Fprintf(&b, " speed=%.2f min_resident=%.2f", r.PredictedSpeed, r.MinResidentSpeed)
	}
	if r.TresOut != "" {
		fmt.Fprintf(&b, " tres=%s->%s", profile.Sanitize(r.TresIn), profile.Sanitize(r.TresOut))
	}
	fmt.Fprintf(&b, " reason=%q", sanitizeLong(r.Reason))
	return b.String()
}

// sanitizeLong bounds a reason (ours, but it may quote user input).
func sanitizeLong(s string) string { return safetext.Limit(s, 600) }
