// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// at1 is the one slot a decision places, or fails the test.
func at1(t *testing.T, d Decision) Slot {
	t.Helper()
	if d.Action == ActionWait || len(d.Placement) != 1 {
		t.Fatalf("decision %v %+v (%s), want one GPU", d.Action, d.Placement, d.Reason)
	}
	return d.Placement[0]
}

// tagScores scores a job by its profile's tag.
type tagScores map[string]int

func (s tagScores) Score(p *profile.Profile) int { return s[p.Tag] }

func lucidFor(t *testing.T, scores map[string]int, submits []float64) *Lucid {
	t.Helper()
	opts := DefaultOptions()
	opts.ShareScore = tagScores(scores)
	p, err := NewLucid(opts.ShareScore, opts)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []PlannedJob
	for _, s := range submits {
		jobs = append(jobs, PlannedJob{Submit: s, GPUs: 1, Duration: 100})
	}
	p.Plan(jobs)
	p.SetNow(0)
	return p
}

// busySubmits is a forecast of 30 submissions in the first 50 minutes: 6 per
// 10-minute bin, over Lucid's 2.
func busySubmits() []float64 {
	var s []float64
	for i := 0; i < 30; i++ {
		s = append(s, float64(i)*100)
	}
	return s
}

// Lucid packs a queued job with the FIRST running job (cluster order) whose
// sharing score plus its own is at most 2, of as many GPUs, and whose priority
// is at most twice its own; otherwise it runs alone; and only while busy.
func TestLucidPackingRule(t *testing.T) {
	scores := map[string]int{"heavy": 2, "mid": 1, "light": 0}
	heavy, mid, light := prof("heavy", profile.ClassTrain, 90, 4000), prof("mid", profile.ClassTrain, 50, 4000), prof("light", profile.ClassTrain, 10, 4000)
	run := func(p *Lucid, c *Cluster, id string, pr *profile.Profile, gpus int, est float64) Decision {
		r := req(id, pr, gpus)
		r.EstDuration = est
		d := p.Place(c, r)
		if d.Action != ActionWait {
			c.Apply(r, d)
		}
		return d
	}
	t.Run("busy", func(t *testing.T) {
		p := lucidFor(t, scores, busySubmits())
		c := NewCluster(1, 6, 40000, 4)
		if s := at1(t, run(p, c, "A", heavy, 1, 100)); s.GPU != 0 {
			t.Fatalf("A on GPU %d, want 0 (alone, first idle)", s.GPU)
		}
		if s := at1(t, run(p, c, "B", mid, 1, 100)); s.GPU != 1 {
			t.Fatalf("B (score 1) on GPU %d, want alone on 1: 2+1 > 2 with A", s.GPU)
		}
		// C (score 0) fits with A (2+0) and with B (1+0): the first, A.
		d := run(p, c, "C", light, 1, 100)
		if s := at1(t, d); s.GPU != 0 || d.Action != ActionShare || !strings.Contains(d.Reason, "packed with job A") {
			t.Fatalf("C: %v on GPU %d (%s), want packed with A on GPU 0", d.Action, s.GPU, d.Reason)
		}
		// D's priority 10: B's 100 is more than twice it, so D runs alone.
		if s := at1(t, run(p, c, "D", light, 1, 10)); s.GPU != 2 {
			t.Fatalf("D on GPU %d, want alone on 2 (B's priority 100 > 2 x 10)", s.GPU)
		}
		// E (priority 60, score 0) may join B (1+0, 100 <= 120) or D; B first.
		if s := at1(t, run(p, c, "E", light, 1, 60)); s.GPU != 1 {
			t.Fatalf("E on GPU %d, want packed with B on 1", s.GPU)
		}
		// A two-GPU job joins only a running job of two GPUs.
		d = run(p, c, "F", light, 2, 50)
		if d.Action != ActionExclusive || len(d.Placement) != 2 {
			t.Fatalf("F: %v %+v, want alone on two idle GPUs", d.Action, d.Placement)
		}
		d = run(p, c, "G", light, 2, 50)
		if d.Action != ActionShare || d.Placement[0].GPU != 3 || d.Placement[1].GPU != 4 {
			t.Fatalf("G: %v %+v (%s), want packed with F on GPUs 3 and 4", d.Action, d.Placement, d.Reason)
		}
	})
	t.Run("not busy", func(t *testing.T) {
		p := lucidFor(t, scores, nil)
		c := NewCluster(1, 4, 40000, 4)
		run(p, c, "A", heavy, 1, 100)
		if s := at1(t, run(p, c, "C", light, 1, 100)); s.GPU != 1 {
			t.Fatalf("C on GPU %d, want alone on 1: no packing while the forecast is quiet", s.GPU)
		}
	})
	t.Run("queue order", func(t *testing.T) {
		p := lucidFor(t, scores, nil)
		short, long := req("s", light, 4), req("l", light, 1)
		short.EstDuration, long.EstDuration = 10, 100
		if p.Priority(short) != 40 || p.Priority(long) != 100 {
			t.Fatalf("priorities %v %v, want duration x GPUs: 40 and 100", p.Priority(short), p.Priority(long))
		}
	})
}

