// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Default GPU sharing settings (Slurm shards per GPU and jobs per GPU).
const (
	DefaultSlots        = 4
	DefaultMaxCoRunners = 2
)

// index holds the caches a decision reads instead of the residents themselves:
// one flat gpuState per GPU, the buckets of GPUs in equal states (a decision
// evaluates states, not GPUs), a job index so Remove does not walk the cluster,
// and the interning table behind the resident-set signatures.
type index struct {
	nodeOff []int32    // nodeOff[n] = global index of GPU 0 of node n; len = nodes+1
	gpus    []gpuState // by global GPU index
	idle    int        // GPUs without residents
	models  bool       // some node names its GPU model (Node.Model)
	jobs    map[string]jobLoc
	intern  *Interner

	// GPUs in equal states share a bucket: a single-GPU decision evaluates each
	// bucket once (on its lowest GPU) instead of every GPU. Buckets of GPUs whose
	// residents have no exact signature hold one GPU each. The index does not
	// depend on the cluster's Reach: each bucket also keeps the members Slurm's
	// first-fit allocator reaches, so a first-fit decision (a first-fit cluster,
	// or a typed one seen through WithReach) reads them instead of every member.
	buckets   []bucket
	bucketOf  map[bucketKey]int32
	freeB     []int32 // empty buckets, for reuse
	gpuBucket []int32 // bucket of each GPU
	// scanSummary is what a decision's scan reads of each bucket (by bucket index),
	// packed in one array: a decision inside slurmctld finds its data out of
	// the CPU's caches, and reading the bucket, its member list, the GPU's
	// state and its node cost a cache miss each per bucket; one sequential
	// pass over this array is prefetched instead (docs/performance-submit.md).
	scanSummary []bucketSummary
}

// bucketSummary is a bucket's summary for the scan: its lowest member's state, the
// counts of its members and open members, and the lowest of each. It is
// recomputed from the bucket whenever set changes the bucket (refreshSummary).
type bucketSummary struct {
	st        gpuState // the lowest member's state (node and hidden are its own)
	members   int32    // len(bucket.members)
	open      int32    // len(bucket.open)
	first     int32    // bucket.members[0]; -1 when empty
	firstOpen int32    // bucket.open[0]; -1 when none is open
	openNode  int32    // node of firstOpen
}

// refreshSummary recomputes bucket bi's summary (growing scanSummary to the bucket count:
// appends into memory kept across Reindex, so a rebuild allocates nothing).
func (ix *index) refreshSummary(bi int32) {
	for len(ix.scanSummary) < len(ix.buckets) {
		ix.scanSummary = append(ix.scanSummary, bucketSummary{})
	}
	b := &ix.buckets[bi]
	h := bucketSummary{members: int32(len(b.members)), open: int32(len(b.open)), first: -1, firstOpen: -1}
	if len(b.members) > 0 {
		h.first = b.members[0]
		h.st = ix.gpus[h.first]
	}
	if len(b.open) > 0 {
		h.firstOpen = b.open[0]
		h.openNode = ix.gpus[h.firstOpen].node
	}
	ix.scanSummary[bi] = h
}

// bucket is a set of GPUs in one state, as sorted global indexes; open is the
// subset first fit reaches (members not hidden), kept incrementally with it.
type bucket struct {
	key     bucketKey
	members []int32
	open    []int32
}

// bucketKey is a gpuState without its node, floats by their bits (so the key is
// comparable even for NaN); solo is the GPU index for unsignable busy GPUs, else -1.
type bucketKey struct {
	sig                     uint64
	mem, sm, memCap         uint64
	slots, used, nres, unkn int32
	solo                    int32
}

func keyOf(st *gpuState, gi int32) bucketKey {
	k := bucketKey{sig: st.sig, mem: math.Float64bits(st.mem), sm: math.Float64bits(st.sm), memCap: math.Float64bits(st.memCap),
		slots: st.slots, used: st.used, nres: st.nres, unkn: st.unknown, solo: -1}
	if st.sig == 0 && st.nres > 0 {
		k.solo = gi
	}
	return k
}

