// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/emulate"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/replay"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/submit"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// The trace replay on real daemons (make e2e; docs/evaluation.md "On real Slurm:
// trace replay"). Each job of a time-compressed trace sample is an emulated GPU
// job (coscheml e2e-job, package emulate) that runs at its true speed next to the
// co-runners Slurm actually gave it; the same jobs are replayed under three
// setups and simulated in-process beside each.

// replayOptions say what one replay does.
type replayOptions struct {
	jobs     int
	seeds    []int64
	setups   []string
	compress float64
	load     float64
	minWork  float64
	maxDur   float64 // trace seconds
	slack    float64 // time limit = ceil(work * slack) minutes
	typed    bool    // per-GPU Slurm types and shard_pinning: typed
	trace    string  // philly | generic:FILE | alibaba:FILE
	// waitDefer is coscheml's wait_defer; with it the re-decide loop runs
	// beside slurmctld every redecide (0: a "wait" runs on a whole GPU).
	waitDefer, redecide time.Duration
	// guard runs coscheml-node guard on every node over the emulated jobs'
	// readings (E2E_GUARD=on); predictor is the plugin's (E2E_PREDICTOR).
	guard     bool
	predictor string
	// guardFloor, when set (E2E_GUARD_FLOOR), is the guard's floor action for
	// classes hpc and train; infer keeps its default (requeue: a suspended
	// server would time its clients out).
	guardFloor string
	// maxGPUs caps each job's GPUs (E2E_MAX_GPUS; default a node's GPUs: the
	// trace's several-GPU jobs run on one node).
	maxGPUs int
}

// Defaults of make e2e (docs/evaluation.md says how they were chosen): the
// simulator demo's sample (jobs of at most 24 h, offered load 2) on the 4x4 GPU
// cluster, 500x faster than the trace, at least 2 s of work per job; coscheml
// with typed pinning and otherwise the default configuration: wait_defer as
// config.Default() has it (20 s), with the re-decide loop beside slurmctld as
// the plugin package starts it, a pass every E2E_REDECIDE (E2E_WAIT_DEFER=0: no
// loop).
func defaultReplay() replayOptions {
	return replayOptions{jobs: 200, seeds: []int64{1, 2, 3}, setups: replay.Setups, compress: 500, load: 2,
		minWork: 2, maxDur: 24 * 3600, slack: 3, typed: true, trace: "philly",
		waitDefer: config.Default().WaitDefer, redecide: time.Second, predictor: config.PredictorModel, maxGPUs: gpusPerNode}
}

