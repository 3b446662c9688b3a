// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// clusterView is the cluster as decisions see it: the residency store's jobs plus
// the reservations of decisions whose jobs have not started yet. It owns both, and
// is the only thing that changes the cluster. Decisions read it under mu; the
// background refresh builds a new cluster outside mu and swaps it in.
type clusterView struct {
	mu sync.Mutex
	viewState
	// res: the reservations of decisions whose jobs have not started yet.
	res reservationSet
	// deferred: decision ids of jobs the plugin deferred (wait_defer), with the
	// begin time given. Only these may have their begin time changed by a
	// re-decision; rebuilt from the decision log on restart (deferralsFrom).
	deferred deferrals
	// ctx: the job context of each decision that gave an id (jobCtx), released
	// when its job starts or leaves the queue; lost on restart.
	ctx ctxStore
	// started, startedJobs: scratch of the decision ids and job ids that a
	// residency read shows started since the one before (background goroutine
	// only).
	started, startedJobs []string
	// spareRun, spareConf: the maps the last install replaced, refilled by the
	// next one (install is called by one goroutine at a time: the engine's refresh lock).
	spareRun map[string]bool
	// expiredAt: when expireLocked last ran.
	expiredAt time.Time
	spareConf map[string][]confirmation
	// lastPlaced: the last new submission placed on the cluster, replayed
	// without effect after each refresh that changed the view (warmDecision).
	lastPlaced JobFields
	hasPlaced  bool
	// req: the scratch request of the decision in progress (under mu).
	req placement.Request
}

// reservationSet is the pending reservations, indexed so that job_modify drops
// its job's reservation and expiry finds the oldest without a scan.
type reservationSet struct {
	list []reservation
	ttl  time.Duration // forget an unconfirmed reservation after
	// byID indexes list by decision id, byJob by bound job id (the ids).
	byID  map[string]int
	byJob map[string][]string
	// age: the reservations' ids in the order they were made, for expiry by
	// age from the oldest; an id no longer reserved is skipped when reached.
	age     []reservedAt
	ageHead int
}

// viewState is what a decision reads from the view (never writes).
type viewState struct {
	cluster *placement.Cluster
	snap    *Snapshot // the snapshot the cluster was built for
	resErr  error
	running map[string]bool           // job ids with a residency entry
	confirm map[string][]confirmation // decision ids with a residency entry (or done)
}

// reservedAt is when the reservation of decision id was made.
type reservedAt struct {
	id string
	at time.Time
}

// confirmation is where a decision id was seen started: the entry's node and job
// ("" for a done marker, which has neither).
type confirmation struct{ node, jobID string }

// blocker is why no decision can be placed on this view now ("" when one can).
func (v *viewState) blocker(snap *Snapshot, jobID string) string {
	switch {
	case v.resErr != nil:
		return "degraded (residency unreadable, logged when it happened): left unchanged"
	case v.cluster == nil || v.snap != snap:
		return "degraded: cluster state not loaded yet"
	case jobID != "" && v.running[jobID]:
		return "job is running; its placement is kept"
	}
	return ""
}

// reservation is a decision not yet seen in the residency store: the job is queued
// or starting. Without it, two quick submissions would both see the same GPU idle.
type reservation struct {
	id    string // decision id (the resident's ID, Kind Reserved)
	jobID string // known for job_modify; bound when first confirmed
	uid   uint32 // the job's user: only they may replace it (job_modify)
	node  int
	more  []int // the further nodes of a span over several nodes: the same gpus on each
	gpus  []int // indexes into the node's GPUs
	slots int
	prof  *profile.Profile
	class profile.Class
	at    time.Time
}

// install swaps in cluster c, built for snap from the residency entries, with the
// pending reservations re-applied and the confirmed or expired ones dropped. It
// returns the cluster it replaced, which no decision reaches from then on (they
// read the cluster under mu only).
func (v *clusterView) install(snap *Snapshot, c *placement.Cluster, entries []residency.Entry, done []string, now time.Time) (old *placement.Cluster) {
	running, confirm := v.indexEntries(entries, done)
	v.mu.Lock()
	defer v.mu.Unlock()
	old = v.cluster
	v.spareRun, v.spareConf = v.running, v.confirm
	v.cluster, v.snap, v.resErr = c, snap, nil
	v.running, v.confirm = running, confirm
	v.releaseStartedLocked()
	v.expireLocked(now)
	for i := range v.res.list {
		v.applyLocked(&v.res.list[i])
	}
	return old
}