// set stores GPU gi's new state and moves it to the bucket of that state (and
// into or out of its bucket's open list when its hidden flag changes).
func (ix *index) set(gi int32, st gpuState) {
	k := keyOf(&st, gi)
	old := ix.gpuBucket[gi]
	if old >= 0 {
		wasOpen := !ix.gpus[gi].hidden
		ix.gpus[gi] = st
		b := &ix.buckets[old]
		if b.key == k {
			if wasOpen != !st.hidden {
				b.open = toggle(b.open, gi, !st.hidden)
			}
			ix.refreshSummary(old)
			return
		}
		if i, ok := slices.BinarySearch(b.members, gi); ok {
			b.members = slices.Delete(b.members, i, i+1)
		}
		if wasOpen {
			b.open = toggle(b.open, gi, false)
		}
		if len(b.members) == 0 {
			delete(ix.bucketOf, b.key)
			ix.freeB = append(ix.freeB, old)
		}
		ix.refreshSummary(old)
	}
	ix.gpus[gi] = st
	id, ok := ix.bucketOf[k]
	if !ok {
		if n := len(ix.freeB); n > 0 {
			id = ix.freeB[n-1]
			ix.freeB = ix.freeB[:n-1]
			ix.buckets[id].key = k
		} else {
			id = int32(len(ix.buckets))
			if len(ix.buckets) < cap(ix.buckets) {
				// A bucket of the previous index: keep its members' memory.
				ix.buckets = ix.buckets[:id+1]
				nb := &ix.buckets[id]
				nb.key, nb.members, nb.open = k, nb.members[:0], nb.open[:0]
			} else {
				ix.buckets = append(ix.buckets, bucket{key: k})
			}
		}
		ix.bucketOf[k] = id
	}
	b := &ix.buckets[id]
	b.members = toggle(b.members, gi, true)
	if !st.hidden {
		b.open = toggle(b.open, gi, true)
	}
	ix.gpuBucket[gi] = id
	ix.refreshSummary(id)
}

// toggle inserts (in) or deletes gi in the sorted list s. Reindex adds GPUs in
// increasing order, so its inserts are appends.
func toggle(s []int32, gi int32, in bool) []int32 {
	if n := len(s); in && (n == 0 || s[n-1] < gi) {
		return append(s, gi)
	}
	i, found := slices.BinarySearch(s, gi)
	switch {
	case in && !found:
		return slices.Insert(s, i, gi)
	case !in && found:
		return slices.Delete(s, i, i+1)
	}
	return s
}

// jobLoc lists the GPUs (global indexes) a job holds; single-GPU jobs, the common
// case, need no slice.
type jobLoc struct {
	first int32
	more  []int32
}

type internKey struct {
	p    *profile.Profile
	c    profile.Class
	span uint8 // GPUs the resident holds (spanOf); 0 for a request
}

// spanOf is a resident's GPU count as an intern key: predictions weigh a
// resident of several GPUs by their number (capped, as no node has more).
func spanOf(gpus int) uint8 { return uint8(min(max(gpus, 1), 255)) }

// gpuState is the cached summary of one GPU.
type gpuState struct {
	sig     uint64  // exact signature of the resident (profile, class) multiset; 0: none or not representable
	mem     float64 // sum of resident profiles' MemUsedMiB
	sm      float64 // sum of resident profiles' SMUtil.Mean
	memCap  float64 // GPU.MemMiB
	node    int32
	slots   int32 // GPU.Slots
	used    int32 // slots held by residents
	nres    int32 // residents
	unknown int32 // residents without a profile
	// hidden: Slurm's first-fit shard allocator cannot reach this GPU (see
	// hiddenFirstFit); kept whatever the cluster's Reach, for first-fit decisions.
	hidden bool
}

func (s *gpuState) free() int32 { return s.slots - s.used }

// hiddenFirstFit reports whether a GPU with free slots is out of reach of Slurm
// 22.05's first-fit shard allocator, given the most free slots of a lower GPU of its
// node: a request for K shards lands on the lowest GPU with K free, so this GPU is
// chosen only for a K above every lower GPU's free slots and within its own. A full
// GPU is not hidden (the slots filter rejects it anyway).
func hiddenFirstFit(free, lowerMax int32) bool { return free > 0 && free <= lowerMax }