// replayFromEnv reads E2E_JOBS, E2E_SEEDS (count), E2E_FIRST_SEED (1: seeds
// 1..E2E_SEEDS; a benchmark may run seed by seed), E2E_SETUPS, E2E_COMPRESS,
// E2E_LOAD, E2E_MIN_WORK, E2E_PINNING (typed | first-fit), E2E_WAIT_DEFER
// (0: no re-decide loop), E2E_REDECIDE (the loop's interval) and E2E_TRACE.
func replayFromEnv(t *testing.T, o replayOptions) replayOptions {
	t.Helper()
	num := func(name string, dst *float64) {
		if v := os.Getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0) {
				t.Fatalf("%s=%q: want a number >= 0", name, v)
			}
			*dst = f
		}
	}
	if v := os.Getenv("E2E_MAX_GPUS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > gpusPerNode {
			t.Fatalf("E2E_MAX_GPUS=%q: want 1..%d", v, gpusPerNode)
		}
		o.maxGPUs = n
	}
	if v := os.Getenv("E2E_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			t.Fatalf("E2E_JOBS=%q: want 1..5000", v)
		}
		o.jobs = n
	}
	first := 1
	if v := os.Getenv("E2E_FIRST_SEED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("E2E_FIRST_SEED=%q: want 1..1000", v)
		}
		first = n
	}
	if v := os.Getenv("E2E_SEEDS"); v != "" || first != 1 {
		n := len(o.seeds)
		if v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 20 {
				t.Fatalf("E2E_SEEDS=%q: want 1..20", v)
			}
		}
		o.seeds = nil
		for s := first; s < first+n; s++ {
			o.seeds = append(o.seeds, int64(s))
		}
	}
	if v := os.Getenv("E2E_SETUPS"); v != "" {
		o.setups = nil
		for _, s := range strings.Split(v, ",") {
			if _, err := replay.SimPolicy(s); err != nil {
				t.Fatalf("E2E_SETUPS: %v", err)
			}
			o.setups = append(o.setups, s)
		}
	}
	num("E2E_COMPRESS", &o.compress)
	num("E2E_LOAD", &o.load)
	num("E2E_MIN_WORK", &o.minWork)
	switch v := os.Getenv("E2E_PINNING"); v {
	case "", config.PinTyped:
	case config.PinFirstFit:
		o.typed = false
	default:
		t.Fatalf("E2E_PINNING=%q: want typed or first-fit", v)
	}
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				t.Fatalf("%s=%q: want a duration >= 0 (10s)", name, v)
			}
			*dst = d
		}
	}
	dur("E2E_WAIT_DEFER", &o.waitDefer)
	dur("E2E_REDECIDE", &o.redecide)
	if o.waitDefer > 0 && (o.redecide < 100*time.Millisecond || o.redecide > o.waitDefer/2) {
		t.Fatalf("E2E_REDECIDE=%s: want 100ms..E2E_WAIT_DEFER/2 (%s)", o.redecide, o.waitDefer/2)
	}
	if v := os.Getenv("E2E_TRACE"); v != "" {
		o.trace = v
	}
	switch v := os.Getenv("E2E_GUARD"); v {
	case "", "off":
	case "on":
		o.guard = true
	default:
		t.Fatalf("E2E_GUARD=%q: want on or off", v)
	}
	if v := os.Getenv("E2E_GUARD_FLOOR"); v != "" {
		if !o.guard || !slices.Contains(config.GuardFloorActions, v) {
			t.Fatalf("E2E_GUARD_FLOOR=%q: want one of %v, with E2E_GUARD=on", v, config.GuardFloorActions)
		}
		o.guardFloor = v
	}
	switch v := os.Getenv("E2E_PREDICTOR"); v {
	case "":
	case config.PredictorModel, config.PredictorOptimistic:
		o.predictor = v
	default:
		t.Fatalf("E2E_PREDICTOR=%q: want %s or %s", v, config.PredictorModel, config.PredictorOptimistic)
	}
	return o
}

// TestE2E is the benchmark (make e2e): E2E=1 runs it; it writes e2e-report/.
func TestE2E(t *testing.T) {
	if os.Getenv("E2E") == "" {
		t.Skip("the trace replay benchmark runs with E2E=1 (make e2e)")
	}
	needRoot(t)
	ensurePackages(t)
	a := build(t)
	ensureMunge(t)
	o := replayFromEnv(t, defaultReplay())
	dir := os.Getenv("E2E_REPORT")
	if dir == "" {
		dir = filepath.Join(a.repo, "e2e-report")
	}
	// Written after every seed, so that a benchmark stopped early keeps what
	// finished.
	save := func(rep replay.Report) {
		if err := replay.Write(dir, rep); err != nil {
			t.Fatal(err)
		}
	}
	rep := runReplay(t, a, o, save)
	var md bytes.Buffer
	if err := replay.Markdown(&md, rep.Summaries); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n%s\n%s\nReport written to %s/ (results.json, summary.md)\n", strings.Join(rep.Setup, "\n"), md.String(), dir)
}

