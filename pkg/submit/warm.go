// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"

	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/residency"
)

// warmMaxProfiles bounds the background work of warmPolicy on a large catalog.
const warmMaxProfiles = 512

// warmPolicy fills a freshly loaded policy's prediction memo before the snapshot
// is swapped in: without it, the first decision after a reload (scontrol
// reconfigure, a new model or profile) predicts for every distinct resident set
// of the cluster inside slurmctld's submit call (p99 ~150 us at 8,192 GPUs, see
// docs/performance-submit.md). It places one request per profile on a cluster
// built from entries and the pending reservations; placing changes nothing, and nobody else holds the policy
// yet, so this runs on the background goroutine without the decision lock. The
// cluster shares the snapshot's interner, so the memo stays valid for the
// cluster the engine installs next. It is built into spare, a cluster no
// decision reaches (the engine's, under the refresh lock; nil: a new one), so a reload
// does not leave 8,192 GPUs of garbage for the next decisions' GC assist.
func warmPolicy(l *Snapshot, entries []residency.Entry, reserved []reservation, spare *placement.Cluster) {
	if l.policy == nil || l.polErr != nil || l.catErr != nil || l.clusterErr != nil || len(l.catalog) == 0 {
		return
	}
	c := buildCluster(l, entries, spare)
	for i := range reserved {
		applyReservation(c, &reserved[i])
	}
	tags := make([]string, 0, len(l.catalog))
	for tag := range l.catalog {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	if len(tags) > warmMaxProfiles {
		tags = tags[:warmMaxProfiles]
	}
	for _, tag := range tags {
		p := l.catalog[tag]
		if p == nil {
			continue
		}
		l.policy.Place(c, &placement.Request{JobID: "warm-up", Tag: tag, Profile: p, Class: p.Class, GPUs: 1})
	}
}

// warmDecision replays the last placed submission's decision on the view as
// it is now, through the pure stages only (prepare and place: the comment and
// GPU request parsed, the policy's scan, the reason, the id, the log line),
// and drops the outcome: nothing is reserved, counted, logged or numbered. It
// runs on the background goroutine after each refresh that changed the view,
// so that the work of the refresh (a walk over every GPU, a new snapshot, its
// garbage) does not leave the next decision inside slurmctld to fetch its code
// and data from memory: on the refresh's CPU (as in BenchmarkDecideLatencyAt8192)
// the first decision after it then runs warm. It holds the decision lock for
// about one decision, at most once per changed refresh (every 500 ms at most).
func (e *Engine) warmDecision() {
	defer func() { _ = recover() }() // a policy that panics here panics in decisions too, where it is caught
	st := e.snap.Load()
	if st == nil || st.cfgErr != nil {
		return
	}
	now := e.opts.Now()
	q := query{snap: st, now: now, idPfx: e.idPfx, version: e.opts.SlurmVersion(), key: e.keyFor(st), down: e.downNow(now)}
	e.view.mu.Lock()
	defer e.view.mu.Unlock()
	if !e.view.hasPlaced {
		return
	}
	q.j, q.view, q.seq, q.req = e.view.lastPlaced, &e.view.viewState, e.idSeq+1, &e.view.req
	if in, _, ok := prepare(&q); ok {
		place(&q, &in)
	}
}
