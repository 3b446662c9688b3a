// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// A decision is a pipeline of small stages, in the manner of Nomad's scheduler
// (feasibility, ranking, selection) and the Kubernetes framework (Filter, Score):
//
//  1. filter: what every policy requires of a GPU, the same for all:
//     Slurm can reach it, and a busy GPU passes the sharing rules (or, for a policy
//     that never shares, is refused as busy). A refusal is counted by reason.
//  2. score (the policy's scorer): the policy's own judgment of a feasible GPU, a
//     candidate with a rank key, or a refusal by its own rule (a floor, a threshold).
//  3. select: one path for every policy: the best candidate for one GPU (or one
//     drawn uniformly), the best node / fewest nodes for several.
//  4. shard count and explanation (decisionFor, the policy's reason).
//
// Stages 1 and 2 run once per GPU *state*: the cluster's buckets of equal GPUs are
// the cache of equivalent GPUs, and a never-indexed cluster is indexed in a private
// copy first. The stages share one engine per policy value, with scratch buffers
// reused from one decision to the next: nothing is allocated per GPU.

// reject is why a GPU cannot take the job.
type reject uint8

const (
	rejNone        reject = iota
	rejBusy               // exclusive placement needs an idle GPU
	rejCoRunners          // the GPU already holds MaxCoRunners jobs
	rejSlots              // not enough free sharing slots
	rejMem                // the profiles' memory would not fit
	rejUnknown            // a job without a profile: interference cannot be judged
	rejFloor              // a job would fall below its class's speed floor
	rejThreshold          // summed SM utilization above the UtilSum threshold
	rejUnreachable        // Slurm's first-fit shard choice cannot land on it
	rejNode               // its node is not one the job may use (Request.Nodes)
	nReject
)

func (r reject) String() string {
	switch r {
	case rejBusy:
		return "busy"
	case rejCoRunners:
		return "at co-runner limit"
	case rejSlots:
		return "too few free slots"
	case rejMem:
		return "memory would not fit"
	case rejUnknown:
		return "unprofiled job"
	case rejFloor:
		return "below speed floor"
	case rejThreshold:
		return "over utilization threshold"
	case rejUnreachable:
		// Read after a count: "6 unreachable with first-fit pinning".
		return "unreachable with first-fit pinning (Slurm would give the shards to a lower GPU)"
	case rejNode:
		return "on a node the job may not use"
	}
	return "ok"
}

// keyTier separates the tiers of rank keys (e.g. "share with high speed" >
// "idle GPU" > "share near the floor"); within a tier, scores stay far below it.
const keyTier = 1e6

// cand is a GPU that can take the job.
type cand struct {
	key float64 // higher is better; ties go to the lower fit, then the lower GPU index
	// fit breaks ties of key, lower first: Co-scheML's best fit (the GPU's
	// memory, so a job that fits a small GPU leaves the large ones to jobs
	// that need them); 0 for the baselines, which keep Slurm's first fit.
	fit    float64
	speed  float64 // predicted speed of the new job on this GPU (1 when alone)
	minRes float64 // lowest predicted speed of a resident here after joining (1 if none)
	gi     int32   // global GPU index
	node   int32
	slots  int32 // slots to take
	share  bool  // joins residents
}

// scorer is a policy's stage: it judges a GPU that passed the shared filter (so a
// busy GPU already meets the sharing rules). On acceptance it fills *cd (all
// fields) and returns rejNone; on refusal by its own rule it leaves *cd alone.
// bi is the bucket evaluated (-1: none), for scores that keep results by
// bucket; gi is the GPU evaluated, the bucket's lowest eligible member. st is
// GPU gi's state but for its node and hidden flag (it may be another member's
// of the same bucket); c.gpuOf(gi) is the GPU itself, for the rare scores that
// need the residents (a memo miss), read only then.
type scorer interface {
	score(c *Cluster, st *gpuState, bi, gi int32, r *Request, cd *cand) reject
}