// update is install for a small residency change: the installed cluster, built
// for snap, is brought to the new entries in place (applyDelta, under mu)
// instead of replaced; the pending reservations stay applied. It returns false,
// changing nothing, when the installed cluster is not snap's.
func (v *clusterView) update(snap *Snapshot, changed map[string]bool, entries []residency.Entry, done []string, now time.Time) bool {
	running, confirm := v.indexEntries(entries, done)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cluster == nil || v.snap != snap {
		v.spareRun, v.spareConf = running, confirm
		return false
	}
	applyDelta(v.cluster, snap, changed, entries)
	v.spareRun, v.spareConf = v.running, v.confirm
	v.running, v.confirm, v.resErr = running, confirm, nil
	v.expireStartedLocked()
	v.releaseStartedLocked()
	v.expireAgedLocked(now)
	return true
}

// indexEntries fills the spare running and confirm maps from entries and done
// (outside mu: only install and update, on the background goroutine, use the
// spares), and lists in started the decision ids confirmed now but not by the
// installed confirm map (which only this goroutine replaces, so it reads it
// without mu).
func (v *clusterView) indexEntries(entries []residency.Entry, done []string) (map[string]bool, map[string][]confirmation) {
	running, confirm := v.spareRun, v.spareConf
	if running == nil || confirm == nil {
		running = make(map[string]bool, len(entries))
		confirm = make(map[string][]confirmation, len(entries))
	}
	clear(running)
	clear(confirm)
	for _, en := range entries {
		running[en.JobID] = true
		if en.DecisionID != "" {
			confirm[en.DecisionID] = append(confirm[en.DecisionID], confirmation{node: en.Node, jobID: en.JobID})
		}
	}
	for _, id := range done {
		confirm[id] = append(confirm[id], confirmation{}) // started and already ended
	}
	v.started, v.startedJobs = v.started[:0], v.startedJobs[:0]
	for i := range entries {
		if en := &entries[i]; !v.running[en.JobID] {
			v.startedJobs = append(v.startedJobs, en.JobID)
			if _, ok := v.confirm[en.DecisionID]; !ok && en.DecisionID != "" {
				v.started = append(v.started, en.DecisionID)
			}
		}
	}
	for _, id := range done {
		if _, ok := v.confirm[id]; !ok {
			v.started = append(v.started, id)
		}
	}
	return running, confirm
}

// expireStartedLocked drops the reservations of the decisions and jobs that
// started since the last residency read (what the full expireLocked finds, at
// the cost of the change rather than of every reservation). Caller holds mu.
func (v *clusterView) expireStartedLocked() {
	for _, id := range v.started {
		if i, ok := v.res.byID[id]; ok && v.confirmedLocked(&v.res.list[i]) {
			v.unreserveLocked(i)
		}
	}
	for _, job := range v.startedJobs {
		for len(v.res.byJob[job]) > 0 {
			v.unreserveLocked(v.res.byID[v.res.byJob[job][0]])
		}
	}
	v.startedJobs = v.startedJobs[:0]
}

// releaseStartedLocked forgets the context and the deferral of each decision
// whose job started: a running job is never decided again (blocker), and an
// ended one never comes back under its id but requeued, which then is decided
// on its update's fields like a job whose context was evicted. An array keeps
// its context until it leaves the queue: its other tasks still wait. Caller
// holds mu.
func (v *clusterView) releaseStartedLocked() {
	for _, id := range v.started {
		if c, ok := v.ctx.get(id); ok && c.arrayInx == "" {
			v.ctx.release(id)
		}
		v.deferred.take(id)
	}
	v.started = v.started[:0]
}

// setErr marks the residency unreadable: decisions pass jobs through.
func (v *clusterView) setErr(err error) {
	v.mu.Lock()
	v.resErr = err
	v.mu.Unlock()
}

// expire drops the reservations past the TTL (the residency did not change:
// the last install or update dropped the confirmed ones).
func (v *clusterView) expire(now time.Time) {
	v.mu.Lock()
	v.expireAgedLocked(now)
	v.mu.Unlock()
}

// expireEvery is how often a decision expires reservations itself (the
// background refresh does it every residency interval, when it runs).
const expireEvery = time.Second

