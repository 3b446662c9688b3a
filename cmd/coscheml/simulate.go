// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/policyname"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/report"
	"github.com/coscheml/coscheml/pkg/sharescore"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
	"github.com/urfave/cli/v2"
)

// The demo preset: a short run on the shipped data (docs/evaluation.md).
const (
	demoJobs        = 2000
	demoNodes       = 8
	demoGPUsPerNode = 8
	demoLoad        = 2.0
	demoSeeds       = 3
	demoMaxDuration = 24 * time.Hour
)

// phillyRel is where the shipped Philly trace lives in a checkout or an install.
var phillyRel = filepath.Join("models", "data", "philly", "philly.csv")

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "replay a job trace through every placement policy and compare them",
		Description: "Replays a trace on a simulated cluster (FIFO + EASY backfill like Slurm)\n" +
			"through the same placement code slurmctld runs. Jobs progress at their\n" +
			"measured co-located speeds (ground truth from the Lucid pair data, never the\n" +
			"model). Prints a Markdown table; --report DIR also writes summary.md,\n" +
			"results.csv, results.json and SVG plots. See docs/evaluation.md.\n\n" +
			"Examples:\n" +
			"   coscheml simulate --demo --report demo-report\n" +
			"   coscheml simulate --jobs 5000 --nodes 16 --load 2 --seeds 5\n" +
			"   coscheml simulate --trace alibaba --file openb_pod_list_default.csv --load 1.5\n" +
			"   coscheml simulate --trace generic --file jobs.csv --policies coscheml,exclusive",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trace", Value: "philly", Usage: "trace format: philly, alibaba or generic"},
			&cli.StringFlag{Name: "file", Usage: "trace file (default for philly: the shipped " + phillyRel + ")"},
			&cli.IntFlag{Name: "nodes", Value: 16, Usage: "nodes in the simulated cluster"},
			&cli.IntFlag{Name: "gpus-per-node", Value: 8, Usage: "GPUs per node"},
			&cli.Float64Flag{Name: "gpu-mem-mib", Value: 32768, Usage: "memory of each GPU in MiB"},
			&cli.StringFlag{Name: "cluster", Usage: "YAML file with a cluster: section (flat, or node groups of their own GPU count, memory and model; etc/examples/cluster-hetero.yaml): the simulated cluster, instead of --nodes, --gpus-per-node and --gpu-mem-mib"},
			&cli.DurationFlag{Name: "from", Usage: "keep jobs submitted at least this long after the trace's first submission (time window)"},
			&cli.DurationFlag{Name: "to", Usage: "keep jobs submitted before this time after the first submission (0: to the end)"},
			&cli.DurationFlag{Name: "max-duration", Usage: "leave out jobs that run longer than this alone, e.g. 24h (0: keep all)"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "sample this many jobs of the trace per seed (0: all)"},
			&cli.Float64Flag{Name: "load", Value: 0, Usage: "compress arrivals so that offered load = X x cluster capacity (0: as in the trace)"},
			&cli.IntFlag{Name: "seeds", Value: 3, Usage: "seeds (1..K): job sample, applications, classes, random policy"},
			&cli.StringFlag{Name: "shard-pinning", Usage: "how Slurm reaches a GPU: first-fit or typed (default: the config's shard_pinning, typed for auto; typed with --demo)"},
			&cli.StringFlag{Name: "decide-at", Value: "start", Usage: "when a job is placed: start (an idealised scheduler: FIFO + backfill, placement when a job starts) or submit (what the plugin does in slurmctld: decided at submission; a wait is deferred and re-decided by the loop, or without it runs on a whole GPU)"},
			&cli.DurationFlag{Name: "redecide", Usage: "with --decide-at submit: the re-decide loop's interval in trace time (0: no loop, a wait runs on a whole GPU; default: 2s when the config's wait_defer is set, else 0)"},
			&cli.BoolFlag{Name: "untyped-updates", Usage: "with --decide-at submit and typed pinning: the loop's updates cannot name a GPU's type (Slurm 22.05), so re-decisions use untyped shard counts that Slurm's first fit places when the job starts"},
			&cli.DurationFlag{Name: "start-delay", Usage: "with --decide-at submit: the longest wait, in trace time, from a loop pass's re-decisions to Slurm starting those jobs together (its next backfill pass: bf_interval); drawn uniformly up to it per pass (0: at once)"},
			&cli.StringFlag{Name: "policies", Value: strings.Join(placement.Names(), ","), Usage: "policies to compare, comma-separated"},
			&cli.StringFlag{Name: "report", Usage: "write the report files into this directory"},
			&cli.IntFlag{Name: "backfill-depth", Value: 500, Usage: "queued jobs the backfill pass considers (Slurm's bf_max_job_test, default 500 on every release from 22.05; -1: no backfill)"},
			&cli.StringFlag{Name: "pairs", Usage: "ground-truth pair CSV (default: the embedded Lucid pairs)"},
			&cli.StringFlag{Name: "pairs-format", Value: "lucid", Usage: "format of --pairs: lucid or generic (tag_a,tag_b,speed_a,speed_b)"},
			&cli.StringFlag{Name: "solo", Usage: "solo-profile CSV (Lucid format) for --pairs (default: the embedded one)"},
			&cli.BoolFlag{Name: "demo", Usage: fmt.Sprintf("short preset on the shipped data: %d Philly jobs of at most %s, %dx%d GPUs, load %g, %d seeds", demoJobs, demoMaxDuration, demoNodes, demoGPUsPerNode, demoLoad, demoSeeds)},
			&cli.BoolFlag{Name: "pair-memory", Value: true, Usage: "coscheml learns from the co-runs that end during the run (pair memory, docs/model.md); --pair-memory=false for the model alone"},
			&cli.BoolFlag{Name: "warm-memory", Usage: "before each coscheml run, run another sample of the same size (seed + 1000) to fill the pair memory: steady state instead of an empty memory"},
			&cli.StringFlag{Name: "guard", Value: "on", Usage: "on: the node guard (coscheml-node guard, the config's guard section) watches coscheml's shared GPUs and acts on sustained floor breaches; off: predictions alone (the baselines never have it)"},
			&cli.StringFlag{Name: "predictor", Value: "model", Usage: "what coscheml predicts with: model (the configured model) or optimistic (every pair at full speed: the worst case of a wrong model)"},
			&cli.BoolFlag{Name: "quiet", Usage: "no progress on stderr"},
		},
		Action: runSimulate,
	}
}

