// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"container/heap"
	"time"
)

// The job contexts and deferrals live under the view's lock, which slurmctld's
// submitting thread takes with its job write lock held: no operation on them may
// cost more as they grow. Both are bounded, evict in O(1) (O(log n) for a
// deferral) when the bound is hit, and release an entry as soon as its job is
// known to have started or left the queue.

// ctxStore holds the job context of each decision that gave an id, in insertion
// order: a map from decision id to a node of a doubly linked list kept in one
// slice (indexes, not pointers: nothing for the garbage collector to chase).
// Adding, releasing and evicting the oldest are O(1); the queue check walks the
// list in chunks from a cursor that a release moves past the node it frees.
type ctxStore struct {
	idx map[string]int32
	// byJob indexes the contexts bound to a Slurm job id (bind): job_modify
	// finds its job's context by the job id Slurm hands it, so an update whose
	// token does not count (Slurm 22.05 hands no stored comment; a token the
	// screen removed) still decides within the job's own node options.
	byJob map[string]int32
	nodes []ctxNode
	free  int32 // head of the free list (-1: none)
	head  int32 // oldest (-1: empty)
	tail  int32 // newest (-1: empty)
	// sweep is the queue check's next node (-1: at the end, or no sweep).
	sweep int32
	max   int // bound (0: maxCtx)
}

type ctxNode struct {
	id         string
	job        string // the Slurm job id it is bound to ("" until known)
	c          jobCtx
	prev, next int32
}

func (s *ctxStore) init() {
	if s.idx == nil {
		s.idx = make(map[string]int32)
		s.byJob = make(map[string]int32)
		s.free, s.head, s.tail, s.sweep = -1, -1, -1, -1
	}
}

func (s *ctxStore) bound() int {
	if s.max > 0 {
		return s.max
	}
	return maxCtx
}

// len is the number of contexts held.
func (s *ctxStore) len() int { return len(s.idx) }

// get is decision id's context.
func (s *ctxStore) get(id string) (jobCtx, bool) {
	if i, ok := s.idx[id]; ok {
		return s.nodes[i].c, true
	}
	return jobCtx{}, false
}

// put records id's context as the newest; at the bound the oldest goes first.
func (s *ctxStore) put(id string, c jobCtx) {
	s.init()
	if i, ok := s.idx[id]; ok {
		s.nodes[i].c = c
		return
	}
	if len(s.idx) >= s.bound() && s.head >= 0 {
		s.release(s.nodes[s.head].id)
	}
	var i int32
	if s.free >= 0 {
		i, s.free = s.free, s.nodes[s.free].next
	} else {
		s.nodes = append(s.nodes, ctxNode{})
		i = int32(len(s.nodes) - 1)
	}
	s.nodes[i] = ctxNode{id: id, c: c, prev: s.tail, next: -1}
	if s.tail >= 0 {
		s.nodes[s.tail].next = i
	} else {
		s.head = i
	}
	s.tail = i
	s.idx[id] = i
}

// bind ties decision id's context to Slurm job id job: the job's newest
// decision. A decision already bound to another job keeps its job (a decision
// belongs to one job); the job's earlier decision's context is released (the
// newer one replaces it). It reports whether id is now bound to job.
func (s *ctxStore) bind(id, job string) bool {
	i, ok := s.idx[id]
	if !ok || job == "" {
		return false
	}
	n := &s.nodes[i]
	switch n.job {
	case job:
		return true
	case "":
	default:
		return false
	}
	if old, ok := s.byJob[job]; ok && old != i {
		s.release(s.nodes[old].id)
	}
	n.job = job
	s.byJob[job] = i
	return true
}

// forJob is the context bound to Slurm job id job and its decision id.
func (s *ctxStore) forJob(job string) (jobCtx, string, bool) {
	if i, ok := s.byJob[job]; ok && job != "" {
		return s.nodes[i].c, s.nodes[i].id, true
	}
	return jobCtx{}, "", false
}

// jobOf is the Slurm job id decision id's context is bound to ("" when none).
func (s *ctxStore) jobOf(id string) string {
	if i, ok := s.idx[id]; ok {
		return s.nodes[i].job
	}
	return ""
}

// release forgets id's context (nothing when unknown).
func (s *ctxStore) release(id string) bool {
	i, ok := s.idx[id]
	if !ok {
		return false
	}
	delete(s.idx, id)
	n := &s.nodes[i]
	if n.job != "" && s.byJob[n.job] == i {
		delete(s.byJob, n.job)
	}
	if s.sweep == i {
		s.sweep = n.next
	}
	if n.prev >= 0 {
		s.nodes[n.prev].next = n.next
	} else {
		s.head = n.next
	}
	if n.next >= 0 {
		s.nodes[n.next].prev = n.prev
	} else {
		s.tail = n.prev
	}
	*n = ctxNode{next: s.free} // drop the strings
	s.free = i
	return true
}