// hideNode recomputes the hidden flags of node n's GPUs after one of them changed
// (O(GPUs of the node)); GPUs whose flag flips move into or out of their bucket's
// open list.
func (ix *index) hideNode(n int32) {
	highest := int32(0)
	for gi := ix.nodeOff[n]; gi < ix.nodeOff[n+1]; gi++ {
		st := ix.gpus[gi]
		f := st.free()
		if h := hiddenFirstFit(f, highest); h != st.hidden {
			st.hidden = h
			ix.set(gi, st)
		}
		highest = max(highest, f)
	}
}

// Signatures pack up to sigLanes interned IDs (16 bits each, sorted) into a uint64,
// so two GPUs have equal signatures exactly when their resident sets are equal.
const (
	sigLanes = 4
	maxID    = 1<<16 - 1
)

// NewCluster returns a cluster of nodes named n1..nN, each with gpusPerNode GPUs of
// memMiB MiB and slots sharing slots (DefaultSlots when slots <= 0).
func NewCluster(nodes, gpusPerNode int, memMiB float64, slots int) *Cluster {
	if slots <= 0 {
		slots = DefaultSlots
	}
	c := &Cluster{Nodes: make([]Node, nodes)}
	for n := range c.Nodes {
		c.Nodes[n].Name = fmt.Sprintf("n%d", n+1)
		c.Nodes[n].GPUs = make([]GPU, gpusPerNode)
		for g := range c.Nodes[n].GPUs {
			c.Nodes[n].GPUs[g] = GPU{Index: g, MemMiB: memMiB, Slots: slots}
		}
	}
	c.Reindex()
	return c
}

// Reindex rebuilds every cache from Nodes. Call it after changing Nodes other than
// through Apply and Remove. The caches' memory is reused: a cluster rebuilt in
// place (slurmctld rebuilds 8,192 GPUs every residency change) allocates
// nothing here, so the garbage collector is not woken inside a decision.
func (c *Cluster) Reindex() {
	ix := c.ix
	if ix == nil {
		ix = &index{jobs: make(map[string]jobLoc), bucketOf: make(map[bucketKey]int32)}
	}
	clear(ix.jobs)
	clear(ix.bucketOf)
	ix.intern, ix.idle = c.Interner, 0
	ix.buckets, ix.freeB, ix.scanSummary = ix.buckets[:0], ix.freeB[:0], ix.scanSummary[:0]
	if ix.intern == nil {
		ix.intern = NewInterner()
	}
	ix.nodeOff = resize(ix.nodeOff, len(c.Nodes)+1)
	total := 0
	ix.models = false
	for n := range c.Nodes {
		ix.nodeOff[n] = int32(total)
		total += len(c.Nodes[n].GPUs)
		ix.models = ix.models || c.Nodes[n].Model != ""
	}
	ix.nodeOff[len(c.Nodes)] = int32(total)
	ix.gpus = resize(ix.gpus, total)
	ix.gpuBucket = resize(ix.gpuBucket, total)
	for i := range ix.gpuBucket {
		ix.gpuBucket[i] = -1
	}
	gi := int32(0)
	for n := range c.Nodes {
		highest := int32(0) // most free slots of a lower GPU of the node
		for g := range c.Nodes[n].GPUs {
			gpu := &c.Nodes[n].GPUs[g]
			st := summarize(gpu, int32(n), c.Nodes[n].Model, ix)
			st.hidden = hiddenFirstFit(st.free(), highest)
			highest = max(highest, st.free())
			ix.set(gi, st)
			if len(gpu.Residents) == 0 {
				ix.idle++
			}
			for _, r := range gpu.Residents {
				ix.addJob(r.JobID, gi)
			}
			gi++
		}
	}
	c.ix = ix
}

// resize returns s with length n, reusing its memory when large enough (the
// contents are to be overwritten).
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// Clone returns a deep copy of the cluster's nodes and residents (profiles are shared:
// they are immutable) with its own caches.
func (c *Cluster) Clone() *Cluster {
	d := &Cluster{Nodes: make([]Node, len(c.Nodes)), Reach: c.Reach, Interner: c.Interner}
	for n, node := range c.Nodes {
		d.Nodes[n] = node
		d.Nodes[n].GPUs = make([]GPU, len(node.GPUs))
		for g, gpu := range node.GPUs {
			gpu.Residents = slices.Clone(gpu.Residents)
			d.Nodes[n].GPUs[g] = gpu
		}
	}
	d.Reindex()
	return d
}

