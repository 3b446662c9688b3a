// SPDX-License-Identifier: Apache-2.0

// Package sim is an event-driven simulator of a GPU cluster (nodes x GPUs with
// sharing slots) that replays a job trace through a placement.Policy, the same code
// slurmctld runs, with FIFO plus EASY backfill queueing like Slurm's. Jobs progress
// at the rate their co-runners allow according to measured ground truth (package
// truth), never the model's predictions.
//
// Model of execution (docs/evaluation.md has the full list of assumptions):
//   - A job needs Duration seconds of work at speed 1 (alone). While it runs, its
//     rate is the lowest, over its GPUs, of the product of its true pairwise speeds
//     next to each co-runner on that GPU (a multi-GPU job runs at the pace of its
//     slowest GPU). Rates change only when a job starts or ends on a GPU; then the
//     affected jobs' progress is brought up to date and their finish events are
//     rescheduled (stale events are dropped lazily by a version number).
//   - Queue: jobs in submission order. The scheduler starts jobs from the head while
//     the policy places them; when the head must wait, it computes the head's
//     reservation (the earliest time enough GPUs become idle, taking each running
//     job's end as start + trace duration: the trace duration plays the user's time
//     limit, as in EASY backfill) and lets later jobs (up to BackfillDepth, like
//     Slurm's bf_max_job_test) start if they end by that time by the same estimate,
//     or fit on GPUs the reservation does not need.
package sim