// sweepStart puts the queue check's cursor on the oldest context.
func (s *ctxStore) sweepStart() { s.init(); s.sweep = s.head }

// sweepStep visits at most n contexts from the cursor: visit returns whether
// the context is gone (released) and, if not, the Slurm job id it belongs to
// ("" when not known), which binds it. It returns how many it released and
// whether the walk reached the end.
func (s *ctxStore) sweepStep(n int, visit func(id string, c *jobCtx) (gone bool, job string)) (released int, end bool) {
	for ; n > 0 && s.sweep >= 0; n-- {
		i := s.sweep
		s.sweep = s.nodes[i].next
		gone, job := visit(s.nodes[i].id, &s.nodes[i].c)
		switch {
		case gone:
			s.release(s.nodes[i].id)
			released++
		case job != "":
			s.bind(s.nodes[i].id, job)
		}
	}
	return released, s.sweep < 0
}

// maxDeferred bounds the deferrals remembered (a deferral lasts wait_defer plus
// the reservation TTL, so this is never reached but by a flood).
const maxDeferred = 1 << 16

// deferrals are the plugin's own deferred waits: decision id -> begin time
// given, and a min-heap of the same by begin time, for pruning the expired in
// O(log n) each. A deferral taken or released leaves its heap item behind
// (lazy deletion): an item counts only while the map holds the same time for
// its id, and the heap is rebuilt from the map when stale items outnumber
// live ones (amortised O(1) per operation).
type deferrals struct {
	until map[string]time.Time
	h     deferHeap
	max   int // bound (0: maxDeferred)
}

type deferItem struct {
	id    string
	until time.Time
}

type deferHeap []deferItem

func (h deferHeap) Len() int           { return len(h) }
func (h deferHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h deferHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deferHeap) Push(x any)        { *h = append(*h, x.(deferItem)) }
func (h *deferHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = deferItem{}
	*h = old[:len(old)-1]
	return it
}

func (d *deferrals) bound() int {
	if d.max > 0 {
		return d.max
	}
	return maxDeferred
}

func (d *deferrals) len() int { return len(d.until) }

// live says whether heap item it is still the deferral of its id.
func (d *deferrals) live(it deferItem) bool {
	t, ok := d.until[it.id]
	return ok && t.Equal(it.until)
}

// add remembers id deferred until until, first dropping the deferrals begun
// longer than keep before now and, at the bound, the earliest.
func (d *deferrals) add(id string, until, now time.Time, keep time.Duration) {
	if d.until == nil {
		d.until = make(map[string]time.Time)
	}
	d.prune(now, keep)
	if _, ok := d.until[id]; !ok && len(d.until) >= d.bound() {
		for len(d.h) > 0 {
			it := heap.Pop(&d.h).(deferItem)
			if d.live(it) {
				delete(d.until, it.id)
				break
			}
		}
	}
	d.until[id] = until
	heap.Push(&d.h, deferItem{id: id, until: until})
	d.compact()
}

// load replaces the deferrals with all (the rebuild at start): one heap
// construction, linear in their number.
func (d *deferrals) load(all map[string]time.Time, now time.Time, keep time.Duration) {
	d.until = make(map[string]time.Time, len(all))
	d.h = make(deferHeap, 0, len(all))
	for id, t := range all {
		d.until[id] = t
		d.h = append(d.h, deferItem{id: id, until: t})
	}
	heap.Init(&d.h)
	d.prune(now, keep)
	for len(d.until) > d.bound() && len(d.h) > 0 {
		if it := heap.Pop(&d.h).(deferItem); d.live(it) {
			delete(d.until, it.id)
		}
	}
}

// prune drops the deferrals whose begin time is more than keep before now.
func (d *deferrals) prune(now time.Time, keep time.Duration) {
	for len(d.h) > 0 && now.Sub(d.h[0].until) > keep {
		if it := heap.Pop(&d.h).(deferItem); d.live(it) {
			delete(d.until, it.id)
		}
	}
}

// take reports whether id is a deferral, and forgets it.
func (d *deferrals) take(id string) bool {
	if _, ok := d.until[id]; !ok {
		return false
	}
	delete(d.until, id)
	d.compact()
	return true
}

// compact rebuilds the heap from the map when most of its items are stale.
func (d *deferrals) compact() {
	if len(d.h) <= 2*len(d.until)+64 {
		return
	}
	h := d.h[:0]
	for _, it := range d.h {
		if d.live(it) {
			h = append(h, it)
		}
	}
	clear(d.h[len(h):])
	d.h = h
	heap.Init(&d.h)
}