// WithReach is a view of the same nodes, residents and caches as reached by r,
// for a decision whose request reaches GPUs otherwise than the cluster's (an
// update that cannot name a GPU's type). The caches do not depend on the reach
// (each bucket keeps its first-fit-reachable members), so the view costs no
// indexing and stays current as c changes; it is for decisions only (apply
// changes to c). An unindexed c is left unchanged: the view indexes its own copy.
func (c *Cluster) WithReach(r Reach) *Cluster {
	d := &Cluster{Nodes: c.Nodes, Reach: r, Interner: c.Interner}
	if c.indexed() {
		d.ix = c.ix
	} else {
		d.Reindex()
	}
	return d
}

// NumGPUs is the number of GPUs in the cluster.
func (c *Cluster) NumGPUs() int {
	if c.indexed() {
		return len(c.ix.gpus)
	}
	t := 0
	for n := range c.Nodes {
		t += len(c.Nodes[n].GPUs)
	}
	return t
}

// IdleGPUs is the number of GPUs without residents.
func (c *Cluster) IdleGPUs() int {
	if c.indexed() {
		return c.ix.idle
	}
	t := 0
	for n := range c.Nodes {
		for g := range c.Nodes[n].GPUs {
			if len(c.Nodes[n].GPUs[g].Residents) == 0 {
				t++
			}
		}
	}
	return t
}

// indexed reports whether the caches exist and match the node list's shape. Only the
// node count is checked (O(1)); a change of GPUs per node needs Reindex.
func (c *Cluster) indexed() bool {
	return c.ix != nil && len(c.ix.nodeOff) == len(c.Nodes)+1
}

func (c *Cluster) ensureIndex() {
	if !c.indexed() {
		c.Reindex()
	}
}

// Apply records decision d for request r in the cluster (the job becomes resident on
// every GPU of d.Placement) and updates the caches of those GPUs only.
// A decision to wait changes nothing.
func (c *Cluster) Apply(r *Request, d Decision) {
	if d.Action == ActionWait || len(d.Placement) == 0 {
		return
	}
	c.ensureIndex()
	ix := c.ix
	for _, s := range d.Placement {
		gpu := &c.Nodes[s.Node].GPUs[s.GPU]
		gi := ix.nodeOff[s.Node] + int32(s.GPU)
		if len(gpu.Residents) == 0 {
			ix.idle--
		}
		gpu.Residents = append(gpu.Residents, Resident{JobID: r.JobID, Profile: r.Profile, Class: r.Class, Slots: s.Slots, Kind: r.Kind, GPUs: len(d.Placement)})
		ix.setKeepHidden(gi, summarize(gpu, int32(s.Node), c.Nodes[s.Node].Model, ix))
		ix.addJob(r.JobID, gi)
		ix.hideNode(int32(s.Node))
	}
}

// setKeepHidden stores a GPU's new summary with its current hidden flag (the caller
// then runs hideNode), so a GPU whose flag does not change moves buckets once.
func (ix *index) setKeepHidden(gi int32, st gpuState) {
	st.hidden = ix.gpus[gi].hidden
	ix.set(gi, st)
}

// Remove takes job jobID off every GPU it holds. It costs O(GPUs the job holds), not
// O(cluster), and does nothing for an unknown job.
func (c *Cluster) Remove(jobID string) {
	c.ensureIndex()
	ix := c.ix
	loc, ok := ix.jobs[jobID]
	if !ok {
		return
	}
	delete(ix.jobs, jobID)
	ix.removeFrom(c, jobID, loc.first)
	for _, gi := range loc.more {
		ix.removeFrom(c, jobID, gi)
	}
}