// TestReplayShort is the short replay of the ordinary suite: 40 jobs of one
// seed under coscheml; every job must end and every pinned placement must land
// on the GPU its policy chose.
func TestReplayShort(t *testing.T) {
	needRoot(t)
	a := build(t)
	ensureMunge(t)
	o := defaultReplay()
	o.jobs, o.seeds, o.setups = 40, []int64{1}, []string{replay.CoScheML}
	rep := runReplay(t, a, o, nil)
	for _, r := range rep.Runs {
		if r.Ended != r.Jobs {
			t.Errorf("%s seed %d: %d of %d jobs ended (missing %v)", r.Setup, r.Seed, r.Ended, r.Jobs, r.Missing)
		}
		p := r.Placement
		if p.Pinned == 0 {
			t.Errorf("%s seed %d: no placement was pinned to a GPU: the check proves nothing (%+v)", r.Setup, r.Seed, p)
		}
		// Every placement decided at submit lands; a re-decided one too where the
		// update names the GPU's type (23.11+). On 22.05 the loop's update can
		// only ask for an untyped count, which a job ending before Slurm starts
		// the job can redirect (docs/install.md): reported, not required.
		atSubmit, landedAtSubmit := p.Pinned-p.RedecidedPinned, p.Landed-p.RedecidedLanded
		if landedAtSubmit != atSubmit {
			t.Errorf("%s seed %d: %d of %d placements decided at submit landed on the intended GPU", r.Setup, r.Seed, landedAtSubmit, atSubmit)
		}
		if exact := submit.TypedUpdates(slurmVersionNumber(a.slurm.version)); exact && p.RedecidedLanded != p.RedecidedPinned {
			t.Errorf("%s seed %d: %d of %d re-decided placements landed on the intended GPU (typed updates)", r.Setup, r.Seed, p.RedecidedLanded, p.RedecidedPinned)
		}
		t.Logf("%s seed %d: re-decided by the loop: %d of %d landed as intended (Slurm %s)", r.Setup, r.Seed, p.RedecidedLanded, p.RedecidedPinned, a.slurm.version)
		t.Logf("%s seed %d: %d jobs ended in %.0f s; avg JCT %.1f s (simulator %.1f s); %d of %d pinned placements as intended, %d not pinned",
			r.Setup, r.Seed, r.Ended, r.WallS, r.Real.AvgJCT, r.Sim.AvgJCT, p.Landed, p.Pinned, p.Unpinned)
	}
}

// replayTruth is the ground truth of both the emulated jobs and the simulator:
// the embedded Lucid data, as coscheml e2e-job and coscheml simulate load it.
func replayTruth(t *testing.T) *truth.Table {
	t.Helper()
	tt, err := truth.FromLucid(models.DefaultSoloCSV, models.DefaultPairsCSV)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// replayTrace reads the trace named by spec: "philly" (the shipped one) or
// "FORMAT:FILE" (philly, generic, alibaba).
func replayTrace(t *testing.T, spec string) *trace.Trace {
	t.Helper()
	format, file, _ := strings.Cut(spec, ":")
	var read func(io.Reader) (*trace.Trace, error)
	switch format {
	case "philly":
		read = trace.ReadPhilly
	case "generic":
		read = trace.ReadGeneric
	case "alibaba":
		read = trace.ReadAlibaba
	default:
		t.Fatalf("E2E_TRACE=%q: want philly, generic:FILE or alibaba:FILE", spec)
	}
	var r io.Reader = bytes.NewReader(models.PhillyCSV)
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			t.Fatalf("E2E_TRACE: %v", err)
		}
		defer f.Close()
		r = bufio.NewReader(f)
	} else if format != "philly" {
		t.Fatalf("E2E_TRACE=%s needs a file (%s:FILE)", spec, format)
	}
	tr, err := read(r)
	if err != nil {
		t.Fatalf("E2E_TRACE %s: %v", spec, err)
	}
	return tr
}

// replayClusterConfig edits the cluster's coscheml.yaml for a replay; the
// simulator twin reads the same config.
func replayClusterConfig(o replayOptions) func(*config.Config) {
	return func(cfg *config.Config) {
		if o.typed {
			cfg.ShardPinning = config.PinTyped
			cfg.ShardTypePrefix = "g"
		}
		cfg.WaitDefer = o.waitDefer
		if o.predictor != "" {
			cfg.Predictor = o.predictor
		}
		if o.guard {
			guardConfig(replayGuardTiming)(cfg)
		}
		if o.guardFloor != "" {
			cfg.Guard.Actions.HPC.Floor, cfg.Guard.Actions.Train.Floor = o.guardFloor, o.guardFloor
		}
	}
}

func guardFloorArg(floor string) string {
	if floor == "" {
		return ""
	}
	return " E2E_GUARD_FLOOR=" + floor
}

func guardActionsText(floor string) string {
	if floor == "" {
		return "default actions"
	}
	return "floor action " + floor + " for hpc and train, other actions default"
}

