// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/urfave/cli/v2"
)

// droppedText says which jobs the simulator left out and why, per seed (every
// policy of a seed sees the same jobs, so the first run of each seed speaks for
// it). The simulator drops a job that asks for more GPUs than the whole cluster
// has: it could never start under any policy.
func droppedText(runs []*sim.PolicyRun, gpus int) string {
	per := map[int64]int{}
	for _, r := range runs {
		if _, ok := per[r.Seed]; !ok && r.Result != nil {
			per[r.Seed] = r.Result.Dropped
		}
	}
	seeds := make([]int64, 0, len(per))
	total := 0
	for s, n := range per {
		seeds = append(seeds, s)
		total += n
	}
	if total == 0 {
		return fmt.Sprintf("dropped: none (no job asked for more than the cluster's %d GPUs)", gpus)
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	var parts []string
	for _, s := range seeds {
		parts = append(parts, fmt.Sprintf("seed %d: %d", s, per[s]))
	}
	return fmt.Sprintf("dropped: %d jobs asked for more GPUs than the cluster's %d and could never start under any policy; "+
		"left out of every figure (%s)", total, gpus, strings.Join(parts, ", "))
}

// simProgressText is the progress line while runs go in parallel: finished jobs
// over all runs move steadily, while whole runs all finish near the end.
func simProgressText(jobsDone, jobsTotal, runsDone, runsTotal int, elapsed time.Duration) string {
	pct := 0.0
	if jobsTotal > 0 {
		pct = 100 * float64(jobsDone) / float64(jobsTotal)
	}
	return fmt.Sprintf("simulate: %.0f%% of jobs finished (%d/%d over %d runs), %d runs complete, %s",
		pct, jobsDone, jobsTotal, runsTotal, runsDone, elapsed.Round(time.Second))
}

// shapingFlags are the flags that decide what a simulation runs; with none of
// them set, `coscheml simulate` runs the demo preset rather than the whole
// 82,000-job Philly trace at its own (overloaded) rate for hours of simulated
// queueing.
var shapingFlags = []string{"trace", "file", "nodes", "gpus-per-node", "gpu-mem-mib", "from", "to", "max-duration", "jobs", "load", "seeds", "pairs", "solo"}

// defaultToDemo says whether a bare `coscheml simulate` should mean --demo.
func defaultToDemo(c *cli.Context) bool {
	if c.Bool("demo") {
		return false
	}
	for _, f := range shapingFlags {
		if c.IsSet(f) {
			return false
		}
	}
	return true
}