// expireStale is expire when the last expiry is older than every.
func (v *clusterView) expireStale(now time.Time, every time.Duration) {
	v.mu.Lock()
	if d := now.Sub(v.expiredAt); d >= every || d < 0 {
		v.expireAgedLocked(now)
	}
	v.mu.Unlock()
}

// expireLocked drops reservations that the residency store confirmed (the job
// started) or that are older than the TTL. Caller holds mu.
func (v *clusterView) expireLocked(now time.Time) {
	v.expiredAt = now
	for i := 0; i < len(v.res.list); {
		r := &v.res.list[i]
		if v.confirmedLocked(r) || (r.jobID != "" && v.running[r.jobID]) || now.Sub(r.at) > v.res.ttl {
			v.unreserveLocked(i)
			continue
		}
		i++
	}
}

// expireAgedLocked drops the reservations older than the TTL, from the oldest
// made: amortised O(1) per reservation, whatever their number. After a clock
// step back the ones made later wait behind the first until it ages (the next
// full install scans them all). Caller holds mu.
func (v *clusterView) expireAgedLocked(now time.Time) {
	v.expiredAt = now
	for v.res.ageHead < len(v.res.age) {
		a := v.res.age[v.res.ageHead]
		if now.Sub(a.at) <= v.res.ttl {
			break
		}
		v.res.age[v.res.ageHead] = reservedAt{}
		v.res.ageHead++
		if i, ok := v.res.byID[a.id]; ok && v.res.list[i].at.Equal(a.at) {
			v.unreserveLocked(i)
		}
	}
	if v.res.ageHead > 64 && v.res.ageHead > len(v.res.age)/2 {
		n := copy(v.res.age, v.res.age[v.res.ageHead:])
		clear(v.res.age[n:])
		v.res.age, v.res.ageHead = v.res.age[:n], 0
	}
}

// confirmedLocked says whether r's job has started: an entry with r's id on r's
// node (and r's job, once bound), or a done marker. An entry elsewhere carries
// an id it cannot have been given for that job, and confirms nothing.
func (v *clusterView) confirmedLocked(r *reservation) bool {
	for _, c := range v.confirm[r.id] {
		if c.node != "" && v.snap != nil && !r.onNode(v.snap.nodes, c.node) {
			continue
		}
		if r.jobID == "" || c.jobID == "" || c.jobID == r.jobID {
			return true
		}
	}
	return false
}

// onNode says whether node name is one of r's nodes (names: the snapshot's).
func (r *reservation) onNode(names []string, name string) bool {
	if r.node < len(names) && names[r.node] == name {
		return true
	}
	for _, n := range r.more {
		if n < len(names) && names[n] == name {
			return true
		}
	}
	return false
}

// reserveLocked records a decision's reservation and applies it. Caller holds mu.
func (v *clusterView) reserveLocked(r reservation) {
	v.addReservedLocked(r)
	v.applyLocked(&v.res.list[len(v.res.list)-1])
}

// addReservedLocked records r without applying it (the rebuild at start: the
// install that follows applies every reservation). A reservation of the same id
// replaces the earlier one. Caller holds mu.
func (v *clusterView) addReservedLocked(r reservation) {
	if v.res.byID == nil {
		v.res.byID = make(map[string]int)
		v.res.byJob = make(map[string][]string)
	}
	if i, ok := v.res.byID[r.id]; ok {
		v.unreserveLocked(i)
	}
	v.res.list = append(v.res.list, r)
	v.res.byID[r.id] = len(v.res.list) - 1
	v.res.age = append(v.res.age, reservedAt{id: r.id, at: r.at})
	if r.jobID != "" {
		v.res.byJob[r.jobID] = append(v.res.byJob[r.jobID], r.id)
	}
}

// unreserveLocked removes reservation i from the cluster and from reserved, in
// O(1): the last one takes its place. Caller holds mu.
func (v *clusterView) unreserveLocked(i int) {
	r := v.res.list[i]
	if v.cluster != nil {
		v.cluster.Remove(r.id)
	}
	delete(v.res.byID, r.id)
	if r.jobID != "" {
		ids := v.res.byJob[r.jobID]
		if k := slices.Index(ids, r.id); k >= 0 {
			ids = slices.Delete(ids, k, k+1)
		}
		if len(ids) == 0 {
			delete(v.res.byJob, r.jobID)
		} else {
			v.res.byJob[r.jobID] = ids
		}
	}
	last := len(v.res.list) - 1
	if i != last {
		v.res.list[i] = v.res.list[last]
		v.res.byID[v.res.list[i].id] = i
	}
	v.res.list[last] = reservation{}
	v.res.list = v.res.list[:last]
}

