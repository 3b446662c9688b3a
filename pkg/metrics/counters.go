// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// maxLabelValues bounds the distinct values one label takes in Counters; more
// are counted under "other", so no input can grow the file (or Prometheus'
// series count) without bound.
const maxLabelValues = 32

// ErrorBuckets are the upper bounds of the prediction error histogram
// (|predicted - measured| speed; speeds are ratios, 1.0 = as fast as alone).
var ErrorBuckets = []float64{0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5}

// Counters are the decision metrics of the job_submit library in slurmctld. Every
// method is safe for concurrent use and cheap (a mutex and a counter: no I/O),
// so the submit path may call them; the file is written by Run in the background.
// The zero value is not ready: use NewCounters.
type Counters struct {
	mu         sync.Mutex
	decisions  map[[2]string]uint64 // outcome, action: other words than these
	known      [len(outcomes)][len(actions)]uint64
	waits      uint64
	rejects    map[string]uint64 // reason
	passes     map[string]uint64 // why the engine could not decide (loading, stale)
	belowFloor map[string]uint64 // class
	errBuckets []uint64          // per ErrorBuckets, not cumulative
	errCount   uint64
	errSum     float64
	start      time.Time
}

// NewCounters returns counters that start now.
func NewCounters(now time.Time) *Counters {
	return &Counters{decisions: map[[2]string]uint64{}, rejects: map[string]uint64{}, passes: map[string]uint64{}, belowFloor: map[string]uint64{},
		errBuckets: make([]uint64, len(ErrorBuckets)), start: now}
}

// The decision log's outcome and action words, counted in a fixed table: the
// submit path then touches a few words, not a map (a decision runs with cold
// caches in slurmctld, docs/performance-slurm.md).
var (
	outcomes = [...]string{"unchanged", "rewrite", "reject"}
	actions  = [...]string{"share", "exclusive", "wait", "pass"}
)

// usualDecision marks the outcome/action pairs the plugin writes, exported at
// 0 before the first one so a rate() on a fresh slurmctld is 0, not "No data".
var usualDecision = func() (m [len(outcomes)][len(actions)]bool) {
	for _, p := range [][2]string{{"unchanged", "pass"}, {"rewrite", "share"}, {"rewrite", "exclusive"}, {"rewrite", "wait"}, {"reject", "pass"}} {
		m[wordIndex(outcomes[:], p[0])][wordIndex(actions[:], p[1])] = true
	}
	return m
}()

func wordIndex(words []string, s string) int {
	for i, w := range words {
		if w == s {
			return i
		}
	}
	return -1
}

// Decision counts one decision: outcome unchanged|rewrite|reject, action
// share|exclusive|wait|pass (decisionlog.Record's fields). A wait also counts in
// waits, a reject in rejects under reason (a short fixed word such as
// "invalid_tag" or "unknown_profile", never user text).
func (c *Counters) Decision(outcome, action, reason string) {
	oi, ai := wordIndex(outcomes[:], outcome), wordIndex(actions[:], action)
	if oi < 0 || ai < 0 {
		outcome, action = labelValue(outcome), labelValue(action)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if oi >= 0 && ai >= 0 {
		c.known[oi][ai]++
	} else if k := [2]string{outcome, action}; len(c.decisions) < maxLabelValues || c.decisions[k] > 0 {
		c.decisions[k]++
	} else {
		c.decisions[[2]string{"other", "other"}]++
	}
	if action == "wait" {
		c.waits++
	}
	if outcome == "reject" {
		bump(c.rejects, labelValue(reason))
	}
}

// Passthrough counts a job the engine let through without deciding, under
// reason (a fixed word: "loading" before the first load completed, "stale" when
// the watchdog found the cluster view too old).
func (c *Counters) Passthrough(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bump(c.passes, labelValue(reason))
}

// Measured counts one finished co-located run whose speed was predicted and then
// measured: the absolute error goes into the histogram, and a measured speed
// under the class's floor counts as a job below floor.
func (c *Counters) Measured(class string, predicted, measured, floor float64) {
	if math.IsNaN(predicted) || math.IsNaN(measured) || math.IsInf(predicted, 0) || math.IsInf(measured, 0) {
		return
	}
	e := math.Abs(predicted - measured)
	class = labelValue(class)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ub := range ErrorBuckets {
		if e <= ub {
			c.errBuckets[i]++
			break
		}
	}
	c.errCount++
	c.errSum += e
	if measured < floor {
		bump(c.belowFloor, class)
	}
}

func bump(m map[string]uint64, k string) {
	if _, ok := m[k]; !ok && len(m) >= maxLabelValues {
		k = "other"
	}
	m[k]++
}

// labelValue keeps a label value short and plain: anything outside [a-z0-9_-]
// becomes "_", empty becomes "none".
func labelValue(s string) string {
	if s == "" {
		return "none"
	}
	if len(s) > 32 {
		s = s[:32]
	}
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return '_'
	}, s)
}

