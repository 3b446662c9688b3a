package placement

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// A decision is a pipeline of small stages, in the manner of Nomad's scheduler
// (feasibility, ranking, selection) and the Kubernetes framework (Filter, Score):
//
//  1. scan: every GPU goes through the policy's eval, which either rejects it with a
//     reason (counted for the operator) or turns it into a candidate with a rank key.
//     On an indexed cluster eval runs once per bucket of GPUs in equal states, and
//     its result stands for every member;
//  2. select: the best candidate (one GPU), or the best node / fewest nodes holding
//     enough candidates (several GPUs);
//  3. explain: the policy words the chosen placement.
//
// The stages share one engine per policy value, with scratch buffers reused from one
// decision to the next: nothing is allocated per GPU.

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
		return "out of reach of Slurm's first-fit shard choice"
	}
	return "ok"
}

// keyTier separates the tiers of rank keys (e.g. "share with high speed" >
// "idle GPU" > "share near the floor"); within a tier, scores stay far below it.
const keyTier = 1e6

// cand is a GPU that can take the job.
type cand struct {
	key    float64 // higher is better; ties go to the lower GPU index
	speed  float64 // predicted speed of the new job on this GPU (1 when alone)
	minRes float64 // lowest predicted speed of a resident here after joining (1 if none)
	gi     int32   // global GPU index
	node   int32
	slots  int32 // slots to take
	share  bool  // joins residents
}

// evaluator is a policy's per-GPU stage: filter and score in one call, so the cached
// state is read once. On acceptance it fills *cd (all fields) and returns rejNone;
// on rejection it leaves *cd alone. gpu is the GPU itself, for the rare evaluations
// that need the residents (a memo miss).
type evaluator interface {
	eval(gpu *GPU, st *gpuState, gi int32, r *Request, cd *cand) reject
}

type group struct{ lo, hi int32 } // candidates of one node: e.cands[lo:hi]

// engine runs the scan and select stages. It is not safe for concurrent use.
type engine struct {
	cands   []cand
	out     []cand
	tmp     []cand // one node's candidates
	nodeCnt []int32
	best    []cand // the best node's chosen candidates
	bres    []bucketResult
	groups  []group
	rejects [nReject]int
	scanned int
	steered steer // the last decision's first-fit shard count, for its reason
}

// steer records a single-GPU decision whose slots were raised so that Slurm's
// first-fit shard choice lands on the chosen GPU.
type steer struct {
	want, k int32
	on      bool
}

// filter is the feasibility stage every policy shares before its own judgment:
// today Slurm reachability (a single-GPU request on a first-fit cluster cannot use
// a hidden GPU). Slots, memory and the co-runner limit follow in shareFeasible.
func filter(st *gpuState, r *Request) reject {
	if st.hidden && r.GPUs == 1 {
		return rejUnreachable
	}
	return rejNone
}

// scan evaluates every GPU of an uncached cluster (a literal never indexed), from
// summaries computed now. With one GPU wanted it keeps only the best candidate;
// with several it collects all of them (in GPU order, so grouped by node). It is
// also the reference the bucketed stages must agree with (see the tests).
func (e *engine) scan(c *Cluster, r *Request, ev evaluator, collect bool) (best cand, found bool) {
	e.cands = e.cands[:0]
	e.rejects = [nReject]int{}
	var (
		cd cand
		gi int32
	)
	ff := c.Reach == ReachFirstFit
	for n := range c.Nodes {
		gpus := c.Nodes[n].GPUs
		highest := int32(0)
		for g := range gpus {
			st := summarize(&gpus[g], int32(n), nil)
			st.hidden = ff && hiddenFirstFit(st.free(), highest)
			highest = max(highest, st.free())
			why := filter(&st, r)
			if why == rejNone {
				why = ev.eval(&gpus[g], &st, gi, r, &cd)
			}
			if why != rejNone {
				e.rejects[why]++
			} else {
				if collect {
					e.cands = append(e.cands, cd)
				}
				if !found || cd.key > best.key {
					best, found = cd, true
				}
			}
			gi++
		}
	}
	e.scanned = int(gi)
	return best, found
}

