// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/inferlatency"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// CoScheML is the interference-aware policy. For each feasible GPU (slots free,
// co-runner limit, memory fits by profile) it predicts the speed of the new job and
// of every resident it would join, and ranks the GPU:
//
//   - share, every affected job at or above PreferShareSpeed: best tier;
//   - idle GPU: middle tier (the job runs at full speed);
//   - share, every affected job at or above its class floor but some below
//     PreferShareSpeed: lowest tier, so it is only taken when no GPU is idle;
//   - any affected job below its floor: rejected.
//
// Within a sharing tier the GPU with the least predicted interference wins: the sum
// over affected jobs of the speed they lose (1 - new job's speed, plus each resident's
// speed before minus after). That sum is the GPU-time the cluster loses to sharing, so
// minimizing it maximizes useful throughput; the floors bound what any one job pays.
// Ties go to the GPU with the least memory (best fit: a job that fits a small GPU
// model leaves the large ones to the jobs that need them), then the lower index.
// A job alone on an idle GPU takes ShareSlots so a compatible job may join later.
// Requests without a profile cannot be judged: they take a whole idle GPU.
//
// A CoScheML value holds scratch buffers and a memo of predictions (about 1 MiB)
// reused between decisions: it is not safe for concurrent use (use one per
// goroutine). The memo assumes profiles are not modified in place once used (they
// are immutable by convention: replace a profile with a new value).
type CoScheML struct {
	name string
	pred model.Bounder
	// ownBound: pred has a calibrated lower bound of its own (the oracle's
	// truth has none: its bound is the prediction itself)
	ownBound bool
	revision uint64 // pred's revision the memo's entries were computed with
	opts     Options
	e        engine
	memo     memo
	rows     [scanRows]scanRow // the scan's memo results by bucket, per recent request

	cycle cycle // the decision in progress; Place starts a new one

	note string // floorNote's words

	// prediction scratch, reused
	co, others []*profile.Profile
	ord        []int32
}

// cycle is the state of one decision (the Kubernetes framework's CycleState): Place
// replaces it whole, so nothing of a decision leaks into the next.
type cycle struct {
	req      uint32   // memo ID of the request's (profile, class); 0: no memo
	row      *scanRow // the request's results by bucket index; nil: none
	classNew profile.Class
	floorNew float64
	fail     struct { // the closest refusal, for the wait reason
		gi     int32
		margin float64
		ok     bool
	}
	lowShare bool // a GPU could be shared within the floors, below PreferShareSpeed
}

// NewCoScheML returns the Co-scheML policy using pred to predict speeds.
func NewCoScheML(pred model.Predictor, opts Options) (*CoScheML, error) {
	return newCoScheML("coscheml", pred, opts)
}

// NewOracle returns the same algorithm as NewCoScheML handed the true speeds (the
// simulator's ground truth) instead of the model's predictions: only the predictor
// differs, so the gap between the two measures the model's errors.
func NewOracle(truth model.Predictor, opts Options) (*CoScheML, error) {
	return newCoScheML("oracle", truth, opts)
}

func newCoScheML(name string, pred model.Predictor, opts Options) (*CoScheML, error) {
	if pred == nil {
		return nil, fmt.Errorf("%s policy: nil predictor", name)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s policy: %w", name, err)
	}
	p := &CoScheML{name: name, opts: o, memo: newMemo(memoSize),
		co: make([]*profile.Profile, 0, 8), others: make([]*profile.Profile, 0, 8), ord: make([]int32, 0, 8)}
	p.pred, p.ownBound = model.Bounds(pred)
	p.e.opts, p.e.shares = &p.opts, true
	return p, nil
}

// predict returns the predicted speed of job next to co and the speed that must
// clear the floor: the predictor's lower bound at coverage FloorConfidence (the
// model's calibrated margin; 0 = the model's default coverage), or the
// prediction itself for a predictor without one (the oracle's true speeds).
// floor is the job's floor: a predictor with a default coverage per floor
// clears a stricter floor (infer's) at a higher coverage (docs/model.md).
//
// For an inference job both are at most the latency speed its co-runners'
// solo GPU shares allow (inferlatency.FromProfiles): its floor bounds request
// latency, which time-slicing stretches even where throughput holds.
func (p *CoScheML) predict(job *profile.Profile, co []*profile.Profile, class profile.Class, floor float64) (speed, sure float64) {
	speed, sure = p.pred.Bound(job, co, model.Query{Coverage: p.opts.FloorConfidence, Floor: floor})
	if class == profile.ClassInfer && len(co) > 0 {
		l := inferlatency.FromProfiles(co)
		speed, sure = min(speed, l), min(sure, l)
	}
	return speed, sure
}