// Families returns the counters as metric families, stamped with now.
func (c *Counters) Families(now time.Time) []Family {
	c.mu.Lock()
	defer c.mu.Unlock()
	dec := Family{Name: "coscheml_decisions_total", Type: Counter,
		Help: "Placement decisions of the job_submit plugin by outcome (unchanged, rewrite, reject) and action (share, exclusive, wait, pass)."}
	counts := make(map[[2]string]uint64, len(c.decisions)+len(outcomes)*len(actions))
	for k, n := range c.decisions {
		counts[k] += n
	}
	for oi, row := range c.known {
		for ai, n := range row {
			if n > 0 || usualDecision[oi][ai] {
				counts[[2]string{outcomes[oi], actions[ai]}] += n
			}
		}
	}
	keys := make([][2]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	for _, k := range keys {
		dec.Samples = append(dec.Samples, Sample{Labels: []Label{{"outcome", k[0]}, {"action", k[1]}}, Value: float64(counts[k])})
	}
	fams := []Family{
		dec,
		{Name: "coscheml_waits_total", Type: Counter, Help: "Decisions that kept a job queued because no GPU was acceptable.",
			Samples: []Sample{{Value: float64(c.waits)}}},
		byLabel("coscheml_rejects_total", "Submissions refused, by reason.", "reason", c.rejects),
		byLabel("coscheml_passthrough_total", "Jobs let through unchanged without a decision, by reason (loading: first load not finished; stale: the watchdog found the cluster view too old).", "reason", c.passes),
		byLabel("coscheml_jobs_below_floor_total", "Finished co-located jobs whose measured speed was under their class's speed floor, by class.", "class", c.belowFloor, knownClasses...),
	}
	h := Family{Name: "coscheml_prediction_abs_error_ratio", Type: Histogram,
		Help: "Absolute difference between predicted and measured speed (1.0 = as fast as alone) of finished co-located jobs."}
	var cum uint64
	for i, ub := range ErrorBuckets {
		cum += c.errBuckets[i]
		h.Samples = append(h.Samples, Sample{Suffix: "_bucket", Labels: []Label{{"le", strconv.FormatFloat(ub, 'g', -1, 64)}}, Value: float64(cum)})
	}
	h.Samples = append(h.Samples,
		Sample{Suffix: "_bucket", Labels: []Label{{"le", "+Inf"}}, Value: float64(c.errCount)},
		Sample{Suffix: "_sum", Value: c.errSum},
		Sample{Suffix: "_count", Value: float64(c.errCount)})
	return append(fams, h,
		Family{Name: "coscheml_counters_start_time_seconds", Type: Gauge, Help: "When these counters started (Unix time): they reset when slurmctld restarts.",
			Samples: []Sample{{Value: float64(c.start.Unix())}}},
		Family{Name: "coscheml_metrics_write_time_seconds", Type: Gauge, Help: "When this file was written (Unix time).",
			Samples: []Sample{{Value: float64(now.Unix())}}},
	)
}

// knownClasses get a sample from the start (0 until a job of theirs is
// counted): a dashboard's increase() over a series that does not exist yet
// shows "No data" rather than the healthy 0.
var knownClasses = []string{string(profile.ClassHPC), string(profile.ClassTrain), string(profile.ClassInfer)}

// byLabel is one counter family by label value; zeros are label values always
// present, 0 until counted.
func byLabel(name, help, label string, m map[string]uint64, zeros ...string) Family {
	f := Family{Name: name, Type: Counter, Help: help}
	keys := make([]string, 0, len(m)+len(zeros))
	for k := range m {
		keys = append(keys, k)
	}
	for _, k := range zeros {
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		f.Samples = append(f.Samples, Sample{Labels: []Label{{label, k}}, Value: float64(m[k])})
	}
	return f
}

// Run writes the counters to path every interval until ctx ends, then once
// more. Write errors go to logf (rate it yourself if needed) and never stop the
// loop: metrics must not take the plugin down. Start it in its own goroutine.
func (c *Counters) Run(ctx context.Context, path string, every time.Duration, logf func(format string, a ...any)) {
	if every <= 0 {
		every = 30 * time.Second
	}
	write := func() {
		if err := WriteFile(path, c.Families(time.Now())); err != nil && logf != nil {
			logf("coscheml metrics: %v", err)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-t.C:
			write()
		}
	}
}