// scanBuckets is scan for one GPU on an indexed cluster: it evaluates each bucket
// of equal GPUs once, on its lowest GPU, and counts rejections for all its members.
// Since GPUs in a bucket differ only in their index, and ties go to the lowest
// index, it chooses exactly what scan would, in O(distinct states).
func (e *engine) scanBuckets(c *Cluster, r *Request, ev evaluator) (best cand, found bool) {
	e.cands = e.cands[:0]
	e.rejects = [nReject]int{}
	ix := c.ix
	var cd cand
	for bi := range ix.buckets {
		m := ix.buckets[bi].members
		if len(m) == 0 {
			continue
		}
		gi := m[0]
		st := &ix.gpus[gi]
		gpu := &c.Nodes[st.node].GPUs[gi-ix.nodeOff[st.node]]
		why := filter(st, r)
		if why == rejNone {
			why = ev.eval(gpu, st, gi, r, &cd)
		}
		if why != rejNone {
			e.rejects[why] += len(m)
			continue
		}
		if !found || better(&cd, &best) {
			best, found = cd, true
		}
	}
	e.scanned = len(ix.gpus)
	return best, found
}

// evalBuckets evaluates each bucket of an indexed cluster once, on its lowest GPU,
// into e.bres, counts the rejections for all members, and returns the number of
// acceptable GPUs.
func (e *engine) evalBuckets(c *Cluster, r *Request, ev evaluator) int {
	ix := c.ix
	e.rejects = [nReject]int{}
	e.scanned = len(ix.gpus)
	if cap(e.bres) < len(ix.buckets) {
		e.bres = make([]bucketResult, len(ix.buckets))
	}
	e.bres = e.bres[:len(ix.buckets)]
	ok := 0
	for bi := range ix.buckets {
		res := &e.bres[bi]
		m := ix.buckets[bi].members
		if len(m) == 0 {
			res.why = rejNone
			continue
		}
		gi := m[0]
		st := &ix.gpus[gi]
		gpu := &c.Nodes[st.node].GPUs[gi-ix.nodeOff[st.node]]
		if res.why = filter(st, r); res.why == rejNone {
			res.why = ev.eval(gpu, st, gi, r, &res.cd)
		}
		if res.why != rejNone {
			e.rejects[res.why] += len(m)
		} else {
			ok += len(m)
		}
	}
	return ok
}

// scanCollect is scan collecting every candidate on an indexed cluster: each
// bucket is evaluated once, then every GPU takes its bucket's result (with its own
// index and node), so the per-GPU work is a few loads.
func (e *engine) scanCollect(c *Cluster, r *Request, ev evaluator) {
	e.evalBuckets(c, r, ev)
	e.collect(c)
}

// collect turns the bucket results into the candidates of every GPU, in order.
func (e *engine) collect(c *Cluster) {
	ix := c.ix
	e.cands = e.cands[:0]
	for gi, bi := range ix.gpuBucket {
		res := &e.bres[bi]
		if res.why != rejNone {
			continue
		}
		cd := res.cd
		cd.gi, cd.node = int32(gi), ix.gpus[gi].node
		e.cands = append(e.cands, cd)
	}
}

// pickUniform draws one acceptable GPU uniformly (one draw per decision): the
// k-th acceptable GPU in cluster order, on cached and uncached clusters alike.
func (e *engine) pickUniform(c *Cluster, r *Request, ev evaluator, draw *rand.Rand) (cand, bool) {
	if !c.indexed() {
		e.scan(c, r, ev, true)
		if len(e.cands) == 0 {
			return cand{}, false
		}
		return e.cands[draw.IntN(len(e.cands))], true
	}
	n := e.evalBuckets(c, r, ev)
	if n == 0 {
		return cand{}, false
	}
	k := draw.IntN(n)
	ix := c.ix
	for gi, bi := range ix.gpuBucket {
		res := &e.bres[bi]
		if res.why != rejNone {
			continue
		}
		if k == 0 {
			cd := res.cd
			cd.gi, cd.node = int32(gi), ix.gpus[gi].node
			return cd, true
		}
		k--
	}
	return cand{}, false // unreachable: n counted the acceptable GPUs
}