// Gandiva packs only under overload (the lowest-utilization job alone onto
// the GPU of the lowest-utilization other job), and after its probe unpacks a
// pair whose speeds sum below 1, never packing it again.
func TestGandivaPackAndUnpack(t *testing.T) {
	p, err := NewGandiva(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(1, 3, 40000, 4)
	reqs := map[string]*Request{}
	for _, j := range []struct {
		id string
		sm float64
	}{{"A", 10}, {"B", 50}, {"C", 90}} {
		r := req(j.id, prof("app-"+j.id, profile.ClassTrain, j.sm, 4000), 1)
		reqs[j.id] = r
		d := p.Place(c, r)
		if d.Action != ActionExclusive && d.Action != ActionShare || len(c.Nodes[0].GPUs[at1(t, d).GPU].Residents) != 0 {
			t.Fatalf("%s: %v %+v, want alone on an idle GPU", j.id, d.Action, d.Placement)
		}
		c.Apply(r, d)
	}
	speeds := map[string]float64{"A": 1, "B": 1, "C": 1}
	job := func(id string) (*Request, float64, bool) {
		r, ok := reqs[id]
		return r, speeds[id], ok
	}
	move := func(m Move) {
		c.Remove(m.JobID)
		if m.To.Action != ActionWait {
			c.Apply(reqs[m.JobID], m.To)
		}
	}
	if moves := p.Review(c, 0, 0, job); len(moves) != 0 {
		t.Fatalf("no overload, moves %+v", moves)
	}
	moves := p.Review(c, 0, 1, job)
	if len(moves) != 1 || moves[0].JobID != "A" || at1(t, moves[0].To).GPU != 1 || moves[0].Cost != MigrationCost {
		t.Fatalf("overload: moves %+v, want A (10%%) onto B's GPU 1 (50%%, lower than C's 90%%)", moves)
	}
	move(moves[0])
	speeds["A"], speeds["B"] = 0.45, 0.5
	if moves := p.Review(c, GandivaProbe-1, 0, job); len(moves) != 0 {
		t.Fatalf("within the probe period: moves %+v", moves)
	}
	moves = p.Review(c, GandivaProbe, 1, job)
	if len(moves) != 1 || moves[0].JobID != "A" || at1(t, moves[0].To).GPU != 0 || !strings.Contains(moves[0].To.Reason, "unpack") {
		t.Fatalf("after the probe, 0.45 + 0.5 < 1: moves %+v, want A back alone on GPU 0", moves)
	}
	move(moves[0])
	speeds["A"], speeds["B"] = 1, 1
	// Overload again: A was packed once, so the next lowest, B, moves; never
	// next to A (their pair ran worse than time-slicing): onto C.
	moves = p.Review(c, GandivaProbe+60, 1, job)
	if len(moves) != 1 || moves[0].JobID != "B" || at1(t, moves[0].To).GPU != 2 {
		t.Fatalf("moves %+v, want B onto C's GPU 2", moves)
	}
	move(moves[0])
	speeds["B"], speeds["C"] = 0.6, 0.5
	if moves := p.Review(c, 2*GandivaProbe+60, 0, job); len(moves) != 0 {
		t.Fatalf("0.6 + 0.5 >= 1 is kept: moves %+v", moves)
	}
}

// FGD puts a fractional task where the node's expected fragmentation grows
// least: next to a resident on node 1 rather than on node 0's idle GPUs, whose
// two idle GPUs a two-GPU task of the mix needs.
func TestFGDLeastFragmentation(t *testing.T) {
	p, err := NewFGD(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	p.Plan([]PlannedJob{{GPUs: 1}, {GPUs: 2}})
	c := NewCluster(2, 2, 40000, 4)
	light := prof("light", profile.ClassTrain, 10, 4000)
	put(c, "res", light, 1, 0, 2)
	d := p.Place(c, req("q", light, 1))
	if s := at1(t, d); s.Node != 1 || s.GPU != 0 || s.Slots != 2 || d.Action != ActionShare {
		t.Fatalf("%v %+v (%s), want a share of node 1 GPU 0 (fragmentation -0.25 GPU, node 0 +0.75)", d.Action, d.Placement, d.Reason)
	}
	// Node 1's fragmentation, by hand: a one-GPU task fits both GPUs (none
	// unusable); a two-GPU task finds one idle GPU, so all 1.5 free GPUs are
	// fragments to it: 0.5 x 0 + 0.5 x 1.5.
	if f := p.frag(p.nodeFree(c, 1)); f != 0.75 {
		t.Fatalf("node 1's expected fragmentation %v, want 0.75", f)
	}
	// A task of two GPUs takes node 0's two idle GPUs whole.
	d = p.Place(c, req("w", light, 2))
	if d.Action != ActionExclusive || len(d.Placement) != 2 || d.Placement[0].Node != 0 {
		t.Fatalf("%v %+v, want node 0's two GPUs", d.Action, d.Placement)
	}
}