// Name is "coscheml" or "oracle".
func (p *CoScheML) Name() string { return p.name }

// Options returns the options in effect (defaults filled in).
func (p *CoScheML) Options() Options { return p.opts }

// Place chooses GPUs for r without changing c.
func (p *CoScheML) Place(c *Cluster, r *Request) Decision {
	if d, bad := badRequest(p.name, c, r); bad {
		return d
	}
	if v := p.pred.Revision(); v != p.revision { // the predictor learned: memoized predictions are stale
		p.revision = v
		p.memo.forget()
	}
	cl := classOf(r.Class, r.Profile)
	p.cycle = cycle{classNew: cl, floorNew: p.opts.Floors.For(cl)}
	if c.indexed() {
		p.memo.use(c.ix)
		p.cycle.req = p.memo.reqID(r.Profile, classOf(r.Class, r.Profile))
		p.cycle.row = p.rowFor(p.cycle.req, len(c.ix.scanSummary))
	} // else: an uncached cluster is decided on a private copy; no memo
	chosen, found := p.e.place(c, r, p, nil)
	if chosen == nil {
		d := Decision{Action: ActionWait, MinResidentSpeed: 1, Reason: p.e.waitReason(p.name, r, found)}
		if p.cycle.fail.ok {
			d.Reason += "; closest: " + p.explainGPU(c, r, p.cycle.fail.gi)
		}
		return d
	}
	d := p.e.decisionFor(c, chosen)
	var b strings.Builder
	// One allocation for the whole reason (a shared GPU's runs to about 400
	// bytes): every allocation in a decision is a possible refill of Go's
	// per-size caches, which is slow when they are cold.
	b.Grow(512)
	// Appends rather than fmt, as in writeExplain: the same words as
	// "%s: %s: job %s (%s, %s)".
	b.WriteString(p.name)
	b.WriteString(": ")
	b.WriteString(d.Action.String())
	b.WriteString(": job ")
	b.WriteString(profile.Sanitize(r.JobID))
	b.WriteString(" (")
	b.WriteString(tagOf(r))
	b.WriteString(", ")
	b.WriteString(profile.Sanitize(string(classOf(r.Class, r.Profile))))
	b.WriteByte(')')
	for i, cd := range chosen {
		b.WriteString("; ")
		if i == 0 && len(chosen) > 1 {
			b.WriteString("speed of its slowest GPU ")
			writeSpeed(&b, d.PredictedSpeed)
			b.WriteString("; ")
		}
		p.writeExplain(&b, c, r, cd.gi)
	}
	b.WriteString("; ")
	p.rule(&b, chosen, r)
	if d.Action == ActionExclusive {
		p.e.rejectSummary(&b, "; other GPUs: ")
	}
	p.e.writeSteerNote(&b, c, &d)
	d.Reason = b.String()
	return d
}

// rule words why the chosen GPUs won, from their tiers.
func (p *CoScheML) rule(b *strings.Builder, chosen []cand, r *Request) {
	high, low := 0, 0
	for i := range chosen {
		switch {
		case !chosen[i].share:
		case chosen[i].key > keyTier:
			high++
		default:
			low++
		}
	}
	prefer := p.opts.PreferShareSpeed
	// Appends rather than fmt (%.2f is writeSpeed).
	switch {
	case r.GPUs > 1 && !p.e.multiShare:
		b.WriteString("several GPUs: whole idle GPUs (Slurm cannot name each GPU's shards here, or share_multi_gpu is off)")
	case r.GPUs > 1 && !oneNode(chosen) && !p.e.spanned:
		b.WriteString("several GPUs over several nodes: whole idle GPUs")
	case r.GPUs > 1 && p.e.spanned && high+low > 0:
		b.WriteString("several nodes at the same GPUs, each GPU judged like a one-GPU share; the job runs at its slowest GPU's speed")
	case r.GPUs > 1 && p.e.spanned:
		b.WriteString("several nodes at the same GPUs: idle GPUs, each keeping shards free for a co-runner")
	case r.GPUs > 1 && high+low > 0:
		b.WriteString("several GPUs, each judged like a one-GPU share; the job runs at its slowest GPU's speed")
	case r.GPUs > 1:
		b.WriteString("several GPUs: idle GPUs, each keeping shards free for a co-runner")
	case r.Profile == nil:
		b.WriteString("no profile: interference unknown, so a whole idle GPU")
	case low > 0:
		b.WriteString("every predicted speed above its floor but some below ")
		writeSpeed(b, prefer)
		b.WriteString(": shared for want of idle GPUs")
	case high > 0:
		b.WriteString("every predicted speed >= ")
		writeSpeed(b, prefer)
		b.WriteString(": sharing preferred to opening an idle GPU")
	case p.cycle.lowShare:
		b.WriteString("idle GPU: sharing would slow a job below ")
		writeSpeed(b, prefer)
	default:
		b.WriteString("idle GPU: no GPU could be shared within the floors")
	}
}