// replayGuardTiming is the guard's clock in a replay, compressed with the jobs:
// the defaults (5 s, 6 readings, 1 min) react in about 90 s to jobs of hours;
// at 100x that is under a second, below what the emulated jobs resolve (they
// re-read every 500 ms). Reading every 250 ms, smoothing over two readings and
// acting on a breach held 500 ms, the guard reacts in about 1.5 s: 150 s of
// trace time.
var replayGuardTiming = guardTiming{period: 250 * time.Millisecond, sustain: 500 * time.Millisecond, window: 2}

// replayJobInterval is how often an emulated job re-reads its co-runners and
// writes its reading: twice per guard round, so that every round has a fresh
// reading of every running job (a round with none reads its share as 0, as
// NVML reports a process that did not run). Every setup uses it, guard or not,
// so that their below-floor times are measured alike.
var replayJobInterval = replayGuardTiming.period / 2

// slurmVersionNumber is SLURM_VERSION_NUMBER of a release as slurmctld -V
// prints it ("22.05.8"); 0 when it does not parse (unknown: as 22.05).
func slurmVersionNumber(v string) uint32 {
	var major, minor, micro uint32
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &micro); n < 2 {
		return 0
	}
	return major<<16 | minor<<8 | micro
}

// replayTopology is the cluster's GPU description: per-GPU types for typed
// pinning; jobs may overrun their time limit (a co-located job runs slower than
// its limit assumed; the limit only informs backfill, as the trace duration does
// in the simulator).
func replayTopology(o replayOptions) topology {
	// A replay at low compression runs longer than Slurm's default record
	// lifetime: keep every job's end state until the run is read.
	return topology{typed: o.typed, extraConf: "OverTimeLimit=UNLIMITED", redecide: o.redecide, minJobAge: 6 * time.Hour}
}

