// SPDX-License-Identifier: Apache-2.0

package main

import (
	"sort"
	"sync"
	"time"

	"github.com/coscheml/coscheml/pkg/metrics"
)

// guardCounters are the guard's metrics: actions by class, kind and outcome,
// rounds, and GPU reads.
type guardCounters struct {
	mu        sync.Mutex
	actions   map[[3]string]uint64 // class, kind, outcome
	rounds    uint64
	noNVML    uint64 // rounds without NVML
	reads     uint64
	unhealthy uint64
	start     time.Time
}

func newGuardCounters(now time.Time) *guardCounters {
	return &guardCounters{actions: map[[3]string]uint64{}, start: now}
}

// The label values are the guard's own words; anything else (a class a record
// could carry) is counted as "other", so no input grows the file.
var (
	guardClasses  = map[string]bool{"hpc": true, "train": true, "infer": true}
	guardKinds    = map[string]bool{"observe": true, "requeue": true, "cancel": true, "suspend": true, "resume": true}
	guardOutcomes = map[string]bool{"observed": true, "taken": true, "dry-run": true, "failed": true}
)

func word(known map[string]bool, s, none string) string {
	switch {
	case s == "":
		return none
	case known[s]:
		return s
	}
	return "other"
}

func (c *guardCounters) action(class, kind, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actions[[3]string{word(guardClasses, class, "none"), word(guardKinds, kind, "other"), word(guardOutcomes, outcome, "other")}]++
}

func (c *guardCounters) round(noNVML bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rounds++
	if noNVML {
		c.noNVML++
	}
}

func (c *guardCounters) gpuReads(n, unhealthy int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads += uint64(n)
	c.unhealthy += uint64(unhealthy)
}

func (c *guardCounters) families(now time.Time) []metrics.Family {
	c.mu.Lock()
	defer c.mu.Unlock()
	acts := metrics.Family{Name: "coscheml_guard_actions_total", Type: metrics.Counter,
		Help: "Guard actions by class of the job acted on, kind (observe, requeue, cancel, suspend, resume) and outcome (observed, taken, dry-run, failed)."}
	keys := make([][3]string, 0, len(c.actions))
	for k := range c.actions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		return a[2] < b[2]
	})
	for _, k := range keys {
		acts.Samples = append(acts.Samples, metrics.Sample{Labels: []metrics.Label{{Name: "class", Value: k[0]}, {Name: "kind", Value: k[1]}, {Name: "outcome", Value: k[2]}},
			Value: float64(c.actions[k])})
	}
	counter := func(name, help string, v uint64) metrics.Family {
		return metrics.Family{Name: name, Type: metrics.Counter, Help: help, Samples: []metrics.Sample{{Value: float64(v)}}}
	}
	return []metrics.Family{acts,
		counter("coscheml_guard_rounds_total", "Guard rounds run.", c.rounds),
		counter("coscheml_guard_rounds_without_nvml_total", "Guard rounds skipped because NVML could not be opened.", c.noNVML),
		counter("coscheml_guard_gpu_reads_total", "Co-located GPUs read.", c.reads),
		counter("coscheml_guard_gpu_reads_unhealthy_total", "Co-located GPUs whose read failed (timeout, lost GPU, no NVML).", c.unhealthy),
		{Name: "coscheml_guard_start_time_seconds", Type: metrics.Gauge, Help: "When the guard started (Unix time).",
			Samples: []metrics.Sample{{Value: float64(c.start.Unix())}}},
		{Name: "coscheml_guard_metrics_write_time_seconds", Type: metrics.Gauge, Help: "When this file was written (Unix time).",
			Samples: []metrics.Sample{{Value: float64(now.Unix())}}},
	}
}