// engine runs the filter, score and select stages. It is not safe for concurrent use.
type engine struct {
	opts   *Options // the policy's (shared rules: co-runners, slots, memory)
	shares bool     // the policy may put a job on a busy GPU

	one           [1]cand
	out           []cand
	tmp           []cand // one node's candidates
	nodeCnt       []int32
	best          []cand // the best node's chosen candidates
	bucketResults []bucketResult
	scratch       bucketResult // one bucket's result when results are not kept
	keys          []float64    // drawn rank keys by GPU (random baseline, several GPUs)
	members       []int32      // one bucket's members on nodes the request allows
	req           *Request     // the request being placed (its node filter)
	constrained   Request      // a model or feature request with its node filter narrowed
	nodeMask      []bool       // constrained's node filter
	// shareReq, when not nil, is the request as busy GPUs see it: its profile was
	// measured on another GPU model than some nodes', which it may use alone only.
	shareReq     *Request
	ownReq       Request
	ownMask      []bool
	firstFitOnly bool // single GPU on a first-fit cluster: hidden GPUs are out
	// multiShare: a several-GPU request may share its GPUs (Options.sharesMulti).
	multiShare bool
	// spanned: the last several-GPU choice is a span (Request.SpanNodes).
	spanned    bool
	spanMasks  []uint64 // per node: the GPU indices acceptable for the span
	spanNodes  []int32
	spanOrder  []int32
	spanSorted []int32
	spanSeeds  []uint64 // the acceptable-GPU masks already tried as seeds
	spanTop    []spanPick
	rejects    [nReject]int
	scanned    int
	steered    steer // the last decision's first-fit shard count, for its reason
}

// steer records a single-GPU decision whose slots were raised so that Slurm's
// first-fit shard choice lands on the chosen GPU.
type steer struct {
	want, k int32
	on      bool
}

// evalBuckets runs the filter and score stages once per bucket of equal GPUs, on
// its lowest GPU, counts the rejections for all members, and returns the number of
// acceptable GPUs and the best candidate (each bucket's result stands for its lowest
// GPU: GPUs in a bucket differ only in their index, and ties go to the lowest).
// With keep, every bucket's result is also kept in e.bucketResults for the selections that
// need more than the best (a uniform draw, several GPUs).
func (e *engine) evalBuckets(c *Cluster, r *Request, sc scorer, keep bool) (ok int, best cand, found bool) {
	ix := c.ix
	e.rejects = [nReject]int{}
	e.scanned = len(ix.gpus)
	if keep {
		if cap(e.bucketResults) < len(ix.buckets) {
			e.bucketResults = make([]bucketResult, len(ix.buckets))
		}
		e.bucketResults = e.bucketResults[:len(ix.buckets)]
	}
	res := &e.scratch
	e.req = r
	e.firstFitOnly = r.GPUs == 1 && c.Reach == ReachFirstFit
	e.multiShare = r.GPUs > 1 && e.shares && e.opts.sharesMulti(c)
	r0 := r
	for bi := range ix.scanSummary {
		if keep {
			res = &e.bucketResults[bi]
		}
		r = r0
		if e.shareReq != nil && ix.scanSummary[bi].st.nres > 0 {
			r = e.shareReq // a busy bucket: only the nodes the job may share on
		}
		// The filter stage's reachability, per bucket: a single-GPU request on a
		// first-fit cluster can use only the bucket's open (reachable) members.
		// Without a node filter the bucket's summary says it all (one sequential
		// read per bucket); st is then the lowest member's state, and the
		// candidate's node is set below from the GPU actually evaluated.
		h := &ix.scanSummary[bi]
		st := &h.st
		var n int
		var gi, node int32
		switch {
		case r.Nodes != nil:
			// A node filter: the bucket stands for its allowed members only (its
			// lowest allowed GPU is evaluated; GPUs of a bucket differ in index only).
			b := &ix.buckets[bi]
			m := b.members
			if e.firstFitOnly {
				m = b.open
			}
			e.members = e.members[:0]
			for _, gi := range m {
				if r.allows(ix.gpus[gi].node) {
					e.members = append(e.members, gi)
				}
			}
			allowed := len(e.members)
			if e.firstFitOnly { // the node filter comes first: hidden members it allows are unreachable
				allowed = 0
				for _, gi := range b.members {
					if r.allows(ix.gpus[gi].node) {
						allowed++
					}
				}
				e.rejects[rejUnreachable] += allowed - len(e.members)
			}
			e.rejects[rejNode] += len(b.members) - allowed
			if n = len(e.members); n > 0 {
				gi = e.members[0]
				st = &ix.gpus[gi]
				node = st.node
			}
		case e.firstFitOnly:
			e.rejects[rejUnreachable] += int(h.members - h.open)
			n, gi, node = int(h.open), h.firstOpen, h.openNode
		default:
			n, gi, node = int(h.members), h.first, h.st.node
		}
		if n == 0 {
			// No member the request may use: the bucket is refused (its members'
			// refusals are counted above), so the selections that read the kept
			// results never see it as acceptable.
			res.why = rejUnreachable
			if r.Nodes != nil {
				res.why = rejNode
			}
			continue
		}
		// The rest of the filter stage, the same for every policy (written out
		// here: as a call it would not inline, and this loop runs once per GPU
		// state): for a busy GPU the sharing rules, or "busy" for a policy that
		// never shares and for a several-GPU job where Slurm cannot express
		// "K shards on each of GPUs i, j" (a first-fit cluster: such a job asks
		// for whole GPUs, gres/gpu, which Slurm gives only where no shard is
		// allocated) or the site keeps such jobs whole. A several-GPU job that
		// may share judges each GPU like a one-GPU share. An idle GPU fits a
		// job alone unless it has less memory than the job's profile says it
		// uses (a smaller GPU model of a heterogeneous cluster).
		switch {
		case r.Profile != nil && r.Profile.MemUsedMiB > st.memCap:
			res.why = rejMem
		case st.nres == 0:
			res.why = rejNone
		case !e.shares || r.GPUs > 1 && !e.multiShare:
			res.why = rejBusy
		default:
			res.why = shareFeasible(e.opts, st, r)
		}
		// The score stage: the policy's own judgment of a feasible GPU.
		if res.why == rejNone {
			res.why = sc.score(c, st, int32(bi), gi, r, &res.cd)
		}
		if res.why != rejNone {
			e.rejects[res.why] += n
			continue
		}
		res.cd.node = node // st may be another member's state: the same but for node
		ok += n
		if !found || better(&res.cd, &best) {
			best, found = res.cd, true
		}
	}
	return ok, best, found
}

