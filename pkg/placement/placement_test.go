// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

var (
	lowA   = prof("low-a", profile.ClassTrain, 20, 4000)
	lowB   = prof("low-b", profile.ClassTrain, 25, 4000)
	mid    = prof("mid", profile.ClassTrain, 45, 4000) // with a low job: speeds 0.78..0.9
	heavyA = prof("heavy-a", profile.ClassTrain, 90, 8000)
	heavyB = prof("heavy-b", profile.ClassHPC, 85, 8000)
	inferX = prof("infer-x", profile.ClassInfer, 30, 3000)
	bigMem = prof("big-mem", profile.ClassTrain, 10, 16000)
)

// pred is the fake model used by the scenario tests: speed = 1 - 0.5*sum(co SM)/100.
var pred = fakePred{k: 0.5}

type at struct{ node, gpu, slots int }

func placed(d Decision) []at {
	var out []at
	for _, s := range d.Placement {
		out = append(out, at{s.Node, s.GPU, s.Slots})
	}
	return out
}

func mustPolicy(t testing.TB, name string, opts Options) Policy {
	t.Helper()
	p, err := testByName(name, pred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCoScheMLScenarios(t *testing.T) {
	tests := []struct {
		name       string
		nodes, gpu int
		memMiB     float64
		setup      func(c *Cluster)
		req        *Request
		want       Action
		where      []at
		reasonHas  []string
	}{
		{
			name: "two low-utilization jobs share a GPU", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", lowA, 0, 0, 2) },
			req:   req("2", lowB, 1), want: ActionShare, where: []at{{0, 0, 2}},
			reasonHas: []string{"n1/gpu0", "job 1 (low-a, train)", "new job 0.90", "job 1 0.88", "floor 0.75"},
		},
		{
			name: "two heavy jobs are kept apart", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", heavyA, 0, 0, 2) },
			req:   req("2", heavyB, 1), want: ActionExclusive, where: []at{{0, 1, 2}},
			reasonHas: []string{"n1/gpu1 idle"},
		},
		{
			name: "heavy jobs wait rather than share below the floor", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", heavyA, 0, 0, 2) },
			req:   req("2", heavyB, 1), want: ActionWait,
			reasonHas: []string{"1 below speed floor", "closest: n1/gpu0 with job 1 (heavy-a, train)", "new job 0.55 (floor 0.75)"},
		},
		{
			name: "an infer job is not co-located past its floor", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", inferX, 0, 0, 2) },
			// 0.85 for both: fine for a train job (0.75), not for the infer resident (0.9)
			req: req("2", inferX, 1), want: ActionExclusive, where: []at{{0, 1, 2}},
		},
		{
			name: "an infer resident is protected even without an idle GPU", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", inferX, 0, 0, 2) },
			req:   req("2", mid, 1), want: ActionWait,
			reasonHas: []string{"job 1 0.69 (floor 0.90)"}, // latency: 1 / (1 + 0.45)
		},
		{
			name: "memory overflow is refused", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", bigMem, 0, 0, 2) },
			req:   req("2", bigMem, 1), want: ActionWait,
			reasonHas: []string{"1 memory would not fit"},
		},
		{
			name: "waits when every GPU is full", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) {
				put(c, "1", lowA, 0, 0, 2)
				put(c, "2", lowA, 0, 0, 2)
				put(c, "3", heavyA, 0, 1, 4)
			},
			req: req("4", lowB, 1), want: ActionWait,
			reasonHas: []string{"0 of 2 GPUs acceptable", "at co-runner limit"},
		},
		{
			name: "near the floor: idle GPU preferred while one exists", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", mid, 0, 0, 2) },
			req:   req("2", mid, 1), want: ActionExclusive, where: []at{{0, 1, 2}},
		},
		{
			name: "near the floor: shared when no GPU is idle", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", mid, 0, 0, 2) },
			req:   req("2", mid, 1), want: ActionShare, where: []at{{0, 0, 2}},
			reasonHas: []string{"new job 0.78 (floor 0.75)"},
		},
		{
			name: "least interference wins among sharing GPUs", nodes: 1, gpu: 3, memMiB: 24000,
			setup: func(c *Cluster) {
				put(c, "1", prof("m20", profile.ClassTrain, 20, 1000), 0, 0, 2)
				put(c, "2", prof("m10", profile.ClassTrain, 10, 1000), 0, 1, 2)
				put(c, "3", prof("m15", profile.ClassTrain, 15, 1000), 0, 2, 2)
			},
			req: req("4", lowA, 1), want: ActionShare, where: []at{{0, 1, 2}},
		},
		{
			name: "unprofiled request takes a whole idle GPU", nodes: 1, gpu: 2, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", lowA, 0, 0, 2) },
			req:   &Request{JobID: "2", Tag: "nope", GPUs: 1}, want: ActionExclusive, where: []at{{0, 1, 4}},
			reasonHas: []string{"nope, unprofiled", "no profile"},
		},
		{
			name: "unprofiled resident is never joined", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { put(c, "1", nil, 0, 0, 2) },
			req:   req("2", lowA, 1), want: ActionWait, reasonHas: []string{"1 unprofiled job"},
		},
		{
			name: "bad request: zero GPUs", nodes: 1, gpu: 1, memMiB: 24000, setup: func(*Cluster) {},
			req: req("2", lowA, 0), want: ActionWait, reasonHas: []string{"asks for 0 GPUs"},
		},
		{
			name: "bad request: more GPUs than the cluster", nodes: 1, gpu: 2, memMiB: 24000, setup: func(*Cluster) {},
			req: req("2", lowA, 3), want: ActionWait, reasonHas: []string{"the cluster has 2"},
		},
		{
			name: "hostile job ID and node name are sanitized", nodes: 1, gpu: 1, memMiB: 24000,
			setup: func(c *Cluster) { c.Nodes[0].Name = "n\x1b[31m" },
			req:   req("x\ny", lowA, 1), want: ActionExclusive, where: []at{{0, 0, 2}},
			reasonHas: []string{"job x?y", "n?[31m/gpu0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(tt.nodes, tt.gpu, tt.memMiB, 4)
			tt.setup(c)
			before := c.Clone()
			p := mustPolicy(t, "coscheml", Options{})
			d := p.Place(c, tt.req)
			if d.Action != tt.want || !reflect.DeepEqual(placed(d), tt.where) {
				t.Fatalf("got %v %v, want %v %v\nreason: %s", d.Action, placed(d), tt.want, tt.where, d.Reason)
			}
			for _, s := range tt.reasonHas {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason lacks %q:\n%s", s, d.Reason)
				}
			}
			if strings.ContainsAny(d.Reason, "\n\x1b") {
				t.Errorf("reason has control characters: %q", d.Reason)
			}
			if !reflect.DeepEqual(c.Nodes, before.Nodes) {
				t.Error("Place modified the cluster")
			}
			if err := c.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Decision speeds: the new job's predicted speed and the lowest resident's.
func TestCoScheMLDecisionSpeeds(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", lowA, 0, 0, 2)
	d := mustPolicy(t, "coscheml", Options{}).Place(c, req("2", lowB, 1))
	// new job: 1 - 0.5*0.20 = 0.90; resident: 1 - 0.5*0.25 = 0.875
	if d.PredictedSpeed != 0.9 || d.MinResidentSpeed != 0.875 {
		t.Fatalf("speeds %v %v, want 0.9 0.875", d.PredictedSpeed, d.MinResidentSpeed)
	}
}

func TestFloorsAreConfigurable(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", heavyA, 0, 0, 2)
	r := req("2", heavyB, 1) // 0.55 and 0.575
	for _, tt := range []struct {
		floor float64
		want  Action
	}{{0.75, ActionWait}, {0.5, ActionShare}} {
		opts := Options{Floors: Floors{HPC: tt.floor, Train: tt.floor, Infer: 0.9}}
		if d := mustPolicy(t, "coscheml", opts).Place(c, r); d.Action != tt.want {
			t.Errorf("floor %v: %v, want %v (%s)", tt.floor, d.Action, tt.want, d.Reason)
		}
	}
}

func TestMaxCoRunnersThree(t *testing.T) {
	// Three low jobs on a 6-slot GPU: the third joins two residents, and the cost
	// accounts for residents already slowed by each other.
	c := NewCluster(1, 1, 80000, 6)
	opts := Options{MaxCoRunners: 3}
	put(c, "1", lowA, 0, 0, 2)
	put(c, "2", lowA, 0, 0, 2)
	d := mustPolicy(t, "coscheml", opts).Place(c, req("3", prof("tiny", profile.ClassTrain, 5, 100), 1))
	if d.Action != ActionShare || d.Placement[0].Slots != 2 {
		t.Fatalf("got %v %v: %s", d.Action, d.Placement, d.Reason)
	}
	// new job: 1 - 0.5*0.40 = 0.80 < 0.85: it is taken only because no GPU is idle
	if d.PredictedSpeed != 0.8 || d.MinResidentSpeed != 0.875 {
		t.Fatalf("speeds %v %v", d.PredictedSpeed, d.MinResidentSpeed)
	}
}

func TestBaselines(t *testing.T) {
	// One node, 4 GPUs: gpu0 holds a heavy job, gpu1 a low one, gpu2 two jobs, gpu3 idle.
	setup := func() *Cluster {
		c := NewCluster(1, 4, 24000, 4)
		put(c, "h", heavyA, 0, 0, 2)
		put(c, "l", lowA, 0, 1, 2)
		put(c, "f1", lowA, 0, 2, 2)
		put(c, "f2", lowA, 0, 2, 2)
		return c
	}
	tests := []struct {
		policy string
		opts   Options
		req    *Request
		want   Action
		where  []at
		why    string
	}{
		{"exclusive", Options{}, req("n", lowB, 1), ActionExclusive, []at{{0, 3, 4}}, "whole idle GPU"},
		{"blind", Options{}, req("n", heavyB, 1), ActionShare, []at{{0, 0, 2}}, "first GPU in cluster order"},
		{"least-loaded", Options{}, req("n", heavyB, 1), ActionExclusive, []at{{0, 3, 2}}, "fewest residents"},
		{"utilsum", Options{}, req("n", lowB, 1), ActionShare, []at{{0, 1, 2}}, "<= 100%"},
		{"utilsum", Options{}, req("n", heavyB, 1), ActionExclusive, []at{{0, 3, 2}}, "<= 100%"},
		{"utilsum", Options{UtilSumThreshold: 30}, req("n", lowB, 1), ActionExclusive, []at{{0, 3, 2}}, "<= 30%"},
		{"coscheml", Options{}, req("n", heavyB, 1), ActionExclusive, []at{{0, 3, 2}}, "idle"},
		{"coscheml", Options{}, req("n", lowB, 1), ActionShare, []at{{0, 1, 2}}, "job l"},
	}
	for _, tt := range tests {
		t.Run(tt.policy+"/"+tt.req.Tag, func(t *testing.T) {
			c := setup()
			p := mustPolicy(t, tt.policy, tt.opts)
			if p.Name() != tt.policy {
				t.Errorf("Name() = %q", p.Name())
			}
			d := p.Place(c, tt.req)
			if d.Action != tt.want || !reflect.DeepEqual(placed(d), tt.where) {
				t.Fatalf("got %v %v, want %v %v\n%s", d.Action, placed(d), tt.want, tt.where, d.Reason)
			}
			if !strings.HasPrefix(d.Reason, tt.policy+": ") || !strings.Contains(d.Reason, tt.why) {
				t.Errorf("reason %q lacks %q", d.Reason, tt.why)
			}
		})
	}
}

// Once every GPU is busy: exclusive waits, least-loaded picks the emptiest GPU,
// blind still fills the first free slots.
func TestBaselinesWhenBusy(t *testing.T) {
	c := NewCluster(1, 3, 24000, 4)
	put(c, "a", heavyA, 0, 0, 2)
	put(c, "b", lowA, 0, 1, 2)
	put(c, "c", mid, 0, 2, 2)
	for _, tt := range []struct {
		policy string
		want   Action
		where  []at
	}{
		{"exclusive", ActionWait, nil},
		{"blind", ActionShare, []at{{0, 0, 2}}},
		{"least-loaded", ActionShare, []at{{0, 1, 2}}},
	} {
		d := mustPolicy(t, tt.policy, Options{}).Place(c, req("n", heavyB, 1))
		if d.Action != tt.want || !reflect.DeepEqual(placed(d), tt.where) {
			t.Errorf("%s: got %v %v, want %v %v\n%s", tt.policy, d.Action, placed(d), tt.want, tt.where, d.Reason)
		}
	}
	d := mustPolicy(t, "exclusive", Options{}).Place(c, req("n", heavyB, 1))
	if !strings.Contains(d.Reason, "3 busy") {
		t.Errorf("exclusive wait reason: %s", d.Reason)
	}
}

func TestRandomIsSeededAndFeasible(t *testing.T) {
	c := NewCluster(4, 8, 24000, 4)
	for g := 0; g < 8; g++ { // node 0 full
		put(c, fmt.Sprintf("f%d", g), heavyA, 0, g, 4)
	}
	run := func(seed uint64) []at {
		p, err := NewRandom(seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out []at
		for i := 0; i < 20; i++ {
			d := p.Place(c, req("n", lowA, 1))
			if d.Action == ActionWait || d.Placement[0].Node == 0 {
				t.Fatalf("seed %d: infeasible %v: %s", seed, placed(d), d.Reason)
			}
			out = append(out, placed(d)...)
		}
		return out
	}
	a, b, other := run(7), run(7), run(8)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different decisions")
	}
	if reflect.DeepEqual(a, other) {
		t.Error("different seeds, same 20 decisions")
	}
	distinct := map[at]bool{}
	for _, x := range a {
		distinct[x] = true
	}
	if len(distinct) < 5 {
		t.Errorf("20 random draws hit only %d GPUs", len(distinct))
	}
}

// truthPred disagrees with the model: mid-utilization pairs are much worse than the
// model thinks.
type truthPred struct{}

func (truthPred) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	s := pred.PredictSpeed(job, co)
	if job.SMUtil.Mean > 15 && len(co) > 0 {
		s -= 0.2
	}
	return s
}

func TestOracleIsCoScheMLWithTruth(t *testing.T) {
	c := NewCluster(1, 2, 24000, 4)
	put(c, "1", lowA, 0, 0, 2)
	r := req("2", lowB, 1)
	model := mustPolicy(t, "coscheml", Options{}).Place(c, r)
	oracle, err := testByName("oracle", truthPred{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	truth := oracle.Place(c, r)
	if model.Action != ActionShare || truth.Action != ActionExclusive {
		t.Fatalf("model %v, oracle %v: %s", model.Action, truth.Action, truth.Reason)
	}
	same, _ := NewCoScheML(truthPred{}, Options{})
	d := same.Place(c, r)
	if !reflect.DeepEqual(placed(d), placed(truth)) || d.PredictedSpeed != truth.PredictedSpeed ||
		strings.TrimPrefix(d.Reason, "coscheml") != strings.TrimPrefix(truth.Reason, "oracle") {
		t.Errorf("oracle differs from coscheml given the same predictor:\n%s\n%s", d.Reason, truth.Reason)
	}
}

func TestMultiGPU(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *Cluster)
		gpus  int
		want  Action
		nodes []int // node of each chosen GPU, in order
	}{
		{"fits on one node: the one with enough idle GPUs", func(c *Cluster) {
			put(c, "1", heavyA, 0, 0, 4)
			put(c, "2", heavyA, 0, 1, 4)
		}, 4, ActionExclusive, []int{1, 1, 1, 1}},
		{"spreads over the fewest nodes", func(c *Cluster) {
			put(c, "1", heavyA, 0, 0, 4)
			put(c, "2", heavyA, 1, 0, 4)
			put(c, "3", heavyA, 1, 1, 4)
			put(c, "4", heavyA, 2, 0, 4)
			put(c, "5", heavyA, 2, 1, 4)
			put(c, "6", heavyA, 2, 2, 4)
		}, 5, ActionExclusive, []int{0, 0, 0, 1, 1}},
		// Slurm's shard requests fit on one GPU per node, so a several-GPU job
		// asks for whole GPUs (gres/gpu), which Slurm gives only where no shard is
		// allocated: it never joins a busy GPU, even one a single-GPU job could.
		{"never joins busy GPUs, even of low jobs", func(c *Cluster) {
			for n := 0; n < 3; n++ {
				for g := 0; g < 4; g++ {
					if n == 1 && g < 2 {
						put(c, fmt.Sprintf("%d-%d", n, g), lowA, n, g, 2)
						continue
					}
					put(c, fmt.Sprintf("%d-%d", n, g), heavyA, n, g, 4)
				}
			}
		}, 2, ActionWait, nil},
		{"takes idle GPUs next to busy ones", func(c *Cluster) {
			put(c, "0-0", lowA, 0, 0, 2)
			put(c, "1-0", lowA, 1, 0, 2)
			put(c, "2-0", lowA, 2, 0, 2)
		}, 3, ActionExclusive, []int{0, 0, 0}},
		{"waits when too few GPUs are acceptable", func(c *Cluster) {
			for n := 0; n < 3; n++ {
				for g := 0; g < 4; g++ {
					put(c, fmt.Sprintf("%d-%d", n, g), heavyA, n, g, 4)
				}
			}
		}, 2, ActionWait, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(3, 4, 24000, 4)
			tt.setup(c)
			d := mustPolicy(t, "coscheml", Options{WholeMultiGPU: true}).Place(c, req("m", lowB, tt.gpus))
			var nodes []int
			gpus := map[[2]int]bool{}
			for _, s := range d.Placement {
				nodes = append(nodes, s.Node)
				gpus[[2]int{s.Node, s.GPU}] = true
			}
			if d.Action != tt.want || !slices.Equal(nodes, tt.nodes) {
				t.Fatalf("got %v on nodes %v, want %v %v\n%s", d.Action, nodes, tt.want, tt.nodes, d.Reason)
			}
			if len(gpus) != len(d.Placement) {
				t.Fatalf("a GPU chosen twice: %v", d.Placement)
			}
			for _, sl := range d.Placement {
				if g := &c.Nodes[sl.Node].GPUs[sl.GPU]; len(g.Residents) > 0 || sl.Slots != g.Slots {
					t.Errorf("%d GPUs: n%d/gpu%d with %d residents, %d of %d slots: want whole idle GPUs", tt.gpus, sl.Node, sl.GPU, len(g.Residents), sl.Slots, g.Slots)
				}
			}
			c.Apply(req("m", lowB, tt.gpus), d)
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With share_multi_gpu off, every policy handles multi-GPU requests the same
// way: whole idle GPUs, on one node when possible, never a busy GPU (blind's
// shards included).
func TestMultiGPUAllPolicies(t *testing.T) {
	whole := Options{WholeMultiGPU: true}
	for _, name := range Names() {
		c := NewCluster(2, 4, 24000, 4)
		put(c, "1", heavyA, 0, 0, 4)
		d := mustPolicy(t, name, whole).Place(c, req("m", lowB, 4))
		if len(d.Placement) != 4 {
			t.Fatalf("%s: %v: %s", name, d.Placement, d.Reason)
		}
		for _, s := range d.Placement {
			if s.Node != 1 || s.Slots != 4 {
				t.Errorf("%s: placed on node %d with %d slots, want all on node 1, whole GPUs: %s", name, s.Node, s.Slots, d.Reason)
			}
		}
		// One light job on each node: room for a single GPU's share, not for a
		// several-GPU job, which spreads over the idle GPUs or waits.
		c = NewCluster(2, 4, 24000, 4)
		put(c, "a", lowA, 0, 0, 2)
		put(c, "b", lowA, 1, 0, 2)
		d = mustPolicy(t, name, whole).Place(c, req("m", lowB, 4))
		for _, s := range d.Placement {
			if s.GPU == 0 || s.Slots != 4 {
				t.Errorf("%s: 4 GPUs with 3 idle per node: %v on n%d/gpu%d (%d slots), want idle GPUs only, whole: %s", name, d.Action, s.Node, s.GPU, s.Slots, d.Reason)
			}
		}
		if d.Action != ActionExclusive || len(d.Placement) != 4 {
			t.Errorf("%s: 4 GPUs with 6 idle: %v %v: %s", name, d.Action, d.Placement, d.Reason)
		}
		if d = mustPolicy(t, name, whole).Place(c, req("m", lowB, 7)); d.Action != ActionWait {
			t.Errorf("%s: 7 GPUs with 6 idle: %v %v, want wait: %s", name, d.Action, d.Placement, d.Reason)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, reach := range []Reach{ReachTyped, ReachFirstFit} {
		t.Run(reach.String(), func(t *testing.T) { testDeterministic(t, reach) })
	}
}

func testDeterministic(t *testing.T, reach Reach) {
	cat := catalog(50, 3)
	c := busyCluster(50, cat, 4)
	c.Reach = reach
	c.Reindex()
	uncached := &Cluster{Nodes: c.Clone().Nodes, Reach: reach} // never indexed: the slow path
	for _, name := range Names() {
		for i, p := range cat[:10] {
			r := req(fmt.Sprintf("r%d", i), p, 1+i%3)
			p1 := mustPolicy(t, name, Options{Seed: 9})
			p2 := mustPolicy(t, name, Options{Seed: 9})
			a, b := p1.Place(c, r), p2.Place(c, r)
			u := mustPolicy(t, name, Options{Seed: 9}).Place(uncached, r)
			if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, u) {
				t.Fatalf("%s: decisions differ for one state:\n%+v\n%+v\n%+v", name, a, b, u)
			}
			if name != "random" { // random draws anew each call, by design
				if again := p1.Place(c, r); !reflect.DeepEqual(a, again) {
					t.Fatalf("%s: second decision differs:\n%+v\n%+v", name, a, again)
				}
			}
		}
	}
	if uncached.ix != nil {
		t.Error("Place indexed a cluster: it must not modify it")
	}
}

func TestMemoSavesPredictions(t *testing.T) {
	cat := catalog(5, 1)
	c := busyCluster(40, cat, 2) // ~160 busy GPUs, few distinct resident sets
	calls := 0
	p, err := NewCoScheML(countingPred{fakePred{0.5}, &calls}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Place(c, req("x", cat[0], 1))
	withMemo := calls
	// A GPU-by-GPU evaluation predicts at least once per busy GPU with room.
	perGPU := 0
	for _, n := range c.Nodes {
		for _, g := range n.GPUs {
			if len(g.Residents) == 1 {
				perGPU++
			}
		}
	}
	if withMemo == 0 || withMemo*3 > perGPU {
		t.Errorf("memo: %d predictions for %d shareable busy GPUs", withMemo, perGPU)
	}
}

// TestMemoSurvivesRebuild: slurmctld rebuilds its cluster from the residency after
// every change; with a shared Interner the rebuilt cluster's signatures keep their
// meaning, so the next decision reuses the memo instead of predicting again. Without
// one (each Reindex its own table) every rebuild empties the memo.
func TestMemoSurvivesRebuild(t *testing.T) {
	cat := catalog(5, 1)
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"shared interner", true}, {"private tables", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var in *Interner
			if tc.shared {
				in = NewInterner()
			}
			build := func() *Cluster {
				c := busyCluster(40, cat, 2)
				c.Interner = in
				c.Reindex()
				return c
			}
			calls := 0
			p, err := NewCoScheML(countingPred{fakePred{0.5}, &calls}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			first := p.Place(build(), req("x", cat[0], 1))
			cold := calls
			calls = 0
			again := p.Place(build(), req("y", cat[0], 1)) // the same residents, rebuilt
			if fmt.Sprint(first.Placement) != fmt.Sprint(again.Placement) {
				t.Fatalf("same state, different placements: %v then %v", first.Placement, again.Placement)
			}
			if cold == 0 {
				t.Fatal("the first decision predicted nothing")
			}
			if tc.shared && calls != 0 {
				t.Errorf("after a rebuild with a shared interner: %d predictions, want 0 (memo kept)", calls)
			}
			if !tc.shared && calls != cold {
				t.Errorf("after a rebuild with private tables: %d predictions, want %d (memo emptied)", calls, cold)
			}
		})
	}
}

func TestByName(t *testing.T) {
	for _, name := range Names() {
		p, err := testByName(name, pred, Options{})
		if err != nil || p.Name() != name {
			t.Errorf("%s: %v %v", name, p, err)
		}
	}
	for _, tt := range []struct {
		name string
		opts Options
		pred bool
		want string
	}{
		{"fifo", Options{}, true, `unknown placement policy "fifo"`},
		{"lucid", Options{ShareScore: nil}, true, "no sharing score"},
		{"coscheml", Options{}, false, "nil predictor"},
		{"blind", Options{MaxCoRunners: -1}, true, "max_corunners"},
		{"coscheml", Options{Floors: Floors{Infer: 1.5}}, true, "floors.infer"},
		{"utilsum", Options{UtilSumThreshold: -5}, true, "utilsum_threshold"},
	} {
		var pr fakePred
		p, err := ByName(tt.name, nil, tt.opts)
		if tt.pred {
			p, err = ByName(tt.name, pr, tt.opts)
		}
		if err == nil || p != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %+v: %v, %v; want error with %q", tt.name, tt.opts, p, err, tt.want)
		}
	}
}

func TestFloorsFor(t *testing.T) {
	f := Floors{HPC: 0.7, Train: 0.75, Infer: 0.9}
	for cl, want := range map[profile.Class]float64{"hpc": 0.7, "train": 0.75, "infer": 0.9, "": 0.9, "x": 0.9} {
		if got := f.For(cl); got != want {
			t.Errorf("%q: %v, want %v", cl, got, want)
		}
	}
}

type nanPred struct{}

func (nanPred) PredictSpeed(*profile.Profile, []*profile.Profile) float64 { return math.NaN() }

// A broken prediction never licenses sharing.
func TestNaNPredictionRefusesSharing(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", lowA, 0, 0, 2)
	p, err := NewCoScheML(nanPred{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Place(c, req("2", lowB, 1)); d.Action != ActionWait || !strings.Contains(d.Reason, "below speed floor") {
		t.Fatalf("%v: %s", d.Action, d.Reason)
	}
}

// Without a class on the request, the profile's class sets the floor.
func TestClassFromProfile(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", inferX, 0, 0, 2)
	c.Nodes[0].GPUs[0].Residents[0].Class = "" // resident: infer by its profile
	c.Reindex()
	light := prof("light", profile.ClassTrain, 8, 4000)
	r := &Request{JobID: "2", Profile: light, GPUs: 1} // train by its profile
	d := mustPolicy(t, "coscheml", Options{}).Place(c, r)
	// light: 1-0.15 = 0.85 >= 0.75; inferX: throughput 1-0.04, latency
	// 1/(1+0.08) = 0.93 >= 0.9
	if d.Action != ActionShare || !strings.Contains(d.Reason, "(light, train)") || !strings.Contains(d.Reason, "(infer-x, infer)") {
		t.Fatalf("%v: %s", d.Action, d.Reason)
	}
	put(c, "3", nil, 0, 0, 0)
	c.Remove("3")
	r.Profile = lowA // throughput 1-0.1 = 0.9 for the infer resident, latency 1/(1+0.2) = 0.83
	if d := mustPolicy(t, "coscheml", Options{}).Place(c, r); d.Action != ActionWait {
		t.Fatalf("infer resident by profile class not protected: %s", d.Reason)
	}
}

// The memo is bound to one cluster's signatures: the same policy moving between
// clusters (whose interned IDs coincide) or across Reindex decides as a fresh one.
func TestMemoFollowsCluster(t *testing.T) {
	a := NewCluster(1, 2, 24000, 4)
	put(a, "1", lowA, 0, 0, 2) // lowA gets ID 1 in a
	b := NewCluster(1, 2, 24000, 4)
	put(b, "1", heavyA, 0, 0, 2) // heavyA gets ID 1 in b: same signature
	r := req("2", lowB, 1)
	p := mustPolicy(t, "coscheml", Options{})
	for i, tt := range []struct {
		c    *Cluster
		want Action
	}{{a, ActionShare}, {b, ActionExclusive}, {a, ActionShare}, {b, ActionExclusive}} {
		d := p.Place(tt.c, r)
		fresh := mustPolicy(t, "coscheml", Options{}).Place(tt.c, r)
		if d.Action != tt.want || !reflect.DeepEqual(d, fresh) {
			t.Fatalf("step %d: %v, fresh policy %v, want %v\n%s", i, d.Action, fresh.Action, tt.want, d.Reason)
		}
	}
	// Reindex after swapping residents by hand: new index, new epoch.
	a.Nodes[0].GPUs[0].Residents[0].Profile = heavyA
	a.Reindex()
	if d := p.Place(a, r); d.Action != ActionExclusive {
		t.Fatalf("after Reindex: %v: %s", d.Action, d.Reason)
	}
}

// A memo far too small for the cluster evicts all the time and still decides as a
// roomy one does.
func TestTinyMemoSameDecisions(t *testing.T) {
	cat := catalog(30, 7)
	c := busyCluster(20, cat, 8)
	small, _ := NewCoScheML(pred, Options{})
	small.memo = newMemo(4)
	big, _ := NewCoScheML(pred, Options{})
	for round := 0; round < 3; round++ {
		for i, p := range cat {
			r := req(fmt.Sprint("t", i), p, 1+i%2)
			if a, b := small.Place(c, r), big.Place(c, r); !reflect.DeepEqual(a, b) {
				t.Fatalf("round %d request %d:\n%+v\n%+v", round, i, a, b)
			}
		}
	}
}

func TestShareSlotsOption(t *testing.T) {
	c := NewCluster(1, 1, 80000, 4)
	opts := Options{ShareSlots: 1, MaxCoRunners: 4}
	p := mustPolicy(t, "blind", opts)
	for i := 0; i < 4; i++ {
		r := req(fmt.Sprint(i), prof(fmt.Sprint("t", i), profile.ClassTrain, 5, 100), 1)
		d := p.Place(c, r)
		if d.Action == ActionWait || d.Placement[0].Slots != 1 {
			t.Fatalf("job %d: %+v", i, d)
		}
		c.Apply(r, d)
	}
	if d := p.Place(c, req("x", lowA, 1)); d.Action != ActionWait || !strings.Contains(d.Reason, "1 at co-runner limit") {
		t.Fatalf("fifth job: %s", d.Reason)
	}
	if got := mustPolicy(t, "coscheml", opts).(*CoScheML).Options(); got.ShareSlots != 1 || got.Floors != DefaultOptions().Floors {
		t.Fatalf("options in effect: %+v", got)
	}
}

// lowerPred is fakePred with a calibrated margin that grows with the coverage
// asked: margin = 0.1 x coverage (0: its default coverage 0.5).
type lowerPred struct {
	fakePred
}

func (l lowerPred) Bound(job *profile.Profile, co []*profile.Profile, q model.Query) (float64, float64) {
	s := l.PredictSpeed(job, co)
	if len(co) == 0 {
		return s, s
	}
	coverage := q.Coverage
	if coverage == 0 {
		coverage = 0.5
	}
	return s, s - 0.1*coverage
}

func (lowerPred) Revision() uint64 { return 0 }

// FloorConfidence is the coverage at which the prediction less its calibrated
// margin must clear the floor: the same pair shares at a low coverage and waits
// at a high one; a predictor without a lower bound (the oracle's truth) is
// unaffected.
func TestFloorConfidence(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", heavyA, 0, 0, 2)
	r := req("2", heavyB, 1) // predicted 0.55 and 0.575
	pred := lowerPred{fakePred{0.5}}
	for _, tt := range []struct {
		cov   float64
		pred  model.Predictor
		want  Action
		floor float64
	}{
		{0, pred, ActionShare, 0.5},            // default 0.5: 0.55 - 0.05 = 0.50 clears 0.5
		{0.4, pred, ActionShare, 0.5},          // 0.55 - 0.04 clears
		{0.9, pred, ActionWait, 0.5},           // 0.55 - 0.09 = 0.46 does not
		{0.9, pred.fakePred, ActionShare, 0.5}, // no lower bound: the prediction itself
	} {
		opts := Options{Floors: Floors{HPC: tt.floor, Train: tt.floor, Infer: 0.9}, FloorConfidence: tt.cov}
		p, err := NewCoScheML(tt.pred, opts)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Place(c, r)
		if d.Action != tt.want {
			t.Errorf("coverage %v (%T): %v, want %v (%s)", tt.cov, tt.pred, d.Action, tt.want, d.Reason)
		}
		_, hasLower := tt.pred.(model.Bounder)
		if named := strings.Contains(d.Reason, "floor_confidence"); d.Action != ActionWait && named != hasLower {
			t.Errorf("coverage %v (%T): reason names floor_confidence = %v: %s", tt.cov, tt.pred, named, d.Reason)
		}
	}
	for _, bad := range []float64{-1, 1, 2, math.NaN()} {
		if _, err := NewCoScheML(pred, Options{FloorConfidence: bad}); err == nil {
			t.Errorf("floor_confidence %v accepted", bad)
		}
	}
}

// learningPred is a predictor whose answer changes with its revision (as the
// pair memory's does when it learns).
type learningPred struct {
	speed    *float64
	revision *uint64
}

func (l learningPred) PredictSpeed(_ *profile.Profile, co []*profile.Profile) float64 {
	if len(co) == 0 {
		return 1
	}
	return *l.speed
}

func (l learningPred) Bound(job *profile.Profile, co []*profile.Profile, _ model.Query) (float64, float64) {
	s := l.PredictSpeed(job, co)
	return s, s
}

func (l learningPred) Revision() uint64 { return *l.revision }

// A learning predictor's new answers are used at once: the memo of
// predictions is dropped when its revision changes.
func TestRevisionDropsMemo(t *testing.T) {
	c := NewCluster(1, 1, 24000, 4)
	put(c, "1", heavyA, 0, 0, 2)
	r := req("2", heavyB, 1)
	speed, revision := 0.9, uint64(1)
	p, err := NewCoScheML(learningPred{&speed, &revision}, Options{Floors: Floors{HPC: 0.75, Train: 0.75, Infer: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Place(c, r); d.Action != ActionShare {
		t.Fatalf("at speed 0.9: %v (%s)", d.Action, d.Reason)
	}
	speed = 0.5 // learned: the pair is slow, but the revision did not change yet
	if d := p.Place(c, r); d.Action != ActionShare {
		t.Fatalf("memoized answer expected before the revision changes: %v", d.Action)
	}
	revision++
	if d := p.Place(c, r); d.Action != ActionWait {
		t.Fatalf("after the revision changed: %v, want wait (%s)", d.Action, d.Reason)
	}
}

// Every name of the registry has a constructor, and nothing else does.
func TestRegistryComplete(t *testing.T) {
	if len(constructors) != len(Names()) {
		t.Fatalf("%d constructors for %d names", len(constructors), len(Names()))
	}
	for _, n := range Names() {
		p, err := testByName(n, fakePred{}, Options{})
		if err != nil || p.Name() != n {
			t.Fatalf("%s: %v, %v", n, p, err)
		}
	}
}

// TestExplainFromMemo: the reason words each resident's speed after joining
// as the predictor gives it next to the other residents and the new job (the
// test predicts it itself), whatever the residents' order on the GPU; a second
// decision on the same state words it from the memo without predicting.
func TestExplainFromMemo(t *testing.T) {
	light := prof("light", profile.ClassTrain, 10, 1000)
	mid := prof("mid", profile.ClassTrain, 20, 1000)
	other := prof("other", profile.ClassTrain, 15, 1000)
	newJob := prof("new", profile.ClassTrain, 5, 1000)
	tests := []struct {
		name      string
		residents []*profile.Profile
	}{
		{"one resident", []*profile.Profile{mid}},
		{"two in canonical order", []*profile.Profile{light, mid}},
		{"two against canonical order", []*profile.Profile{mid, light}},
		{"three (predicted for the reason)", []*profile.Profile{mid, other, light}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			pred := countingPred{fakePred{0.5}, &calls}
			p, err := NewCoScheML(pred, Options{MaxCoRunners: 4, ShareSlots: 1, Floors: Floors{Train: 0.1, HPC: 0.1, Infer: 0.1}})
			if err != nil {
				t.Fatal(err)
			}
			c := NewCluster(1, 1, 81920, 8)
			for i, rp := range tt.residents {
				put(c, fmt.Sprintf("r%d", i), rp, 0, 0, 1)
			}
			var want []string
			for i, rp := range tt.residents {
				var co []*profile.Profile
				for j, o := range tt.residents {
					if j != i {
						co = append(co, o)
					}
				}
				speed := fakePred{0.5}.PredictSpeed(rp, append(co, newJob))
				want = append(want, fmt.Sprintf(", job r%d %.2f (floor", i, speed))
			}
			for round := range 2 {
				calls = 0
				d := p.Place(c, req("x", newJob, 1))
				if d.Action != ActionShare {
					t.Fatalf("round %d: %v: %s", round, d.Action, d.Reason)
				}
				for _, w := range want {
					if !strings.Contains(d.Reason, w) {
						t.Errorf("round %d: reason lacks %q:\n%s", round, w, d.Reason)
					}
				}
				if round == 1 && len(tt.residents) <= explained && calls != 0 {
					t.Errorf("second decision on the same state made %d predictions, want 0", calls)
				}
			}
		})
	}
}

// TestPlaceReasonWording: the reason built by appends words the header, the
// slowest-GPU note and the rule exactly as the fmt formats they replaced.
func TestPlaceReasonWording(t *testing.T) {
	light := prof("light", profile.ClassTrain, 10, 1000)
	heavy := prof("heavy", profile.ClassTrain, 90, 1000)
	mid := prof("mid", profile.ClassTrain, 30, 1000) // shared: 0.85, above the floor, below 0.9
	opts := Options{PreferShareSpeed: 0.9}
	tests := []struct {
		name     string
		resident *profile.Profile // on the first busy GPUs of the one node (nil: idle)
		busy     int
		gpus     int
		job      *profile.Profile
		rule     string
	}{
		{"share above prefer", light, 2, 1, light, fmt.Sprintf("every predicted speed >= %.2f: sharing preferred to opening an idle GPU", 0.9)},
		{"idle, sharing below prefer", mid, 2, 1, mid, fmt.Sprintf("idle GPU: sharing would slow a job below %.2f", 0.9)},
		{"shared below prefer, no idle GPU", mid, 4, 1, mid, fmt.Sprintf("every predicted speed above its floor but some below %.2f: shared for want of idle GPUs", 0.9)},
		{"idle, no sharing within floors", heavy, 2, 1, heavy, "idle GPU: no GPU could be shared within the floors"},
		{"no profile", nil, 0, 1, nil, "no profile: interference unknown, so a whole idle GPU"},
		{"several GPUs, shared", light, 2, 2, light, "several GPUs, each judged like a one-GPU share; the job runs at its slowest GPU's speed"},
		{"several GPUs, idle", heavy, 2, 2, heavy, "several GPUs: idle GPUs, each keeping shards free for a co-runner"},
		{"several GPUs, kept whole", light, 2, 2, light, "several GPUs: whole idle GPUs (Slurm cannot name each GPU's shards here, or share_multi_gpu is off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.WholeMultiGPU = strings.HasSuffix(tt.name, "kept whole")
			p, err := NewCoScheML(fakePred{0.5}, o)
			if err != nil {
				t.Fatal(err)
			}
			c := NewCluster(1, 4, 81920, DefaultSlots)
			for g := range tt.busy {
				put(c, fmt.Sprintf("r%d", g), tt.resident, 0, g, 2)
			}
			r := req("j\"1", tt.job, tt.gpus)
			d := p.Place(c, r)
			head := fmt.Sprintf("%s: %s: job %s (%s, %s); ", p.Name(), d.Action, profile.Sanitize(r.JobID), tagOf(r), profile.Sanitize(string(classOf(r.Class, r.Profile))))
			if tt.gpus > 1 {
				head += fmt.Sprintf("speed of its slowest GPU %.2f; ", d.PredictedSpeed)
			}
			if !strings.HasPrefix(d.Reason, head) {
				t.Errorf("reason does not start with %q:\n%s", head, d.Reason)
			}
			if !strings.Contains(d.Reason, "; "+tt.rule) {
				t.Errorf("reason lacks the rule %q:\n%s", tt.rule, d.Reason)
			}
		})
	}
}

// A several-GPU job on a typed cluster takes, on one node, GPUs that are idle
// or shared with compatible residents, each judged like a one-GPU share: the
// same K shards on each GPU, every resident's floor kept, the job's speed the
// slowest of its GPUs'. Spread over nodes, or on a first-fit cluster, it takes
// whole idle GPUs.
func TestMultiGPUShares(t *testing.T) {
	speedWith := func(co ...*profile.Profile) float64 { return pred.PredictSpeed(lowB, co) }
	t.Run("shares GPUs of light residents, K shards on each", func(t *testing.T) {
		c := NewCluster(2, 4, 24000, 4)
		for g := 0; g < 4; g++ {
			put(c, fmt.Sprintf("0-%d", g), lowA, 0, g, 2) // node 0: every GPU half used by a light job
			put(c, fmt.Sprintf("1-%d", g), heavyA, 1, g, 2)
		}
		d := mustPolicy(t, "coscheml", Options{}).Place(c, req("m", lowB, 4))
		if d.Action != ActionShare || len(d.Placement) != 4 {
			t.Fatalf("%v %v: %s", d.Action, d.Placement, d.Reason)
		}
		for _, s := range d.Placement {
			if s.Node != 0 || s.Slots != 2 {
				t.Errorf("n%d/gpu%d with %d slots, want node 0 (light residents), 2 slots each: %s", s.Node, s.GPU, s.Slots, d.Reason)
			}
		}
		if want := speedWith(lowA); math.Abs(d.PredictedSpeed-want) > 1e-9 {
			t.Errorf("predicted speed %.3f, want the slowest GPU's %.3f", d.PredictedSpeed, want)
		}
	})
	t.Run("a GPU whose resident would fall below its floor is left out", func(t *testing.T) {
		c := NewCluster(1, 4, 24000, 4)
		put(c, "light", lowA, 0, 0, 2)
		put(c, "hog", heavyA, 0, 1, 2) // heavy-a next to low-b: 0.875, but low-b next to it 0.55
		d := mustPolicy(t, "coscheml", Options{}).Place(c, req("m", lowB, 3))
		if d.Action == ActionWait {
			t.Fatalf("wait: %s", d.Reason)
		}
		for _, s := range d.Placement {
			if s.GPU == 1 {
				t.Errorf("joined the GPU where it would run at %.2f, below its floor: %s", speedWith(heavyA), d.Reason)
			}
		}
	})
	t.Run("a one-GPU job joining a several-GPU resident keeps that resident's floor", func(t *testing.T) {
		c := NewCluster(1, 2, 24000, 4)
		r := req("gang", mid, 2)
		c.Apply(r, Decision{Action: ActionExclusive, Placement: []Slot{{Node: 0, GPU: 0, Slots: 2}, {Node: 0, GPU: 1, Slots: 2}}})
		// mid next to heavy-a: 1 - 0.45 = 0.55 < 0.75: the gang would slow.
		if d := mustPolicy(t, "coscheml", Options{}).Place(c, req("h", heavyA, 1)); d.Action != ActionWait {
			t.Errorf("a heavy job joined a GPU of the gang: %v %v: %s", d.Action, d.Placement, d.Reason)
		}
		if d := mustPolicy(t, "coscheml", Options{}).Place(c, req("l", lowA, 1)); d.Action != ActionShare {
			t.Errorf("a light job could not join the gang: %v: %s", d.Action, d.Reason)
		}
	})
	t.Run("over nodes without a span: whole idle GPUs", func(t *testing.T) {
		c := NewCluster(2, 4, 24000, 4)
		put(c, "a", lowA, 0, 0, 2) // n1 GPU 0 and n2 GPU 1 could be shared, but not over nodes
		put(c, "b", lowA, 1, 1, 2)
		d := mustPolicy(t, "coscheml", Options{}).Place(c, req("m", lowB, 6))
		if d.Action != ActionExclusive || len(d.Placement) != 6 {
			t.Fatalf("%v %v: %s", d.Action, d.Placement, d.Reason)
		}
		for _, s := range d.Placement {
			if g := &c.Nodes[s.Node].GPUs[s.GPU]; len(g.Residents) > 0 || s.Slots != 4 {
				t.Errorf("n%d/gpu%d with %d slots: want idle GPUs, whole: %s", s.Node, s.GPU, s.Slots, d.Reason)
			}
		}
	})
	t.Run("a span over nodes: the same GPUs on each, shared where they are alike", func(t *testing.T) {
		c := NewCluster(3, 4, 24000, 4)
		put(c, "full-0", heavyA, 0, 0, 4) // n0 GPU 0, n1 GPU 1, n2 GPUs 0 and 3: no room
		put(c, "full-1", heavyA, 1, 1, 4)
		put(c, "full-2", heavyA, 2, 0, 4)
		put(c, "full-3", heavyA, 2, 3, 4)
		put(c, "light", lowA, 1, 2, 2) // n1 GPU 2 half used by a light job
		r := req("m", lowB, 4)
		r.SpanNodes = 2
		d := mustPolicy(t, "coscheml", Options{}).Place(c, r)
		if d.Action == ActionWait || len(d.Placement) != 4 {
			t.Fatalf("%v %v: %s", d.Action, d.Placement, d.Reason)
		}
		gpus := map[int][]int{}
		for _, s := range d.Placement {
			gpus[s.Node] = append(gpus[s.Node], s.GPU)
			if s.Slots != d.Placement[0].Slots || s.Slots == 4 {
				t.Errorf("n%d/gpu%d with %d slots: want the same shard count on each GPU, a co-runner's room kept: %s", s.Node, s.GPU, s.Slots, d.Reason)
			}
		}
		if len(gpus) != 2 || !slices.Equal(sorted(gpus[0]), sorted(gpus[1])) && !slices.Equal(sorted(gpus[1]), sorted(gpus[2])) && !slices.Equal(sorted(gpus[0]), sorted(gpus[2])) {
			t.Errorf("placement %v: want the same GPUs on two nodes: %s", d.Placement, d.Reason)
		}
		if !strings.Contains(d.Reason, "several nodes at the same GPUs") {
			t.Errorf("reason %q", d.Reason)
		}
		pol := mustPolicy(t, "coscheml", Options{})
		pol.Place(c, r)
		if d1 := pol.Place(c, req("one", lowB, 1)); strings.Contains(d1.Reason, "several") {
			t.Errorf("a one-GPU decision after a span reads %q", d1.Reason)
		}
		// No two nodes with four GPUs in common: whole idle GPUs, as Slurm gives
		// the job's own request.
		r = req("m2", lowB, 8)
		r.SpanNodes = 2
		d = mustPolicy(t, "coscheml", Options{}).Place(c, r)
		if d.Action != ActionWait {
			for _, s := range d.Placement {
				if g := &c.Nodes[s.Node].GPUs[s.GPU]; len(g.Residents) > 0 || s.Slots != 4 {
					t.Errorf("n%d/gpu%d with %d slots: want idle GPUs, whole: %s", s.Node, s.GPU, s.Slots, d.Reason)
				}
			}
		}
	})
	t.Run("first-fit cluster: whole idle GPUs", func(t *testing.T) {
		c := NewCluster(1, 4, 24000, 4)
		c.Reach = ReachFirstFit
		c.Reindex()
		put(c, "a", lowA, 0, 0, 2)
		d := mustPolicy(t, "coscheml", Options{}).Place(c, req("m", lowB, 3))
		for _, s := range d.Placement {
			if s.GPU == 0 || s.Slots != 4 {
				t.Errorf("n%d/gpu%d with %d slots: want idle GPUs, whole: %s", s.Node, s.GPU, s.Slots, d.Reason)
			}
		}
	})
	t.Run("prefers the node where its GPUs are alike", func(t *testing.T) {
		c := NewCluster(2, 2, 24000, 4)
		put(c, "0-0", lowA, 0, 0, 2) // node 0: light, light
		put(c, "0-1", lowA, 0, 1, 2)
		put(c, "1-0", lowA, 1, 0, 2) // node 1: light, mid: its slowest GPU is slower
		put(c, "1-1", mid, 1, 1, 2)
		d := mustPolicy(t, "coscheml", Options{}).Place(c, req("m", lowB, 2))
		if d.Action != ActionShare || d.Placement[0].Node != 0 || d.Placement[1].Node != 0 {
			t.Errorf("%v %v: want node 0: %s", d.Action, d.Placement, d.Reason)
		}
	})
}

// constScore is a sharing score of c for every job.
type constScore int

func (c constScore) Score(*profile.Profile) int { return int(c) }

// testByName is ByName with a sharing score for Lucid when opts has none (a
// trained one comes from package sharescore, which needs training data): 1
// for every job, so two jobs' scores sum to 2 and Lucid may pack them.
func testByName(name string, pred model.Predictor, opts Options) (Policy, error) {
	if opts.ShareScore == nil {
		opts.ShareScore = constScore(1)
	}
	return ByName(name, pred, opts)
}

func sorted(s []int) []int { return slices.Sorted(slices.Values(s)) }
