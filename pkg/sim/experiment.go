// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/pairmem"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/policyname"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// Experiment compares policies on the same jobs over several seeds. A seed picks
// the jobs (Jobs is called with it), their applications and classes (trace.Assign)
// and the random baseline's choices; every policy of a seed sees the same jobs.
type Experiment struct {
	Config Config
	Jobs   func(seed int64) ([]trace.Job, error) // tags/classes may be empty
	Truth  *truth.Table
	Model  model.Predictor // for "coscheml"; "oracle" gets Truth
	// PairMemory puts a fresh pair memory (package pairmem) in front of the
	// model for each "coscheml" run: co-runs that end during the run feed it
	// (Config.OnCoRunEnd), as the Epilog's observations would in production.
	PairMemory bool
	// MemoryOptions configure the pair memory (zero: its defaults).
	MemoryOptions pairmem.Options
	// MemoryStudy brings back earlier rules of the pair memory, for the
	// tuning studies that measure what each rule is worth (zero: today's).
	MemoryStudy pairmem.Study
	// WarmUp, when set with PairMemory, gives jobs that each coscheml run first
	// runs on its own cluster, results discarded, only to fill the pair memory:
	// the measured run then starts from a memory like that of a cluster that has
	// been running for a while. It must be safe for concurrent use; its jobs get
	// applications and classes like the measured ones (seed + WarmUpSeedOffset).
	WarmUp   func(seed int64) ([]trace.Job, error)
	Options  placement.Options
	Policies []string
	Seeds    []int64
	Mix      trace.ClassMix
	Workers  int // runs in parallel (default GOMAXPROCS)
	// OnRun, when set, is called after each finished run (from any goroutine,
	// serialised).
	OnRun func(done, total int, r *PolicyRun)
}

// PolicyRun is one policy on one seed.
type PolicyRun struct {
	Policy  string                    `json:"policy"`
	Seed    int64                     `json:"seed"`
	Overall Metrics                   `json:"overall"`
	ByClass map[profile.Class]Metrics `json:"by_class"`
	Result  *Result                   `json:"result"`
	// BelowFloorPer lists the jobs below their floor in each block of
	// BelowFloorBlock jobs, in order of start: how the floors hold over time.
	BelowFloorPer []int `json:"below_floor_per_block"`
	// MemoryPairs and MemoryKnown: pairs the pair memory had observed, and had
	// enough evidence for, at the end of the run (0 without a memory).
	MemoryPairs int `json:"memory_pairs"`
	MemoryKnown int `json:"memory_known"`
}

// WarmUpSeedOffset separates the warm-up jobs' seed from the measured run's.
const WarmUpSeedOffset = 1000

// BelowFloorBlock is the block size of PolicyRun.BelowFloorPer.
const BelowFloorBlock = 500

// Execute runs every policy on every seed.
func (e Experiment) Execute() ([]*PolicyRun, error) {
	if len(e.Policies) == 0 || len(e.Seeds) == 0 {
		return nil, fmt.Errorf("experiment: need at least one policy and one seed")
	}
	if e.Mix == (trace.ClassMix{}) {
		e.Mix = trace.DefaultClassMix
	}
	type task struct {
		seed int64
		pol  string
		jobs []trace.Job
	}
	var tasks []task
	for _, seed := range e.Seeds {
		jobs, err := e.Jobs(seed)
		if err != nil {
			return nil, err
		}
		if err := trace.Assign(jobs, e.Truth.Tags(), e.Mix, seed); err != nil {
			return nil, err
		}
		for _, p := range e.Policies {
			tasks = append(tasks, task{seed, p, jobs})
		}
	}
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	runs := make([]*PolicyRun, len(tasks))
	errs := make([]error, len(tasks))
	var mu sync.Mutex
	done := 0
	ch := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, len(tasks)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				t := tasks[i]
				runs[i], errs[i] = e.one(t.pol, t.seed, t.jobs)
				mu.Lock()
				done++
				if e.OnRun != nil && errs[i] == nil {
					e.OnRun(done, len(tasks), runs[i])
				}
				mu.Unlock()
			}
		}()
	}
	for i := range tasks {
		ch <- i
	}
	close(ch)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// SlurmAlone reports whether a policy of the experiment stands for Slurm without