// applyLocked makes r resident in the current cluster. Caller holds mu.
func (v *clusterView) applyLocked(r *reservation) { applyReservation(v.cluster, r) }

// reservations returns a copy of the pending reservations.
func (v *clusterView) reservations() []reservation {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.res.list)
}

// applyReservation makes r resident in c (nil: nothing).
func applyReservation(c *placement.Cluster, r *reservation) {
	if c == nil || r.node >= len(c.Nodes) {
		return
	}
	var slots [8]placement.Slot // Apply keeps none: no allocation for up to 8 GPUs
	d := placement.Decision{Action: placement.ActionShare, Placement: slots[:0]}
	for _, g := range r.gpus {
		if g < len(c.Nodes[r.node].GPUs) {
			d.Placement = append(d.Placement, placement.Slot{Node: r.node, GPU: g, Slots: r.slots})
		}
	}
	for _, n := range r.more {
		for _, g := range r.gpus {
			if n < len(c.Nodes) && g < len(c.Nodes[n].GPUs) {
				d.Placement = append(d.Placement, placement.Slot{Node: n, GPU: g, Slots: r.slots})
			}
		}
	}
	c.Apply(&placement.Request{JobID: r.id, Tag: tagOfProf(r.prof), Profile: r.prof, Class: r.class, Kind: placement.Reserved}, d)
}

// dropLocked forgets the reservation of an earlier decision for this job
// (job_modify decides again): the one bound to jobID, or the one named id if it
// belongs to uid and is not bound to another job (admin: any). It returns the
// ids dropped.
// Caller holds mu.
func (v *clusterView) dropLocked(id string, uid uint32, admin bool, jobID string) []string {
	if id == "" && jobID == "" {
		return nil
	}
	var dropped []string
	if i, ok := v.res.byID[id]; ok && id != "" {
		rv := &v.res.list[i]
		if admin || rv.uid == uid && (rv.jobID == "" || rv.jobID == jobID) {
			dropped = append(dropped, rv.id)
			v.unreserveLocked(i)
		}
	}
	if jobID != "" {
		for len(v.res.byJob[jobID]) > 0 {
			rid := v.res.byJob[jobID][0]
			dropped = append(dropped, rid)
			v.unreserveLocked(v.res.byID[rid])
		}
	}
	return dropped
}

// jobCtx is what a decision knew of its job's node options. job_modify hands over
// only the fields an update changes, so a re-decision reads the job's partition,
// -w, -x and array from here (and knows whether the node list is the plugin's pin).
type jobCtx struct {
	partition, reqNodes, excNodes, arrayInx string
	mc                                      modelAsk // the GPU model and features it asked for
	pinned                                  bool     // req_nodes was set by the plugin, not the user
	at                                      time.Time
	// minNodes, maxNodes: the job's node count range (-N), which an update
	// that names none does not hand over.
	minNodes, maxNodes uint32
}

// maxCtx bounds the contexts remembered (those of queued jobs: a context goes
// when its job starts or leaves the queue); past it the oldest goes. A job
// whose context is gone (or a restart) is re-decided on the update's fields.
const maxCtx = 1 << 16

// rememberLocked records decision id's job context. Caller holds mu.
func (v *clusterView) rememberLocked(id string, c jobCtx) {
	if id == "" {
		return
	}
	v.ctx.put(id, c)
}

// releaseCtxLocked forgets decision id's job context. Caller holds mu.
func (v *clusterView) releaseCtxLocked(id string) { v.ctx.release(id) }

// ctxLocked is decision id's job context (nil when unknown). Caller holds mu.
func (v *clusterView) ctxLocked(id string) *jobCtx {
	if c, ok := v.ctx.get(id); ok && id != "" {
		return &c
	}
	return nil
}