func runSimulate(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("simulate takes no arguments, got %q", sanitize(c.Args().First()))
	}
	nodes, gpn, nJobs, load, seeds := c.Int("nodes"), c.Int("gpus-per-node"), c.Int("jobs"), c.Float64("load"), c.Int("seeds")
	maxDur := c.Duration("max-duration")
	demo := c.Bool("demo")
	if defaultToDemo(c) {
		gpus := fmt.Sprintf("%dx%d GPUs", demoNodes, demoGPUsPerNode)
		if c.String("cluster") != "" {
			gpus = "the --cluster file's GPUs"
		}
		fmt.Fprintf(c.App.ErrWriter, "simulate: no trace or cluster flags given: running the --demo preset (%d Philly jobs of at most %s, %s, load %g, %d seeds); "+
			"give --jobs, --load, --nodes, ... to choose your own (see coscheml simulate --help)\n", demoJobs, demoMaxDuration, gpus, demoLoad, demoSeeds)
		demo = true
	}
	if demo {
		set := func(name string) bool { return c.IsSet(name) }
		if !set("nodes") {
			nodes = demoNodes
		}
		if !set("gpus-per-node") {
			gpn = demoGPUsPerNode
		}
		if !set("jobs") {
			nJobs = demoJobs
		}
		if !set("load") {
			load = demoLoad
		}
		if !set("seeds") {
			seeds = demoSeeds
		}
		if !set("max-duration") {
			maxDur = demoMaxDuration
		}
	}
	switch {
	case nodes < 1 || gpn < 1 || nodes*gpn > 1<<20:
		return usageErrorf("--nodes %d --gpus-per-node %d: want at least 1 x 1 and at most 2^20 GPUs", nodes, gpn)
	case seeds < 1 || seeds > 1000:
		return usageErrorf("--seeds %d: want 1..1000", seeds)
	case nJobs < 0:
		return usageErrorf("--jobs %d: want >= 0", nJobs)
	case load < 0:
		return usageErrorf("--load %g: want >= 0", load)
	}
	pols, err := parsePolicies(c.String("policies"))
	if err != nil {
		return err
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	// The config's shard_pinning (auto: the per-GPU Types install.md sets up,
	// so typed). The demo compares the policies themselves: every GPU reachable
	// whatever the config says. --shard-pinning first-fit shows what Slurm
	// 22.05's first-fit shard allocator costs them.
	reach := placeconf.ModelReach(cfg)
	pin := c.String("shard-pinning")
	if demo && pin == "" {
		pin = config.PinTyped
	}
	switch p := pin; p {
	case "":
	case config.PinFirstFit:
		reach = placement.ReachFirstFit
	case config.PinTyped:
		reach = placement.ReachTyped
	default:
		return usageErrorf("--shard-pinning %q: want first-fit or typed", sanitize(p))
	}
	hetero, clusterText, err := simCluster(c)
	if err != nil {
		return err
	}
	totalGPUs := nodes * gpn
	if hetero != nil {
		totalGPUs = hetero.NumGPUs()
	} else {
		clusterText = fmt.Sprintf("%d nodes x %d GPUs = %d GPUs", nodes, gpn, nodes*gpn)
	}
	tt, err := loadTruth(c)
	if err != nil {
		return err
	}
	tr, traceName, err := loadTrace(c.String("trace"), c.String("file"))
	if err != nil {
		return err
	}
	readJobs := len(tr.Jobs)
	if from, to := c.Duration("from"), c.Duration("to"); from > 0 || to > 0 {
		if to > 0 && to <= from {
			return usageErrorf("--to %s must be after --from %s", to, from)
		}
		tr.Jobs = trace.Window(tr.Jobs, from.Seconds(), to.Seconds())
	}
	tr.Jobs = trace.MaxDuration(tr.Jobs, maxDur.Seconds())
	if len(tr.Jobs) == 0 {
		return fmt.Errorf("trace %s has no usable jobs", sanitize(traceName))
	}
	exp := sim.Experiment{
		Config: sim.Config{Nodes: nodes, GPUsPerNode: gpn, GPUMemMiB: c.Float64("gpu-mem-mib"), Slots: cfg.SlotsPerGPU,
			Floors: cfg.SpeedFloor, BackfillDepth: c.Int("backfill-depth"), Reach: reach, Cluster: hetero},
		Truth:    tt,
		Options:  placeconf.Options(cfg),
		Policies: pols,
		Mix:      trace.DefaultClassMix,

		PairMemory: c.Bool("pair-memory"),
	}
	switch at := c.String("decide-at"); at {
	case "start":
		if c.IsSet("redecide") || c.IsSet("untyped-updates") || c.IsSet("start-delay") {
			return usageErrorf("--redecide, --untyped-updates and --start-delay need --decide-at submit")
		}
	case "submit":
		redecide := c.Duration("redecide")
		if !c.IsSet("redecide") && cfg.WaitDefer > 0 {
			redecide = 2 * time.Second // coscheml redecide --loop's default interval
		}
		if redecide < 0 {
			return usageErrorf("--redecide %s: want >= 0", redecide)
		}
		if c.Duration("start-delay") < 0 {
			return usageErrorf("--start-delay %s: want >= 0", c.Duration("start-delay"))
		}
		exp.Config.Submit = &sim.SubmitModel{Redecide: redecide.Seconds(), UntypedUpdates: c.Bool("untyped-updates"),
			StartDelay: c.Duration("start-delay").Seconds()}
	default:
		return usageErrorf("--decide-at %q: want start or submit", sanitize(at))
	}
	if exp.Config.BackfillDepth == 0 {
		exp.Config.BackfillDepth = -1 // 0 on the command line means "none"
	}
	for s := 1; s <= seeds; s++ {
		exp.Seeds = append(exp.Seeds, int64(s))
	}
	loads := map[int64]float64{}
	exp.Jobs = func(seed int64) ([]trace.Job, error) {
		jobs := trace.Sample(tr.Jobs, nJobs, seed)
		if load > 0 {
			if _, err := trace.SetLoad(jobs, totalGPUs, load); err != nil {
				return nil, err
			}
		}
		loads[seed] = trace.OfferedLoad(jobs, totalGPUs)
		return jobs, nil
	}
	if c.Bool("warm-memory") {
		if !exp.PairMemory {
			return usageErrorf("--warm-memory needs the pair memory (drop --pair-memory=false)")
		}
		exp.WarmUp = func(seed int64) ([]trace.Job, error) {
			jobs := trace.Sample(tr.Jobs, nJobs, seed+sim.WarmUpSeedOffset)
			if load > 0 {
				if _, err := trace.SetLoad(jobs, totalGPUs, load); err != nil {
					return nil, err
				}
			}
			return jobs, nil
		}
	}
	guardText, err := simGuard(c, cfg, &exp.Config)
	if err != nil {
		return err
	}
	predictor := c.String("predictor")
	for _, p := range pols {
		if p != "coscheml" {
			continue
		}
		switch predictor {
		case "model":
			m, err := loadModel(c)
			if err != nil {
				return fmt.Errorf("loading the model for coscheml: %w", err)
			}
			exp.Model = m
		case "optimistic":
			exp.Model = model.Optimistic{}
		default:
			return usageErrorf("--predictor %q: want %s", sanitize(predictor), strings.Join(model.PredictorNames, " or "))
		}
	}
	peersText := ""
	if slices.Contains(pols, policyname.Lucid) {
		sc, err := lucidScore()
		if err != nil {
			return fmt.Errorf("policy lucid: %w", err)
		}
		exp.Options.ShareScore = sc
		peersText = "; lucid's sharing score: a depth-3 tree on the default model's training data (docs/peers.md)"
	}
	progress := newProgress(c.App.ErrWriter, c.Bool("quiet"))
	// Runs go in parallel: count finished jobs over all of them for a progress line.
	var mu sync.Mutex
	runsDone, jobsDone := 0, 0
	totalRuns := len(exp.Seeds) * len(pols)
	perRun := len(tr.Jobs)
	if nJobs > 0 && nJobs < perRun {
		perRun = nJobs
	}
	exp.Config.ProgressEvery = 20000
	t0 := time.Now()
	exp.Config.Progress = func(finished int) {
		mu.Lock()
		defer mu.Unlock()
		jobsDone += finished
		progress(simProgressText(jobsDone, totalRuns*perRun, runsDone, totalRuns, time.Since(t0)))
	}
	exp.OnRun = func(done, total int, r *sim.PolicyRun) {
		mu.Lock()
		defer mu.Unlock()
		runsDone = done
		progress(simProgressText(jobsDone, totalRuns*perRun, runsDone, totalRuns, time.Since(t0)))
	}
	runs, err := exp.Execute()
	progress("")
	if err != nil {
		if strings.Contains(err.Error(), "not in the catalog") {
			return fmt.Errorf("%w; the simulator knows the applications with measured co-location pairs (docs/evaluation.md, ground truth)", err)
		}
		return err
	}
	measured, total, samples := tt.Coverage()
	sampled := len(tr.Jobs)
	if nJobs > 0 && nJobs < sampled {
		sampled = nJobs
	}
	in := report.Input{
		Title:    "coscheml simulate: policy comparison",
		Command:  commandLine(),
		Baseline: "exclusive",
		Setup: []string{
			fmt.Sprintf("trace: %s (%s), %d jobs used per seed of %d read (%d rows left out; %d outside the window or longer than %s left out)", c.String("trace"), sanitize(traceName), sampled, readJobs, tr.SkippedTotal(), readJobs-len(tr.Jobs), maxDurText(maxDur)),
			fmt.Sprintf("cluster: %s, %d sharing slots per GPU, at most %d jobs per GPU", clusterText, exp.Config.Slots, exp.Options.MaxCoRunners),
			fmt.Sprintf("offered load (GPU-time asked / capacity over the submission span): %s", loadText(loads, exp.Seeds)),
			fmt.Sprintf("queueing: FIFO + EASY backfill, depth %d; seeds %v", c.Int("backfill-depth"), exp.Seeds),
			fmt.Sprintf("ground truth: %d applications, %d of %d ordered pairs measured (%d samples), others from the 3 nearest measured pairs", tt.Len(), measured, total, samples),
			fmt.Sprintf("coscheml predicts with: %s; %s%s", predictorText(predictor), guardText, peersText),
			fmt.Sprintf("classes: hpc %.0f%%, train %.0f%%, infer %.0f%% (labels over DL-training profiles); floors hpc %g, train %g, infer %g",
				100*exp.Mix.HPC, 100*exp.Mix.Train, 100*exp.Mix.Infer, exp.Options.Floors.HPC, exp.Options.Floors.Train, exp.Options.Floors.Infer),
			droppedText(runs, totalGPUs),
			fmt.Sprintf("simulated in %s", time.Since(t0).Round(time.Millisecond)),
		},
		Summaries: sim.SummarizeRuns(runs, "exclusive"),
		Runs:      runs,
	}
	if err := report.Markdown(c.App.Writer, in); err != nil {
		return err
	}
	if dir := c.String("report"); dir != "" {
		if err := report.Write(dir, in); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "\nReport written to %s/ (%s); docs/evaluation.md explains it.\n", sanitize(dir), strings.Join(report.Files, ", "))
	}
	return nil
}