// the plugin (exclusive: whole GPUs; blind: shards, first fit), which the
// SubmitModel does not apply to.
func SlurmAlone(policy string) bool { return policy == "exclusive" || policy == "blind" }

// ownQueue reports whether a policy runs the queue itself, deciding at each
// scheduling pass without the plugin's submit-time model or the guard: Slurm
// alone, and the published peers (their own schedulers, given an ideal one).
func ownQueue(policy string) bool { return SlurmAlone(policy) || policyname.Peer(policy) }

func (e Experiment) one(name string, seed int64, jobs []trace.Job) (*PolicyRun, error) {
	opts := e.Options
	opts.Seed = uint64(seed)
	if SlurmAlone(name) {
		// Without the plugin a several-GPU job asks for whole GPUs
		// (--gres=gpu:N): Slurm shares only what a job asks for in shards,
		// and a shard request fits on one GPU.
		opts.WholeMultiGPU = true
	}
	var pred model.Predictor
	cfg := e.Config
	cfg.Seed = uint64(seed)
	var mem *pairmem.Memory
	switch name {
	case "coscheml":
		pred = e.Model
		if pred == nil {
			return nil, fmt.Errorf("experiment: policy coscheml needs a model")
		}
		if e.PairMemory {
			mem = pairmem.New(e.MemoryOptions)
			mp, err := pairmem.NewStudyPredictor(pred, mem, e.MemoryStudy)
			if err != nil {
				return nil, fmt.Errorf("experiment: %w", err)
			}
			pred = mp
			cfg.OnCoRunEnd = func(job, co *profile.Profile, uid string, speed float64) {
				_ = mp.Observe(job, []*profile.Profile{co}, uid, speed) // the simulator's tags and speeds are valid
			}
			if e.WarmUp != nil {
				if err := e.warmUp(seed, mp, opts, cfg); err != nil {
					return nil, err
				}
			}
		}
	case "oracle":
		pred = e.Truth
	}
	pol, err := placement.ByName(name, pred, opts)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	if cfg.MaxCoRunners == 0 {
		cfg.MaxCoRunners = opts.MaxCoRunners
	}
	if ownQueue(name) {
		// The baselines Slurm runs by itself (gres/gpu, gres/shard): its queue
		// places jobs when they start; only a policy in the plugin decides at
		// submit. The peers are schedulers of their own, idealized the same way.
		cfg.Submit = nil
		cfg.Guard = nil // the guard comes with coscheml's node package
	}
	res, err := Run(cfg, jobs, e.Truth, pol)
	if err != nil {
		return nil, fmt.Errorf("experiment: policy %s seed %d: %w", name, seed, err)
	}
	all, by := Summarize(res)
	// Keep the policy's name as asked (ByName's Name() may differ in spelling).
	res.Policy = name
	run := &PolicyRun{Policy: name, Seed: seed, Overall: all, ByClass: by, Result: res,
		BelowFloorPer: BelowFloorPer(res.Jobs, BelowFloorBlock)}
	if mem != nil {
		run.MemoryPairs, run.MemoryKnown = mem.Len(), mem.Known()
	}
	return run, nil
}

// warmUp runs the warm-up jobs of seed through a fresh coscheml policy on pred
// (the pair memory's predictor), so that its memory learns; results are dropped.
func (e Experiment) warmUp(seed int64, pred model.Predictor, opts placement.Options, cfg Config) error {
	ws := seed + WarmUpSeedOffset
	jobs, err := e.WarmUp(seed)
	if err != nil {
		return fmt.Errorf("experiment: warm-up jobs: %w", err)
	}
	if err := trace.Assign(jobs, e.Truth.Tags(), e.Mix, ws); err != nil {
		return fmt.Errorf("experiment: warm-up jobs: %w", err)
	}
	pol, err := placement.ByName("coscheml", pred, opts)
	if err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	cfg.Seed = uint64(ws)
	cfg.Progress = nil
	if cfg.MaxCoRunners == 0 {
		cfg.MaxCoRunners = opts.MaxCoRunners
	}
	if _, err := Run(cfg, jobs, e.Truth, pol); err != nil {
		return fmt.Errorf("experiment: warm-up seed %d: %w", seed, err)
	}
	return nil
}