// ctxForJobLocked is the context a job_modify of Slurm job jobID decides with,
// and its decision id: the one bound to the job id; else the one of the job's
// verified token prevID, which is then bound to the job (a context bound to
// another job is not this one's). nil when neither is known. Caller holds mu.
func (v *clusterView) ctxForJobLocked(jobID, prevID string) (*jobCtx, string) {
	if c, id, ok := v.ctx.forJob(jobID); ok {
		return &c, id
	}
	if prevID == "" {
		return nil, ""
	}
	if j := v.ctx.jobOf(prevID); j != "" && j != jobID {
		return nil, ""
	}
	c, ok := v.ctx.get(prevID)
	if !ok {
		return nil, ""
	}
	v.ctx.bind(prevID, jobID)
	return &c, prevID
}

// deferLocked remembers that decision id deferred its job until until. Entries
// of jobs that did not start (or vanished) are pruned once past until plus the
// TTL. Caller holds mu.
func (v *clusterView) deferLocked(id string, until, now time.Time) {
	v.deferred.add(id, until, now, v.res.ttl)
}

// takeDeferredLocked reports whether decision id is a deferral of the plugin's,
// and forgets it (the re-decision replaces it). Caller holds mu.
func (v *clusterView) takeDeferredLocked(id string) bool {
	if id == "" {
		return false
	}
	return v.deferred.take(id)
}

func tagOfProf(p *profile.Profile) string {
	if p == nil {
		return ""
	}
	return p.Tag
}

// buildCluster turns the inventory and the residency entries into a cluster. Jobs
// without a known profile (untagged, or a tag whose profile is gone) are residents
// with a nil profile: the policy will not share their GPU. The cluster's Reach is
// the configured shard pinning, so placement filters out GPUs Slurm cannot reach.
//
// spare, when not nil, is a cluster no decision can reach any more (the one the
// previous install replaced): its memory is reused, so a rebuild of 8,192 GPUs
// allocates next to nothing and wakes no garbage collection that a decision on
// slurmctld's thread would pay for (GC assist).
func buildCluster(st *Snapshot, entries []residency.Entry, spare *placement.Cluster) *placement.Cluster {
	cfg := st.cfg
	slots := cfg.SlotsPerGPU
	c := spare
	if c == nil || len(c.Nodes) != len(st.shapes) {
		c = &placement.Cluster{Nodes: make([]placement.Node, len(st.shapes))}
	}
	c.Reach, c.Interner = st.reach, nil
	if st.interner != nil && !st.interner.Full() {
		c.Interner = st.interner
	} // else a private table: signatures (and the memo) restart with this build
	for i := range st.shapes {
		shape := &st.shapes[i]
		gpus := c.Nodes[i].GPUs
		if len(gpus) != len(shape.GPUs) {
			gpus = make([]placement.GPU, len(shape.GPUs))
		}
		for g := range gpus {
			res := gpus[g].Residents
			clear(res) // drop the old residents' profiles
			gpus[g] = placement.GPU{Index: g, MemMiB: shape.GPUs[g].MemMiB, Slots: slots, Residents: res[:0]}
		}
		c.Nodes[i] = placement.Node{Name: shape.Name, GPUs: gpus, Model: shape.Model, Features: shape.Features}
	}
	for i := range entries {
		n, res, ok := residentOf(st, &entries[i])
		if !ok {
			continue
		}
		for _, g := range entries[i].GPUs {
			if g >= 0 && g < len(c.Nodes[n].GPUs) {
				gpu := &c.Nodes[n].GPUs[g]
				gpu.Residents = append(gpu.Residents, res)
			}
		}
	}
	c.Reindex()
	return c
}

// residentOf is the resident entry en makes on each of its GPUs, and the index
// of its node (ok false: a node not in the inventory).
func residentOf(st *Snapshot, en *residency.Entry) (node int, res placement.Resident, ok bool) {
	n, ok := st.nodeIdx[en.Node]
	if !ok {
		return 0, res, false
	}
	var prof *profile.Profile
	if en.Tag != "" {
		prof = st.catalog[en.Tag]
	}
	class := en.Class
	if class == "" && prof != nil {
		class = prof.Class
	}
	slots := st.cfg.SlotsPerGPU
	held := en.Shards
	if held <= 0 || held > slots {
		held = slots // whole GPU, or more shards than we think a GPU has
	}
	// A job of several nodes holds its GPUs on each: slowing it here slows all.
	return n, placement.Resident{JobID: en.JobID, Profile: prof, Class: class, Slots: held, GPUs: len(en.GPUs) * max(en.Nodes, 1)}, true
}