// simGuard sets the simulated guard from --guard and the configuration's guard
// section, and words it for the report.
func simGuard(c *cli.Context, cfg config.Config, sc *sim.Config) (string, error) {
	switch g := c.String("guard"); g {
	case "off":
		return "node guard off", nil
	case "on":
		gc, err := guard.FromConfig(cfg)
		if err != nil {
			return "", err
		}
		sc.Guard = &gc
		return fmt.Sprintf("node guard on (acts on a floor breach that lasts %s after a %d x %s smoothing window; floor actions hpc %s, train %s, infer %s)",
			gc.SustainFor, gc.Window, gc.Period, gc.Actions[profile.ClassHPC].Floor, gc.Actions[profile.ClassTrain].Floor, gc.Actions[profile.ClassInfer].Floor), nil
	default:
		return "", usageErrorf("--guard %q: want on or off", sanitize(g))
	}
}

func predictorText(p string) string {
	if p == "optimistic" {
		return "the optimistic predictor (every pair at full speed, no margin)"
	}
	return "the model"
}

func maxDurText(d time.Duration) string {
	if d <= 0 {
		return "no limit"
	}
	return d.String()
}

func parsePolicies(s string) ([]string, error) {
	known := map[string]bool{}
	for _, n := range placement.Names() {
		known[n] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" || seen[p] {
			continue
		}
		if !known[p] {
			return nil, usageErrorf("--policies: unknown policy %q: want some of %s", sanitize(p), strings.Join(placement.Names(), ","))
		}
		seen[p] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--policies: empty")
	}
	return out, nil
}

