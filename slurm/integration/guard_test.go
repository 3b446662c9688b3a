// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/emulate"
)

// The runtime guard on real daemons: `coscheml-node guard` per node reads the
// emulated jobs' readings (guard.emulated_metrics_dir, the same Monitor as on
// NVML) and acts through scontrol and scancel.

// guardTiming is the guard's clock for a replay compressed in time: the
// shortest period, two readings of smoothing and a breach held two seconds.
type guardTiming struct {
	period, sustain time.Duration
	window          int
}

var fastGuard = guardTiming{period: time.Second, sustain: 2 * time.Second, window: 2}

// guardConfig turns the guard on over the emulated metrics folder of the
// cluster (its var/ folder, found from residency_dir).
func guardConfig(gt guardTiming) func(*config.Config) {
	return func(cfg *config.Config) {
		base := filepath.Dir(cfg.ResidencyDir)
		cfg.Guard.Enabled = true
		cfg.Guard.EmulatedMetricsDir = filepath.Join(base, "gpumetrics")
		cfg.Guard.EventDir = filepath.Join(base, "guard")
		cfg.Guard.StateDir = filepath.Join(base, "guard-state")
		cfg.Guard.Period, cfg.Guard.Window, cfg.Guard.SustainFor = gt.period, gt.window, gt.sustain
	}
}

// startGuards starts one guard per node, as coscheml-guard.service runs on
// each; the returned function stops them and logs what they said.
func (c *cluster) startGuards() (stop func()) {
	t := c.t
	if err := os.MkdirAll(c.cfg.Guard.EmulatedMetricsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	type guardProc struct {
		cmd *exec.Cmd
		log string
		f   *os.File
	}
	var procs []guardProc
	for _, n := range c.nodes {
		logPath := c.path("log", "guard-"+n+".log")
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(c.a.binDir, "coscheml-node"), "guard", "--config", c.cfgPath, "--node", n, "--no-syslog")
		cmd.Env = c.env
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			f.Close()
			t.Fatal(err)
		}
		procs = append(procs, guardProc{cmd, logPath, f})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, p := range procs {
				p.cmd.Process.Signal(os.Interrupt)
			}
			for _, p := range procs {
				p.cmd.Wait()
				p.f.Close()
				if b, _ := os.ReadFile(p.log); len(b) > 0 && (t.Failed() || testing.Verbose()) {
					t.Logf("%s:\n%s", filepath.Base(p.log), tail(b, 3000))
				}
			}
		})
	}
}

// TestGuard runs the guard against co-located emulated jobs.
func TestGuard(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	// The plugin is off: the jobs ask for shards of a named node, so Slurm's
	// first fit puts two of them on one GPU whatever a model would say.
	c := newCluster(t, a, false, func(cfg *config.Config) {
		guardConfig(fastGuard)(cfg)
		// The speed-breach subtest shows suspension and its resume; the default
		// floor action (requeue elsewhere) is what make e2e runs.
		cfg.Guard.Actions.Train.Floor, cfg.Guard.Actions.HPC.Floor = "suspend", "suspend"
	})
	t.Cleanup(c.startGuards())
	sub := c.subtests(t)
	sub("memory_grower", testGuardMemoryGrower)
	sub("speed_breach", testGuardSpeedBreach)
}

// submitEmulated submits an emulated train job of tag (coscheml e2e-job) with
// the placement flags place (e.g. "-w", node, "--gres=shard:2") and extra
// e2e-job flags.
func (c *cluster) submitEmulated(tag string, work float64, place []string, extra ...string) int {
	c.t.Helper()
	results := c.path("jobs", "results")
	c.mkdirs(filepath.Join("jobs", "results"), filepath.Join("jobs", "out"))
	args := append(append([]string{"-J", "guard"}, place...), "--time=10", "-o", c.path("jobs", "out", "%j.out"),
		fmt.Sprintf("--comment=coscheml:app=%s,class=train", tag),
		fmt.Sprintf("--wrap=exec %s --config %s e2e-job --tag %s --class train --work %g --results %s %s",
			filepath.Join(c.a.binDir, "coscheml"), c.cfgPath, tag, work, results, strings.Join(extra, " ")))
	return c.mustSbatch(args...)
}

// emulatedJob submits an emulated job of tag on node, on shards of a GPU,
// with extra e2e-job flags; it waits until the job runs.
func (c *cluster) emulatedJob(node, tag string, work float64, extra ...string) job {
	c.t.Helper()
	id := c.submitEmulated(tag, work, []string{"-w", node, "--gres=shard:2"}, extra...)
	j, ok := c.waitJob(id, 30*time.Second, func(j job) bool { return j.State == "RUNNING" })
	if !ok {
		c.t.Fatalf("job %d did not start within 30 s:\n%s", id, j.Raw)
	}
	return j
}

