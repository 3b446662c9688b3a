// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"fmt"
	"github.com/coscheml/coscheml/pkg/policyname"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

func prof(tag string, sm, mem float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: profile.ClassTrain, SMUtil: profile.Stat{Mean: sm, P95: sm, Max: sm}, MemBWUtil: profile.Stat{Mean: sm / 2, P95: sm / 2, Max: sm / 2}, MemUsedMiB: mem}
}

// handTruth: a next to b runs at 0.5, b next to a at 0.8, a next to a at 0.6,
// b next to b at 0.9.
func handTruth(t *testing.T) *truth.Table {
	t.Helper()
	tb, err := truth.New([]*profile.Profile{prof("a", 90, 4000), prof("b", 30, 2000)},
		[]truth.Pair{{A: "a", B: "b", SpeedA: 0.5, SpeedB: 0.8}, {A: "a", B: "a", SpeedA: 0.6, SpeedB: 0.6}, {A: "b", B: "b", SpeedA: 0.9, SpeedB: 0.9}}, truth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// constScore is a sharing score (placement.ShareScorer) of c for every job.
type constScore int

func (c constScore) Score(*profile.Profile) int { return int(c) }

func mustPolicy(t testing.TB, name string, pred model.Predictor) placement.Policy {
	t.Helper()
	opts := placement.DefaultOptions()
	opts.ShareScore = constScore(1) // Lucid: every pair's scores sum to 2
	p, err := placement.ByName(name, pred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	shippedOnce sync.Once
	shippedTT   *truth.Table
	shippedErr  error
)

func shipped(t testing.TB) *truth.Table {
	t.Helper()
	shippedOnce.Do(func() {
		ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
		if err != nil {
			shippedErr = err
			return
		}
		pairs, err := truth.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
		if err != nil {
			shippedErr = err
			return
		}
		shippedTT, shippedErr = truth.New(ps, pairs, truth.Options{})
	})
	if shippedErr != nil {
		t.Fatal(shippedErr)
	}
	return shippedTT
}

// TestRatesFollowCoRunners checks rate changes against a hand computation: A
// (100 s) alone from 0; B (40 s) joins at 10 under blind sharing: A runs at 0.5
// and B at 0.8, so B ends at 10+40/0.8 = 60 having let A do 25 s of work in 50 s;
// A's remaining 65 s run alone, ending at 125.
func TestRatesFollowCoRunners(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "A", Submit: 0, Duration: 100, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "B", Submit: 10, Duration: 40, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
	}
	res, err := Run(Config{Nodes: 1, GPUsPerNode: 1}, jobs, tb, mustPolicy(t, "blind", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"A": {0, 125}, "B": {10, 60}}
	for _, j := range res.Jobs {
		w := want[j.ID]
		if math.Abs(j.Start-w[0]) > 1e-9 || math.Abs(j.End-w[1]) > 1e-9 {
			t.Errorf("job %s ran %v..%v, want %v..%v", j.ID, j.Start, j.End, w[0], w[1])
		}
	}
	if !res.Jobs[0].BelowFloor || res.Jobs[1].BelowFloor {
		t.Errorf("below floor: A %v (0.5 < 0.75) B %v (0.8 >= 0.75)", res.Jobs[0].BelowFloor, res.Jobs[1].BelowFloor)
	}
	if math.Abs(res.Useful-140) > 1e-9 || math.Abs(res.AllocGPUS-125) > 1e-9 || res.Makespan != 125 {
		t.Errorf("useful %v alloc %v makespan %v, want 140, 125, 125", res.Useful, res.AllocGPUS, res.Makespan)
	}
	// A several-GPU job shares GPUs GPU by GPU and runs at its slowest GPU's
	// speed: C (2 GPUs) joins X (a) and Y (b), which least-loaded spread over
	// the two GPUs; b next to a runs at 0.8 and next to b at 0.9, so C does
	// its 80 s of work at 0.8, from 1 to 101. With share_multi_gpu off it
	// takes whole idle GPUs: it starts when both ended and runs alone.
	jobs = []trace.Job{
		{ID: "X", Submit: 0, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "Y", Submit: 0, Duration: 1000, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "C", Submit: 1, Duration: 80, GPUs: 2, Tag: "b", Class: profile.ClassTrain},
	}
	for _, tc := range []struct {
		whole                bool
		start, end, minSpeed float64
	}{{false, 1, 101, 0.8}, {true, 1000, 1080, 1}} {
		o := placement.DefaultOptions()
		o.WholeMultiGPU = tc.whole
		pol, err := placement.ByName("least-loaded", nil, o)
		if err != nil {
			t.Fatal(err)
		}
		res, err = Run(Config{Nodes: 1, GPUsPerNode: 2}, jobs, tb, pol)
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Jobs[2]; c.Start != tc.start || math.Abs(c.End-tc.end) > 1e-9 || math.Abs(c.MinSpeed-tc.minSpeed) > 1e-9 {
			t.Errorf("whole %v: C ran %v..%v at min speed %v, want %v..%v at %v", tc.whole, c.Start, c.End, c.MinSpeed, tc.start, tc.end, tc.minSpeed)
		}
	}
}

// TestBackfill: on 2 GPUs, a 2-GPU head waits for a running 100 s job; a 50 s job
// behind it starts at once (it ends before the reservation), a 500 s one does not.
func TestBackfill(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "run", Submit: 0, Duration: 100, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "head", Submit: 1, Duration: 10, GPUs: 2, Tag: "a", Class: profile.ClassTrain},
		{ID: "long", Submit: 2, Duration: 500, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "short", Submit: 3, Duration: 50, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
	}
	for _, tc := range []struct {
		depth int
		start map[string]float64
	}{
		{depth: 0, start: map[string]float64{"run": 0, "head": 100, "long": 110, "short": 3}},
		{depth: -1, start: map[string]float64{"run": 0, "head": 100, "long": 110, "short": 110}},
	} {
		res, err := Run(Config{Nodes: 1, GPUsPerNode: 2, BackfillDepth: tc.depth}, jobs, tb, mustPolicy(t, "exclusive", nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			if j.Start != tc.start[j.ID] {
				t.Errorf("depth %d: %s started at %v, want %v", tc.depth, j.ID, j.Start, tc.start[j.ID])
			}
		}
	}
}

func phillySample(t testing.TB, n int, gpus int, load float64, seed int64, tt *truth.Table) []trace.Job {
	t.Helper()
	tr, err := trace.ReadPhilly(bytes.NewReader(testPhilly(t)))
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Sample(tr.Jobs, n, seed)
	if _, err := trace.SetLoad(jobs, gpus, load); err != nil {
		t.Fatal(err)
	}
	if err := trace.Assign(jobs, tt.Tags(), trace.DefaultClassMix, seed); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestConservation runs every policy on real trace jobs and checks that every job
// finishes exactly once, after it started, never faster than alone, and that the
// GPU-time adds up: work done = sum of duration x GPUs; allocated GPU-time is at
// most the jobs' held GPU-time (equal without sharing).
func TestConservation(t *testing.T) {
	tt := shipped(t)
	base := Config{Nodes: 4, GPUsPerNode: 4}
	jobs := phillySample(t, 400, base.GPUs(), 2, 1, tt)
	models := []struct {
		name   string
		submit *SubmitModel
	}{{"at-start", nil}, {"submit-loop", &SubmitModel{Redecide: 30}}, {"submit-no-loop", &SubmitModel{}},
		{"submit-loop-untyped", &SubmitModel{Redecide: 30, UntypedUpdates: true, StartDelay: 20}},
		{"submit-loop-untyped-at-once", &SubmitModel{Redecide: 30, UntypedUpdates: true}},
		{"submit-loop-first-fit-at-once", &SubmitModel{Redecide: 30}}}
	for _, mc := range models {
		redecided := 0 // over the policies: the loop's models must exercise it
		for _, name := range placement.Names() {
			cfg := base
			cfg.Submit = mc.submit
			if strings.HasPrefix(mc.name, "submit-loop-first-fit") {
				cfg.Reach = placement.ReachFirstFit
			}
			if mc.submit != nil && policyname.Peer(name) {
				continue // the peers run their own queue: Run refuses the submit model
			}
			t.Run(mc.name+"/"+name, func(t *testing.T) {
				var pred model.Predictor
				switch name {
				case "coscheml":
					pred = testModel(t)
				case "oracle":
					pred = tt
				}
				res, err := Run(cfg, jobs, tt, mustPolicy(t, name, pred))
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Jobs)+res.Dropped != len(jobs) {
					t.Fatalf("%d results + %d dropped for %d jobs", len(res.Jobs), res.Dropped, len(jobs))
				}
				// Started at once, in decision order, a re-decided job's untyped
				// count lands where the decision steered it.
				if mc.submit != nil && mc.submit.StartDelay == 0 && res.Redirected != 0 {
					t.Errorf("%d of %d re-decided jobs redirected with no start delay", res.Redirected, res.Redecided)
				}
				redecided += res.Redecided
				seen := map[string]bool{}
				work, held, last, kern := 0.0, 0.0, 0.0, 0.0
				for _, j := range res.Jobs {
					if seen[j.ID] {
						t.Fatalf("job %s reported twice", j.ID)
					}
					seen[j.ID] = true
					if !(j.Start >= j.Submit && j.End >= j.Start+j.Duration*(1-1e-12)-1e-6) {
						t.Fatalf("job %+v: bad times", j)
					}
					work += j.Duration * float64(j.GPUs)
					held += (j.End - j.Start) * float64(j.GPUs)
					ti, _ := tt.Index(j.Tag)
					kern += tt.SoloUtil(ti) / 100 * j.Duration * float64(j.GPUs)
					last = max(last, j.End)
				}
				if math.Abs(res.Useful-work) > 1e-6*work {
					t.Errorf("work done %v, want %v", res.Useful, work)
				}
				if res.AllocGPUS > held*(1+1e-9) {
					t.Errorf("allocated %v > held %v", res.AllocGPUS, held)
				}
				if name == "exclusive" && math.Abs(res.AllocGPUS-held) > 1e-6*held {
					t.Errorf("exclusive: allocated %v != held %v", res.AllocGPUS, held)
				}
				// Kernel time: alone, each job keeps its GPU busy at its solo utilization.
				if name == "exclusive" && math.Abs(res.Kernel-kern) > 1e-6*kern {
					t.Errorf("exclusive: kernel GPU-time %v, want %v", res.Kernel, kern)
				}
				if res.Kernel > res.AllocGPUS*(1+1e-9) {
					t.Errorf("kernel GPU-time %v > allocated %v", res.Kernel, res.AllocGPUS)
				}
				if res.Makespan != last {
					t.Errorf("makespan %v, last end %v", res.Makespan, last)
				}
				tl := 0.0
				for _, s := range res.Timeline {
					tl += s.Alloc
				}
				width := res.Timeline[1].T - res.Timeline[0].T
				if got := tl * width * float64(res.GPUs); math.Abs(got-res.AllocGPUS) > 1e-6*res.AllocGPUS {
					t.Errorf("timeline integrates to %v, want %v", got, res.AllocGPUS)
				}
			})
		}
		if mc.submit != nil && mc.submit.Redecide > 0 && redecided == 0 {
			t.Errorf("%s: no job was re-decided", mc.name)
		}
	}
}

// TestSubmitModel follows one busy-GPU job through the three models, by hand:
// one GPU, blind sharing, b next to b at 0.9. J1 (100 s) and J2 (50 s) share
// from 0; J2 ends at 50/0.9 = 55.56 with J1's work at 50. J3 (10 s, at 1) finds
// the GPU full:
//   - at start: queued, placed next to J1 when J2 ends (55.56);
//   - at submit with the loop every 4 s: deferred, placed by the loop's next
//     pass after J2's end (56), next to J1;
//   - at submit without the loop: a whole-GPU request, which starts only when
//     J1 has ended (55.56 + 50 alone = 105.56), alone.
func TestSubmitModel(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "J1", Submit: 0, Duration: 100, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "J2", Submit: 0, Duration: 50, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "J3", Submit: 1, Duration: 10, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
	}
	j2End := 50 / 0.9
	cases := []struct {
		name       string
		submit     *SubmitModel
		wantStart  float64
		wantShared bool
		redecided  int // J3 placed by the loop
		whole      int // J3 on a whole GPU from Slurm's queue
	}{
		{"at start", nil, j2End, true, 0, 0},
		{"at submit, loop every 4 s", &SubmitModel{Redecide: 4}, 56, true, 1, 0},
		{"at submit, no loop", &SubmitModel{}, j2End + 50, false, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(Config{Nodes: 1, GPUsPerNode: 1, Submit: tc.submit}, jobs, tb, mustPolicy(t, "blind", nil))
			if err != nil {
				t.Fatal(err)
			}
			j3 := res.Jobs[2]
			if math.Abs(j3.Start-tc.wantStart) > 1e-9 || j3.Shared != tc.wantShared {
				t.Fatalf("J3 started at %v shared=%v, want %v shared=%v (%+v)", j3.Start, j3.Shared, tc.wantStart, tc.wantShared, res.Jobs)
			}
			if res.Redecided != tc.redecided || res.Whole != tc.whole || res.Redirected != 0 {
				t.Fatalf("%d re-decided, %d whole, %d redirected; want %d, %d, 0", res.Redecided, res.Whole, res.Redirected, tc.redecided, tc.whole)
			}
		})
	}
	if _, err := Run(Config{Nodes: 1, GPUsPerNode: 1, Submit: &SubmitModel{Redecide: math.NaN()}}, jobs, tb, mustPolicy(t, "blind", nil)); err == nil {
		t.Fatal("NaN re-decide interval accepted")
	}
}

// scripted places A and B on GPU 0 (2 slots each) and answers C "wait" at
// submit, then GPU 1 with 2 slots; it records the reach of the cluster C's
// re-decision saw.
type scripted struct{ reach []placement.Reach }

func (*scripted) Name() string { return "scripted" }
func (p *scripted) Place(c *placement.Cluster, r *placement.Request) placement.Decision {
	slot := func(g int) placement.Decision {
		return placement.Decision{Action: placement.ActionShare, Placement: []placement.Slot{{Node: 0, GPU: g, Slots: 2}}, PredictedSpeed: 1, MinResidentSpeed: 1}
	}
	if r.JobID != "C" {
		return slot(0)
	}
	p.reach = append(p.reach, c.Reach)
	if len(p.reach) == 1 {
		return placement.Decision{Action: placement.ActionWait}
	}
	return slot(1)
}

// TestSubmitModelUntyped: Slurm 22.05's re-decisions, by hand, on one node of
// two GPUs. A (1.5 s) and B (1 s) share GPU 0 from 0; C (at 0.5) is deferred.
// B ends at 1/0.9 = 1.11, A at 1.61. The loop's pass at 1.2 re-decides C onto
// GPU 1. With typed updates C gets GPU 1 and its 2 slots. With untyped ones the
// policy sees the first-fit view, and C asks for 3 untyped shards (more than
// GPU 0's 2 free, so only GPU 1 holds them now); Slurm starts it after the
// start delay where first fit puts 3 shards: GPU 1 while A runs, GPU 0 once A
// has ended (redirected).
func TestSubmitModelUntyped(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "A", Submit: 0, Duration: 1.5, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "B", Submit: 0, Duration: 1, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
		{ID: "C", Submit: 0.5, Duration: 10, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
	}
	aEnd := 1/0.9 + 0.5
	cases := []struct {
		name         string
		untyped      bool
		delay        float64
		reach        placement.Reach // C's re-decision's view
		gpu, slots   int
		redirected   int
		startBetween [2]float64
	}{
		{"typed, at once", false, 0, placement.ReachTyped, 1, 2, 0, [2]float64{1.2, 1.2}},
		{"typed, late", false, 100, placement.ReachTyped, 1, 2, 0, [2]float64{1.2, 101.2}},
		{"untyped, at once", true, 0, placement.ReachFirstFit, 1, 3, 0, [2]float64{1.2, 1.2}},
		{"untyped, before A ends", true, 0.01, placement.ReachFirstFit, 1, 3, 0, [2]float64{1.2, 1.21}},
		{"untyped, after A ends: first fit on GPU 0", true, 100, placement.ReachFirstFit, 0, 3, 1, [2]float64{aEnd, 101.2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got placement.Slot
			pol := &scripted{}
			cfg := Config{Nodes: 1, GPUsPerNode: 2, Submit: &SubmitModel{Redecide: 0.1, UntypedUpdates: tc.untyped, StartDelay: tc.delay},
				OnStart: func(id string, d placement.Decision) {
					if id == "C" {
						got = d.Placement[0]
					}
				}}
			res, err := Run(cfg, jobs, tb, pol)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Jobs[2]
			if got.GPU != tc.gpu || got.Slots != tc.slots || res.Redirected != tc.redirected || res.Redecided != 1 {
				t.Fatalf("C on GPU %d with %d slots, %d of %d redirected; want GPU %d, %d slots, %d of 1", got.GPU, got.Slots, res.Redirected, res.Redecided, tc.gpu, tc.slots, tc.redirected)
			}
			if c.Start < tc.startBetween[0]-1e-9 || c.Start > tc.startBetween[1]+1e-9 {
				t.Fatalf("C started at %v, want in %v", c.Start, tc.startBetween)
			}
			if len(pol.reach) != 2 || pol.reach[0] != placement.ReachTyped || pol.reach[1] != tc.reach {
				t.Fatalf("C decided on reaches %v, want typed then %v", pol.reach, tc.reach)
			}
		})
	}
	if _, err := Run(Config{Nodes: 1, GPUsPerNode: 2, Submit: &SubmitModel{StartDelay: -1}}, jobs, tb, &scripted{}); err == nil {
		t.Fatal("negative start delay accepted")
	}
}

// TestExclusiveReproducesDurations: without sharing every job runs exactly its
// trace duration, whatever the queueing.
func TestExclusiveReproducesDurations(t *testing.T) {
	tt := shipped(t)
	cfg := Config{Nodes: 2, GPUsPerNode: 4}
	jobs := phillySample(t, 500, cfg.GPUs(), 3, 2, tt)
	res, err := Run(cfg, jobs, tt, mustPolicy(t, "exclusive", nil))
	if err != nil {
		t.Fatal(err)
	}
	queued := 0
	for _, j := range res.Jobs {
		if d := (j.JCT() - j.Queue()) - j.Duration; math.Abs(d) > 1e-9*max(1, j.End) {
			t.Errorf("job %s: JCT-queue-duration = %v", j.ID, d)
		}
		if j.Shared || j.MinSpeed != 1 {
			t.Errorf("job %s shared under exclusive", j.ID)
		}
		if j.Queue() > 0 {
			queued++
		}
	}
	if queued == 0 {
		t.Error("no job queued: the test does not exercise the queue")
	}
}

func TestRunErrors(t *testing.T) {
	tb := handTruth(t)
	ex := mustPolicy(t, "exclusive", nil)
	for _, tc := range []struct {
		name string
		cfg  Config
		jobs []trace.Job
	}{
		{"no cluster", Config{}, nil},
		{"unsorted", Config{Nodes: 1, GPUsPerNode: 1}, []trace.Job{{ID: "1", Submit: 5, Duration: 1, GPUs: 1, Tag: "a"}, {ID: "2", Submit: 1, Duration: 1, GPUs: 1, Tag: "a"}}},
		{"unknown tag", Config{Nodes: 1, GPUsPerNode: 1}, []trace.Job{{ID: "1", Duration: 1, GPUs: 1, Tag: "zz"}}},
		{"zero duration", Config{Nodes: 1, GPUsPerNode: 1}, []trace.Job{{ID: "1", Duration: 0, GPUs: 1, Tag: "a"}}},
	} {
		if _, err := Run(tc.cfg, tc.jobs, tb, ex); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	res, err := Run(Config{Nodes: 1, GPUsPerNode: 1}, []trace.Job{{ID: "big", Duration: 1, GPUs: 2, Tag: "a"}}, tb, ex)
	if err != nil || res.Dropped != 1 {
		t.Errorf("oversized job: err %v dropped %d", err, res.Dropped)
	}
}

func TestQuantileAndStat(t *testing.T) {
	v := []float64{1, 2, 3, 4}
	if q := Quantile(v, 0.5); q != 2.5 {
		t.Errorf("median %v", q)
	}
	if q := Quantile(v, 1); q != 4 {
		t.Errorf("max %v", q)
	}
	s := StatOf([]float64{1, 3})
	if s.Mean != 2 || math.Abs(s.SD-math.Sqrt2) > 1e-12 || s.Min != 1 || s.Max != 3 {
		t.Errorf("stat %+v", s)
	}
}

func testPhilly(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "models", "data", "philly", "philly.csv"))
	if err != nil {
		t.Skip("shipped Philly trace not present:", err)
	}
	return b
}