func tagOf(r *Request) string {
	switch {
	case r.Profile != nil:
		return profile.Sanitize(r.Profile.Tag)
	case r.Tag != "":
		return profile.Sanitize(r.Tag) + ", unprofiled"
	}
	return "untagged"
}

// score judges a feasible GPU from the memoized predictions: an idle GPU is the
// middle tier; a shared one is refused below a floor, else ranked by tier and cost.
func (p *CoScheML) score(c *Cluster, st *gpuState, bi, gi int32, r *Request, cd *cand) reject {
	if st.nres == 0 {
		slots := st.slots
		if r.Profile != nil {
			slots = min(p.opts.shareSlots(st.slots), st.slots)
		}
		*cd = cand{key: keyTier, fit: st.memCap, speed: 1, minRes: 1, gi: gi, node: st.node, slots: slots}
		return rejNone
	}
	if st.unknown > 0 {
		return rejUnknown
	}
	res := p.scanned(c, st, bi, gi, r)
	if !(res.margin >= 0) { // below a floor, or a NaN prediction
		m := res.margin
		if math.IsNaN(m) {
			m = math.Inf(-1)
		}
		// the closest refusal, for the wait reason; ties to the lower GPU so the
		// bucket scan and the GPU scan agree
		if !p.cycle.fail.ok || m > p.cycle.fail.margin || (m == p.cycle.fail.margin && gi < p.cycle.fail.gi) {
			p.cycle.fail.gi, p.cycle.fail.margin, p.cycle.fail.ok = gi, m, true
		}
		return rejFloor
	}
	key := -res.cost
	if min(res.speed, res.minRes) >= p.opts.PreferShareSpeed {
		key += 2 * keyTier
	} else {
		p.cycle.lowShare = true
	}
	*cd = cand{key: key, fit: st.memCap, speed: res.speed, minRes: res.minRes, gi: gi, node: st.node, slots: p.opts.shareSlots(st.slots), share: true}
	return rejNone
}

// shareFeasible is the part of the shared filter (engine.feasible) for a busy GPU:
// the rules every sharing policy shares under, so the baselines are measured
// under Co-scheML's rules.
func shareFeasible(o *Options, st *gpuState, r *Request) reject {
	switch {
	case r.Profile == nil:
		return rejUnknown
	case int(st.nres)+1 > o.MaxCoRunners:
		return rejCoRunners
	case st.free() < o.shareSlots(st.slots):
		return rejSlots
	case st.mem+r.Profile.MemUsedMiB+o.MemReserveMiB > st.memCap:
		return rejMem
	}
	return rejNone
}

// setResult is what the predictions say about adding the request to one resident set.
type setResult struct {
	speed  float64 // new job
	minRes float64 // lowest resident after joining
	cost   float64 // summed speed lost by all affected jobs
	margin float64 // lowest (speed - floor) over affected jobs; < 0 or NaN: refused
	// after: each resident's speed after joining, in canonical order (see
	// compute), kept for sets of up to len(after) residents so the reason
	// (explainGPU) words the memoized predictions instead of predicting again.
	after [explained]float64
}

// explained is how many residents' speeds a set result keeps for the reason: at
// most one other resident besides the one worded, so the co-runners a resident's
// speed was predicted with are the same in any order (the default max_corunners
// of 2 leaves one resident on a GPU a job joins).
const explained = 2