// pickUniform draws one acceptable GPU uniformly (one draw per decision, from the
// n acceptable ones): the k-th acceptable GPU in cluster order.
func (e *engine) pickUniform(c *Cluster, n int, draw *rand.Rand) cand {
	k := draw.IntN(n)
	ix := c.ix
	for gi, bi := range ix.gpuBucket {
		res := &e.bucketResults[bi]
		if res.why != rejNone || (e.firstFitOnly && ix.gpus[gi].hidden) || !e.reqAt(ix, int32(gi)).allows(ix.gpus[gi].node) {
			continue
		}
		if k == 0 {
			cd := res.cd
			cd.gi, cd.node = int32(gi), ix.gpus[gi].node
			return cd
		}
		k--
	}
	return cand{} // unreachable: n counted the acceptable GPUs
}

type bucketResult struct {
	cd  cand
	why reject
}

// better orders candidates: higher key, then lower fit, then lower GPU index.
func better(a, b *cand) bool {
	if a.key != b.key {
		return a.key > b.key
	}
	if a.fit != b.fit {
		return a.fit < b.fit
	}
	return a.gi < b.gi
}

// sortGroup sorts one node's candidates best first (insertion sort: a node has few GPUs).
func sortGroup(cs []cand) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && better(&cs[j], &cs[j-1]); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// decisionFor builds the Decision for the chosen candidates. On a first-fit cluster
// a single-GPU placement takes the shard count that makes Slurm land on its GPU.
func (e *engine) decisionFor(c *Cluster, chosen []cand) Decision {
	d := Decision{Placement: make([]Slot, len(chosen)), PredictedSpeed: 1, MinResidentSpeed: 1, Action: ActionExclusive}
	e.steered = steer{}
	// A several-GPU job on one node that may share takes the same K slots on
	// each GPU (K shards of each GPU's Type); spread over nodes, or where it
	// may not share, whole GPUs (gres/gpu: Slurm lets nothing join them).
	perGPU := int32(0)
	if len(chosen) > 1 && e.multiShare && (e.spanned || oneNode(chosen)) {
		perGPU = chosen[0].slots
		for _, cd := range chosen[1:] {
			perGPU = min(perGPU, cd.slots)
		}
	}
	for i, cd := range chosen {
		n, g := c.locateGlobal(cd.gi)
		slots := cd.slots
		if len(chosen) > 1 {
			slots = perGPU
			if slots == 0 {
				slots = int32(c.Nodes[n].GPUs[g].Slots)
			}
		}
		if c.Reach == ReachFirstFit && len(chosen) == 1 {
			if k := steerSlots(c, n, g, slots); k != slots {
				e.steered = steer{want: slots, k: k, on: true}
				slots = k
			}
		}
		d.Placement[i] = Slot{Node: n, GPU: g, Slots: int(slots)}
		d.PredictedSpeed = min(d.PredictedSpeed, cd.speed)
		d.MinResidentSpeed = min(d.MinResidentSpeed, cd.minRes)
		if cd.share {
			d.Action = ActionShare
		}
	}
	return d
}