// runReplay replays every seed under every setup; save, when set, gets the
// report so far after each seed.
func runReplay(t *testing.T, a artifacts, o replayOptions, save func(replay.Report)) replay.Report {
	t.Helper()
	tt := replayTruth(t)
	tr := replayTrace(t, o.trace)
	m, err := model.Load(filepath.Join(a.repo, "models", "default.model"))
	if err != nil {
		t.Fatal(err)
	}
	gpus := numNodes * gpusPerNode
	cfg := config.Default()
	replayClusterConfig(o)(&cfg)
	cfg.SlotsPerGPU = shardsPerGPU
	opts := placeconf.Options(cfg)
	twin := replay.SimSetup{Truth: tt, Model: m, PairMemory: cfg.PairMemory, Options: opts,
		Config: sim.Config{Nodes: numNodes, GPUsPerNode: gpusPerNode, GPUMemMiB: 143771, Slots: shardsPerGPU,
			MaxCoRunners: opts.MaxCoRunners, Floors: cfg.SpeedFloor, Reach: placeconf.Reach(cfg)},
		// The jobs are already compressed: the simulator's seconds are real ones.
		Submit: &sim.SubmitModel{}}
	loop := "no re-decide loop (wait_defer 0)"
	if o.waitDefer > 0 {
		twin.Submit.Redecide = o.redecide.Seconds()
		// As the plugin: a release that refuses typed updates re-decides with
		// untyped counts; an updated job starts at the next backfill pass
		// (the suite's bf_interval=1).
		twin.Submit.UntypedUpdates = !submit.TypedUpdates(slurmVersionNumber(a.slurm.version))
		twin.Submit.StartDelay = 1
		loop = fmt.Sprintf("wait_defer %s, coscheml redecide --loop --interval %s beside slurmctld", o.waitDefer, o.redecide)
	}
	// Blind sharing as a site would run it without coscheml: every job asks
	// for the share of a GPU a sharing job gets from the policies (slots per GPU
	// over the most jobs per GPU), Slurm picks the GPU.
	share := max(shardsPerGPU/opts.MaxCoRunners, 1)
	if opts.ShareSlots > 0 {
		share = opts.ShareSlots
	}
	pin := config.PinFirstFit
	if o.typed {
		pin = config.PinTyped
	}
	rep := replay.Report{
		Command: "E2E=1 E2E_JOBS=" + strconv.Itoa(o.jobs) + " E2E_SEEDS=" + strconv.Itoa(len(o.seeds)) +
			" E2E_COMPRESS=" + strconv.FormatFloat(o.compress, 'g', -1, 64) + " E2E_WAIT_DEFER=" + o.waitDefer.String() +
			" E2E_GUARD=" + map[bool]string{true: "on", false: "off"}[o.guard] + guardFloorArg(o.guardFloor) + " E2E_PREDICTOR=" + cmp.Or(o.predictor, config.PredictorModel) + " make e2e",
		Date: time.Now().UTC().Format(time.RFC3339),
		Setup: []string{
			fmt.Sprintf("Slurm %s; cluster: %d nodes x %d GPUs x %d shards (fake GPUs, real slurmctld/slurmd/munge), shard_pinning %s", a.slurm.version, numNodes, gpusPerNode, shardsPerGPU, pin),
			fmt.Sprintf("trace: %s, %d jobs per seed of at most %.0f h, capped at %d GPU(s) (one node's), offered load %g, seeds %v", o.trace, o.jobs, o.maxDur/3600, max(o.maxGPUs, 1), o.load, o.seeds),
			fmt.Sprintf("time compression %gx (trace seconds per real second), work at least %g s, time limit ceil(%g x work) min, OverTimeLimit=UNLIMITED", o.compress, o.minWork, o.slack),
			fmt.Sprintf("setups (every job --comment=coscheml:app=TAG,class=CLASS): exclusive = plugin off, --gres=gpu:N; blind = plugin off, --gres=shard:%d (Slurm picks the GPU; a job of several GPUs --gres=gpu:N); coscheml = plugin on, --gres=gpu:N, %s", share, loop),
		},
	}
	if o.predictor == config.PredictorOptimistic {
		rep.Setup = append(rep.Setup, "predictor: optimistic (evaluation only): the plugin predicts every pair at full speed; the simulator twin keeps the shipped model")
	}
	if o.guard {
		g := replayGuardTiming
		rep.Setup = append(rep.Setup, fmt.Sprintf("guard on: coscheml-node guard on every node over the emulated jobs' readings (guard.emulated_metrics_dir), period %s, window %d, sustain %s, %s", g.period, g.window, g.sustain, guardActionsText(o.guardFloor)))
	}
	for _, seed := range o.seeds {
		jobs, err := replay.Prepare(tr.Jobs, tt.Tags(), replay.Spec{Jobs: o.jobs, Seed: seed, MaxDuration: o.maxDur,
			Load: o.load, GPUs: gpus, Compress: o.compress, MinWork: o.minWork, MaxGPUs: o.maxGPUs})
		if err != nil {
			t.Fatal(err)
		}
		for _, setup := range o.setups {
			simRun, err := replay.Simulate(setup, jobs, seed, twin)
			if err != nil {
				t.Fatal(err)
			}
			atSubmit, err := replay.SimulateAtSubmit(setup, jobs, seed, twin)
			if err != nil {
				t.Fatal(err)
			}
			var res replay.SeedResult
			t.Run(fmt.Sprintf("%s_seed%d", setup, seed), func(t *testing.T) {
				run, wall := replayOnce(t, a, o, setup, share, jobs)
				run.Seed, run.GPUs = seed, gpus
				measured, err := replay.Measure(run)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range measured.Elsewhere {
					t.Logf("%s seed %d: not where intended: %s", setup, seed, e)
				}
				res = replay.NewSeedResult(run, measured, simRun, atSubmit, wall)
				t.Logf("%s seed %d: %d/%d jobs ended in %.0f s; avg JCT %.1f s (simulator %.1f), makespan %.1f s (%.1f), below floor %d (%d), shared %d (%d); placements %+v",
					setup, seed, res.Ended, res.Jobs, wall, res.Real.AvgJCT, res.Sim.AvgJCT, res.Real.Makespan, res.Sim.Makespan,
					res.Real.BelowFloor, res.Sim.BelowFloor, res.Real.Shared, res.Sim.Shared, res.Placement)
			})
			if res.Setup != "" {
				rep.Runs = append(rep.Runs, res)
			}
		}
		rep.Summaries = replay.Summarize(rep.Runs)
		rep.Checks = replay.Checks(rep.Summaries)
		if save != nil {
			save(rep)
		}
	}
	return rep
}