type bucketResult struct {
	cd  cand
	why reject
}

// better orders candidates: higher key, then lower GPU index.
func better(a, b *cand) bool {
	if a.key != b.key {
		return a.key > b.key
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

// selectMulti picks want GPUs from the collected candidates: all on one node when a
// node has enough (the node whose worst chosen GPU ranks best, since a multi-GPU job
// runs at the pace of its slowest GPU), otherwise on the fewest nodes (largest groups
// first). It returns the chosen candidates, best node first, or nil.
func (e *engine) selectMulti(want int) []cand {
	if len(e.cands) < want {
		return nil
	}
	e.groups = e.groups[:0]
	for lo := 0; lo < len(e.cands); {
		hi := lo
		for hi < len(e.cands) && e.cands[hi].node == e.cands[lo].node {
			hi++
		}
		sortGroup(e.cands[lo:hi])
		e.groups = append(e.groups, group{int32(lo), int32(hi)})
		lo = hi
	}
	bestG := -1
	for i, g := range e.groups {
		if int(g.hi-g.lo) < want {
			continue
		}
		if bestG < 0 || better(&e.cands[g.lo+int32(want)-1], &e.cands[e.groups[bestG].lo+int32(want)-1]) {
			bestG = i
		}
	}
	if bestG >= 0 {
		g := e.groups[bestG]
		return e.cands[g.lo : g.lo+int32(want)]
	}
	// Spread: repeatedly take the largest remaining node (ties: the better best GPU,
	// then the lower node).
	e.out = e.out[:0]
	for len(e.out) < want {
		pick := -1
		for i, g := range e.groups {
			if g.hi <= g.lo {
				continue
			}
			if pick < 0 {
				pick = i
				continue
			}
			p := e.groups[pick]
			if n, m := g.hi-g.lo, p.hi-p.lo; n > m || (n == m && better(&e.cands[g.lo], &e.cands[p.lo])) {
				pick = i
			}
		}
		g := &e.groups[pick]
		take := min(int(g.hi-g.lo), want-len(e.out))
		e.out = append(e.out, e.cands[g.lo:g.lo+int32(take)]...)
		g.lo = g.hi // consumed
	}
	return e.out
}

// decisionFor builds the Decision for the chosen candidates. On a first-fit cluster
// a single-GPU placement takes the shard count that makes Slurm land on its GPU.
func (e *engine) decisionFor(c *Cluster, chosen []cand) Decision {
	d := Decision{Placement: make([]Slot, len(chosen)), PredictedSpeed: 1, MinResidentSpeed: 1, Action: ActionExclusive}
	e.steered = steer{}
	for i, cd := range chosen {
		n, g := c.locateGlobal(cd.gi)
		slots := cd.slots
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
			st := summarize(&gpus[j], int32(n), nil)
			low = max(low, st.free()+1)
		}
		st := summarize(&gpus[g], int32(n), nil)
		free = st.free()
	}
	if low > free { // not reached: the reachability filter refused such GPUs
		return want
	}
	return min(max(want, low), free)
}

// steerNote words a first-fit shard count for the reason ("" when none).
func (e *engine) steerNote(c *Cluster, d *Decision) string {
	if !e.steered.on || len(d.Placement) != 1 {
		return ""
	}
	s := d.Placement[0]
	return fmt.Sprintf("; %d shards instead of %d so that Slurm's first-fit choice lands on gpu%d", e.steered.k, e.steered.want, c.Nodes[s.Node].GPUs[s.GPU].Index)
}

// gpuName names a GPU for a reason: node name (sanitized: it comes from outside)
// and GPU index.
func gpuName(c *Cluster, n, g int) string {
	return fmt.Sprintf("%s/gpu%d", profile.Sanitize(c.Nodes[n].Name), c.Nodes[n].GPUs[g].Index)
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
		fmt.Fprintf(b, " %s (%s, %s)", profile.Sanitize(res.JobID), tag, profile.Sanitize(string(classOf(res.Class, res.Profile))))
	}
}