func testModel(t testing.TB) model.Predictor {
	t.Helper()
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBelowFloorPer(t *testing.T) {
	mk := func(start float64, below bool) JobResult {
		return JobResult{Start: start, End: start + 1, BelowFloor: below}
	}
	jobs := []JobResult{mk(5, true), mk(1, false), mk(3, true), mk(2, true), mk(4, false)}
	tests := []struct {
		size int
		want []int
	}{
		{2, []int{1, 1, 1}}, // by start: 1 f, 2 t | 3 t, 4 f | 5 t
		{5, []int{3}},
		{10, []int{3}},
		{0, nil},
	}
	for _, tc := range tests {
		got := BelowFloorPer(jobs, tc.size)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("size %d: %v, want %v", tc.size, got, tc.want)
		}
	}
}

// Co-runs that end report both jobs' measured speeds (truth plus the truth's
// noise), once per direction; a job alone reports nothing.
func TestCoRunsFeedObservations(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "A", Submit: 0, Duration: 100, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "B", Submit: 10, Duration: 40, GPUs: 1, Tag: "b", Class: profile.ClassTrain},
	}
	type got struct {
		job, co string
		speed   float64
	}
	var seen []got
	cfg := Config{Nodes: 1, GPUsPerNode: 1, Seed: 7, OnCoRunEnd: func(job, co *profile.Profile, uid string, speed float64) {
		if uid == "" {
			t.Error("no user")
		}
		seen = append(seen, got{job.Tag, co.Tag, speed})
	}}
	if _, err := Run(cfg, jobs, tb, mustPolicy(t, "blind", nil)); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"b|a": 0.8, "a|b": 0.5}
	if len(seen) != 2 {
		t.Fatalf("%d observations %v, want 2 (B ends next to A)", len(seen), seen)
	}
	for _, g := range seen {
		w, ok := want[g.job+"|"+g.co]
		if !ok || math.Abs(g.speed-w) > 6*tb.NoiseSD() || g.speed == w {
			t.Errorf("observation %v: want %v plus noise of sd %v", g, w, tb.NoiseSD())
		}
	}
}

