//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestSubmissionCPU decomposes what a submission costs slurmctld, as the CPU
// time of its threads (not wall time, which a shared machine inflates at
// random), in many short interleaved rounds. It only reports (t.Log and, with
// COSCHEML_PERF_OUT=FILE, a Markdown report): speed is never asserted. Run it with
//
//	COSCHEML_PERF=1 go test -tags integration -count=1 -v -run TestSubmissionCPU ./slurm/integration/
//
// Two identical clusters side by side, "off" without the plugin and "on" with
// it, each first given COSCHEML_PERF_QUEUE held jobs (default 1,000). Then
// COSCHEML_PERF_ROUNDS rounds (default 20) of four modes, COSCHEML_PERF_JOBS
// submissions each (default 20), the order rotated every round:
//
//   - base: plugin off, the user's request (--gres=gpu:1): Slurm alone;
//   - rewritten: plugin off, the user submits what the plugin would have made
//     of it (--gres=shard:N --nodelist=NODE): Slurm's own cost of the rewrite;
//   - pass: plugin on, an untagged job (untagged: pass): the call, the engine's
//     answer "unchanged", nothing rewritten: the pure cost of the call;
//   - full: plugin on, the tagged job: the decision and the rewrite.
//
// Per round and mode: slurmctld's process CPU clock (every thread, also those
// that exited) before and after, per submission; sdiag's mean time per
// REQUEST_SUBMIT_BATCH_JOB (reset before the round); the sbatch wall times.
// Differences are taken per round (paired), and their median and quartiles
// reported. With COSCHEML_PERF_PROFILE=1 the "on" slurmctld is also sampled by
// perf(1) during the rounds and the top symbols are reported.
func TestSubmissionCPU(t *testing.T) {
	if os.Getenv("COSCHEML_PERF") == "" {
		t.Skip("set COSCHEML_PERF=1 to measure the submission cost with and without the plugin")
	}
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	queue := envInt("COSCHEML_PERF_QUEUE", 1000)
	jobs := envInt("COSCHEML_PERF_JOBS", 20)
	rounds := envInt("COSCHEML_PERF_ROUNDS", 20)

	tagged := []string{"--hold", "--gres=gpu:1", "-o", "/dev/null",
		"--comment=coscheml:app=" + lightA, "--wrap=true"}
	untagged := []string{"--hold", "--gres=gpu:1", "-o", "/dev/null", "--wrap=true"}

	off := newCluster(t, a, false, nil)
	on := newCluster(t, a, true, nil)
	rssEmpty := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}

	// What the plugin makes of the tagged job, for the "rewritten" mode.
	probe := on.showJob(on.mustSbatch(tagged...))
	shard := strings.TrimPrefix(probe.TresPerNode, "gres:")
	if !strings.HasPrefix(shard, "shard:") || probe.ReqNodeList == "" || probe.ReqNodeList == "(null)" {
		t.Fatalf("the plugin did not rewrite the probe job: TresPerNode=%q ReqNodeList=%q", probe.TresPerNode, probe.ReqNodeList)
	}
	rewritten := []string{"--hold", "--gres=" + shard, "--nodelist=" + probe.ReqNodeList, "-o", "/dev/null",
		"--comment=coscheml:app=" + lightA, "--wrap=true"}

	fillStart := time.Now()
	for k := 0; k < queue; k++ {
		off.mustSbatch(tagged...)
		on.mustSbatch(tagged...)
	}
	t.Logf("queued %d held jobs on each cluster in %v", queue, time.Since(fillStart).Round(time.Second))
	rssFull := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}

	modes := []cpuMode{
		{name: "base", c: off, args: tagged, what: "plugin off, --gres=gpu:1"},
		{name: "rewritten", c: off, args: rewritten, what: "plugin off, --gres=" + shard + " --nodelist=" + probe.ReqNodeList},
		{name: "pass", c: on, args: untagged, what: "plugin on, untagged --gres=gpu:1 (untagged: pass)"},
		{name: "full", c: on, args: tagged, what: "plugin on, tagged --gres=gpu:1 (rewritten by the plugin)"},
	}
	var prof *exec.Cmd
	profOut := on.path("perf.data")
	if os.Getenv("COSCHEML_PERF_PROFILE") != "" {
		prof = exec.Command("perf", "record", "-q", "-F", "1999", "-g", "-p", strconv.Itoa(on.ctld.pid), "-o", profOut)
		if err := prof.Start(); err != nil {
			t.Logf("perf record: %v (no profile)", err)
			prof = nil
		}
	}
	for r := 0; r < rounds; r++ {
		for i := range modes {
			m := &modes[(i+r)%len(modes)]
			m.c.mustRun("sdiag", "-r")
			cpu0 := procCPU(t, m.c.ctld.pid)
			for k := 0; k < jobs; k++ {
				start := time.Now()
				m.c.mustSbatch(m.args...)
				m.wall = append(m.wall, float64(time.Since(start).Microseconds())/1000)
			}
			cpu1 := procCPU(t, m.c.ctld.pid)
			count, ave := submitStats(m.c.mustRun("sdiag"))
			if count != jobs {
				t.Logf("%s round %d: sdiag counted %d submissions, want %d", m.name, r, count, jobs)
			}
			m.cpu = append(m.cpu, float64(cpu1-cpu0)/1e3/float64(jobs))
			m.sdiag = append(m.sdiag, float64(ave))
		}
	}
	profile := ""
	if prof != nil {
		prof.Process.Signal(syscall.SIGINT)
		prof.Wait()
		out, err := exec.Command("perf", "report", "-i", profOut, "--stdio", "--no-children",
			"--sort", "dso,sym", "--percent-limit", "1.5", "-g", "none").CombinedOutput()
		if err != nil {
			t.Logf("perf report: %v", err)
		}
		profile = string(out)
	}
	rssEnd := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}
	if n := on.countLog("job_submit/coscheml", "tag="+lightA); n < queue+jobs*rounds {
		t.Errorf("plugin on, but only %d decision lines for %d tagged jobs", n, queue+jobs*rounds)
	}

	ver, _ := off.run("sbatch", "--version")
	var b strings.Builder
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "Submission CPU cost, %s, %s, %d CPUs, host %s, load %s: %d held jobs queued per cluster, "+
		"%d rounds x 4 modes x %d submissions, interleaved\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(ver), runtime.NumCPU(), host,
		strings.Join(strings.Fields(string(load))[:3], " "), queue, rounds, jobs)
	b.WriteString("| mode | what | slurmctld CPU/submit, median (p25-p75) µs | sdiag ave_time, median (p25-p75) µs | sbatch mean (ms) | sbatch median (ms) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, m := range modes {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f | %.2f |\n", m.name, m.what, spread(m.cpu), spread(m.sdiag), mean(m.wall), pct(m.wall, 50))
	}
	byName := map[string]*cpuMode{}
	for i := range modes {
		byName[modes[i].name] = &modes[i]
	}
	base := byName["base"]
	b.WriteString("\nPaired per round (same round, difference to base; % of base's median):\n\n")
	b.WriteString("| difference | CPU/submit µs, median (p25-p75) | % | sdiag µs, median (p25-p75) | % | sbatch mean |\n|---|---|---|---|---|---|\n")
	for _, d := range []struct{ name, a, b string }{
		{"pure call cost (pass - base)", "pass", "base"},
		{"Slurm's own share of the rewrite (rewritten - base)", "rewritten", "base"},
		{"full plugin (full - base)", "full", "base"},
		{"ours in the full plugin (full - rewritten)", "full", "rewritten"},
	} {
		x, y := byName[d.a], byName[d.b]
		dc, ds := diffs(x.cpu, y.cpu), diffs(x.sdiag, y.sdiag)
		fmt.Fprintf(&b, "| %s | %s | %+.1f%% | %s | %+.1f%% | %+.1f%% |\n", d.name,
			spread(dc), 100*pct(dc, 50)/pct(base.cpu, 50), spread(ds), 100*pct(ds, 50)/pct(base.sdiag, 50),
			100*(mean(x.wall)/mean(y.wall)-1))
	}
	fmt.Fprintf(&b, "\nslurmctld VmRSS (KiB), off / on / difference: empty %d / %d / %+d; %d held jobs %d / %d / %+d; end (%d jobs) %d / %d / %+d\n",
		rssEmpty[0], rssEmpty[1], rssEmpty[1]-rssEmpty[0], queue, rssFull[0], rssFull[1], rssFull[1]-rssFull[0],
		queue+2*jobs*rounds, rssEnd[0], rssEnd[1], rssEnd[1]-rssEnd[0])
	if profile != "" {
		b.WriteString("\nperf profile of the \"on\" slurmctld during all rounds (dso, symbol; >= 1.5%):\n\n```\n")
		for _, l := range strings.Split(profile, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				b.WriteString(l + "\n")
			}
		}
		b.WriteString("```\n")
	}
	report := b.String()
	t.Log("\n" + report)
	if p := os.Getenv("COSCHEML_PERF_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type cpuMode struct {
	name, what string
	c          *cluster
	args       []string
	cpu        []float64 // µs of slurmctld CPU per submission, one per round
	sdiag      []float64 // sdiag ave_time µs, one per round
	wall       []float64 // ms per sbatch
}

func (c *cluster) mustRun(name string, args ...string) string {
	c.t.Helper()
	out, err := c.run(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// procCPU reads the CPU time (ns) of every thread of process pid, those that
// exited included, from its process CPU clock (nanoseconds; /proc's utime and
// stime count 10 ms ticks, too coarse for a round of a few ms).
func procCPU(t *testing.T, pid int) int64 {
	t.Helper()
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's posix-timers.
	clock := uintptr((^pid << 3) | 2)
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		t.Fatalf("clock_gettime(process CPU clock of %d): %v", pid, e)
	}
	return ts.Nano()
}

// vmRSS is the resident set size of pid in KiB (0 when unreadable).
func vmRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// diffs is a - b element by element (rounds paired).
func diffs(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] - b[i]
	}
	return out
}

// spread formats the median and quartiles.
func spread(xs []float64) string {
	s := slices.Clone(xs)
	return fmt.Sprintf("%.0f (%.0f to %.0f)", pct(s, 50), pct(s, 25), pct(s, 75))
}
