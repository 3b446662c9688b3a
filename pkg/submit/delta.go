// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"

	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/residency"
)

// A residency refresh usually changes a few jobs (some started, some ended),
// yet rebuilding the cluster walks all of it: at 8,192 GPUs ~1 ms of the
// background goroutine's CPU every refresh, and a walk over megabytes that
// leaves the next decision's data (memo, model, code) out of the CPU's caches,
// so the first decision after each rebuild cost 2-4 times a warm one
// (docs/performance-submit.md). A small change is applied to the installed
// cluster in place instead: only the changed jobs' GPUs are touched.

// maxDeltaJobs bounds the jobs an in-place update changes under the view's
// lock (each a Remove and an Apply, microseconds); a larger change (a restart,
// a burst of job ends) rebuilds the whole cluster outside the lock.
const maxDeltaJobs = 256

// entryKey identifies a residency entry: a job has one entry per node.
type entryKey struct{ job, node string }

// deltaScratch is the memory a diff reuses from one refresh to the next (the
// background goroutine's only: callers hold the engine's refresh lock), so a refresh
// allocates next to nothing and wakes no garbage collection that a decision
// would pay for.
type deltaScratch struct {
	old     map[entryKey]int32 // entry -> index in the installed entries
	seen    []bool             // installed entries matched by a new one
	changed map[string]bool    // jobs whose entries differ
}

// diff returns the jobs whose entries differ between the installed entries
// (prev) and the new ones, or ok false when the change is too large for an
// in-place update or the entries are not one per job and node.
func (s *deltaScratch) diff(prev, next []residency.Entry) (changed map[string]bool, ok bool) {
	if s.old == nil {
		s.old, s.changed = make(map[entryKey]int32, len(prev)), make(map[string]bool)
	}
	clear(s.old)
	clear(s.changed)
	for i := range prev {
		k := entryKey{prev[i].JobID, prev[i].Node}
		if _, dup := s.old[k]; dup {
			return nil, false
		}
		s.old[k] = int32(i)
	}
	s.seen = slices.Grow(s.seen[:0], len(prev))[:len(prev)]
	clear(s.seen)
	for i := range next {
		en := &next[i]
		j, found := s.old[entryKey{en.JobID, en.Node}]
		switch {
		case !found:
			s.changed[en.JobID] = true
		case s.seen[j]:
			return nil, false // two new entries for one job and node
		default:
			s.seen[j] = true
			if !samePlacement(&prev[j], en) {
				s.changed[en.JobID] = true
			}
		}
		if len(s.changed) > maxDeltaJobs {
			return nil, false
		}
	}
	for i := range prev {
		if !s.seen[i] {
			s.changed[prev[i].JobID] = true
		}
	}
	if len(s.changed) > maxDeltaJobs {
		return nil, false
	}
	return s.changed, true
}

// samePlacement: the two entries put the same resident on the same GPUs
// (what buildCluster reads of an entry).
func samePlacement(a, b *residency.Entry) bool {
	return a.Node == b.Node && a.Shards == b.Shards && a.Tag == b.Tag && a.Class == b.Class && slices.Equal(a.GPUs, b.GPUs)
}

// applyDelta brings c, built for st from the installed entries, to next: the
// changed jobs are removed and their new entries applied (as buildCluster
// would place them). Caller holds the view's lock.
func applyDelta(c *placement.Cluster, st *Snapshot, changed map[string]bool, next []residency.Entry) {
	for job := range changed {
		c.Remove(job)
	}
	for i := range next {
		en := &next[i]
		if !changed[en.JobID] {
			continue
		}
		n, res, ok := residentOf(st, en)
		if !ok {
			continue
		}
		d := placement.Decision{Action: placement.ActionShare}
		for _, g := range en.GPUs {
			if g >= 0 && g < len(c.Nodes[n].GPUs) {
				d.Placement = append(d.Placement, placement.Slot{Node: n, GPU: g, Slots: res.Slots})
			}
		}
		c.Apply(&placement.Request{JobID: res.JobID, Profile: res.Profile, Class: res.Class, Kind: placement.Running}, d)
	}
}
