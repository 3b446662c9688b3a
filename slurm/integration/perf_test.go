// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
)

// TestSubmissionCost measures what the plugin adds to a job submission, with and
// without JobSubmitPlugins=coscheml, at 1,000 queued jobs. It only reports (t.Log
// and, with COSCHEML_PERF_OUT=FILE, a Markdown table): speed targets are not
// asserted in tests. Run it with
//
//	COSCHEML_PERF=1 go test -tags integration -count=1 -v -run TestSubmissionCost ./slurm/integration/
//
// Two measurements, both with COSCHEML_PERF_QUEUE held jobs queued first (default
// 1,000) and then COSCHEML_PERF_JOBS timed submissions (default 300), one sbatch at
// a time, each timed from the client and by slurmctld itself (sdiag, reset after
// the queue is filled):
//
//   - same cluster: slurmctld restarted on empty state with the plugin off and on,
//     COSCHEML_PERF_ROUNDS rounds (default 3) in the order off/on, on/off, ...
//   - twins: two identical clusters started side by side, one with the plugin, and
//     the timed submissions interleaved one by one, so that the load of a shared
//     machine falls on both alike.
func TestSubmissionCost(t *testing.T) {
	a, queue, jobs, rounds := perfSetup(t, 300, 3)

	// Every job is a tagged GPU job: the plugin's full decision path, and the
	// same work for Slurm in both modes.
	args := []string{"--hold", "--gres=gpu:1", "-o", "/dev/null",
		"--comment=coscheml:app=" + lightA, "--wrap=true"}
	fill := func(c *cluster) {
		t.Helper()
		for k := 0; k < queue; k++ {
			c.mustSbatch(args...)
		}
		if _, err := c.run("sdiag", "-r"); err != nil {
			t.Fatal(err)
		}
	}
	timed := func(c *cluster) float64 {
		start := time.Now()
		c.mustSbatch(args...)
		return float64(time.Since(start).Microseconds()) / 1000
	}
	finish := func(c *cluster, name string, round int, wall []float64) perfRound {
		t.Helper()
		out, err := c.run("sdiag")
		if err != nil {
			t.Fatal(err)
		}
		count, aveUs := submitStats(out)
		pr := perfRound{name: name, round: round, plugin: c.plugin, wall: wall, sdiagCount: count, sdiagAveUs: aveUs}
		t.Logf("%s round %d plugin=%-3s queued=%d: sbatch mean %.2f ms median %.2f ms p95 %.2f ms; sdiag REQUEST_SUBMIT_BATCH_JOB count %d ave_time %d µs",
			name, round, onOff(c.plugin), queue+jobs, mean(wall), pct(wall, 50), pct(wall, 95), count, aveUs)
		if c.plugin {
			// The plugin really decided: a line per job in the log.
			if n := c.countLog("job_submit/coscheml", "tag="+lightA); n < queue+jobs {
				t.Errorf("plugin on, but only %d job_submit/coscheml decision lines for %d jobs", n, queue+jobs)
			}
		}
		return pr
	}

	var results []perfRound
	// Same cluster, restarted between modes.
	c := newCluster(t, a, false, asShipped)
	for r := 1; r <= rounds; r++ {
		modes := []bool{false, true}
		if r%2 == 0 {
			modes = []bool{true, false}
		}
		for _, on := range modes {
			c.plugin = on
			c.writeSlurmConf()
			c.stopCtld()
			c.ctld = c.daemon("slurmctld", "slurmctld.out", "-D", "-c", "-i", "-f", c.path("slurm.conf"))
			c.waitPing(30 * time.Second)
			c.waitIdle(60 * time.Second)
			fill(c)
			var wall []float64
			for k := 0; k < jobs; k++ {
				wall = append(wall, timed(c))
			}
			results = append(results, finish(c, "same", r, wall))
		}
	}
	ver, _ := c.run("sbatch", "--version")
	c.stopAll()

	// Twins, submissions interleaved.
	off := newCluster(t, a, false, asShipped)
	on := newCluster(t, a, true, asShipped)
	fill(off)
	fill(on)
	var wOff, wOn []float64
	for k := 0; k < jobs; k++ {
		if k%2 == 0 {
			wOff = append(wOff, timed(off))
			wOn = append(wOn, timed(on))
		} else {
			wOn = append(wOn, timed(on))
			wOff = append(wOff, timed(off))
		}
	}
	results = append(results, finish(off, "twins", 1, wOff), finish(on, "twins", 1, wOn))

	report := perfReport(results, strings.TrimSpace(ver), queue, jobs)
	t.Log("\n" + report)
	if p := os.Getenv("COSCHEML_PERF_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type perfRound struct {
	name       string // "same" (one cluster restarted) or "twins"
	round      int
	plugin     bool
	wall       []float64 // ms per sbatch
	sdiagCount int
	sdiagAveUs int
}

var submitRE = regexp.MustCompile(`REQUEST_SUBMIT_BATCH_JOB\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)`)

// submitStats reads slurmctld's own count and mean time (µs) of batch submissions.
func submitStats(sdiag string) (count, aveUs int) {
	m := submitRE.FindStringSubmatch(sdiag)
	if m == nil {
		return 0, 0
	}
	count, _ = strconv.Atoi(m[1])
	aveUs, _ = strconv.Atoi(m[2])
	return count, aveUs
}

func perfReport(rs []perfRound, ver string, queue, jobs int) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Submission cost, %s, %s, %d CPUs, host %s: %d held jobs queued, then %d timed submissions\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), ver, runtime.NumCPU(), host, queue, jobs)
	b.WriteString("| setup | round | plugin | sbatch mean (ms) | median (ms) | p95 (ms) | sdiag submits | sdiag ave_time (µs) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	type key struct {
		name string
		on   bool
	}
	wall := map[key][]float64{}
	sd := map[key][]float64{}
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %s | %.2f | %.2f | %.2f | %d | %d |\n", r.name, r.round, onOff(r.plugin),
			mean(r.wall), pct(r.wall, 50), pct(r.wall, 95), r.sdiagCount, r.sdiagAveUs)
		k := key{r.name, r.plugin}
		wall[k] = append(wall[k], r.wall...)
		sd[k] = append(sd[k], float64(r.sdiagAveUs))
	}
	b.WriteString("\n")
	for _, name := range []string{"same", "twins"} {
		off, on := key{name, false}, key{name, true}
		if len(wall[off]) == 0 || len(wall[on]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "- %s: sbatch mean %.2f ms off, %.2f ms on (%+.1f%%); median %.2f vs %.2f ms (%+.1f%%); "+
			"sdiag ave_time %.0f µs off, %.0f µs on (%+.1f%%)\n", name,
			mean(wall[off]), mean(wall[on]), 100*(mean(wall[on])/mean(wall[off])-1),
			pct(wall[off], 50), pct(wall[on], 50), 100*(pct(wall[on], 50)/pct(wall[off], 50)-1),
			mean(sd[off]), mean(sd[on]), 100*(mean(sd[on])/mean(sd[off])-1))
	}
	return b.String()
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// pct is the p-th percentile (nearest rank).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// perfSetup is the common start of the submission-cost reports: skipped without
// COSCHEML_PERF, then root, Slurm, the build and munge; it returns the artifacts
// and the sizes COSCHEML_PERF_QUEUE (default 1,000 held jobs), COSCHEML_PERF_JOBS
// and COSCHEML_PERF_ROUNDS (the caller's defaults).
func perfSetup(t *testing.T, defJobs, defRounds int) (a artifacts, queue, jobs, rounds int) {
	t.Helper()
	if os.Getenv("COSCHEML_PERF") == "" {
		t.Skip("set COSCHEML_PERF=1 to measure the submission cost with and without the plugin")
	}
	needRoot(t)
	ensurePackages(t)
	a = build(t)
	ensureMunge(t)
	return a, envInt("COSCHEML_PERF_QUEUE", 1000), envInt("COSCHEML_PERF_JOBS", defJobs), envInt("COSCHEML_PERF_ROUNDS", defRounds)
}

// asShipped undoes what the functional suite changes for its own reading
// (log_decisions: info), so that performance is measured as installed.
func asShipped(cfg *config.Config) {
	cfg.LogDecisions = config.Default().LogDecisions
}