// oneNode says whether the candidates are all on one node.
func oneNode(cs []cand) bool {
	for _, cd := range cs[1:] {
		if cd.node != cs[0].node {
			return false
		}
	}
	return true
}

// steerSlots is the shard count closest to want that makes Slurm 22.05's first-fit
// allocator pick GPU g of node n: more than the free slots of every lower GPU, at
// most g's own. The filter admitted g, so that range is not empty; want itself fits
// (the policies checked), so the result is want whenever no lower GPU has as many
// free slots.
func steerSlots(c *Cluster, n, g int, want int32) int32 {
	low, free := int32(1), int32(0)
	if c.indexed() {
		off := c.ix.nodeOff[n]
		for j := int32(0); j < int32(g); j++ {
			low = max(low, c.ix.gpus[off+j].free()+1)
		}
		free = c.ix.gpus[off+int32(g)].free()
	} else {
		gpus := c.Nodes[n].GPUs
		for j := 0; j < g; j++ {
			st := summarize(&gpus[j], int32(n), c.Nodes[n].Model, nil)
			low = max(low, st.free()+1)
		}
		st := summarize(&gpus[g], int32(n), c.Nodes[n].Model, nil)
		free = st.free()
	}
	if low > free { // not reached: the reachability filter refused such GPUs
		return want
	}
	return min(max(want, low), free)
}

// writeSteerNote appends the words for a first-fit shard count to the reason
// (nothing when none): appends, the same words as "; %d shards instead of %d
// so that Slurm's first-fit choice lands on gpu%d".
func (e *engine) writeSteerNote(b *strings.Builder, c *Cluster, d *Decision) {
	if !e.steered.on || len(d.Placement) != 1 {
		return
	}
	s := d.Placement[0]
	var num [20]byte
	b.WriteString("; ")
	b.Write(strconv.AppendInt(num[:0], int64(e.steered.k), 10))
	b.WriteString(" shards instead of ")
	b.Write(strconv.AppendInt(num[:0], int64(e.steered.want), 10))
	b.WriteString(" so that Slurm's first-fit choice lands on gpu")
	b.Write(strconv.AppendInt(num[:0], int64(c.Nodes[s.Node].GPUs[s.GPU].Index), 10))
}

// gpuName names a GPU for a reason: node name (sanitized: it comes from outside)
// and GPU index.
func gpuName(c *Cluster, n, g int) string {
	var b strings.Builder
	writeGPUName(&b, c, n, g)
	return b.String()
}

// writeGPUName appends gpuName's words to b.
func writeGPUName(b *strings.Builder, c *Cluster, n, g int) {
	var num [20]byte
	b.WriteString(profile.Sanitize(c.Nodes[n].Name))
	b.WriteString("/gpu")
	b.Write(strconv.AppendInt(num[:0], int64(c.Nodes[n].GPUs[g].Index), 10))
}

// describeResidents lists a GPU's residents as `job 12 (resnet18-bs32, train)`.
func describeResidents(b *strings.Builder, gpu *GPU) {
	for i, res := range gpu.Residents {
		if i > 0 {
			b.WriteString(", ")
		}
		tag := "unprofiled"
		if res.Profile != nil {
			tag = profile.Sanitize(res.Profile.Tag)
		}
		if res.Kind == Reserved {
			b.WriteString("queued decision") // written apart: a string in Fprintf's args allocates
		} else {
			b.WriteString("job")
		}
		b.WriteByte(' ')
		b.WriteString(profile.Sanitize(res.JobID))
		b.WriteString(" (")
		b.WriteString(tag)
		b.WriteString(", ")
		b.WriteString(profile.Sanitize(string(classOf(res.Class, res.Profile))))
		b.WriteByte(')')
	}
}