func (ix *index) removeFrom(c *Cluster, jobID string, gi int32) {
	n := ix.gpus[gi].node
	gpu := &c.Nodes[n].GPUs[gi-ix.nodeOff[n]]
	if len(gpu.Residents) == 0 {
		return
	}
	kept := gpu.Residents[:0]
	for _, r := range gpu.Residents {
		if r.JobID != jobID {
			kept = append(kept, r)
		}
	}
	clear(gpu.Residents[len(kept):]) // drop profile pointers for the GC
	gpu.Residents = kept
	if len(kept) == 0 {
		ix.idle++
	}
	ix.setKeepHidden(gi, summarize(gpu, n, c.Nodes[n].Model, ix))
	ix.hideNode(n)
}

func (ix *index) addJob(jobID string, gi int32) {
	loc, ok := ix.jobs[jobID]
	switch {
	case !ok:
		ix.jobs[jobID] = jobLoc{first: gi}
		return
	case loc.first == gi || slices.Contains(loc.more, gi):
		return
	}
	loc.more = append(loc.more, gi)
	ix.jobs[jobID] = loc
}

// Interner numbers (profile, class) pairs for resident-set signatures. It is safe
// for concurrent use: slurmctld's background rebuild and the decisions (which add
// reservations) intern at the same time. IDs never change once given, so
// signatures from any cluster sharing one Interner are comparable. Profiles are
// keyed by pointer: share an Interner only among clusters built from one
// catalog (it keeps those profiles alive).
type Interner struct {
	mu  sync.Mutex
	ids map[internKey]uint16
}

// NewInterner returns an empty table.
func NewInterner() *Interner { return &Interner{ids: make(map[internKey]uint16)} }

// Full says whether the table can give no more IDs (then build a new one).
func (in *Interner) Full() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.ids) >= maxID-1
}

// id interns a (profile, class) pair; 0 means "not representable" (the table is full).
func (in *Interner) id(p *profile.Profile, cl profile.Class, span uint8) uint16 {
	k := internKey{p, cl, span}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.ids[k]; ok {
		return v
	}
	if len(in.ids) >= maxID-1 {
		return 0
	}
	v := uint16(len(in.ids) + 1)
	in.ids[k] = v
	return v
}

func (ix *index) id(p *profile.Profile, cl profile.Class, span uint8) uint16 {
	return ix.intern.id(p, cl, span)
}

// summarize computes a GPU's cached state from its residents. It is the only place
// the summary is computed, for the caches and for uncached clusters alike, so the two
// can never disagree. ix may be nil (no signature: predictions are not memoized).
// model is the node's GPU model: a resident whose profile was measured on another
// (named) model counts as unprofiled, so no job joins it on the strength of a
// profile that does not describe this GPU (it ran there alone, placement.md).
func summarize(g *GPU, node int32, model string, ix *index) gpuState {
	s := gpuState{node: node, slots: int32(g.Slots), memCap: g.MemMiB, nres: int32(len(g.Residents))}
	var ids [sigLanes]uint16
	sigOK := ix != nil && len(g.Residents) <= sigLanes
	for i := range g.Residents {
		r := &g.Residents[i]
		s.used += int32(r.Slots)
		if r.Profile == nil || (model != "" && r.Profile.MeasuredOn() != "" && r.Profile.MeasuredOn() != model) {
			if r.Profile != nil {
				s.mem += r.Profile.MemUsedMiB // its memory still holds
			}
			s.unknown++
			sigOK = false
			continue
		}
		s.mem += r.Profile.MemUsedMiB
		s.sm += r.Profile.SMUtil.Mean
		if sigOK {
			id := ix.id(r.Profile, classOf(r.Class, r.Profile), spanOf(r.GPUs))
			if id == 0 {
				sigOK = false
				continue
			}
			ids[i] = id
		}
	}
	if sigOK && s.nres > 0 {
		l := ids[:s.nres]
		slices.Sort(l)
		for _, id := range l {
			s.sig = s.sig<<16 | uint64(id)
		}
	}
	return s
}