// waitReason words why no placement was found, with the per-reason GPU counts.
func (e *engine) waitReason(policy string, r *Request, found int) string {
	var b strings.Builder
	b.Grow(256)
	var num [20]byte
	fmt.Fprintf(&b, "%s: wait: job %s needs %d GPU(s), ", policy, profile.Sanitize(r.JobID), r.GPUs)
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

// place runs scan and select for any evaluator; the caller words the reason.
// With draw set (the random baseline), a single GPU is drawn uniformly among the
// acceptable ones, and for several GPUs every acceptable GPU, in cluster order, gets
// a rank key drawn from it instead of the evaluator's.
func (e *engine) place(c *Cluster, r *Request, ev evaluator, draw *rand.Rand) ([]cand, int) {
	if r.GPUs == 1 {
		var (
			best cand
			ok   bool
		)
		switch {
		case draw != nil:
			best, ok = e.pickUniform(c, r, ev, draw)
		case c.indexed():
			best, ok = e.scanBuckets(c, r, ev)
		default:
			best, ok = e.scan(c, r, ev, false)
		}
		if !ok {
			return nil, 0
		}
		e.cands = append(e.cands[:0], best)
		return e.cands[:1], 1
	}
	if draw == nil && c.indexed() {
		return e.placeMulti(c, r, ev)
	}
	if c.indexed() {
		e.scanCollect(c, r, ev)
	} else {
		e.scan(c, r, ev, true)
	}
	if draw != nil {
		for i := range e.cands {
			e.cands[i].key = draw.Float64()
		}
	}
	return e.selectMulti(r.GPUs), len(e.cands)
}

// placeMulti is selectMulti on an indexed cluster without collecting every
// candidate: buckets are evaluated once, each node counts its acceptable GPUs from
// the bucket results, and only nodes with enough (or, when spreading, the largest)
// gather theirs in a small scratch. It makes selectMulti's choice, comparing in the
// same order (the tests check the two agree).
func (e *engine) placeMulti(c *Cluster, r *Request, ev evaluator) ([]cand, int) {
	want := r.GPUs
	ok := e.evalBuckets(c, r, ev)
	if ok < want {
		return nil, ok
	}
	ix := c.ix
	if cap(e.nodeCnt) < len(c.Nodes) {
		e.nodeCnt = make([]int32, len(c.Nodes))
	}
	e.nodeCnt = e.nodeCnt[:len(c.Nodes)]
	found := false
	for n := range c.Nodes {
		cnt := int32(0) // count first: most nodes lack enough, and counting reads little
		for _, bi := range ix.gpuBucket[ix.nodeOff[n]:ix.nodeOff[n+1]] {
			if e.bres[bi].why == rejNone {
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
		return e.best, ok
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
	return e.out, ok
}

// gatherNode puts node n's candidates, best first, in e.tmp.
func (e *engine) gatherNode(c *Cluster, n int) {
	ix := c.ix
	e.tmp = e.tmp[:0]
	for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
		if res := &e.bres[ix.gpuBucket[gi]]; res.why == rejNone {
			cd := res.cd
			cd.gi, cd.node = gi, int32(n)
			e.tmp = append(e.tmp, cd)
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
		if res := &e.bres[ix.gpuBucket[gi]]; res.why == rejNone {
			cd := res.cd
			cd.gi, cd.node = gi, int32(n)
			if !found || better(&cd, &best) {
				best, found = cd, true
			}
		}
	}
	return best
}