// predicted returns the set result for GPU gi's residents (st: its state),
// from the memo when the same request already met the same resident set on
// this cluster; the residents themselves are read only on a miss.
func (p *CoScheML) predicted(c *Cluster, st *gpuState, gi int32, r *Request) setResult {
	if st.sig == 0 || p.cycle.req == 0 {
		return p.compute(c.gpuOf(gi).Residents, r)
	}
	e := p.memo.find(st.sig, p.cycle.req)
	if e.epoch == p.memo.epoch {
		return e.res
	}
	e.sig, e.req, e.epoch = st.sig, p.cycle.req, p.memo.epoch
	e.res = p.compute(c.gpuOf(gi).Residents, r)
	return e.res
}

// scanned is predicted for the scan of bucket bi (st: its state, gi: the GPU
// evaluated), through the request's row: the row holds the results the scan
// reads in bucket order, so a decision reads them in one sequential pass
// instead of one memo slot, a cache miss when cold, per bucket. A row entry is
// a copy of the memo's result for the same (request, resident set), checked
// by its signature, so it gives bit-identical results. Its after speeds are
// not kept: the reason reads those from the memo.
func (p *CoScheML) scanned(c *Cluster, st *gpuState, bi, gi int32, r *Request) setResult {
	row := p.cycle.row
	if row == nil || st.sig == 0 || bi < 0 || int(bi) >= len(row.e) {
		return p.predicted(c, st, gi, r)
	}
	e := &row.e[bi]
	if e.sig == st.sig {
		return setResult{speed: e.speed, minRes: e.minRes, cost: e.cost, margin: e.margin}
	}
	res := p.predicted(c, st, gi, r)
	*e = rowEntry{sig: st.sig, speed: res.speed, minRes: res.minRes, cost: res.cost, margin: res.margin}
	return res
}

// scanRow is one request's memo results by bucket index, for the scan. A row
// is valid for one memo epoch; its entries are checked by signature, so
// buckets renumbered by a rebuild only miss, never mislead.
type scanRow struct {
	req   uint32
	epoch uint32
	e     []rowEntry
}

type rowEntry struct {
	sig                         uint64 // resident set the result is for; 0: empty
	speed, minRes, cost, margin float64
}

// scanRows is how many requests keep a row (direct-mapped by memo request ID:
// a site's active applications); maxRowBuckets bounds a row's length, so the
// rows take at most scanRows x maxRowBuckets x 40 bytes (buckets beyond it
// read the memo directly).
const (
	scanRows      = 64
	maxRowBuckets = 2048
)

// rowFor returns request req's row, sized for buckets buckets (nil when the
// request has no memo ID). A row of another request or an older memo epoch is
// emptied first.
func (p *CoScheML) rowFor(req uint32, buckets int) *scanRow {
	if req == 0 {
		return nil
	}
	row := &p.rows[req%scanRows]
	if row.req != req || row.epoch != p.memo.epoch {
		row.req, row.epoch = req, p.memo.epoch
		clear(row.e)
	}
	n := min(buckets, maxRowBuckets)
	if len(row.e) < n {
		row.e = append(row.e, make([]rowEntry, n-len(row.e))...)
	}
	return row
}

// compute predicts the speeds of the request and of every resident after joining.
//
// Residents are taken in a canonical order (see residentLess), so GPUs holding the
// same set in different orders get bit-identical results: float sums depend on
// order, and GPUs in one bucket (or one memo entry) share one result.
func (p *CoScheML) compute(res []Resident, r *Request) setResult {
	ord := p.order(res)
	co := p.co[:0]
	for _, i := range ord {
		co = append(co, res[i].Profile)
	}
	p.co = co
	speed, sure := p.predict(r.Profile, co, p.cycle.classNew, p.cycle.floorNew)
	out := setResult{speed: speed, minRes: 1}
	out.cost = 1 - out.speed
	out.margin = sure - p.cycle.floorNew
	for k, i := range ord {
		others := p.others[:0]
		for _, j := range ord {
			if j != i {
				others = append(others, res[j].Profile)
			}
		}
		cl := classOf(res[i].Class, res[i].Profile)
		floor := p.opts.Floors.For(cl)
		before := 1.0
		if len(others) > 0 {
			before, _ = p.predict(res[i].Profile, others, cl, floor)
		}
		others = append(others, r.Profile)
		p.others = others
		after, sure := p.predict(res[i].Profile, others, cl, floor)
		if k < explained {
			out.after[k] = after
		}
		// A resident of several GPUs runs at its slowest GPU's pace: slowing
		// it here costs the work of all its GPUs.
		out.cost += (before - after) * float64(spanOf(res[i].GPUs))
		out.minRes = min(out.minRes, after)
		out.margin = min(out.margin, sure-floor)
	}
	return out
}