// waitReason words why no placement was found, with the per-reason GPU counts.
func (e *engine) waitReason(policy string, r *Request, found int) string {
	var b strings.Builder
	b.Grow(256)
	var num [20]byte
	b.WriteString(policy) // no fmt: waits are the common answer of a full cluster
	b.WriteString(": wait: job ")
	b.WriteString(profile.Sanitize(r.JobID))
	b.WriteString(" needs ")
	b.Write(strconv.AppendInt(num[:0], int64(r.GPUs), 10))
	b.WriteString(" GPU(s), ")
	b.Write(strconv.AppendInt(num[:0], int64(found), 10))
	b.WriteString(" of ")
	b.Write(strconv.AppendInt(num[:0], int64(e.scanned), 10))
	b.WriteString(" GPUs acceptable")
	e.rejectSummary(&b, " (")
	return b.String()
}

// rejectSummary appends the per-reason counts of rejected GPUs, if any, after
// prefix and closes with ")" when prefix opened one.
func (e *engine) rejectSummary(b *strings.Builder, prefix string) {
	sep := prefix
	var num [20]byte // counts grow with the cluster: format them without boxing
	for why := rejNone + 1; why < nReject; why++ {
		if n := e.rejects[why]; n > 0 {
			b.WriteString(sep)
			b.Write(strconv.AppendInt(num[:0], int64(n), 10))
			b.WriteByte(' ')
			b.WriteString(why.String())
			sep = ", "
		}
	}
	if sep == ", " && strings.HasSuffix(prefix, "(") {
		b.WriteString(")")
	}
}

// badRequest returns a wait decision for a request no cluster can satisfy, or ok.
func badRequest(policy string, c *Cluster, r *Request) (Decision, bool) {
	switch total := c.NumGPUs(); {
	case r.GPUs < 1:
		return Decision{Action: ActionWait, PredictedSpeed: 0, MinResidentSpeed: 1,
			Reason: fmt.Sprintf("%s: wait: job %s asks for %d GPUs, want at least 1", policy, profile.Sanitize(r.JobID), r.GPUs)}, true
	case r.GPUs > total:
		return Decision{Action: ActionWait, PredictedSpeed: 0, MinResidentSpeed: 1,
			Reason: fmt.Sprintf("%s: wait: job %s asks for %d GPUs, the cluster has %d", policy, profile.Sanitize(r.JobID), r.GPUs, total)}, true
	}
	return Decision{}, false
}

// constrain returns r with its node filter narrowed to the nodes that meet its
// model and feature constraints (a copy in the engine's scratch: r is the caller's).
func (e *engine) constrain(c *Cluster, r *Request) *Request {
	e.constrained = *r
	e.nodeMask = resize(e.nodeMask, len(c.Nodes))
	for n := range c.Nodes {
		e.nodeMask[n] = r.allows(int32(n)) && c.Nodes[n].admits(r)
	}
	e.constrained.Nodes = e.nodeMask
	return &e.constrained
}

// ownModel is r seen by busy GPUs when its profile names a GPU model and some
// node has another (named) one: those nodes are left out, so the job shares only
// on its profile's model (or on nodes of unnamed model) and runs alone elsewhere,
// where its profile says nothing reliable about how it and its co-runners would
// slow down. nil when the rule leaves every node.
func (e *engine) ownModel(c *Cluster, r *Request) *Request {
	want := r.Profile.MeasuredOn()
	if want == "" || r.GPUs > 1 && !(e.shares && e.opts.sharesMulti(c)) || !c.ix.models {
		return nil // several GPUs kept whole: never shared
	}
	foreign := false
	for n := range c.Nodes {
		if m := c.Nodes[n].Model; m != "" && m != want {
			foreign = true
			break
		}
	}
	if !foreign {
		return nil
	}
	e.ownReq = *r
	e.ownMask = resize(e.ownMask, len(c.Nodes))
	for n := range c.Nodes {
		m := c.Nodes[n].Model
		e.ownMask[n] = r.allows(int32(n)) && (m == "" || m == want)
	}
	e.ownReq.Nodes = e.ownMask
	return &e.ownReq
}

// reqAt is the request as GPU gi sees it (shareReq on a busy GPU).
func (e *engine) reqAt(ix *index, gi int32) *Request {
	if e.shareReq != nil && ix.gpus[gi].nres > 0 {
		return e.shareReq
	}
	return e.req
}