// lucidScore is the Lucid peer's sharing score, trained on the data the
// default model is trained on (the embedded Lucid files), never on the
// simulator's evaluation.
func lucidScore() (*sharescore.Classifier, error) {
	solo, err := models.Solo()
	if err != nil {
		return nil, fmt.Errorf("its sharing score trains on the default model's data: %w", err)
	}
	pairs, err := models.Pairs()
	if err != nil {
		return nil, fmt.Errorf("its sharing score trains on the default model's data: %w", err)
	}
	return sharescore.TrainLucid(bytes.NewReader(solo), bytes.NewReader(pairs))
}

// loadTruth builds the ground truth from the embedded Lucid data or --solo/--pairs.
func loadTruth(c *cli.Context) (*truth.Table, error) {
	var solo []byte
	if p := c.String("solo"); p == "" {
		b, err := models.Solo()
		if err != nil {
			return nil, fmt.Errorf("no --solo given: %w", err)
		}
		solo = b
	} else {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--solo: %w", err)
		}
		solo = b
	}
	profiles, err := profile.ReadLucidSolo(bytes.NewReader(solo))
	if err != nil {
		return nil, fmt.Errorf("solo profiles: %w", err)
	}
	var pairs []truth.Pair
	if p := c.String("pairs"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("--pairs: %w", err)
		}
		defer f.Close()
		switch c.String("pairs-format") {
		case "lucid":
			pairs, err = truth.ReadLucidPairs(f)
		case "generic":
			pairs, err = truth.ReadGenericPairs(f)
		default:
			return nil, usageErrorf("--pairs-format %q: want lucid or generic", sanitize(c.String("pairs-format")))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sanitize(p), err)
		}
	} else {
		b, err := models.Pairs()
		if err != nil {
			return nil, fmt.Errorf("no --pairs given: %w", err)
		}
		if pairs, err = truth.ReadLucidPairs(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("Lucid pairs (%s): %w", models.Source(), err)
		}
	}
	return truth.New(profiles, pairs, truth.Options{})
}