// residentLess orders residents by what predictions read: tag, class, then the
// main metrics (ties left are profiles identical for the model's purposes).
func residentLess(a, b *Resident) bool {
	pa, pb := a.Profile, b.Profile
	switch {
	case pa == nil || pb == nil: // not reached: unprofiled GPUs are never predicted
		return pa == nil && pb != nil
	case pa.Tag != pb.Tag:
		return pa.Tag < pb.Tag
	case a.Class != b.Class:
		return a.Class < b.Class
	case pa.SMUtil.Mean != pb.SMUtil.Mean:
		return pa.SMUtil.Mean < pb.SMUtil.Mean
	case pa.MemBWUtil.Mean != pb.MemBWUtil.Mean:
		return pa.MemBWUtil.Mean < pb.MemBWUtil.Mean
	case pa.MemUsedMiB != pb.MemUsedMiB:
		return pa.MemUsedMiB < pb.MemUsedMiB
	}
	return spanOf(a.GPUs) < spanOf(b.GPUs)
}

// explainGPU words the predictions for placing r on GPU gi.
func (p *CoScheML) explainGPU(c *Cluster, r *Request, gi int32) string {
	var b strings.Builder
	b.Grow(192)
	p.writeExplain(&b, c, r, gi)
	return b.String()
}

// writeExplain appends explainGPU's words to b (a decision's reason is built
// in one buffer).
func (p *CoScheML) writeExplain(b *strings.Builder, c *Cluster, r *Request, gi int32) {
	n, g := c.locateGlobal(gi)
	gpu := &c.Nodes[n].GPUs[g]
	writeGPUName(b, c, n, g)
	if len(gpu.Residents) == 0 {
		b.WriteString(" idle")
		return
	}
	b.WriteString(" with ")
	describeResidents(b, gpu)
	var res setResult
	if c.indexed() {
		res = p.predicted(c, &c.ix.gpus[gi], gi, r) // the score stage's, from the memo
	} else {
		res = p.compute(gpu.Residents, r)
	}
	canonical := p.order(gpu.Residents)
	// Appends rather than fmt: this runs in every sharing decision, inside
	// slurmctld's submit call.
	b.WriteString(": predicted speed new job ")
	writeSpeed(b, res.speed)
	b.WriteString(" (floor ")
	writeSpeed(b, p.cycle.floorNew)
	b.WriteByte(')')
	for i := range gpu.Residents {
		rs := &gpu.Residents[i]
		b.WriteString(", job ")
		b.WriteString(profile.Sanitize(rs.JobID))
		b.WriteByte(' ')
		if len(gpu.Residents) <= explained {
			// The speed compute predicted with the same co-runners: with at
			// most one other resident their order cannot differ.
			writeSpeed(b, res.after[slices.Index(canonical, int32(i))])
		} else {
			writeSpeed(b, p.predictAfter(gpu.Residents, i, r))
		}
		b.WriteString(" (floor ")
		writeSpeed(b, p.opts.Floors.For(classOf(rs.Class, rs.Profile)))
		b.WriteByte(')')
	}
	b.WriteString("; interference cost ")
	writeSpeed(b, res.cost)
	if p.ownBound {
		// Otherwise a wait with every prediction above its floor would read as a bug.
		b.WriteString(p.floorNote())
	}
}

// floorNote words how floors are tested with a calibrated lower bound (the
// options are fixed for the policy's life: worded once).
func (p *CoScheML) floorNote() string {
	if p.note == "" {
		cov := "the model's default coverage for each floor"
		if p.opts.FloorConfidence > 0 {
			cov = fmt.Sprintf("coverage %.3g", p.opts.FloorConfidence)
		}
		p.note = fmt.Sprintf("; floors tested at the prediction less its calibrated margin, a measured pair at its measurement less its noise margin (floor_confidence: %s)", cov)
	}
	return p.note
}

// predictAfter is resident i's predicted speed next to the GPU's other
// residents, in their order, and r (a set too large for setResult.after).
func (p *CoScheML) predictAfter(res []Resident, i int, r *Request) float64 {
	others := p.others[:0]
	for j := range res {
		if j != i {
			others = append(others, res[j].Profile)
		}
	}
	others = append(others, r.Profile)
	p.others = others[:0]
	return p.pred.PredictSpeed(res[i].Profile, others)
}