// place runs filter, score and select for any scorer; the caller words the reason.
// It returns the chosen candidates (nil: none) and the count of acceptable GPUs.
// With draw set (the random baseline), a single GPU is drawn uniformly among the
// acceptable ones, and for several GPUs every acceptable GPU, in cluster order, gets
// a rank key drawn from it instead of the scorer's.
func (e *engine) place(c *Cluster, r *Request, sc scorer, draw *rand.Rand) ([]cand, int) {
	if !c.indexed() {
		// A literal never indexed (a state file, a test): decide on an indexed copy,
		// so there is one path; Place must not change the caller's cluster.
		c = c.Clone()
	}
	if r.constrained() {
		r = e.constrain(c, r)
	}
	e.shareReq = e.ownModel(c, r)
	e.spanned = false // set by placeMulti for this decision only
	ok, best, found := e.evalBuckets(c, r, sc, draw != nil || r.GPUs > 1)
	if r.GPUs == 1 {
		if !found {
			return nil, 0
		}
		if draw != nil {
			best = e.pickUniform(c, ok, draw)
		}
		e.one[0] = best
		return e.one[:], ok
	}
	e.keys = e.keys[:0]
	if draw != nil {
		// One draw per acceptable GPU, in cluster order, also when too few are
		// acceptable: the random baseline's sequence of draws is part of its
		// reproducible decisions.
		if cap(e.keys) < len(c.ix.gpus) {
			e.keys = make([]float64, len(c.ix.gpus))
		}
		e.keys = e.keys[:len(c.ix.gpus)]
		for gi, bi := range c.ix.gpuBucket {
			if e.bucketResults[bi].why == rejNone && r.allows(c.ix.gpus[gi].node) {
				e.keys[gi] = draw.Float64()
			}
		}
	}
	if ok < r.GPUs {
		return nil, ok
	}
	return e.placeMulti(c, r.GPUs), ok
}

// placeMulti picks want GPUs from the bucket results (at least want acceptable):
// all on one node when a node has enough (the node whose worst chosen GPU ranks
// best, since a multi-GPU job runs at the pace of its slowest GPU), otherwise on the
// fewest nodes. Each node counts its acceptable GPUs from the bucket results, and
// only nodes with enough (or, when spreading, the largest) gather theirs in a small
// scratch. It returns the chosen candidates, best node first.
func (e *engine) placeMulti(c *Cluster, want int) []cand {
	ix := c.ix
	if cap(e.nodeCnt) < len(c.Nodes) {
		e.nodeCnt = make([]int32, len(c.Nodes))
	}
	e.nodeCnt = e.nodeCnt[:len(c.Nodes)]
	if span := e.req.SpanNodes; span > 1 {
		if e.multiShare && want%span == 0 {
			if out := e.placeSpan(c, span, want/span); out != nil {
				e.spanned = true
				return out
			}
		}
		// Whole idle GPUs, as Slurm gives the job's own request.
		return e.spreadIdle(c, want)
	}
	found := false
	for n := range c.Nodes {
		cnt := int32(0) // count first: most nodes lack enough, and counting reads little
		if !e.req.allows(int32(n)) {
			e.nodeCnt[n] = 0 // a node the job may not use has no candidates
			continue
		}
		for _, bi := range ix.gpuBucket[ix.nodeOff[n]:ix.nodeOff[n+1]] {
			if e.bucketResults[bi].why == rejNone {
				cnt++
			}
		}
		e.nodeCnt[n] = cnt
		if int(cnt) < want {
			continue
		}
		e.gatherNode(c, n)
		if !found || better(&e.tmp[want-1], &e.best[want-1]) {
			e.best = append(e.best[:0], e.tmp[:want]...)
			found = true
		}
	}
	if found {
		return e.best
	}
	if e.req.OneNode {
		return nil
	}
	if e.multiShare {
		// Over several nodes, whole idle GPUs: the plugin leaves a multi-node
		// job of several GPUs per node to Slurm (whole GPUs of its choice).
		return e.spreadIdle(c, want)
	}
	// Spread: the node with the most acceptable GPUs first (ties: the better best
	// GPU, then the lower node), taking its best GPUs.
	e.out = e.out[:0]
	for len(e.out) < want {
		most := int32(0)
		for _, k := range e.nodeCnt {
			most = max(most, k)
		}
		pick := -1
		var pickBest cand
		for n, k := range e.nodeCnt {
			if k != most {
				continue
			}
			b := e.bestOfNode(c, n)
			if pick < 0 || better(&b, &pickBest) {
				pick, pickBest = n, b
			}
		}
		e.gatherNode(c, pick)
		take := min(len(e.tmp), want-len(e.out))
		e.out = append(e.out, e.tmp[:take]...)
		e.nodeCnt[pick] = 0 // consumed
	}
	return e.out
}