import (
	"container/heap"
	"fmt"
	"github.com/coscheml/coscheml/pkg/policyname"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/inferlatency"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// Config is the simulated cluster and scheduler.
type Config struct {
	Nodes       int
	GPUsPerNode int
	GPUMemMiB   float64 // memory of each GPU (default 32768)
	// Cluster, when set, is the simulated cluster's nodes instead of Nodes x
	// GPUsPerNode GPUs of GPUMemMiB: nodes of their own GPU count, memory and
	// model (placeconf.Cluster of a configuration's cluster.groups). Its
	// residents are ignored; every run starts it empty.
	Cluster *placement.Cluster
	Slots   int // sharing slots per GPU (default placement.DefaultSlots)
	// MaxCoRunners is the most jobs on one GPU (default placement's default). The
	// simulator does not ask the policy about a job that needs more GPUs than
	// have a free slot and room for another job: no policy can place it then.
	MaxCoRunners int
	// Floors are the speed floors per class used to count jobs pushed below their
	// floor (by true speed); the policies get theirs from their own options.
	Floors placement.Floors
	// Reach is how Slurm reaches a GPU with a single-GPU shard request, as in the
	// plugin (shard_pinning): the zero value, ReachTyped, reaches every GPU.
	Reach placement.Reach
	// OnStart, when set, is called with each job's ID and placement as it starts
	// (tests compare the simulator's choices with the plugin's).
	OnStart func(jobID string, d placement.Decision)
	// BackfillDepth is how many queued jobs after the head the backfill pass
	// considers (default 500, Slurm's own default of bf_max_job_test from 22.05 to
	// 26.05). -1 turns backfill off.
	BackfillDepth int
	// TimelineBuckets bounds the utilization timeline (default 200).
	TimelineBuckets int
	// Progress, when set, is called about every ProgressEvery events, and once at
	// the end, with the number of jobs finished since its previous call (runs of
	// an Experiment share it: it must be safe for concurrent use).
	Progress      func(finished int)
	ProgressEvery int
	// OnCoRunEnd, when set, is called whenever two jobs stop sharing a GPU (one
	// of them ends), once per direction: job (its profile) ran at speed next to
	// co, as the node's measurements would say. Speed is the true speed plus
	// Gaussian noise of the truth's NoiseSD (seeded by Seed), clipped to
	// [0.01, 1.2]. uid is the job's simulated user (see userOf). This is how
	// the pair memory learns during a run (docs/evaluation.md).
	OnCoRunEnd func(job, co *profile.Profile, uid string, speed float64)
	// Seed drives the measurement noise.
	Seed uint64
	// Submit, when set, models the plugin inside slurmctld instead of a
	// scheduler that places each job when it starts: see SubmitModel. nil keeps
	// the idealised model (FIFO + backfill, placement at start).
	Submit *SubmitModel
	// Guard, when set, runs the node guard's rules (package guard) on every
	// shared GPU: see guard.go. nil: no guard.
	Guard *guard.Config
}

// SubmitModel is what the plugin really does in slurmctld
// (docs/evaluation.md#decision-at-submit):
//   - every job is decided when it is submitted, against the cluster then (the
//     running jobs; a job placed then starts at once, as its pinned request
//     finds its slots free), by the same policy and Reach (shard_pinning);
//   - a single-GPU job answered "wait" is deferred (wait_defer) and decided
//     again by the re-decide loop at its next pass after capacity changed
//     (Redecide > 0), in submit order, until placed; without the loop
//     (Redecide == 0) it keeps the plugin's fail-safe request: a whole GPU, any
//     node, which Slurm's queue (FIFO + backfill) starts on the first idle GPU,
//     exactly as the exclusive policy places it, and nothing joins it later;
//   - a several-GPU job that does not fit at submit is deferred like a
//     one-GPU job where the loop's update can name each GPU's Type (typed
//     pinning, updates typed: Slurm 23.11 and later), else left to Slurm:
//     whole GPUs from the same queue;
//   - a re-decided job starts at Slurm's next scheduling pass (StartDelay), not
//     at once: until then its decision is a queued reservation in the policy's
//     view, as in the plugin. When its request is an untyped shard count
//     (UntypedUpdates, or Reach first fit), Slurm's first fit places that
//     count when the job starts (placement.FirstFitGPU): on the intended GPU
//     unless a lower GPU of the node freed enough shards meanwhile.
type SubmitModel struct {
	// Redecide is the re-decide loop's interval in seconds (coscheml redecide
	// --interval, in the trace's time); 0: no loop.
	Redecide float64
	// UntypedUpdates: on a typed cluster (Reach typed), the loop's updates
	// cannot name a GPU's type (Slurm before 23.11: it does not honour typed shard
	// requests in an update). As in the plugin, a re-decision then chooses among
	// the GPUs an untyped count reaches (Cluster.WithReach(ReachFirstFit)) and
	// asks for placement.UntypedSlots' count, or stays deferred when no count
	// lands on the chosen GPU now.
	UntypedUpdates bool
	// StartDelay bounds the time from a re-decision to the job's start, in
	// seconds of the trace's time: the jobs one pass of the loop re-decides
	// start together, in decision order, after a delay drawn uniformly in
	// (0, StartDelay] (seeded by Seed), as Slurm's next backfill pass, every
	// bf_interval, starts the updated jobs in priority order. 0: at once.
	StartDelay float64
}

func (c Config) withDefaults() (Config, error) {
	if c.GPUMemMiB == 0 {
		c.GPUMemMiB = 32768
	}
	if c.Slots == 0 {
		c.Slots = placement.DefaultSlots
	}
	if c.MaxCoRunners == 0 {
		c.MaxCoRunners = placement.DefaultMaxCoRunners
	}
	if c.Floors == (placement.Floors{}) {
		c.Floors = placement.DefaultOptions().Floors
	}
	if c.BackfillDepth == 0 {
		c.BackfillDepth = 500
	}
	if c.TimelineBuckets == 0 {
		c.TimelineBuckets = 200
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = 50000
	}
	switch {
	case c.Cluster != nil:
		if n := c.Cluster.NumGPUs(); n < 1 || n > 1<<22 {
			return c, fmt.Errorf("sim: cluster of %d GPUs: want 1..%d", n, 1<<22)
		}
	case c.Nodes < 1 || c.GPUsPerNode < 1:
		return c, fmt.Errorf("sim: cluster %d nodes x %d GPUs: want at least 1 x 1", c.Nodes, c.GPUsPerNode)
	case c.Nodes*c.GPUsPerNode > 1<<22:
		return c, fmt.Errorf("sim: cluster of %d GPUs is too large", c.Nodes*c.GPUsPerNode)
	case c.GPUMemMiB < 0 || c.Slots < 1:
		return c, fmt.Errorf("sim: GPU memory %v MiB, slots %d: want >= 0 and >= 1", c.GPUMemMiB, c.Slots)
	}
	return c, nil
}

// GPUs is the cluster's GPU count.
func (c Config) GPUs() int {
	if c.Cluster != nil {
		return c.Cluster.NumGPUs()
	}
	return c.Nodes * c.GPUsPerNode
}

// JobResult is what happened to one job.
type JobResult struct {
	ID         string        `json:"id"`
	Tag        string        `json:"tag"`
	Class      profile.Class `json:"class"`
	GPUs       int           `json:"gpus"`
	Submit     float64       `json:"submit"`
	Start      float64       `json:"start"`
	End        float64       `json:"end"`
	Duration   float64       `json:"duration"`    // alone, from the trace
	MinSpeed   float64       `json:"min_speed"`   // lowest true speed while running
	Shared     bool          `json:"shared"`      // had a co-runner at some time
	BelowFloor bool          `json:"below_floor"` // true speed under its class floor at some time
	// BelowFloorSec is the time the job ran below its floor (suspended time
	// does not count: the job is not running).
	BelowFloorSec float64 `json:"below_floor_s"`
	// Suspended and Requeued count the guard's actions on the job.
	Suspended int `json:"suspended,omitempty"`
	Requeued  int `json:"requeued,omitempty"`
	// Migrated counts the moves a reviewing peer made of the job (Gandiva).
	Migrated int `json:"migrated,omitempty"`
}

// JCT is the job completion time: end minus submission.
func (j JobResult) JCT() float64 { return j.End - j.Submit }

// Queue is the queueing delay: start minus submission.
func (j JobResult) Queue() float64 { return j.Start - j.Submit }

// Sample is one bucket of the utilization timeline.
type Sample struct {
	T      float64 `json:"t"`      // bucket start, seconds
	Alloc  float64 `json:"alloc"`  // allocated GPUs / GPUs, averaged over the bucket
	Useful float64 `json:"useful"` // progress rate / GPUs, averaged over the bucket
	Kernel float64 `json:"kernel"` // kernel utilization (NVML utilization.gpu) / 100, averaged
}

// Result is one policy's run.
type Result struct {
	Policy    string      `json:"policy"`
	GPUs      int         `json:"gpus"`
	Jobs      []JobResult `json:"-"`
	Dropped   int         `json:"dropped"` // jobs asking for more GPUs than the cluster has
	Makespan  float64     `json:"makespan"`
	AllocGPUS float64     `json:"alloc_gpu_seconds"`  // GPU-seconds with at least one job
	Useful    float64     `json:"useful_gpu_seconds"` // work done, GPU-seconds at speed 1
	Kernel    float64     `json:"kernel_gpu_seconds"` // GPU-seconds of kernel time (truth.GPUUtil)
	Events    int         `json:"events"`             // events processed (arrivals + finishes)
	Decisions int         `json:"decisions"`          // policy.Place calls
	// SubmitModel: Redecided, jobs placed by a re-decision; Redirected, those
	// that Slurm's first fit started on another GPU than the decision's;
	// Whole, jobs left to Slurm's queue on a whole GPU (no GPU chosen).
	Redecided  int `json:"redecided,omitempty"`
	Redirected int `json:"redirected,omitempty"`
	Whole      int `json:"whole,omitempty"`
	// Guard: what the guard did (Config.Guard set).
	Guard    GuardStats    `json:"guard"`
	Timeline []Sample      `json:"timeline"`
	Wall     time.Duration `json:"wall_ns"`
}

// event is a finish event; stale ones (finishVersion != the job's) are skipped.
type event struct {
	t             float64
	job           int32
	finishVersion uint32
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].job < h[j].job
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// jobState is the simulator's view of one job.
type jobState struct {
	req           placement.Request
	tag           int32   // index into the truth table
	gpus          []int32 // global GPU indexes while running
	slots         []int32 // slots held on each of gpus
	rate          float64
	remaining     float64 // work left, seconds at speed 1
	last          float64 // time remaining was last brought up to date
	estEnd        float64 // start + duration: the reservation's estimate
	finishVersion uint32  // bumped when the job's finish time changes: older finish events are stale
	running       bool
	// whole: in Slurm's queue with a whole-GPU request (SubmitModel), placed by
	// the exclusive policy, not the one under test.
	whole bool
	// suspended: held by the guard (no progress, resources kept).
	suspended bool
	// migrated: moved by a reviewing peer (its work checkpointed); its next
	// start keeps the first one's time.
	migrated bool
	// floorSpeed is the speed the job's floor is judged by (floorSpeedOn), since
	// floorLast.
	floorSpeed, floorLast float64
}

type simulator struct {
	cfg   Config
	tt    *truth.Table
	pol   placement.Policy
	cl    *placement.Cluster
	jobs  []trace.Job
	st    []jobState
	res   []JobResult
	gpuOn [][]int32 // residents (job indexes) of each global GPU
	// nodeOff[n] is the global index of node n's GPU 0 (nodes differ in GPU count).
	nodeOff []int32
	// largestNode is the GPUs of the largest node: a larger job spans nodes (spanNodes).
	largestNode int
	// overMem is the first GPU found holding more profiled memory than it has.
	overMem error
	// modelMasks are the node filters of the GPU model lists jobs ask for.
	modelMasks map[string][]bool
	// room memoizes roomFor.
	room map[roomKey]int
	used []int32 // slots held on each global GPU
	open int     // GPUs with a free slot and room for another job
	ev   eventHeap

	queue    []int32 // waiting jobs in FIFO order; -1 = started by backfill
	qhead    int
	qlive    int
	newFrom  int  // queue position of the first job not yet tried
	dirty    bool // resources were freed since the last pass
	byEnd    []int32
	memo     map[memoKey]bool
	cnt      []int32 // scratch for the reservation walk
	cntEpoch []uint32
	epoch    uint32

	// SubmitModel state: the exclusive policy for whole-GPU requests, the
	// deferred jobs in submit order, and the re-decide loop's next pass (+Inf:
	// none due).
	excl                  placement.Policy
	deferred              []int32
	nextTick              float64
	pending               []pendingStart // re-decided jobs Slurm has not started yet
	delays                *rand.Rand     // their start delays
	redecided, redirected int

	gd *simGuard // nil: no guard
	// The published peers' hooks (placement.Planner and the others; nil
	// when the policy has none): the clock, the queue order (priority of
	// each job), the reviewer and its next review.
	clocked    placement.Clocked
	prio       []float64
	review     placement.Reviewer
	nextReview float64
	byID       map[string]int32
	shares     []float64 // scratch: co-runners' GPU shares

	now       float64
	allocGPUs int       // GPUs with at least one resident
	useRate   float64   // sum of rate*GPUs over running jobs
	kernel    []float64 // kernel utilization (fraction) of each GPU
	kernRate  float64   // sum of kernel
	apps      []int32   // scratch
	allocInt  float64
	useInt    float64
	kernInt   float64
	tl        timeline
	noise     *rand.Rand
	done      int
	decisions int
	events    int
}

// pendingStart is a re-decided job waiting for Slurm to start it: at t (or,
// when nothing fitted then, at the next change), k shards on node, intended
// GPU g; untyped: Slurm's first fit places the k shards.
type pendingStart struct {
	t       float64
	j       int32
	node, g int
	k       int
	untyped bool
	all     []placement.Slot // several GPUs: every one (node, g, k are the first's)
}

type memoKey struct {
	tag   int32
	class profile.Class
	gpus  int
	nodes *bool // the job's node filter (GPU models), shared by the jobs asking the same: nil for all
}

// Run simulates jobs (sorted by Submit, each with a Tag in tt and a Class) on the
// cluster of cfg under policy pol. The policy must be fresh (it sees only this
// cluster).
func Run(cfg Config, jobs []trace.Job, tt *truth.Table, pol placement.Policy) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s := &simulator{cfg: cfg, tt: tt, pol: pol, memo: map[memoKey]bool{}, nextTick: math.Inf(1)}
	if cfg.Submit != nil && policyname.Peer(pol.Name()) {
		return nil, fmt.Errorf("sim: policy %s runs its own queue: it takes no submit model (the plugin's)", pol.Name())
	}
	if cfg.Submit != nil {
		if !(cfg.Submit.Redecide >= 0) || !(cfg.Submit.StartDelay >= 0) || math.IsInf(cfg.Submit.StartDelay, 0) {
			return nil, fmt.Errorf("sim: re-decide interval %v, start delay %v: want >= 0", cfg.Submit.Redecide, cfg.Submit.StartDelay)
		}
		s.delays = rand.New(rand.NewPCG(cfg.Seed, 0x7374617274))
		opts := placement.DefaultOptions()
		opts.MaxCoRunners = cfg.MaxCoRunners
		if s.excl, err = placement.NewExclusive(opts); err != nil {
			return nil, fmt.Errorf("sim: the whole-GPU requests' policy: %w", err)
		}
	}
	if cfg.Cluster != nil {
		s.cl = emptyClone(cfg.Cluster, cfg.Slots)
	} else {
		s.cl = placement.NewCluster(cfg.Nodes, cfg.GPUsPerNode, cfg.GPUMemMiB, cfg.Slots)
	}
	s.nodeOff = make([]int32, len(s.cl.Nodes)+1)
	for i, node := range s.cl.Nodes {
		s.nodeOff[i+1] = s.nodeOff[i] + int32(len(node.GPUs))
	}
	if cfg.Reach != placement.ReachTyped {
		s.cl.Reach = cfg.Reach
		s.cl.Reindex()
	}
	for _, node := range s.cl.Nodes {
		s.largestNode = max(s.largestNode, len(node.GPUs))
	}
	n := cfg.GPUs()
	s.gpuOn = make([][]int32, n)
	s.used = make([]int32, n)
	s.open = n
	s.kernel = make([]float64, n)
	s.cnt = make([]int32, n)
	s.cntEpoch = make([]uint32, n)
	out := &Result{Policy: pol.Name(), GPUs: n}
	for i, j := range jobs {
		if i > 0 && j.Submit < jobs[i-1].Submit {
			return nil, fmt.Errorf("sim: jobs not sorted by submit time at %d", i)
		}
		if j.GPUs > n {
			out.Dropped++
			continue
		}
		ti, ok := tt.Index(j.Tag)
		if !ok {
			return nil, fmt.Errorf("sim: job %s: application %q has no ground truth", profile.Sanitize(j.ID), profile.Sanitize(j.Tag))
		}
		if !(j.Duration > 0) || j.GPUs < 1 {
			return nil, fmt.Errorf("sim: job %s: duration %v, GPUs %d: want > 0 and >= 1", profile.Sanitize(j.ID), j.Duration, j.GPUs)
		}
		req := placement.Request{JobID: j.ID, Tag: j.Tag, Profile: tt.Profile(ti), Class: j.Class, GPUs: j.GPUs, EstDuration: j.Duration,
			SpanNodes: spanNodes(j.GPUs, s.largestNode)}
		maskKey := ""
		if len(j.GPUModels) > 0 && s.namesModels() {
			if req.Nodes = s.modelNodes(j.GPUModels); req.Nodes == nil {
				out.Dropped++ // no GPU of the models it asks for
				continue
			}
			maskKey = strings.Join(j.GPUModels, "|")
		}
		if cfg.Cluster != nil && j.GPUs > s.roomFor(maskKey, req.Nodes, req.Profile.MemUsedMiB) {
			out.Dropped++ // fewer GPUs with room for it than it asks for: it could never start
			continue
		}
		s.jobs = append(s.jobs, j)
		s.st = append(s.st, jobState{req: req, tag: int32(ti), remaining: j.Duration})
		s.res = append(s.res, JobResult{ID: j.ID, Tag: j.Tag, Class: j.Class, GPUs: j.GPUs, Submit: j.Submit, Duration: j.Duration, MinSpeed: 1})
	}
	s.tl = newTimeline(cfg.TimelineBuckets, s.jobs)
	s.hookPeers()
	s.noise = rand.New(rand.NewPCG(cfg.Seed, 0x6e6f697365))
	if cfg.Guard != nil {
		if s.gd, err = newSimGuard(*cfg.Guard, cfg.Floors, n); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	if err := s.loop(); err != nil {
		return nil, err
	}
	if s.overMem != nil {
		return nil, s.overMem
	}
	out.Jobs = s.res
	out.Makespan = s.now
	out.AllocGPUS = s.allocInt
	out.Useful = s.useInt
	out.Kernel = s.kernInt
	out.Events = s.events
	out.Decisions = s.decisions
	out.Redecided, out.Redirected = s.redecided, s.redirected
	if s.gd != nil {
		out.Guard = s.gd.stats
	}
	for i := range s.st {
		if s.st[i].whole {
			out.Whole++
		}
	}
	out.Timeline = s.tl.samples(n)
	out.Wall = time.Since(start)
	return out, nil
}

func (s *simulator) loop() error {
	next := 0 // next arrival
	total := len(s.jobs)
	nextProgress, reported := s.cfg.ProgressEvery, 0
	for s.done < total {
		// The next time anything happens.
		for len(s.ev) > 0 && s.ev[0].finishVersion != s.st[s.ev[0].job].finishVersion {
			heap.Pop(&s.ev)
		}
		t := math.Inf(1)
		if len(s.ev) > 0 {
			t = s.ev[0].t
		}
		if next < total && s.jobs[next].Submit < t {
			t = s.jobs[next].Submit
		}
		t = min(t, s.nextTick)
		if s.gd != nil {
			t = min(t, s.gd.next())
		}
		for _, p := range s.pending {
			t = min(t, p.t)
		}
		if s.review != nil && s.allocGPUs > 0 {
			t = min(t, max(s.nextReview, s.now))
		}
		if math.IsInf(t, 1) {
			return fmt.Errorf("sim: %s: %d jobs can never start (the policy keeps them waiting on an idle cluster)", s.pol.Name(), total-s.done)
		}
		s.advance(t)
		// Everything that happens at t: finishes first (they free GPUs), then arrivals.
		for len(s.ev) > 0 && s.ev[0].t <= t {
			e := heap.Pop(&s.ev).(event)
			if e.finishVersion != s.st[e.job].finishVersion || !s.st[e.job].running {
				continue
			}
			s.events++
			s.finish(int(e.job))
		}
		if s.gd != nil {
			s.guardChecks()
		}
		if s.cfg.Submit != nil {
			// Slurm's queue (whole-GPU requests, older) first, then each arrival
			// decided at submit, then the loop's pass if due.
			s.schedule()
			for next < total && s.jobs[next].Submit <= t {
				s.arrive(next)
				next++
				s.events++
			}
			s.schedule()
			s.startPending()
			if s.nextTick <= t {
				s.nextTick = math.Inf(1)
				s.redecide()
			}
		} else {
			for next < total && s.jobs[next].Submit <= t {
				s.enqueue(int32(next))
				next++
				s.events++
			}
			s.schedule()
		}
		if s.review != nil && s.nextReview <= t {
			s.reviewMoves()
			s.schedule()
		}
		if s.cfg.Progress != nil && s.events >= nextProgress {
			s.cfg.Progress(s.done - reported)
			reported = s.done
			nextProgress = s.events + s.cfg.ProgressEvery
		}
	}
	if s.cfg.Progress != nil && s.done > reported {
		s.cfg.Progress(s.done - reported)
	}
	return nil
}

// advance integrates utilization up to t.
func (s *simulator) advance(t float64) {
	if dt := t - s.now; dt > 0 {
		s.allocInt += dt * float64(s.allocGPUs)
		s.useInt += dt * s.useRate
		s.kernInt += dt * s.kernRate
		s.tl.add(s.now, t, float64(s.allocGPUs), s.useRate, s.kernRate)
		s.now = t
	}
}

// speedOn is job j's true speed on GPU g given the other residents there (a
// job the guard suspended uses no GPU).
func (s *simulator) speedOn(j int, g int32) float64 {
	sp := 1.0
	ti := int(s.st[j].tag)
	for _, o := range s.gpuOn[g] {
		if int(o) != j && !s.st[o].suspended {
			sp *= s.tt.Speed(ti, int(s.st[o].tag))
		}
	}
	return sp
}

// floorSpeedOn is the speed job j's floor is judged by on GPU g, where its true
// speed is speed: that speed, or for inference its latency speed, which the
// ground truth does not measure: package inferlatency's time-slicing model
// applied to the co-runners' true GPU shares (docs/evaluation.md).
func (s *simulator) floorSpeedOn(j int, g int32, speed float64) float64 {
	if s.res[j].Class != profile.ClassInfer {
		return speed
	}
	s.shares = s.coShares(j, g, s.shares[:0])
	return inferlatency.SpeedFromSMUtil(s.shares)
}

// coShares appends the GPU shares (SM utilization, %) the co-runners of job j
// on GPU g use: each one's solo utilization times its true speed there.
func (s *simulator) coShares(j int, g int32, out []float64) []float64 {
	for _, o := range s.gpuOn[g] {
		if int(o) != j && !s.st[o].suspended {
			out = append(out, s.tt.SoloUtil(int(s.st[o].tag))*s.speedOn(int(o), g))
		}
	}
	return out
}

// refresh brings the jobs on GPUs gs up to date and recomputes their rates and
// the GPUs' kernel utilization.
func (s *simulator) refresh(gs []int32) {
	for _, g := range gs {
		s.apps = s.apps[:0]
		for _, o := range s.gpuOn[g] {
			if !s.st[o].suspended {
				s.apps = append(s.apps, s.st[o].tag)
			}
		}
		k := s.tt.GPUUtil(s.apps) / 100
		s.kernRate += k - s.kernel[g]
		s.kernel[g] = k
	}
	for _, g := range gs {
		for _, o := range s.gpuOn[g] {
			s.rerate(int(o))
		}
	}
	if s.gd != nil {
		for _, g := range gs {
			s.guardWatch(g)
		}
	}
}

func (s *simulator) rerate(j int) {
	st := &s.st[j]
	r := &s.res[j]
	rate, fs := 0.0, 1.0
	if !st.suspended {
		rate = 1.0
		for _, g := range st.gpus {
			sp := s.speedOn(j, g)
			rate = min(rate, sp)
			fs = min(fs, s.floorSpeedOn(j, g, sp))
		}
	}
	if fs != st.floorSpeed {
		s.closeFloorSpan(j)
		st.floorSpeed = fs
		if fs < s.cfg.Floors.For(r.Class)-1e-9 {
			r.BelowFloor = true
		}
	}
	if st.rate == rate {
		return
	}
	st.remaining -= st.rate * (s.now - st.last)
	if st.remaining < 0 {
		st.remaining = 0
	}
	st.last = s.now
	s.useRate += (rate - st.rate) * float64(len(st.gpus))
	st.rate = rate
	st.finishVersion++
	if st.suspended {
		return // no finish until resumed
	}
	if rate < r.MinSpeed {
		r.MinSpeed = rate
	}
	if rate < 1 {
		r.Shared = true
	}
	heap.Push(&s.ev, event{t: s.now + st.remaining/rate, job: int32(j), finishVersion: st.finishVersion})
}

// closeFloorSpan adds the time since job j's floor speed last changed to its
// time below floor when that speed was below the floor.
func (s *simulator) closeFloorSpan(j int) {
	st := &s.st[j]
	if st.floorSpeed < s.cfg.Floors.For(s.res[j].Class)-1e-9 {
		s.res[j].BelowFloorSec += s.now - st.floorLast
	}
	st.floorLast = s.now
}

func (s *simulator) start(j int, d placement.Decision) {
	st := &s.st[j]
	if s.cfg.OnStart != nil {
		s.cfg.OnStart(st.req.JobID, d)
	}
	s.cl.Apply(&st.req, d)
	st.gpus = st.gpus[:0]
	st.slots = st.slots[:0]
	for _, p := range d.Placement {
		g := s.nodeOff[p.Node] + int32(p.GPU)
		st.gpus = append(st.gpus, g)
		st.slots = append(st.slots, int32(p.Slots))
		wasOpen := s.isOpen(g)
		s.used[g] += int32(p.Slots)
		if len(s.gpuOn[g]) == 0 {
			s.allocGPUs++
		}
		if len(s.gpuOn[g]) > 0 {
			s.res[j].Shared = true
			for _, o := range s.gpuOn[g] {
				s.res[o].Shared = true
			}
		}
		s.gpuOn[g] = append(s.gpuOn[g], int32(j))
		s.fixOpen(g, wasOpen)
		s.checkMemory(g, p)
	}
	st.running = true
	st.rate = 0
	st.last = s.now
	st.floorSpeed, st.floorLast = 1, s.now
	st.estEnd = s.now + st.remaining // the duration, but for a migrated job's checkpoint
	if !st.migrated {
		s.res[j].Start = s.now
	}
	st.migrated = false
	s.insertByEnd(int32(j))
	s.refresh(st.gpus)
}

func (s *simulator) finish(j int) {
	s.res[j].End = s.now
	s.coRunsEnd(j)
	s.release(j)
	s.st[j].remaining = 0
	s.done++
	s.dirty = true
	for i := range s.pending {
		if math.IsInf(s.pending[i].t, 1) { // waits for shards: try again now
			s.pending[i].t = s.now
		}
	}
	if s.cfg.Submit != nil && s.cfg.Submit.Redecide > 0 && len(s.deferred) > 0 {
		// The loop notices the change at its next pass.
		r := s.cfg.Submit.Redecide
		s.nextTick = min(s.nextTick, math.Ceil(s.now/r)*r)
	}
	if s.gd != nil {
		s.guardResumes()
	}
}

// release takes running job j off its GPUs and out of the policy's cluster.
func (s *simulator) release(j int) {
	st := &s.st[j]
	s.closeFloorSpan(j)
	st.floorSpeed = 1
	st.running = false
	st.finishVersion++
	s.useRate -= st.rate * float64(len(st.gpus))
	st.rate = 0
	s.cl.Remove(st.req.JobID)
	for k, g := range st.gpus {
		wasOpen := s.isOpen(g)
		s.used[g] -= st.slots[k]
		on := s.gpuOn[g]
		for i, o := range on {
			if int(o) == j {
				on = append(on[:i], on[i+1:]...)
				break
			}
		}
		s.gpuOn[g] = on
		if len(on) == 0 {
			s.allocGPUs--
		}
		s.fixOpen(g, wasOpen)
	}
	s.removeByEnd(int32(j))
	s.refresh(st.gpus)
}

// arrive decides job j at its submission (SubmitModel): placed, it starts now;
// a wait is deferred for the loop, or (no loop, or several GPUs) queued in
// Slurm with a whole-GPU request.
func (s *simulator) arrive(j int) {
	d := s.place(j)
	if d.Action != placement.ActionWait {
		s.start(j, d)
		return
	}
	if s.cfg.Submit.Redecide > 0 && (s.st[j].req.GPUs == 1 || s.multiUpdates()) {
		s.deferred = append(s.deferred, int32(j))
		return
	}
	s.st[j].whole = true
	s.enqueue(int32(j))
}

// multiUpdates says whether the loop's update can place a several-GPU job:
// only typed (one shard Type per GPU, named in the update: Slurm 23.11 and
// later), as the plugin does; else such a job keeps Slurm's whole GPUs.
func (s *simulator) multiUpdates() bool {
	return s.cl.Reach == placement.ReachTyped && !s.cfg.Submit.UntypedUpdates
}

// redecide is one pass of the re-decide loop: every deferred job, in submit
// order, decided again on the cluster now, as the plugin's job_modify decides
// it (see SubmitModel). A placed job is queued for Slurm to start (pending).
func (s *simulator) redecide() {
	start := s.now + s.startDelay() // Slurm's next pass, for every job updated now
	kept := s.deferred[:0]
	for _, j := range s.deferred {
		st := &s.st[j]
		untyped := s.cl.Reach == placement.ReachFirstFit
		var d placement.Decision
		if s.cfg.Submit.UntypedUpdates && !untyped && st.req.GPUs == 1 {
			// The update cannot name the GPU: choose among those an untyped count
			// reaches, and ask for a count that lands on the chosen one.
			untyped = true
			d = s.decideWith(int(j), func(pol placement.Policy, req *placement.Request) placement.Decision {
				d, _ := placement.PlaceUntypedUpdate(pol, s.cl, req)
				return d
			})
		} else {
			d = s.place(int(j))
		}
		if d.Action == placement.ActionWait {
			kept = append(kept, j)
			continue
		}
		if s.cfg.Submit.StartDelay == 0 && !untyped {
			s.start(int(j), d)
			s.redecided++
			continue
		}
		// Queued in Slurm: the decision holds its GPU in the policy's view (the
		// plugin's reservation) until the job starts.
		rq := st.req
		rq.Kind = placement.Reserved
		s.cl.Apply(&rq, d)
		p := d.Placement[0]
		ps := pendingStart{t: start, j: j, node: p.Node, g: p.GPU, k: p.Slots, untyped: untyped}
		if len(d.Placement) > 1 {
			ps.all = slices.Clone(d.Placement)
		}
		s.pending = append(s.pending, ps)
	}
	s.deferred = kept
	s.startPending()
}

// startDelay draws the wait of a pass's re-decided jobs for Slurm's next
// scheduling pass.
func (s *simulator) startDelay() float64 {
	if d := s.cfg.Submit.StartDelay; d > 0 {
		return d * (1 - s.delays.Float64()) // in (0, d]
	}
	return 0
}

// startPending starts the pending jobs whose time has come, in decision order,
// where Slurm puts their shards: an untyped count by first fit over the node's
// started jobs, a typed one on its GPU. A job that fits nowhere yet waits for
// the next job end.
func (s *simulator) startPending() {
	kept := s.pending[:0]
	for _, p := range s.pending {
		if p.t > s.now {
			kept = append(kept, p)
			continue
		}
		if len(p.all) > 0 {
			// Several GPUs, each named by its Type: the job starts once every
			// one of them has its shards free.
			free := true
			for _, sl := range p.all {
				if s.cl.Nodes[sl.Node].GPUs[sl.GPU].Slots-int(s.used[s.nodeOff[sl.Node]+int32(sl.GPU)]) < sl.Slots {
					free = false
				}
			}
			if !free {
				p.t = math.Inf(1)
				kept = append(kept, p)
				continue
			}
			s.cl.Remove(s.st[p.j].req.JobID) // the reservation
			d := placement.Decision{Action: placement.ActionExclusive, Placement: p.all}
			for _, sl := range p.all {
				if len(s.gpuOn[s.nodeOff[sl.Node]+int32(sl.GPU)]) > 0 {
					d.Action = placement.ActionShare
				}
			}
			s.redecided++
			s.start(int(p.j), d)
			continue
		}
		node := &s.cl.Nodes[p.node]
		g := p.g
		if p.untyped {
			g = placement.FirstFitGPU(node, p.k)
		} else if gpu := &node.GPUs[g]; gpu.Slots-int(s.used[s.nodeOff[p.node]+int32(g)]) < p.k {
			g = -1
		}
		if g < 0 {
			p.t = math.Inf(1)
			kept = append(kept, p)
			continue
		}
		st := &s.st[p.j]
		s.cl.Remove(st.req.JobID) // the reservation
		d := placement.Decision{Action: placement.ActionExclusive, Placement: []placement.Slot{{Node: p.node, GPU: g, Slots: p.k}}}
		if len(s.gpuOn[s.nodeOff[p.node]+int32(g)]) > 0 {
			d.Action = placement.ActionShare
		}
		s.redecided++
		if g != p.g {
			s.redirected++
		}
		s.start(int(p.j), d)
	}
	s.pending = kept
}

// coRunsEnd reports, through OnCoRunEnd, the measured speeds of every pair of
// jobs that stops sharing a GPU because job j ends. Only pairs are reported (a
// GPU with exactly j and one other job): a measurement next to several
// co-runners is not evidence about any one pair.
func (s *simulator) coRunsEnd(j int) {
	if s.cfg.OnCoRunEnd == nil {
		return
	}
	for _, g := range s.st[j].gpus {
		on := s.gpuOn[g]
		if len(on) != 2 {
			continue
		}
		o := int(on[0])
		if o == j {
			o = int(on[1])
		}
		for _, d := range [2][2]int{{j, o}, {o, j}} {
			a, b := &s.st[d[0]], &s.st[d[1]]
			sp := s.tt.Speed(int(a.tag), int(b.tag)) + s.tt.NoiseSD()*s.noise.NormFloat64()
			s.cfg.OnCoRunEnd(a.req.Profile, b.req.Profile, userOf(s.jobs[d[0]].ID), min(max(sp, 0.01), 1.2))
		}
	}
}

// simUsers is how many users the simulator's jobs belong to.
const simUsers = 100

// userOf gives a job a simulated user: the traces carry none, so a hash of the
// job ID picks one of simUsers (a job keeps its user across seeds and policies).
func userOf(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return "u" + strconv.Itoa(int(h.Sum32()%simUsers))
}

func (s *simulator) isOpen(g int32) bool {
	return s.used[g] < int32(s.cfg.Slots) && len(s.gpuOn[g]) < s.cfg.MaxCoRunners
}

// fixOpen updates the count of open GPUs after GPU g changed.
func (s *simulator) fixOpen(g int32, wasOpen bool) {
	if now := s.isOpen(g); now != wasOpen {
		if now {
			s.open++
		} else {
			s.open--
		}
	}
}

func (s *simulator) endKey(j int32) (float64, int32) { return s.st[j].estEnd, j }

func (s *simulator) searchByEnd(j int32) int {
	e, id := s.endKey(j)
	return sort.Search(len(s.byEnd), func(i int) bool {
		e2, id2 := s.endKey(s.byEnd[i])
		return e2 > e || (e2 == e && id2 >= id)
	})
}

func (s *simulator) insertByEnd(j int32) {
	i := s.searchByEnd(j)
	s.byEnd = append(s.byEnd, 0)
	copy(s.byEnd[i+1:], s.byEnd[i:])
	s.byEnd[i] = j
}

func (s *simulator) removeByEnd(j int32) {
	i := s.searchByEnd(j)
	if i < len(s.byEnd) && s.byEnd[i] == j {
		s.byEnd = append(s.byEnd[:i], s.byEnd[i+1:]...)
	}
}

func (s *simulator) place(j int) placement.Decision {
	return s.decideWith(j, func(pol placement.Policy, req *placement.Request) placement.Decision {
		return pol.Place(s.cl, req)
	})
}

// decideWith decides job j with how: the policy's own placement, or the
// plugin's re-decision of an update (placement.PlaceUntypedUpdate).
func (s *simulator) decideWith(j int, how func(placement.Policy, *placement.Request) placement.Decision) placement.Decision {
	if s.st[j].req.GPUs > s.open {
		return placement.Decision{Action: placement.ActionWait}
	}
	s.decisions++
	if s.clocked != nil {
		s.clocked.SetNow(s.now)
	}
	if s.st[j].whole {
		return how(s.excl, &s.st[j].req)
	}
	return how(s.pol, &s.st[j].req)
}

// popHead drops started (tombstoned) entries from the front of the queue.
func (s *simulator) popHead() {
	for s.qhead < len(s.queue) && s.queue[s.qhead] < 0 {
		s.qhead++
	}
	if s.qhead > 4096 && s.qhead*2 > len(s.queue) {
		n := copy(s.queue, s.queue[s.qhead:])
		s.newFrom -= s.qhead
		s.queue = s.queue[:n]
		s.qhead = 0
	}
	if s.newFrom < s.qhead {
		s.newFrom = s.qhead
	}
}

// schedule is one scheduling pass at s.now.
func (s *simulator) schedule() {
	// A priority queue (Lucid) may put a new job ahead of the head: every
	// pass starts from the head.
	dirty := s.dirty || s.prio != nil
	s.dirty = false
	// FIFO: start from the head while the policy places.
	s.popHead()
	if !dirty && s.newFrom > s.qhead {
		// Nothing was freed and the head already waited in this state: only the
		// new arrivals can start, and only by backfill.
		s.backfill(false)
		s.newFrom = len(s.queue)
		return
	}
	for s.qhead < len(s.queue) {
		j := int(s.queue[s.qhead])
		d := s.place(j)
		if d.Action == placement.ActionWait {
			break
		}
		s.start(j, d)
		s.queue[s.qhead] = -1
		s.qlive--
		s.popHead()
	}
	s.backfill(true)
	s.newFrom = len(s.queue)
}

// backfill tries the jobs behind a waiting head (all of them up to the depth when
// all is set, else only those not tried before).
func (s *simulator) backfill(all bool) {
	if s.qhead >= len(s.queue) || s.cfg.BackfillDepth < 0 {
		return
	}
	clear(s.memo)
	head := int(s.queue[s.qhead])
	shadow, extra, haveRes := 0.0, 0, false
	seen := 0
	for i := s.qhead + 1; i < len(s.queue) && seen < s.cfg.BackfillDepth; i++ {
		j := s.queue[i]
		if j < 0 {
			continue
		}
		seen++
		if !all && i < s.newFrom {
			continue
		}
		st := &s.st[j]
		if !haveRes {
			shadow, extra = s.reservation(s.st[head].req.GPUs)
			haveRes = true
		}
		// A job that would end after the shadow time needs its GPUs from the extra
		// ones; if there are not enough, no placement can let it start.
		endsInTime := s.now+s.jobs[j].Duration <= shadow
		if !endsInTime && st.req.GPUs > extra {
			continue
		}
		key := memoKey{st.tag, st.req.Class, st.req.GPUs, nil}
		if len(st.req.Nodes) > 0 {
			key.nodes = &st.req.Nodes[0]
		}
		if s.memo[key] {
			continue
		}
		d := s.place(int(j))
		if d.Action == placement.ActionWait {
			s.memo[key] = true
			continue
		}
		if !endsInTime {
			if len(d.Placement) > extra {
				continue
			}
			extra -= len(d.Placement)
		}
		s.start(int(j), d)
		s.queue[i] = -1
		s.qlive--
		clear(s.memo) // the state changed
	}
}

// reservation returns the head's shadow time (the earliest estimated time at which
// h GPUs are idle) and how many idle GPUs beyond h exist then. Running jobs are
// taken to end at start + trace duration (or now, if already past that).
func (s *simulator) reservation(h int) (shadow float64, extra int) {
	free := s.cl.IdleGPUs()
	s.epoch++
	if s.epoch == 0 {
		clear(s.cntEpoch)
		s.epoch = 1
	}
	shadow = s.now
	k := 0
	take := func() {
		st := &s.st[s.byEnd[k]]
		shadow = max(s.now, st.estEnd)
		for _, g := range st.gpus {
			if s.cntEpoch[g] != s.epoch {
				s.cntEpoch[g] = s.epoch
				s.cnt[g] = int32(len(s.gpuOn[g]))
			}
			s.cnt[g]--
			if s.cnt[g] == 0 {
				free++
			}
		}
		k++
	}
	// free >= h already: the head waits for another reason (memory, a node's
	// shape); the first end is the earliest moment anything changes.
	for k < len(s.byEnd) && (free < h || k == 0) {
		take()
	}
	for k < len(s.byEnd) && max(s.now, s.st[s.byEnd[k]].estEnd) <= shadow {
		take()
	}
	if free < h {
		return math.Inf(1), 0
	}
	return shadow, free - h
}

// emptyClone is c's nodes (GPU counts, memory, slots, models) without residents.
// Every GPU gets slots sharing slots (the simulator's accounting assumes one
// count), and the reach is cfg.Reach's, set by Run.
func emptyClone(c *placement.Cluster, slots int) *placement.Cluster {
	d := &placement.Cluster{Nodes: make([]placement.Node, len(c.Nodes))}
	for n, node := range c.Nodes {
		d.Nodes[n] = node
		d.Nodes[n].GPUs = make([]placement.GPU, len(node.GPUs))
		for g, gpu := range node.GPUs {
			gpu.Residents, gpu.Slots = nil, slots
			d.Nodes[n].GPUs[g] = gpu
		}
	}
	d.Reindex()
	return d
}

// checkMemory is the invariant that no GPU holds jobs whose profiled memory
// exceeds its own (a job that started there would fail for want of memory):
// the first violation is kept and fails the run.
func (s *simulator) checkMemory(g int32, p placement.Slot) {
	if s.overMem != nil {
		return
	}
	sum := 0.0
	for _, o := range s.gpuOn[g] {
		if pr := s.st[o].req.Profile; pr != nil {
			sum += pr.MemUsedMiB
		}
	}
	if capMiB := s.cl.Nodes[p.Node].GPUs[p.GPU].MemMiB; sum > capMiB {
		s.overMem = fmt.Errorf("sim: %s: GPU %d of node %s over-committed at t=%.0f: %d jobs of %.0f MiB on %.0f MiB",
			s.pol.Name(), p.GPU, s.cl.Nodes[p.Node].Name, s.now, len(s.gpuOn[g]), sum, capMiB)
	}
}

// modelNodes is the node filter of a job that asks for one of the GPU models
// names (trace.Job.GPUModels): the nodes whose model, or one of whose features,
// is one of them, ignoring case. nil: no node has any of them.
func (s *simulator) modelNodes(names []string) []bool {
	key := strings.Join(names, "|")
	if m, ok := s.modelMasks[key]; ok {
		return m
	}
	if s.modelMasks == nil {
		s.modelMasks = map[string][]bool{}
	}
	mask := make([]bool, len(s.cl.Nodes))
	any := false
	for n := range s.cl.Nodes {
		node := &s.cl.Nodes[n]
		for _, name := range names {
			if strings.EqualFold(node.Model, name) || slices.ContainsFunc(node.Features, func(f string) bool { return strings.EqualFold(f, name) }) {
				mask[n], any = true, true
				break
			}
		}
	}
	if !any {
		mask = nil
	}
	s.modelMasks[key] = mask
	return mask
}

// namesModels reports whether any node names its GPU model or features: only
// then do jobs' model requests narrow where they run.
func (s *simulator) namesModels() bool {
	for n := range s.cl.Nodes {
		if s.cl.Nodes[n].Model != "" || len(s.cl.Nodes[n].Features) > 0 {
			return true
		}
	}
	return false
}

type roomKey struct {
	models string
	mem    float64
}

// roomFor is the number of GPUs on the nodes of mask (nil: all; models is its
// key) with at least mem MiB: the most GPUs a job of that memory may ever get.
func (s *simulator) roomFor(models string, mask []bool, mem float64) int {
	k := roomKey{models, mem}
	if n, ok := s.room[k]; ok {
		return n
	}
	if s.room == nil {
		s.room = map[roomKey]int{}
	}
	n := s.roomIn(mask, mem)
	s.room[k] = n
	return n
}

// roomIn counts the GPUs of the nodes mask allows (nil: all) with at least mem
// MiB.
func (s *simulator) roomIn(mask []bool, mem float64) int {
	n := 0
	for i := range s.cl.Nodes {
		if mask != nil && !mask[i] {
			continue
		}
		for _, g := range s.cl.Nodes[i].GPUs {
			if g.MemMiB >= mem {
				n++
			}
		}
	}
	return n
}

// spanNodes is the node count of a trace job larger than the largest node
// (largest GPUs): it runs as a Slurm job of -N m with the same per-node GPU
// count, m whole multiples of the node (0: it fits a node, or no whole
// multiple: placed over nodes as whole GPUs).
func spanNodes(gpus, largest int) int {
	if largest < 1 || gpus <= largest || gpus%largest != 0 {
		return 0
	}
	return gpus / largest
}