// replayOnce replays jobs under one setup on a fresh cluster and returns what
// was submitted and what the jobs reported, and the wall time.
func replayOnce(t *testing.T, a artifacts, o replayOptions, setup string, share int, jobs []trace.Job) (replay.Run, float64) {
	plugin := setup == replay.CoScheML
	c := newClusterTopo(t, a, plugin, replayTopology(o), replayClusterConfig(o))
	if o.guard {
		t.Cleanup(c.startGuards())
	}
	results := c.path("jobs", "results")
	c.mkdirs(filepath.Join("jobs", "results"), filepath.Join("jobs", "out"))
	bin := filepath.Join(a.binDir, "coscheml")
	// With wait_defer, newClusterTopo started the re-decide loop (one, every
	// o.redecide) beside slurmctld.
	run := replay.Run{Setup: setup}
	var ids []int
	start := time.Now()
	for _, j := range jobs {
		if d := time.Until(start.Add(time.Duration(j.Submit * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		args := []string{"-J", "e2e", "-o", c.path("jobs", "out", "%j.out"),
			fmt.Sprintf("--time=%d", replay.TimeLimitMinutes(j.Duration, o.slack))}
		// Every setup's jobs carry the directive: with the plugin off it only
		// tells the Prolog the job's application, so that co-runners find it
		// in the residency records.
		args = append(args, fmt.Sprintf("--comment=coscheml:app=%s,class=%s", j.Tag, j.Class))
		if setup == replay.Blind && j.GPUs == 1 {
			args = append(args, fmt.Sprintf("--gres=shard:%d", share))
		} else {
			args = append(args, fmt.Sprintf("--gres=gpu:%d", j.GPUs))
		}
		args = append(args, fmt.Sprintf("--wrap=exec %s --config %s e2e-job --tag %s --class %s --work %.3f --interval %s --results %s",
			bin, c.path("coscheml.yaml"), j.Tag, j.Class, j.Duration, replayJobInterval, results))
		id, stderr, err := c.sbatch(args...)
		if err != nil {
			t.Fatalf("job %s: %v: %s", j.ID, err, stderr)
		}
		ids = append(ids, id)
		run.Submitted = append(run.Submitted, replay.Submitted{JobID: strconv.Itoa(id), Trace: j.ID,
			Submit: float64(time.Now().UnixNano()) / 1e9})
	}
	// Generous: every job alone, one after another, would take less.
	limit := 10 * time.Minute
	for _, j := range jobs {
		limit += time.Duration(j.Duration * float64(time.Second))
	}
	terminal := func(s string) bool {
		return s == "COMPLETED" || s == "FAILED" || s == "CANCELLED" || s == "TIMEOUT" || s == "NODE_FAIL" || s == "OUT_OF_MEMORY"
	}
	states, _ := c.waitRan(ids, terminal, limit)
	wall := time.Since(start).Seconds()
	bad := 0
	for _, id := range ids {
		if st := states[id]; st != "COMPLETED" {
			bad++
			if bad <= 5 {
				out, _ := os.ReadFile(c.path("jobs", "out", strconv.Itoa(id)+".out"))
				t.Errorf("job %d ended %q; its output:\n%s", id, st, tail(out, 1500))
			}
		}
	}
	if plugin {
		intended := c.intendedAll()
		redecided := c.redecidedAll()
		for i, id := range ids {
			j := c.showJob(id)
			dec := lastDecisionID(j.Comment)
			if dec == "" {
				continue
			}
			run.Submitted[i].Decided = true
			run.Submitted[i].Redecided = redecided[dec]
			if w, ok := intended[dec]; ok {
				run.Submitted[i].Intended = w
			} else {
				t.Errorf("job %d: no slurmctld log line for its decision %s", id, dec)
			}
		}
	}
	rs, problems, err := emulate.ReadDir(results)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("result record: %v", p)
	}
	run.Results = rs
	logGuardFigures(t, c, setup, rs, o.guard)
	return run, wall
}

// logGuardFigures says how long the jobs ran below their floors and what the
// guard did (its event logs, one per node).
func logGuardFigures(t *testing.T, c *cluster, setup string, rs []emulate.Result, guardOn bool) {
	// The guard cannot act before it has judged a breach: window readings and
	// the sustain time, a round to act; a job below its floor longer than that
	// was below it beyond the guard's reach of it.
	g := replayGuardTiming
	reach := time.Duration(g.window+2)*g.period + g.sustain
	below, beyond, shared := 0, 0, 0
	var belowS, stoppedS float64
	for _, r := range rs {
		if r.BelowFloor {
			below++
		}
		if r.BelowFloorS > reach.Seconds() {
			beyond++
		}
		if r.Shared {
			shared++
		}
		belowS += r.BelowFloorS
		stoppedS += r.StoppedS
	}
	actions := map[string]int{}
	if guardOn {
		ents, _ := os.ReadDir(c.cfg.Guard.EventDir)
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(c.cfg.Guard.EventDir, e.Name()))
			for _, line := range strings.Split(string(b), "\n") {
				var rec struct{ Action, Outcome string }
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Action != "" {
					actions[rec.Action+"/"+rec.Outcome]++
				}
			}
		}
	}
	t.Logf("GUARD FIGURES %s (guard %v): %d of %d jobs below floor at some time, %d below it for more than %v (the guard's reaction), %.1f job-s below floor in all; %d shared; %.1f job-s suspended; guard events %v",
		setup, guardOn, below, len(rs), beyond, reach, belowS, shared, stoppedS, actions)
}