// candAt is GPU gi's candidate from its bucket's result: its own index and node,
// and its drawn key when the keys are drawn.
func (e *engine) candAt(res *bucketResult, gi int32, n int) cand {
	cd := res.cd
	cd.gi, cd.node = gi, int32(n)
	if len(e.keys) > 0 {
		cd.key = e.keys[gi]
	}
	return cd
}

// gatherNode puts node n's candidates, best first, in e.tmp.
func (e *engine) gatherNode(c *Cluster, n int) {
	ix := c.ix
	e.tmp = e.tmp[:0]
	for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
		if res := &e.bucketResults[ix.gpuBucket[gi]]; res.why == rejNone {
			e.tmp = append(e.tmp, e.candAt(res, gi, n))
		}
	}
	sortGroup(e.tmp)
}

// bestOfNode is node n's best candidate (the node has at least one).
func (e *engine) bestOfNode(c *Cluster, n int) cand {
	ix := c.ix
	var best cand
	found := false
	for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
		if res := &e.bucketResults[ix.gpuBucket[gi]]; res.why == rejNone {
			cd := e.candAt(res, gi, n)
			if !found || better(&cd, &best) {
				best, found = cd, true
			}
		}
	}
	return best
}

// spreadIdle picks want idle GPUs over the fewest nodes (the node with the most
// idle acceptable GPUs first, ties to the lower node), or nil when too few are
// idle: a several-GPU job spread over nodes never shares.
func (e *engine) spreadIdle(c *Cluster, want int) []cand {
	ix := c.ix
	idle := 0
	for n := range c.Nodes {
		k := int32(0)
		if e.req.allows(int32(n)) {
			for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
				if res := &e.bucketResults[ix.gpuBucket[gi]]; res.why == rejNone && !res.cd.share {
					k++
				}
			}
		}
		e.nodeCnt[n] = k
		idle += int(k)
	}
	if idle < want {
		return nil
	}
	e.out = e.out[:0]
	for len(e.out) < want {
		pick, most := -1, int32(0)
		for n, k := range e.nodeCnt {
			if k > most {
				pick, most = n, k
			}
		}
		e.gatherNode(c, pick)
		for _, cd := range e.tmp {
			if !cd.share && len(e.out) < want {
				e.out = append(e.out, cd)
			}
		}
		e.nodeCnt[pick] = 0
	}
	return e.out
}

// maxSpanSeeds bounds the nodes a span search starts from (one per distinct set
// of acceptable GPUs, those with the most first), so that a multi-node decision
// on a large cluster stays within maxSpanSeeds passes over the nodes.
const maxSpanSeeds = 16

// spanSlack is how many nodes beyond the span's own a seed's pass keeps as
// alternatives, for when adding a node narrows the common GPUs below per.
const spanSlack = 8

// spanPick is a node and the GPU indices it keeps in common with a seed.
type spanPick struct {
	n int32
	k int
}