func (c *cluster) waitJob(id int, d time.Duration, ok func(job) bool) (job, bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		j := c.showJob(id)
		if ok(j) {
			return j, true
		}
		if time.Now().After(deadline) {
			return j, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func adminComment(j job) string {
	for _, line := range strings.Split(j.Raw, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "AdminComment="); ok {
			return s
		}
	}
	return ""
}

// readResult reads the result record of one emulated job.
func (c *cluster) readResult(id int) (emulate.Result, bool) {
	rs, _, err := emulate.ReadDir(c.path("jobs", "results"))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, r := range rs {
		if r.JobID == strconv.Itoa(id) {
			return r, true
		}
	}
	return emulate.Result{}, false
}

// An emulated job that grows past its memory budget on a shared GPU is the one
// acted on (requeued, the default memory action); its co-runner completes; its
// owner sees why in the job's AdminComment and in coscheml explain.
func testGuardMemoryGrower(t *testing.T, c *cluster) {
	// dcgan-bs64 runs at 0.91 next to mobilenetv3-bs128 (Lucid): the co-runner
	// is never below its floor, only memory is at stake.
	co := c.emulatedJob("n1", "dcgan-bs64", 20)
	grower := c.emulatedJob("n1", "mobilenetv3-bs128", 60, "--grow-mem-mib", "140000", "--grow-after", "2s")
	if co.GPUIdx == "" || co.GPUIdx != grower.GPUIdx {
		t.Fatalf("the jobs do not share a GPU (co-runner gpu %q, grower gpu %q): the test proves nothing", co.GPUIdx, grower.GPUIdx)
	}
	g, ok := c.waitJob(grower.ID, 30*time.Second, func(j job) bool {
		return strings.Contains(adminComment(j), "over its budget") && j.State != "RUNNING"
	})
	if !ok {
		t.Fatalf("the grower %d was not acted on within 30 s (state %s, AdminComment %q)", grower.ID, g.State, adminComment(g))
	}
	t.Logf("grower %d: %s, AdminComment=%s", grower.ID, g.State, adminComment(g))
	if cj := c.showJob(co.ID); strings.Contains(adminComment(cj), "coscheml guard") {
		t.Errorf("the co-runner %d was acted on: %q", co.ID, adminComment(cj))
	}
	explain := c.coscheml("explain", strconv.Itoa(grower.ID))
	if !strings.Contains(explain, "budget") || !strings.Contains(explain, "requeue") {
		t.Errorf("coscheml explain %d does not say the guard requeued it over its budget:\n%s", grower.ID, explain)
	}
	// The requeued grower would grow again; it has made its point.
	c.run("scancel", strconv.Itoa(grower.ID))
	if j, ok := c.waitJob(co.ID, 60*time.Second, func(j job) bool { return j.State == "COMPLETED" }); !ok {
		t.Fatalf("the co-runner %d did not complete: %s", co.ID, j.State)
	}
	if _, ok := c.readResult(co.ID); !ok {
		t.Errorf("the co-runner %d wrote no result record", co.ID)
	}
}

// A speed breach: the later co-runner holds the earlier job below its floor;
// the guard suspends the later one, the earlier one runs at full speed to its
// end, and the suspended one is resumed and completes.
func testGuardSpeedBreach(t *testing.T, c *cluster) {
	// Lucid: mobilenetv3-bs128 runs at 0.63 next to dcgan-bs64 (floor 0.75),
	// with an SM share (63% of 100%) that is its fair slice: a slowdown, not idling.
	const work = 25
	protected := c.emulatedJob("n2", "mobilenetv3-bs128", work)
	later := c.emulatedJob("n2", "dcgan-bs64", 15)
	if protected.GPUIdx == "" || protected.GPUIdx != later.GPUIdx {
		t.Fatalf("the jobs do not share a GPU (%q, %q): the test proves nothing", protected.GPUIdx, later.GPUIdx)
	}
	l, ok := c.waitJob(later.ID, 30*time.Second, func(j job) bool { return j.State == "SUSPENDED" })
	if !ok {
		t.Fatalf("the later co-runner %d was not suspended within 30 s (state %s, AdminComment %q)", later.ID, l.State, adminComment(l))
	}
	if ac := adminComment(l); !strings.Contains(ac, "suspend it until job "+strconv.Itoa(protected.ID)+" ends") {
		t.Errorf("AdminComment of %d: %q", later.ID, ac)
	}
	if p := c.showJob(protected.ID); p.State != "RUNNING" || strings.Contains(adminComment(p), "coscheml guard") {
		t.Errorf("the protected job %d: %s, AdminComment %q", protected.ID, p.State, adminComment(p))
	}
	explain := c.coscheml("explain", strconv.Itoa(later.ID))
	if !strings.Contains(explain, "suspend") {
		t.Errorf("coscheml explain %d does not say it was suspended:\n%s", later.ID, explain)
	}
	if j, ok := c.waitJob(protected.ID, 90*time.Second, func(j job) bool { return j.State == "COMPLETED" }); !ok {
		t.Fatalf("the protected job %d did not complete: %s", protected.ID, j.State)
	}
	if j, ok := c.waitJob(later.ID, 90*time.Second, func(j job) bool { return j.State == "COMPLETED" }); !ok {
		t.Fatalf("the suspended job %d was not resumed to completion: %s", later.ID, j.State)
	}
	pr, ok1 := c.readResult(protected.ID)
	lr, ok2 := c.readResult(later.ID)
	if !ok1 || !ok2 {
		t.Fatalf("result records missing (protected %v, later %v)", ok1, ok2)
	}
	t.Logf("protected %d: %.1f s below floor, ran %.1f s for %g s of work; later %d: stopped %.1f s",
		protected.ID, pr.BelowFloorS, pr.End-pr.Start, pr.Work, later.ID, lr.StoppedS)
	// Unguarded, the protected job would spend its whole run (work/0.63 s)
	// below its floor; guarded, only the guard's reaction time.
	if pr.BelowFloorS >= work/0.63/2 {
		t.Errorf("the protected job spent %.1f s below its floor: the guard did not shorten it", pr.BelowFloorS)
	}
	if lr.StoppedS <= 0 {
		t.Errorf("the suspended job reports no stopped time: %+v", lr)
	}
}

// TestGuardRequeueElsewhere: the default floor action end to end, on the
// plugin's exact pinning. The plugin, predicting every pair at full speed,
// puts a job next to one it slows below its floor; the guard requeues the
// later one and keeps it off the node; the re-decide loop re-pins it (typed)
// away from there, where Slurm starts it again; both complete. On 22.05 too:
// a requeued job's typed re-pin is honoured there (a pending job's is not).
// optimisticGuardedCluster is a typed cluster whose plugin predicts every pair
// at full speed (so it shares wherever the rules allow), with the re-decide loop
// and the fast guard configured, and a credential lifetime of 5 s (a requeued
// job waits it out before it starts again, 120 s by default); more edits the
// configuration further (nil: none).
func optimisticGuardedCluster(t *testing.T, a artifacts, more func(*config.Config)) *cluster {
	return newClusterTopo(t, a, true, topology{typed: true, redecide: time.Second, extraConf: "AuthInfo=cred_expire=5"}, func(cfg *config.Config) {
		cfg.ShardPinning = config.PinTyped
		cfg.ShardTypePrefix = "g"
		cfg.WaitDefer = config.Default().WaitDefer
		cfg.Predictor = config.PredictorOptimistic
		guardConfig(fastGuard)(cfg)
		if more != nil {
			more(cfg)
		}
	})
}

func TestGuardRequeueElsewhere(t *testing.T) {
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	c := optimisticGuardedCluster(t, a, nil)
	t.Cleanup(c.startGuards())
	// The plugin places both jobs (--gres=gpu:1), so the optimistic predictor
	// decides that they share.
	submit := func(tag string, work float64) int { return c.submitEmulated(tag, work, []string{"--gres=gpu:1"}) }
	running := func(j job) bool { return j.State == "RUNNING" }
	// Lucid: mobilenetv3-bs128 runs at 0.63 next to dcgan-bs64 (floor 0.75).
	protected := submit("mobilenetv3-bs128", 15)
	p, ok := c.waitJob(protected, 30*time.Second, running)
	if !ok {
		t.Fatalf("job %d did not start: %s", protected, p.Raw)
	}
	later := submit("dcgan-bs64", 10)
	l, ok := c.waitJob(later, 30*time.Second, running)
	if !ok {
		t.Fatalf("job %d did not start: %s", later, l.Raw)
	}
	if l.NodeList != p.NodeList || l.GPUIdx != p.GPUIdx {
		t.Fatalf("the plugin did not put the jobs on one GPU (%s/%s, %s/%s): the test proves nothing", p.NodeList, p.GPUIdx, l.NodeList, l.GPUIdx)
	}
	first := l.NodeList
	l, ok = c.waitJob(later, 30*time.Second, func(j job) bool { return strings.Contains(adminComment(j), "requeue") && j.State != "RUNNING" })
	if !ok {
		t.Fatalf("the later co-runner %d was not requeued within 30 s (state %s, AdminComment %q)", later, l.State, adminComment(l))
	}
	t.Logf("later %d: %s (%s), AdminComment=%s", later, l.State, l.Reason, adminComment(l))
	l, ok = c.waitJob(later, 150*time.Second, func(j job) bool { return j.State == "RUNNING" || j.State == "COMPLETED" })
	if !ok {
		t.Fatalf("the requeued job %d did not start again within 150 s: %s (%s), TresPerNode=%s ReqNodeList=%s\n%s",
			later, l.State, l.Reason, l.TresPerNode, l.ReqNodeList, l.Raw)
	}
	if l.NodeList == first {
		t.Errorf("the requeued job %d started again on %s, the node it was requeued from", later, first)
	}
	t.Logf("later %d: started again on %s GPU %s (%s)", later, l.NodeList, l.GPUIdx, l.TresPerNode)
	for _, id := range []int{protected, later} {
		if j, ok := c.waitJob(id, 120*time.Second, func(j job) bool { return j.State == "COMPLETED" }); !ok {
			t.Errorf("job %d did not complete: %s (%s)", id, j.State, j.Reason)
		}
	}
	if pj := c.showJob(protected); strings.Contains(adminComment(pj), "coscheml guard") {
		t.Errorf("the protected job %d was acted on: %q", protected, adminComment(pj))
	}
}
