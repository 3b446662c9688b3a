// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Reservations live in memory. A restarted slurmctld (or the backup controller
// taking over) would forget the GPUs promised to queued jobs and promise them
// again, so the first load rebuilds them from the decision log: every pinned
// decision younger than the reservation TTL that no later job_modify decision
// replaced. Those whose jobs have started are then dropped by the first refresh
// as usual (the residency store confirms them). The log is read as it is: torn or
// garbled lines are skipped; an unreadable log rebuilds nothing (fail open, noted).

// restoreLocked rebuilds the reservations of snapshot st from the decision log.
// Caller holds the refresh lock; it runs in the first load only.
func (e *Engine) restoreLocked(st *Snapshot, now time.Time) {
	if st == nil || st.cfgErr != nil || st.clusterErr != nil || st.cfg.DecisionLog == "" {
		return
	}
	recs, err := decisionlog.Since(st.cfg.DecisionLog, now.Add(-e.opts.ReservationTTL))
	if err != nil {
		e.note("info-restore", fmt.Sprintf("reservations not rebuilt from the decision log "+
			"(queued jobs' GPUs look free until they start): %v", err))
		return
	}
	rvs := reservationsFrom(st, recs, now, e.opts.ReservationTTL)
	deferred := deferralsFrom(recs, now, st.cfg.WaitDefer)
	e.view.mu.Lock()
	for _, rv := range rvs {
		e.view.addReservedLocked(rv)
	}
	e.view.deferred.load(deferred, now, e.view.res.ttl) // one heap build: linear
	e.view.mu.Unlock()
	if len(rvs) > 0 {
		e.note("info-restore", fmt.Sprintf("rebuilt %d reservations of queued jobs from the decision log", len(rvs)))
	}
}

// reservationsFrom turns decision records into the reservations still pending at
// now: pinned rewrites (a node and GPU) within ttl, not replaced by a later
// record, on a node and GPUs of st's cluster.
func reservationsFrom(st *Snapshot, recs []decisionlog.Record, now time.Time, ttl time.Duration) []reservation {
	replaced := map[string]bool{}
	for _, r := range recs {
		for _, id := range r.Replaces {
			replaced[id] = true
		}
	}
	seen := map[string]bool{}
	var out []reservation
	for _, r := range recs {
		if r.Outcome != "rewrite" || r.ID == "" || r.Node == "" || r.GPU < 0 || replaced[r.ID] || seen[r.ID] {
			continue
		}
		if age := now.Sub(r.Time); age > ttl || age < -time.Minute {
			continue // expired, or from a clock far ahead: not ours to trust
		}
		node, ok := st.nodeIdx[r.Node]
		if !ok {
			continue // the node left the configuration
		}
		// A span lists its nodes, Node first; each a distinct node of st.
		var more []int
		ok = len(r.Nodes) == 0 || r.Nodes[0] == r.Node
		for _, name := range r.Nodes[min(1, len(r.Nodes)):] {
			n, known := st.nodeIdx[name]
			if ok = ok && known && n != node && !slices.Contains(more, n); !ok {
				break
			}
			more = append(more, n)
		}
		if !ok {
			continue // a node of its span left the configuration, or a garbled list
		}
		gpus := r.GPUs
		if len(gpus) == 0 {
			gpus = []int{r.GPU}
		}
		nodeGPUs := len(st.shapes[node].GPUs)
		for _, n := range more {
			nodeGPUs = min(nodeGPUs, len(st.shapes[n].GPUs))
		}
		fits := len(gpus) <= nodeGPUs
		for _, g := range gpus {
			fits = fits && g >= 0 && g < nodeGPUs
		}
		slots := r.Shards
		if slots <= 0 || slots > st.cfg.SlotsPerGPU {
			slots = st.cfg.SlotsPerGPU // whole GPUs
		}
		if !fits {
			continue
		}
		seen[r.ID] = true
		var prof *profile.Profile
		if r.Tag != "" {
			prof = st.catalog[r.Tag]
		}
		class := profile.Class(r.Class)
		if class == "" && prof != nil {
			class = prof.Class
		}
		out = append(out, reservation{id: r.ID, jobID: r.JobID, uid: r.UserID, node: node, more: more, gpus: gpus,
			slots: slots, prof: prof, class: class, at: r.Time})
	}
	return out
}