// loadTrace reads the trace; for philly without --file it reads the Philly trace
// embedded in the binary, so the simulator works from any directory.
func loadTrace(format, file string) (*trace.Trace, string, error) {
	var read func(io.Reader) (*trace.Trace, error)
	switch format {
	case "philly":
		read = trace.ReadPhilly
	case "alibaba":
		read = trace.ReadAlibaba
	case "generic":
		read = trace.ReadGeneric
	default:
		return nil, "", usageErrorf("--trace %q: want philly, alibaba or generic", sanitize(format))
	}
	if file == "" {
		if format != "philly" {
			return nil, "", usageErrorf("--trace %s needs --file", format)
		}
		t, err := read(bytes.NewReader(models.PhillyCSV))
		if err != nil {
			return nil, "", fmt.Errorf("embedded Philly trace: %w", err)
		}
		return t, "embedded " + phillyRel, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	t, err := read(f)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", sanitize(file), err)
	}
	return t, file, nil
}

func loadText(loads map[int64]float64, seeds []int64) string {
	var parts []string
	for _, s := range seeds {
		parts = append(parts, fmt.Sprintf("%.2f", loads[s]))
	}
	return strings.Join(parts, ", ") + " (per seed)"
}

func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = sanitize(a)
	}
	if len(args) > 0 {
		args[0] = "coscheml"
	}
	return strings.Join(args, " ")
}

// newProgress returns a function that shows status lines: rewritten in place on
// a terminal, one line per call (at most every 5 s) otherwise; "" ends it.
func newProgress(w io.Writer, quiet bool) func(string) {
	if quiet || w == nil {
		return func(string) {}
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	var last time.Time
	shown := false
	return func(msg string) {
		switch {
		case msg == "":
			if tty && shown {
				fmt.Fprint(w, "\r\033[K")
			}
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", msg)
			shown = true
		case time.Since(last) >= 5*time.Second:
			fmt.Fprintln(w, msg)
			last = time.Now()
		}
	}
}