// Check recomputes every cache from the residents and reports the first difference.
// It is for tests and for debugging a caller that edits Nodes by hand.
func (c *Cluster) Check() error {
	if !c.indexed() {
		return fmt.Errorf("cluster caches missing or stale: %d nodes", len(c.Nodes))
	}
	ix := c.ix
	idle, wantOpen := 0, 0
	jobs := map[string][]int32{}
	gi := int32(0)
	for n := range c.Nodes {
		if ix.nodeOff[n] != gi {
			return fmt.Errorf("node %d: cached offset %d, want %d", n, ix.nodeOff[n], gi)
		}
		highest := int32(0)
		for g := range c.Nodes[n].GPUs {
			if int(gi) >= len(ix.gpus) {
				return fmt.Errorf("cache has %d GPUs, cluster more", len(ix.gpus))
			}
			gpu := &c.Nodes[n].GPUs[g]
			want := summarize(gpu, int32(n), c.Nodes[n].Model, ix)
			want.hidden = hiddenFirstFit(want.free(), highest)
			if !want.hidden {
				wantOpen++
			}
			highest = max(highest, want.free())
			if got := ix.gpus[gi]; got != want {
				return fmt.Errorf("node %d GPU %d: cached %+v, want %+v", n, g, got, want)
			}
			b := ix.gpuBucket[gi]
			if b < 0 || int(b) >= len(ix.buckets) || ix.buckets[b].key != keyOf(&want, gi) {
				return fmt.Errorf("node %d GPU %d: in bucket %d of another state", n, g, b)
			}
			if _, ok := slices.BinarySearch(ix.buckets[b].members, gi); !ok {
				return fmt.Errorf("node %d GPU %d: missing from its bucket %d", n, g, b)
			}
			if _, ok := slices.BinarySearch(ix.buckets[b].open, gi); ok == want.hidden {
				return fmt.Errorf("node %d GPU %d: hidden %v but open list says %v", n, g, want.hidden, ok)
			}
			if len(gpu.Residents) == 0 {
				idle++
			}
			for _, r := range gpu.Residents {
				jobs[r.JobID] = append(jobs[r.JobID], gi)
			}
			gi++
		}
	}
	if int(gi) != len(ix.gpus) {
		return fmt.Errorf("cache has %d GPUs, cluster %d", len(ix.gpus), gi)
	}
	members, opens := 0, 0
	if len(ix.scanSummary) != len(ix.buckets) {
		return fmt.Errorf("scan summaries for %d buckets, %d buckets", len(ix.scanSummary), len(ix.buckets))
	}
	for i, b := range ix.buckets {
		want := bucketSummary{members: int32(len(b.members)), open: int32(len(b.open)), first: -1, firstOpen: -1}
		if len(b.members) > 0 {
			want.first, want.st = b.members[0], ix.gpus[b.members[0]]
		}
		if len(b.open) > 0 {
			want.firstOpen, want.openNode = b.open[0], ix.gpus[b.open[0]].node
		}
		if ix.scanSummary[i] != want {
			return fmt.Errorf("bucket %d: scan summary %+v, want %+v", i, ix.scanSummary[i], want)
		}
		if !slices.IsSorted(b.members) || !slices.IsSorted(b.open) {
			return fmt.Errorf("bucket %d: members or open list not sorted", i)
		}
		members += len(b.members)
		opens += len(b.open)
		if id, ok := ix.bucketOf[b.key]; len(b.members) > 0 && (!ok || id != int32(i)) {
			return fmt.Errorf("bucket %d: not found by its key", i)
		}
	}
	if opens != wantOpen {
		return fmt.Errorf("open lists hold %d GPUs, %d are reachable", opens, wantOpen)
	}
	if members != len(ix.gpus) || len(ix.bucketOf)+len(ix.freeB) != len(ix.buckets) {
		return fmt.Errorf("buckets hold %d GPUs of %d (%d keyed, %d free, %d buckets)", members, len(ix.gpus), len(ix.bucketOf), len(ix.freeB), len(ix.buckets))
	}
	if idle != ix.idle {
		return fmt.Errorf("cached idle GPUs %d, want %d", ix.idle, idle)
	}
	if len(jobs) != len(ix.jobs) {
		return fmt.Errorf("job index has %d jobs, residents %d", len(ix.jobs), len(jobs))
	}
	for id, want := range jobs {
		loc, ok := ix.jobs[id]
		if !ok {
			return fmt.Errorf("job %q missing from the job index", profile.Sanitize(id))
		}
		got := append([]int32{loc.first}, loc.more...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, slices.Compact(want)) {
			return fmt.Errorf("job %q: index %v, residents on %v", profile.Sanitize(id), got, want)
		}
	}
	return nil
}