// With the pair memory on, coscheml runs learn: the memory holds pairs at the
// end, and the below-floor counts per block cover every job.
func TestExperimentPairMemory(t *testing.T) {
	tt := shipped(t)
	exp := Experiment{
		Config: Config{Nodes: 2, GPUsPerNode: 8}, Truth: tt, Model: testModel(t),
		Options: placement.DefaultOptions(), Policies: []string{"coscheml", "blind"}, Seeds: []int64{1},
		PairMemory: true,
		Jobs: func(seed int64) ([]trace.Job, error) {
			return phillySample(t, 600, 16, 1.5, seed, tt), nil
		},
	}
	runs, err := exp.Execute()
	if err != nil {
		t.Fatal(err)
	}
	// A warm-up run first fills the memory: the measured run ends knowing more.
	warm := exp
	warm.Policies = []string{"coscheml"}
	warm.WarmUp = func(seed int64) ([]trace.Job, error) {
		return phillySample(t, 600, 16, 1.5, seed+WarmUpSeedOffset, tt), nil
	}
	wruns, err := warm.Execute()
	if err != nil {
		t.Fatal(err)
	}
	if cold := runs[0]; cold.Policy != "coscheml" || wruns[0].MemoryPairs <= cold.MemoryPairs || wruns[0].Overall.Jobs != cold.Overall.Jobs {
		t.Errorf("warm-up: %d pairs in memory after, %d without; %d jobs measured, want %d", wruns[0].MemoryPairs, cold.MemoryPairs, wruns[0].Overall.Jobs, cold.Overall.Jobs)
	}
	for _, r := range runs {
		total := 0
		for _, v := range r.BelowFloorPer {
			total += v
		}
		if len(r.BelowFloorPer) != 2 || total != r.Overall.BelowFloor {
			t.Errorf("%s: blocks %v, below floor %d", r.Policy, r.BelowFloorPer, r.Overall.BelowFloor)
		}
		if (r.Policy == "coscheml") != (r.MemoryPairs > 0) || r.MemoryKnown > r.MemoryPairs {
			t.Errorf("%s: memory pairs %d known %d", r.Policy, r.MemoryPairs, r.MemoryKnown)
		}
	}
}