// lastDecisionID is the plugin's latest decision token in a comment (a job the
// plugin decided again carries the newest one last).
func lastDecisionID(comment string) string {
	i := strings.LastIndex(comment, "coscheml-id=")
	if i < 0 {
		return ""
	}
	return decisionID(comment[i:])
}

// intendedAll reads, from slurmctld's log, the "node/gpu" each decision chose
// ("" when it chose no GPU); the first line of a decision counts, as in
// intended().
func (c *cluster) intendedAll() map[string]string {
	out := map[string]string{}
	for _, l := range c.logLines("job_submit/coscheml") {
		m := decisionRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if _, seen := out[m[1]]; seen {
			continue
		}
		if m[4] == "" || strings.HasPrefix(m[5], "-") {
			out[m[1]] = ""
			continue
		}
		out[m[1]] = m[4] + "/" + cmp.Or(m[6], m[5])
	}
	return out
}

// redecidedAll is the set of decision IDs the plugin made in job_modify (the
// re-decide loop's updates), from slurmctld's log ("modify job=... decision=ID").
func (c *cluster) redecidedAll() map[string]bool {
	out := map[string]bool{}
	for _, l := range c.logLines("job_submit/coscheml") {
		if !strings.Contains(l, "modify job=") {
			continue
		}
		if m := decisionRE.FindStringSubmatch(l); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// TestE2EMerge merges the reports of replays run side by side, one setup per
// process (make e2e-parallel), into one report: E2E_MERGE lists their
// folders (comma-separated), E2E_REPORT names the merged one (default the
// repository's e2e-report). Without E2E_MERGE it skips.
func TestE2EMerge(t *testing.T) {
	dirs := os.Getenv("E2E_MERGE")
	if dirs == "" {
		t.Skip("merges replay reports with E2E_MERGE=dir,dir,... (make e2e-parallel)")
	}
	var all replay.Report
	for _, d := range strings.Split(dirs, ",") {
		b, err := os.ReadFile(filepath.Join(d, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var r replay.Report
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if all.Date == "" {
			all = r
			all.Runs = nil
		}
		all.Runs = append(all.Runs, r.Runs...)
	}
	all.Command = "make e2e-parallel (" + all.Command + ", one setup per process, side by side)"
	all.Summaries = replay.Summarize(all.Runs)
	all.Checks = replay.Checks(all.Summaries)
	out := cmp.Or(os.Getenv("E2E_REPORT"), filepath.Join("..", "..", "e2e-report")) // go test runs in this package's folder
	if err := replay.Write(out, all); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := replay.Markdown(&md, all.Summaries); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n%s\n%s\nReport written to %s/ (results.json, summary.md)\n", strings.Join(all.Setup, "\n"), md.String(), out)
}
