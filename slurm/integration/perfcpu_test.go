// SPDX-License-Identifier: Apache-2.0

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
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/coscheml/coscheml/pkg/config"
)

// TestSubmissionCPU decomposes what a submission costs slurmctld, as the CPU
// time of its threads (not wall time, which a shared machine inflates at
// random), in many short interleaved rounds. It only reports (t.Log and, with
// COSCHEML_PERF_OUT=FILE, a Markdown report): speed is never asserted. Run it with
//
//	COSCHEML_PERF=1 go test -tags integration -count=1 -v -run TestSubmissionCPU ./slurm/integration/
//
// Four identical clusters side by side, "off" without the plugin, "on" with
// it, "noop" with job_submit/defaults and "info" with the plugin and
// log_decisions: info, each first given COSCHEML_PERF_QUEUE held jobs (default 1,000). Then
// COSCHEML_PERF_ROUNDS rounds (default 20) of six modes, COSCHEML_PERF_JOBS
// submissions each (default 20), the order rotated every round:
//
//   - base: plugin off, the user's request (--gres=gpu:1): Slurm alone;
//   - rewritten: plugin off, the user submits what the plugin makes of it
//     with the queue filled (--gres=shard:N, and --nodelist=NODE when pinned;
//     with 1,000 held jobs a wait for a whole GPU in shards): Slurm's own cost
//     of the rewrite;
//   - noop: Slurm's own job_submit/defaults, which does nothing, on a third
//     cluster: what slurmctld does for any job_submit plugin;
//   - pass: plugin on, an untagged job (untagged: pass): the call, the engine's
//     answer "unchanged", nothing rewritten: the pure cost of the call;
//   - full: plugin on, the tagged job: the decision and the rewrite
//     (log_decisions at its default, verbose: no line in slurmctld's log at
//     SlurmctldDebug=info);
//   - full-info: the same on a fourth cluster with log_decisions: info (each
//     decision also a line in slurmctld's log).
//
// Per round and mode: slurmctld's process CPU clock (every thread, also those
// that exited) before and after, per submission; sdiag's mean time per
// REQUEST_SUBMIT_BATCH_JOB (reset before the round); the sbatch wall times.
// Differences are taken per round (paired), and their median and quartiles
// reported. With COSCHEML_PERF_PROFILE=1 the "on" slurmctld is also sampled by
// perf(1) during the rounds and the top symbols are reported.
func TestSubmissionCPU(t *testing.T) {
	a, queue, jobs, rounds := perfSetup(t, 20, 20)

	tagged := []string{"--hold", "--gres=gpu:1", "-o", "/dev/null",
		"--comment=coscheml:app=" + lightA, "--wrap=true"}
	untagged := []string{"--hold", "--gres=gpu:1", "-o", "/dev/null", "--wrap=true"}

	off := newCluster(t, a, false, asShipped)
	on := newCluster(t, a, true, asShipped)
	// The control: Slurm's own job_submit/defaults, a plugin that does nothing,
	// so that what slurmctld does for any job_submit plugin is told apart from
	// what coscheml's call costs.
	noop := newCluster(t, a, false, asShipped)
	conf, err := os.ReadFile(noop.path("slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	noop.writeFile("slurm.conf", string(conf)+"JobSubmitPlugins=defaults\n", 0o644)
	noop.restartCtld()
	info := newCluster(t, a, true, func(cfg *config.Config) { cfg.LogDecisions = config.LogInfo })
	rssEmpty := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}

	fillStart := time.Now()
	fillQueue(t, queue, tagged, off, on, noop, info)
	t.Logf("queued %d held jobs on each cluster in %v", queue, time.Since(fillStart).Round(time.Second))

	// What the plugin makes of the tagged job with this queue (the rounds'
	// state: with 1,000 held jobs every GPU is at its co-runner limit, so a
	// wait for a whole GPU in shards), for the "rewritten" mode.
	probeID := on.mustSbatch(tagged...)
	probe := on.showJob(probeID)
	on.cancel(probeID)
	shard := strings.TrimPrefix(probe.TresPerNode, "gres:")
	if !strings.HasPrefix(shard, "shard:") {
		t.Fatalf("the plugin did not rewrite the probe job: TresPerNode=%q ReqNodeList=%q", probe.TresPerNode, probe.ReqNodeList)
	}
	rewritten := []string{"--hold", "--gres=" + shard, "-o", "/dev/null", "--comment=coscheml:app=" + lightA, "--wrap=true"}
	rewrittenWhat := "plugin off, --gres=" + shard
	if probe.ReqNodeList != "" && probe.ReqNodeList != "(null)" {
		rewritten = append(rewritten, "--nodelist="+probe.ReqNodeList)
		rewrittenWhat += " --nodelist=" + probe.ReqNodeList
	}
	t.Logf("the plugin's answer to a tagged job with %d queued: %s", queue, rewrittenWhat)
	rssFull := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}

	modes := []cpuMode{
		{name: "base", c: off, args: tagged, what: "plugin off, --gres=gpu:1"},
		{name: "rewritten", c: off, args: rewritten, what: rewrittenWhat},
		{name: "noop", c: noop, args: untagged, what: "Slurm's job_submit/defaults (does nothing), untagged --gres=gpu:1"},
		{name: "pass", c: on, args: untagged, what: "plugin on, untagged --gres=gpu:1 (untagged: pass)"},
		{name: "full", c: on, args: tagged, what: "plugin on, tagged --gres=gpu:1 (rewritten by the plugin)"},
		{name: "full-info", c: info, args: tagged, what: "the same with log_decisions: info (a line in slurmctld's log per decision)"},
	}
	// Background: what each slurmctld burns with nothing submitted (its own
	// loops; with the plugin also the library's refresh goroutines and Go's
	// runtime threads), both measured over the same seconds.
	idle := time.Duration(envInt("COSCHEML_PERF_IDLE_S", 10)) * time.Second
	i0 := [2]int64{procCPU(t, off.ctld.pid), procCPU(t, on.ctld.pid)}
	time.Sleep(idle)
	idleMs := [2]float64{float64(procCPU(t, off.ctld.pid)-i0[0]) / 1e6 / idle.Seconds(),
		float64(procCPU(t, on.ctld.pid)-i0[1]) / 1e6 / idle.Seconds()}

	// One perf per daemon, so that the sampling's own cost falls on every mode.
	var profs []*exec.Cmd
	profOut := []string{off.path("perf.data"), on.path("perf.data")}
	if os.Getenv("COSCHEML_PERF_PROFILE") != "" {
		for i, c := range []*cluster{off, on} {
			p := exec.Command("perf", "record", "-q", "-F", "999", "-p", strconv.Itoa(c.ctld.pid), "-o", profOut[i])
			if err := p.Start(); err != nil {
				t.Logf("perf record: %v (no profile)", err)
				continue
			}
			profs = append(profs, p)
		}
	}
	for r := 0; r < rounds; r++ {
		for i := range modes {
			m := &modes[(i+r)%len(modes)]
			m.c.mustRun("sdiag", "-r")
			th0, cpu0 := threadCPU(m.c.ctld.pid), procCPU(t, m.c.ctld.pid)
			for k := 0; k < jobs; k++ {
				start := time.Now()
				m.c.mustSbatch(m.args...)
				m.wall = append(m.wall, float64(time.Since(start).Microseconds())/1000)
			}
			cpu1, th1 := procCPU(t, m.c.ctld.pid), threadCPU(m.c.ctld.pid)
			// Threads alive before and after the round are slurmctld's and Go's
			// long-lived ones (background loops, state save, GC workers); the
			// rest ran only during the round: the RPC threads that served it,
			// with the plugin's call (Go binds its M to the calling thread).
			// Slurm 23.11 and later serve RPCs on conmgr's pool of long-lived
			// threads named "worker[N]": counted as RPC threads too.
			var kept int64
			for tid, th := range th1 {
				if th0, ok := th0[tid]; ok && !isRPCWorker(th.name) {
					kept += th.ns - th0.ns
				}
			}
			m.rpc = append(m.rpc, float64(cpu1-cpu0-kept)/1e3/float64(jobs))
			count, ave := submitStats(m.c.mustRun("sdiag"))
			if count != jobs {
				t.Logf("%s round %d: sdiag counted %d submissions, want %d", m.name, r, count, jobs)
			}
			m.cpu = append(m.cpu, float64(cpu1-cpu0)/1e3/float64(jobs))
			m.sdiag = append(m.sdiag, float64(ave))
		}
	}
	profile := ""
	for _, p := range profs {
		p.Process.Signal(syscall.SIGINT)
		p.Wait()
	}
	for i, name := range []string{"off", "on"} {
		if len(profs) == 0 {
			break
		}
		out, err := exec.Command("perf", "report", "-i", profOut[i], "--stdio", "--no-children", "-g", "none",
			"--sort", "comm,dso", "--percent-limit", "1").CombinedOutput()
		if err != nil {
			t.Logf("perf report: %v", err)
		}
		profile += "slurmctld " + name + " (thread name, DSO; share of its samples):\n" + string(out)
		if name == "on" {
			out, _ = exec.Command("perf", "report", "-i", profOut[i], "--stdio", "--no-children", "-g", "none",
				"--sort", "comm,dso,sym", "--percent-limit", "0.7").CombinedOutput()
			profile += "slurmctld on, by symbol:\n" + string(out)
		}
	}
	rssEnd := [2]int{vmRSS(off.ctld.pid), vmRSS(on.ctld.pid)}
	// Every tagged job was decided: in the decision log on "on" (at verbose, not
	// in slurmctld's log), in slurmctld's log on "info".
	time.Sleep(time.Second) // the decision log's writer lingers 100 ms
	if n := countLines(on.cfg.DecisionLog, `"tag":"`+lightA+`"`); n < queue+jobs*rounds {
		t.Errorf("plugin on, but only %d decision records for %d tagged jobs", n, queue+jobs*rounds)
	}
	if n := on.countLog("job_submit/coscheml", "tag="+lightA); n != 0 {
		t.Errorf("log_decisions: verbose, yet %d decision lines in slurmctld's log at SlurmctldDebug=info", n)
	}
	if n := info.countLog("job_submit/coscheml", "tag="+lightA); n < queue+jobs*rounds {
		t.Errorf("log_decisions: info, but only %d decision lines for %d tagged jobs", n, queue+jobs*rounds)
	}

	ver, _ := off.run("sbatch", "--version")
	var b strings.Builder
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "Submission CPU cost, %s, %s, %d CPUs, host %s, load %s: %d held jobs queued per cluster, "+
		"%d rounds x %d modes x %d submissions, interleaved\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(ver), runtime.NumCPU(), host,
		strings.Join(strings.Fields(string(load))[:3], " "), queue, rounds, len(modes), jobs)
	b.WriteString("CPU µs per submission: RPC threads = slurmctld threads that lived only during the round (22.05: a thread per RPC) " +
		"or conmgr's pool threads worker[N] (23.11 and later); " +
		"all threads = the whole process (also background loops, state save, Go's own threads). Median (p25 to p75) over rounds.\n\n")
	b.WriteString("| mode | what | RPC threads CPU/submit | all threads CPU/submit | sdiag ave_time µs | sbatch mean (ms) | sbatch median (ms) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, m := range modes {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f | %.2f |\n", m.name, m.what, spread(m.rpc), spread(m.cpu), spread(m.sdiag), mean(m.wall), pct(m.wall, 50))
	}
	byName := map[string]*cpuMode{}
	for i := range modes {
		byName[modes[i].name] = &modes[i]
	}
	base := byName["base"]
	b.WriteString("\nPaired per round (same round, difference to base; % of base's median):\n\n")
	b.WriteString("| difference | RPC threads µs | % | all threads µs | % | sdiag µs | % | sbatch mean |\n|---|---|---|---|---|---|---|---|\n")
	for _, d := range []struct{ name, a, b string }{
		{"pure call cost (pass - base)", "pass", "base"},
		{"any job_submit plugin (noop - base)", "noop", "base"},
		{"coscheml's call beyond a no-op plugin (pass - noop)", "pass", "noop"},
		{"Slurm's own share of the rewrite (rewritten - base)", "rewritten", "base"},
		{"full plugin (full - base)", "full", "base"},
		{"ours in the full plugin (full - rewritten)", "full", "rewritten"},
		{"full plugin, log_decisions: info (full-info - base)", "full-info", "base"},
		{"the decision's line in slurmctld's log (full-info - full)", "full-info", "full"},
	} {
		x, y := byName[d.a], byName[d.b]
		dr, dc, ds := diffs(x.rpc, y.rpc), diffs(x.cpu, y.cpu), diffs(x.sdiag, y.sdiag)
		fmt.Fprintf(&b, "| %s | %s | %+.1f%% | %s | %+.1f%% | %s | %+.1f%% | %+.1f%% |\n", d.name,
			spread(dr), 100*pct(dr, 50)/pct(base.rpc, 50), spread(dc), 100*pct(dc, 50)/pct(base.cpu, 50),
			spread(ds), 100*pct(ds, 50)/pct(base.sdiag, 50), 100*(mean(x.wall)/mean(y.wall)-1))
	}
	fmt.Fprintf(&b, "\nslurmctld VmRSS (KiB), off / on / difference: empty %d / %d / %+d; %d held jobs %d / %d / %+d; end (%d jobs) %d / %d / %+d\n",
		rssEmpty[0], rssEmpty[1], rssEmpty[1]-rssEmpty[0], queue, rssFull[0], rssFull[1], rssFull[1]-rssFull[0],
		queue+2*jobs*rounds, rssEnd[0], rssEnd[1], rssEnd[1]-rssEnd[0])
	fmt.Fprintf(&b, "\nslurmctld CPU with nothing submitted (%v, before the rounds): off %.2f ms/s, on %.2f ms/s\n", idle, idleMs[0], idleMs[1])
	if profile != "" {
		b.WriteString("\nperf profiles of each slurmctld during all rounds:\n\n```\n")
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
	rpc        []float64 // the same, of the threads that served RPCs (isRPCWorker, or lived only during the round)
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

// threadTime is one thread's CPU time (ns) and name.
type threadTime struct {
	ns   int64
	name string
}

// isRPCWorker says whether a slurmctld thread of this name is one of conmgr's
// pool threads, which serve RPCs on Slurm 23.11 and later (22.05 starts a
// thread per RPC instead).
func isRPCWorker(name string) bool { return strings.HasPrefix(name, "worker[") }

// threadCPU reads the CPU time (ns) of each live thread of pid from
// /proc/PID/task/TID/schedstat (its first field: time on a CPU), and its name.
func threadCPU(pid int) map[int]threadTime {
	out := map[int]threadTime{}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // exited meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				name, _ := os.ReadFile(dir + "/" + e.Name() + "/comm")
				out[tid] = threadTime{ns: ns, name: strings.TrimSpace(string(name))}
			}
		}
	}
	return out
}

// fillQueue submits n held jobs to each cluster, a few sbatch at a time (10,000
// one by one would take many minutes on a small machine).
func fillQueue(t *testing.T, n int, args []string, cs ...*cluster) {
	t.Helper()
	workers := envInt("COSCHEML_PERF_FILL_WORKERS", 4)
	errs := make(chan error, workers*len(cs))
	var wg sync.WaitGroup
	for _, c := range cs {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < n; k += workers {
					if _, stderr, err := c.sbatch(args...); err != nil {
						errs <- fmt.Errorf("%v: %s", err, stderr)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