// placeSpan picks per GPUs on each of span nodes at the same GPU indices, every
// one acceptable (idle, or shared within the floors), or nil. A span runs at its
// slowest GPU's pace, so spans are compared by their worst chosen GPU. From each
// seed node (the nodes with at least per acceptable GPUs, the most first, one per
// distinct set of them, at most maxSpanSeeds) it adds the nodes that keep the
// most acceptable indices in common, then takes the indices whose worst GPU over
// the chosen nodes ranks best. GPU indices of 64 and more are never spanned.
func (e *engine) placeSpan(c *Cluster, span, per int) []cand {
	ix := c.ix
	e.spanMasks = resize(e.spanMasks, len(c.Nodes))
	e.spanOrder = e.spanOrder[:0]
	for n := range c.Nodes {
		var m uint64
		if e.req.allows(int32(n)) {
			for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
				idx := c.Nodes[n].GPUs[gi-ix.nodeOff[n]].Index
				if idx >= 0 && idx < 64 && e.bucketResults[ix.gpuBucket[gi]].why == rejNone {
					m |= 1 << uint(idx)
				}
			}
		}
		if bits.OnesCount64(m) < per {
			m = 0
		}
		e.spanMasks[n] = m
		if m != 0 {
			e.spanOrder = append(e.spanOrder, int32(n))
		}
	}
	if len(e.spanOrder) < span {
		return nil
	}
	// Seeds: the nodes with the most acceptable GPUs first (ties: the lower
	// node), by a counting sort on the count.
	var at [66]int32
	for _, n := range e.spanOrder {
		at[64-bits.OnesCount64(e.spanMasks[n])+1]++
	}
	for k := 1; k < len(at); k++ {
		at[k] += at[k-1]
	}
	e.spanSorted = resize(e.spanSorted, len(e.spanOrder))
	for _, n := range e.spanOrder {
		k := 64 - bits.OnesCount64(e.spanMasks[n])
		e.spanSorted[at[k]] = n
		at[k]++
	}
	e.spanOrder, e.spanSorted = e.spanSorted, e.spanOrder
	found := false
	var bestWorst cand
	e.spanSeeds = e.spanSeeds[:0]
	for _, s := range e.spanOrder {
		if len(e.spanSeeds) == maxSpanSeeds {
			break
		}
		common := e.spanMasks[s]
		if slices.Contains(e.spanSeeds, common) {
			continue // a node with the same acceptable GPUs was a seed already
		}
		e.spanSeeds = append(e.spanSeeds, common)
		// One pass: the nodes keeping the most indices in common with the seed
		// (ties: the earlier seed order), at most span-1+spanSlack of them; then add them
		// in that order while per indices stay common.
		e.spanTop = e.spanTop[:0]
		keep := span - 1 + spanSlack
		for _, n := range e.spanOrder {
			k := bits.OnesCount64(common & e.spanMasks[n])
			if n == s || k < per || len(e.spanTop) == keep && k <= e.spanTop[keep-1].k {
				continue
			}
			i := len(e.spanTop)
			if i < keep {
				e.spanTop = append(e.spanTop, spanPick{})
			} else {
				i--
			}
			for ; i > 0 && e.spanTop[i-1].k < k; i-- {
				e.spanTop[i] = e.spanTop[i-1]
			}
			e.spanTop[i] = spanPick{n: n, k: k}
		}
		e.spanNodes = append(e.spanNodes[:0], s)
		for _, t := range e.spanTop {
			if len(e.spanNodes) == span {
				break
			}
			if bits.OnesCount64(common&e.spanMasks[t.n]) >= per {
				e.spanNodes = append(e.spanNodes, t.n)
				common &= e.spanMasks[t.n]
			}
		}
		if len(e.spanNodes) < span {
			continue
		}
		// Each common index's worst GPU over the chosen nodes; the best per of them.
		e.tmp = e.tmp[:0]
		for idx := 0; idx < 64; idx++ {
			if common&(1<<uint(idx)) == 0 {
				continue
			}
			var worst cand
			for k, n := range e.spanNodes {
				cd := e.spanCand(c, int(n), idx)
				if k == 0 || better(&worst, &cd) {
					worst = cd
				}
			}
			worst.gi = int32(idx) // ranks the index; the GPUs are taken below
			e.tmp = append(e.tmp, worst)
		}
		sortGroup(e.tmp)
		if !found || better(&e.tmp[per-1], &bestWorst) {
			found, bestWorst = true, e.tmp[per-1]
			e.best = e.best[:0]
			for _, n := range e.spanNodes {
				for _, w := range e.tmp[:per] {
					e.best = append(e.best, e.spanCand(c, int(n), int(w.gi)))
				}
			}
		}
	}
	if !found {
		return nil
	}
	return e.best
}

// spanCand is node n's candidate of GPU index idx (acceptable: in its mask).
func (e *engine) spanCand(c *Cluster, n, idx int) cand {
	ix := c.ix
	for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
		if c.Nodes[n].GPUs[gi-ix.nodeOff[n]].Index == idx {
			return e.candAt(&e.bucketResults[ix.gpuBucket[gi]], gi, n)
		}
	}
	return cand{}
}
