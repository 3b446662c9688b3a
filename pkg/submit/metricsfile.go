// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/metrics"
)

// engineMetrics are the decisions' counters and what writes them to
// metrics_file. The counters count every decision without I/O; a goroutine of
// its own writes the file, so a hung refresh does not stop the metrics.
type engineMetrics struct {
	counters *metrics.Counters
	writeMu  sync.Mutex // serializes metrics file writes
	// since is when the counters started: the finished runs measured since
	// then are counted (countRuns), each once: counted holds the keys of the
	// runs counted and still in the observation files (under the refresh lock).
	since    time.Time
	counted  map[uint64]struct{}
	loopDone chan struct{} // the metrics loop ended
}

// countRuns feeds the metrics (jobs below floor, the model's error) with
// the co-located runs the Epilog measured since the counters started, each
// once: a reload reads every observation again, so only new ones are
// predicted. The floor is the stored profile's class's, as in decisions; the
// prediction the model's own (l.bare). Caller holds the refresh lock.
func (m *engineMetrics) countRuns(l *Snapshot) {
	seen := make(map[uint64]struct{}, len(l.mem.runs))
	for _, r := range l.mem.runs {
		seen[r.key] = struct{}{}
		if _, ok := m.counted[r.key]; ok || l.bare == nil {
			continue
		}
		cl := r.job.Class
		m.counters.Measured(string(cl), l.bare.PredictSpeed(r.job, r.co), r.speed, l.cfg.SpeedFloor.For(cl))
	}
	if l.mem.pred != nil && !l.mem.partial {
		// A complete load: keys it did not read are dropped (their files
		// are gone).
		m.counted = seen
	} else {
		// Files left unread (bounds, errors) may be read next time: keep
		// every key, so a run is never counted twice.
		if m.counted == nil {
			m.counted = seen
		} else {
			maps.Copy(m.counted, seen)
		}
	}
	l.mem.runs = nil // counted: the snapshot need not keep them
}

// metricsLoop writes metrics_file every MetricsEvery until Close, apart from the
// refresh loop: a hung refresh is exactly when the metrics must still come.
func (e *Engine) metricsLoop() {
	defer close(e.metrics.loopDone)
	tick := time.NewTicker(e.opts.MetricsEvery)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.safely(e.writeMetrics)
		}
	}
}

// writeMetrics replaces metrics_file with the counters and the engine's state,
// atomically (a failure is logged once; it never affects decisions). It runs
// only in the metrics loop and Close, never on the decision path.
func (e *Engine) writeMetrics() {
	e.metrics.writeMu.Lock()
	defer e.metrics.writeMu.Unlock()
	now := e.opts.Now()
	st := e.snap.Load()
	if st == nil || st.cfgErr != nil || st.cfg.MetricsFile == "" {
		return
	}
	fams := append(e.metrics.counters.Families(now), e.stateFamilies()...)
	if err := metrics.WriteFile(st.cfg.MetricsFile, fams); err != nil {
		e.note("info-metrics", fmt.Sprintf("metrics file not written: %v", err))
		return
	}
	e.note("info-metrics", "")
}