// Stat is a metric over seeds.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	N    int     `json:"n"`
}

// StatOf computes mean, sample standard deviation, min and max.
func StatOf(v []float64) Stat {
	s := Stat{N: len(v), Min: math.Inf(1), Max: math.Inf(-1)}
	if len(v) == 0 {
		return Stat{}
	}
	for _, x := range v {
		s.Mean += x
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	s.Mean /= float64(len(v))
	if len(v) > 1 {
		for _, x := range v {
			s.SD += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(s.SD / float64(len(v)-1))
	}
	return s
}

// MetricNames are the metrics aggregated across seeds, in report order.
var MetricNames = []string{"avg_jct", "median_jct", "p95_jct", "avg_queue", "makespan", "gpu_util", "useful_util", "kernel_util", "below_floor", "below_floor_hours", "shared", "shared_multi_gpu"}

// Value returns metric name of m.
func (m Metrics) Value(name string) float64 {
	switch name {
	case "avg_jct":
		return m.AvgJCT
	case "median_jct":
		return m.MedianJCT
	case "p95_jct":
		return m.P95JCT
	case "avg_queue":
		return m.AvgQueue
	case "makespan":
		return m.Makespan
	case "gpu_util":
		return m.GPUUtil
	case "useful_util":
		return m.UsefulUtil
	case "kernel_util":
		return m.KernelUtil
	case "below_floor":
		return float64(m.BelowFloor)
	case "below_floor_hours":
		return m.BelowFloorHours
	case "shared":
		return float64(m.Shared)
	case "shared_multi_gpu":
		return float64(m.SharedMultiGPU)
	}
	return math.NaN()
}

// PolicySummary aggregates one policy's runs over seeds.
type PolicySummary struct {
	Policy  string                     `json:"policy"`
	Overall map[string]Stat            `json:"overall"`
	ByClass map[string]map[string]Stat `json:"by_class"`
	// VsBase: per-seed relative change against the baseline policy of the same seed,
	// (policy - base) / base, for avg_jct, makespan and the utilizations.
	VsBase map[string]Stat `json:"vs_baseline,omitempty"`
}

// Summarize aggregates runs per policy (in the order policies first appear),
// with changes relative to baseline (e.g. "exclusive") when it was run.
func SummarizeRuns(runs []*PolicyRun, baseline string) []PolicySummary {
	var order []string
	byPol := map[string][]*PolicyRun{}
	base := map[int64]*PolicyRun{}
	for _, r := range runs {
		if _, ok := byPol[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		byPol[r.Policy] = append(byPol[r.Policy], r)
		if r.Policy == baseline {
			base[r.Seed] = r
		}
	}
	var out []PolicySummary
	for _, p := range order {
		rs := byPol[p]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seed < rs[j].Seed })
		ps := PolicySummary{Policy: p, Overall: map[string]Stat{}, ByClass: map[string]map[string]Stat{}}
		for _, name := range MetricNames {
			var v []float64
			for _, r := range rs {
				v = append(v, r.Overall.Value(name))
			}
			ps.Overall[name] = StatOf(v)
		}
		for _, c := range Classes {
			cm := map[string]Stat{}
			for _, name := range MetricNames {
				var v []float64
				for _, r := range rs {
					if m, ok := r.ByClass[c]; ok {
						v = append(v, m.Value(name))
					}
				}
				if len(v) > 0 {
					cm[name] = StatOf(v)
				}
			}
			if len(cm) > 0 {
				ps.ByClass[string(c)] = cm
			}
		}
		if len(base) > 0 {
			ps.VsBase = map[string]Stat{}
			for _, name := range []string{"avg_jct", "makespan", "gpu_util", "useful_util", "kernel_util"} {
				var v []float64
				for _, r := range rs {
					if b, ok := base[r.Seed]; ok && b.Overall.Value(name) != 0 {
						v = append(v, (r.Overall.Value(name)-b.Overall.Value(name))/b.Overall.Value(name))
					}
				}
				if len(v) > 0 {
					ps.VsBase[name] = StatOf(v)
				}
			}
		}
		out = append(out, ps)
	}
	return out
}
