// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coscheml/coscheml/pkg/metrics"
)

// The watchdog: decisions are only as good as the cluster view, which the
// background loop refreshes every ResidencyEvery. A refresh stuck in a hung
// shared file system would leave decisions running on a frozen view with
// nothing reported. So each refresh that returns stamps the time, and a
// decision that finds the stamp older than StaleAfter lets the job through
// unchanged (fail open), notes one problem (logged once, in Problems, "ok
// again" when a refresh completes) and counts it in the metrics.

// refreshClock stamps each completed refresh on the monotonic clock (not
// Options.Now: a stepped wall clock must not wake or silence the watchdog).
type refreshClock struct {
	epoch     time.Time    // when the engine was created
	completed atomic.Int64 // nanoseconds after epoch of the last completed refresh
}

// markFresh records that a refresh completed now.
func (e *Engine) markFresh() {
	e.refresh.clock.completed.Store(int64(time.Since(e.refresh.clock.epoch)))
	e.publishPass() // the pass window runs StaleAfter from now
}

// viewAge is how long ago the last refresh completed (monotonic clock).
func (e *Engine) viewAge() time.Duration {
	c := &e.refresh.clock
	return time.Since(c.epoch) - time.Duration(c.completed.Load())
}

// passReason says why a job must pass through without a decision: "loading"
// before the first load completed, "stale" when the running loop has not
// completed a refresh for StaleAfter; "" when a decision can be made. It notes
// (and clears) the matching problem.
func (e *Engine) passReason() string {
	if !e.ready.Load() {
		e.note("loading", "first load of configuration, model, profiles and residency not finished yet "+
			"(shared file system slow?): jobs pass through unchanged until it completes")
		return "loading"
	}
	e.note("loading", "")
	if !e.refresh.running.Load() {
		return "" // no background loop (tests, CLIs): nothing refreshes the view anyway
	}
	if age := e.viewAge(); age > e.opts.StaleAfter {
		e.note("watchdog", fmt.Sprintf("cluster view stale: no refresh completed for %v (shared file system hung?); "+
			"jobs pass through unchanged until one does", age.Round(time.Second)))
		return "stale"
	}
	e.note("watchdog", "")
	return ""
}

// stateFamilies are the engine's state for the metrics file.
func (e *Engine) stateFamilies() []metrics.Family {
	ready := 0.0
	if e.ready.Load() {
		ready = 1
	}
	return []metrics.Family{
		{Name: "coscheml_plugin_ready", Type: metrics.Gauge,
			Help:    "1 once the plugin's first load completed (before it, every job passes through unchanged).",
			Samples: []metrics.Sample{{Value: ready}}},
		{Name: "coscheml_view_age_seconds", Type: metrics.Gauge,
			Help:    "Seconds since the background refresh of the cluster view last completed; over the watchdog's limit (30 s) jobs pass through unchanged.",
			Samples: []metrics.Sample{{Value: e.viewAge().Seconds()}}},
	}
}
