// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"math"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/sharescore"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// Lucid's queue is ordered by estimated duration x GPUs: of two jobs waiting
// for the one GPU, the shorter starts first although it came later; FIFO
// (exclusive) starts the older.
func TestLucidQueueOrder(t *testing.T) {
	tt := handTruth(t)
	jobs := []trace.Job{
		{ID: "run", Submit: 0, Duration: 100, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "long", Submit: 1, Duration: 50, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "short", Submit: 2, Duration: 10, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
	}
	opts := placement.DefaultOptions()
	opts.ShareScore = constScore(2) // never packs: the order alone
	lucid, err := placement.NewLucid(opts.ShareScore, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Nodes: 1, GPUsPerNode: 1, BackfillDepth: -1}
	start := func(res *Result) map[string]float64 {
		out := map[string]float64{}
		for _, j := range res.Jobs {
			out[j.ID] = j.Start
		}
		return out
	}
	res, err := Run(cfg, jobs, tt, lucid)
	if err != nil {
		t.Fatal(err)
	}
	if s := start(res); !(s["short"] == 100 && s["long"] == 110) {
		t.Errorf("lucid: starts %v, want short at 100, long at 110", s)
	}
	res, err = Run(cfg, jobs, tt, mustPolicy(t, "exclusive", nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := start(res); !(s["long"] == 100 && s["short"] == 150) {
		t.Errorf("exclusive: starts %v, want long at 100, short at 150", s)
	}
}

// Gandiva in the simulator: under overload it packs a job (one GPU freed for
// the queue), the probe finds the pair below time-slicing (0.4 + 0.4), and it
// moves the packed job back out, each move charged as work done again; the
// work done still adds up to the jobs' durations.
func TestGandivaMigrates(t *testing.T) {
	tt, err := truth.New([]*profile.Profile{prof("a", 40, 2000), prof("b", 20, 2000)},
		[]truth.Pair{{A: "a", B: "a", SpeedA: 0.4, SpeedB: 0.4}, {A: "a", B: "b", SpeedA: 0.9, SpeedB: 0.9}, {A: "b", B: "b", SpeedA: 0.9, SpeedB: 0.9}}, truth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []trace.Job{
		{ID: "j0", Submit: 0, Duration: 2000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "j1", Submit: 0, Duration: 2000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "j2", Submit: 1, Duration: 2000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
	}
	res, err := Run(Config{Nodes: 1, GPUsPerNode: 2}, jobs, tt, mustPolicy(t, "gandiva", nil))
	if err != nil {
		t.Fatal(err)
	}
	moves, work := 0, 0.0
	for _, j := range res.Jobs {
		moves += j.Migrated
		work += j.Duration
		if j.Migrated > 0 && !(j.End-j.Start >= j.Duration+placement.MigrationCost*float64(j.Migrated)-1e-6) {
			t.Errorf("job %s moved %d times ran %v s: less than its %v s and the moves' cost", j.ID, j.Migrated, j.End-j.Start, j.Duration)
		}
	}
	if moves < 2 {
		t.Fatalf("%d moves, want a pack and an unpack: %+v", moves, res.Jobs)
	}
	if math.Abs(res.Useful-work) > 1e-6*work {
		t.Errorf("work done %v, want %v (the moves' cost is not useful work)", res.Useful, work)
	}
}

// fifoLucid is Lucid without its queue order: the simulator finds no
// placement.Prioritizer and serves the queue first come, first served.
type fifoLucid struct {
	placement.Policy
	lucid *placement.Lucid
}

func (f fifoLucid) Plan(jobs []placement.PlannedJob) { f.lucid.Plan(jobs) }
func (f fifoLucid) SetNow(t float64)                 { f.lucid.SetNow(t) }

// TestPeersWhereJCTGoes measures where Lucid's average JCT comes from on the
// demo's workload (make demo: 2,000 Philly jobs of at most 24 h, load 2, 8 x 8
// GPUs, seeds 1-3): its queue order (shortest estimated duration x GPUs
// first, with the trace's true durations) against its packing, each alone.
// Figures in docs/peers.md. TUNE=1 runs it.
func TestPeersWhereJCTGoes(t *testing.T) {
	tt, _ := tuneShipped(t)
	tr, err := trace.ReadPhilly(bytes.NewReader(testPhilly(t)))
	if err != nil {
		t.Fatal(err)
	}
	all := trace.MaxDuration(tr.Jobs, 24*3600)
	sc, err := sharescore.TrainLucid(bytes.NewReader(models.DefaultSoloCSV), bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	opts := placeconf.Options(config.Default()) // as coscheml simulate's
	opts.ShareScore = sc
	never := opts
	never.ShareScore = constScore(2 * 2) // no pair sums to 2 or less
	variants := []struct {
		name string
		pol  func() placement.Policy
	}{
		{"exclusive (FIFO, alone)", func() placement.Policy { return mustPolicy(t, "exclusive", nil) }},
		{"lucid", func() placement.Policy { p, _ := placement.NewLucid(opts.ShareScore, opts); return p }},
		{"lucid's queue order alone (never packs)", func() placement.Policy { p, _ := placement.NewLucid(never.ShareScore, never); return p }},
		{"lucid's packing alone (FIFO)", func() placement.Policy {
			p, _ := placement.NewLucid(opts.ShareScore, opts)
			return fifoLucid{p, p}
		}},
		{"blind (several-GPU jobs whole, as in the demo)", func() placement.Policy {
			o := opts
			o.WholeMultiGPU = true
			p, _ := placement.NewBlind(o)
			return p
		}},
	}
	cfg := Config{Nodes: 8, GPUsPerNode: 8}
	for _, v := range variants {
		var jct, mk, below, useful []float64
		for seed := int64(1); seed <= 3; seed++ {
			jobs := trace.Sample(all, 2000, seed)
			if _, err := trace.SetLoad(jobs, cfg.GPUs(), 2); err != nil {
				t.Fatal(err)
			}
			if err := trace.Assign(jobs, tt.Tags(), trace.DefaultClassMix, seed); err != nil {
				t.Fatal(err)
			}
			c := cfg
			c.Seed = uint64(seed)
			res, err := Run(c, jobs, tt, v.pol())
			if err != nil {
				t.Fatal(err)
			}
			m, _ := Summarize(res)
			jct, mk, below, useful = append(jct, m.AvgJCT/3600), append(mk, m.Makespan/3600), append(below, m.BelowFloorHours), append(useful, 100*m.UsefulUtil)
		}
		t.Logf("%-42s avg JCT %5.2f h, makespan %5.1f h, useful util %5.1f%%, job-h below floor %6.1f",
			v.name, StatOf(jct).Mean, StatOf(mk).Mean, StatOf(useful).Mean, StatOf(below).Mean)
	}
}
