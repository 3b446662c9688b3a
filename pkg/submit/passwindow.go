// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"sync"
	"sync/atomic"
	"time"
)

// The untagged pass window: most submissions carry no coscheml directive, and
// with `untagged: pass` the engine answers them "unchanged" with nothing to log.
// libcoscheml answers such a job in C, without waking Go (each wake-up of the
// worker costs slurmctld's process 100-200 µs of CPU on a small VM,
// docs/performance-slurm.md), while the engine says that answer is certain:
// PassUntaggedFor. The C side checks only what is cheap and conservative (a new
// submission, no "coscheml" in the comment in any case, no "shard" in any GPU
// request) and falls back to Go for everything else.

// passWindow publishes PassUntaggedFor through Options.PassWindow, one publish
// at a time, so a later state never loses to an earlier one.
type passWindow struct {
	mu     sync.Mutex
	closed atomic.Bool // Close began: the window stays shut
}

// PassUntaggedFor is how long from now the engine answers Unchanged, with no
// log line, record, counter or note, to every new submission (not an update)
// whose comment does not contain "coscheml" in any letter case and whose GPU
// requests (tres_per_node/job/task/socket) do not contain "shard". 0 when that
// is not certain: before the first load, without the background loop (no
// watchdog), with the configuration unusable or `untagged: exclusive`, while
// notes wait to be logged with the next job, or once the watchdog would find
// the view stale (the window ends StaleAfter after the last refresh), and
// from Close on.
func (e *Engine) PassUntaggedFor() time.Duration {
	if !e.ready.Load() || !e.refresh.running.Load() || e.pass.closed.Load() {
		return 0
	}
	st := e.snap.Load()
	if st == nil || st.cfgErr != nil || st.cfg.Untagged == "exclusive" {
		return 0
	}
	// The watchdog's and the loading notes flip with each decision
	// (passReason): while either is set, a decision would log "ok again".
	if !e.notes.quiet("loading", "watchdog") {
		return 0
	}
	return max(e.opts.StaleAfter-e.viewAge(), 0)
}

// publishPass hands PassUntaggedFor to Options.PassWindow (when set): after
// each completed refresh, the first load, a new note, a decision that logged
// notes, and Close (0).
func (e *Engine) publishPass() {
	if e.opts.PassWindow == nil {
		return
	}
	e.pass.mu.Lock()
	defer e.pass.mu.Unlock()
	e.opts.PassWindow(e.PassUntaggedFor())
}