// order returns the canonical order of res (indexes; see residentLess), in the
// policy's scratch: an insertion sort, as residents per GPU are few.
func (p *CoScheML) order(res []Resident) []int32 {
	ord := p.ord[:0]
	for i := range res {
		ord = append(ord, int32(i))
		for j := len(ord) - 1; j > 0 && residentLess(&res[ord[j]], &res[ord[j-1]]); j-- {
			ord[j], ord[j-1] = ord[j-1], ord[j]
		}
	}
	p.ord = ord
	return ord
}

// writeSpeed writes x as %.2f does, without fmt's allocations.
func writeSpeed(b *strings.Builder, x float64) {
	var buf [24]byte
	b.Write(strconv.AppendFloat(buf[:0], x, 'f', 2, 64))
}

// gpuOf is GPU gi of an indexed cluster.
func (c *Cluster) gpuOf(gi int32) *GPU {
	n := c.ix.gpus[gi].node
	return &c.Nodes[n].GPUs[gi-c.ix.nodeOff[n]]
}

// locateGlobal turns a global GPU index into node and GPU indexes (for reasons only:
// O(nodes) on an uncached cluster).
func (c *Cluster) locateGlobal(gi int32) (int, int) {
	if c.indexed() {
		n := c.ix.gpus[gi].node
		return int(n), int(gi - c.ix.nodeOff[n])
	}
	off := int32(0)
	for n := range c.Nodes {
		if k := int32(len(c.Nodes[n].GPUs)); gi < off+k {
			return n, int(gi - off)
		}
		off += int32(len(c.Nodes[n].GPUs))
	}
	return -1, -1
}

// memo is a fixed-size open-addressing table from (request, resident-set
// signature) to set result. Predictions are pure functions of the profiles and
// classes involved, so an entry stays true for as long as the signatures keep their
// meaning: while the policy places on clusters sharing one Interner (a cluster
// without one gets a private table at each Reindex). Placing on a cluster with
// another table starts a new epoch, which empties the table in O(1). Catalogs are small and states recur, so
// most decisions after the first few predict little or nothing.
type memo struct {
	e     []memoEntry
	mask  uint64
	epoch uint32
	owner *Interner // the table whose IDs the entries' signatures use

	// request (profile, class) -> small ID; bounded (see reqID)
	reqs map[internKey]uint32
}

type memoEntry struct {
	sig   uint64
	req   uint32
	epoch uint32 // valid when equal to memo.epoch
	res   setResult
}

// memoSize bounds the (request, resident set) pairs remembered; beyond it old
// entries are overwritten (same results, more predictions).
const (
	memoSize   = 1 << 14
	memoProbe  = 8
	memoMaxReq = 1 << 12
)

func newMemo(size int) memo {
	return memo{e: make([]memoEntry, size), mask: uint64(size - 1), epoch: 1, reqs: map[internKey]uint32{}}
}

// forget invalidates every entry in O(1).
func (m *memo) forget() {
	m.epoch++
	if m.epoch == 0 { // wrapped: old entries could look current
		clear(m.e)
		m.epoch = 1
	}
}

// use binds the memo to the signatures of cluster index ix. Entries stay valid
// across rebuilds of the cluster as long as its interning table is the same.
func (m *memo) use(ix *index) {
	if ix.intern != m.owner {
		m.owner = ix.intern
		m.forget()
	}
}

// reqID returns the request's ID, 0 when none can be given. The map of request
// profiles is bounded: when full (profiles replaced over a long run) it starts over
// with a new epoch.
func (m *memo) reqID(p *profile.Profile, cl profile.Class) uint32 {
	k := internKey{p: p, c: cl}
	if id, ok := m.reqs[k]; ok {
		return id
	}
	if len(m.reqs) >= memoMaxReq {
		clear(m.reqs)
		m.forget()
	}
	id := uint32(len(m.reqs) + 1)
	m.reqs[k] = id
	return id
}

// find returns the entry for (sig, req), a slot to fill (its epoch is stale), or,
// when the probe window is full of other current entries, the home slot to
// overwrite.
func (m *memo) find(sig uint64, req uint32) *memoEntry {
	h := (sig ^ uint64(req)*0xff51afd7ed558ccd) * 0x9e3779b97f4a7c15 >> 32
	for i := uint64(0); i < memoProbe; i++ {
		e := &m.e[(h+i)&m.mask]
		if e.epoch != m.epoch || (e.sig == sig && e.req == req) {
			return e
		}
	}
	e := &m.e[h&m.mask]
	e.epoch = 0 // evicted: the caller refills it
	return e
}
