package submit

import (
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/placement"
)

func TestDeferralsFrom(t *testing.T) {
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	wait := 30 * time.Second
	rec := func(id, action, reason string, age time.Duration, replaces ...string) decisionlog.Record {
		return decisionlog.Record{ID: id, Outcome: "rewrite", Action: action, Reason: reason, Time: now.Add(-age), Replaces: replaces}
	}
	recs := []decisionlog.Record{
		rec("d-1", "wait", "deferred 30s for re-decision (wait_defer); ...", 10*time.Second), // replaced below
		rec("d-2", "wait", "deferred 30s for re-decision (wait_defer); ...", 5*time.Second, "d-1"),
		rec("d-3", "wait", "deferred 30s for re-decision (wait_defer); ...", 40*time.Second), // begun already
		rec("d-4", "wait", "coscheml: wait: ...; queued for a whole GPU", 5*time.Second),     // not deferred (wait_defer was 0)
		rec("d-5", "share", "re-decided after a deferred wait, begin time now; ...", time.Second),
		rec("d-6", "wait", "deferred 30s for re-decision (wait_defer); ...", -time.Hour), // clock far ahead
		{ID: "d-7", Outcome: "reject", Action: "wait", Reason: "deferred x", Time: now},
	}
	cases := []struct {
		name string
		wait time.Duration
		want map[string]time.Time
	}{
		{"live deferrals only", wait, map[string]time.Time{"d-2": now.Add(-5 * time.Second).Add(wait)}},
		{"wait_defer off now", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := deferralsFrom(recs, now, tc.wait)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for id, until := range tc.want {
				if !got[id].Equal(until) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// A restarted slurmctld still knows its deferrals (from the decision log read
// back from disk): the loop's re-decision defers the job again instead of
// leaving it to start on a whole GPU at its old begin time.
func TestRestartKeepsDeferrals(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", 1
		c.WaitDefer = 30 * time.Second
	})
	f.e.Decide(job("coscheml:app=heavy-a"))
	w := f.e.Decide(job("coscheml:app=heavy-b"))
	if w.BeginTime == 0 {
		t.Fatalf("not deferred: %+v", w)
	}
	f.e.Close()
	f.advance(10 * time.Second)
	e := New(f.sources(), Options{Now: f.clock})
	t.Cleanup(e.Close)
	m := JobFields{Comment: w.Comment, TresPerNode: w.TresPerNode, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
	r := e.Decide(m)
	if want := f.clock().Add(30 * time.Second).Unix(); r.Code != Rewrite || r.BeginTime != want {
		t.Fatalf("re-decision after restart: begin %d, want %d (deferred again): %+v", r.BeginTime, want, r)
	}
}

func TestFirstFitSlots(t *testing.T) {
	gpu := func(used int) placement.GPU {
		return placement.GPU{Slots: 4, Residents: []placement.Resident{{JobID: "x", Slots: used}}}
	}
	cases := []struct {
		name   string
		gpus   []placement.GPU
		g      int
		k      int
		wantOK bool
	}{
		{"lowest GPU", []placement.GPU{gpu(2), gpu(0)}, 0, 2, true},
		{"past a half-full GPU: 3", []placement.GPU{gpu(2), gpu(0)}, 1, 3, true},
		{"past a GPU as free: none", []placement.GPU{gpu(2), gpu(2)}, 1, 3, false},
		{"past full GPUs", []placement.GPU{gpu(4), gpu(4), gpu(2)}, 2, 2, true},
		// A queued decision holds nothing in Slurm until its job starts.
		{"past a GPU only reserved", []placement.GPU{{Slots: 4, Residents: []placement.Resident{{JobID: "d", Slots: 4, Kind: placement.Reserved}}}, gpu(2)}, 1, 5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := firstFitSlots(&placement.Node{GPUs: tc.gpus}, tc.g, 2)
			if k != tc.k || ok != tc.wantOK {
				t.Fatalf("firstFitSlots = %d, %v; want %d, %v", k, ok, tc.k, tc.wantOK)
			}
		})
	}
}

// A wait released to its whole-GPU request (no untyped count lands on the GPU)
// is not deferred again; the plugin's own deferral becomes eligible now.
func TestDeferralRelease(t *testing.T) {
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		release bool
		want    int64
	}{{"deferred again", false, now.Add(30 * time.Second).Unix()}, {"released", true, now.Unix()}} {
		t.Run(tc.name, func(t *testing.T) {
			q := &query{now: now, j: JobFields{Modify: true}}
			out := outcome{res: Result{Code: Rewrite}, release: tc.release}
			out.rec.Action = "wait"
			if got := deferral(q, out, true, 30*time.Second); got.res.BeginTime != tc.want {
				t.Fatalf("begin %d, want %d", got.res.BeginTime, tc.want)
			}
		})
	}
}

func TestUniqueFit(t *testing.T) {
	gpu := func(used ...int) placement.GPU {
		g := placement.GPU{Slots: 4}
		for i, u := range used {
			g.Residents = append(g.Residents, placement.Resident{JobID: string(rune('a' + i)), Slots: u})
		}
		return g
	}
	cases := []struct {
		name   string
		gpus   []placement.GPU
		g      int
		want   int
		k      int
		wantOK bool
	}{
		{"only GPU", []placement.GPU{gpu(2)}, 0, 2, 2, true},
		{"others full", []placement.GPU{gpu(4), gpu(2), gpu(2, 2)}, 1, 2, 2, true},
		{"another as free", []placement.GPU{gpu(2), gpu(2)}, 1, 2, 3, false},
		{"an idle one elsewhere", []placement.GPU{gpu(2), gpu()}, 0, 2, 5, false},
		{"idle, others hold 2 free: 3 shards", []placement.GPU{gpu(2), gpu()}, 1, 2, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := uniqueFit(&placement.Node{GPUs: tc.gpus}, tc.g, tc.want)
			if k != tc.k || ok != tc.wantOK {
				t.Fatalf("uniqueFit = %d, %v; want %d, %v", k, ok, tc.k, tc.wantOK)
			}
		})
	}
}

// With typed pinning a re-decision (job_modify) asks for untyped shards that only
// the chosen GPU can hold (Slurm 22.05 refuses a typed request in an update), else
// that first fit lands on it.
func TestTypedRedecisionUntyped(t *testing.T) {
	cases := []struct {
		name     string
		gpus     int
		wantTres string
		wantNode string
	}{
		{"one GPU per node: untyped, pinned", 1, "gres:shard:2", "n1"},
		{"another GPU as free: first fit lands on the lower one", 2, "gres:shard:2", "n1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", tc.gpus
				c.ShardPinning, c.ShardTypePrefix = config.PinTyped, "g"
			})
			for g := 0; g < tc.gpus; g++ {
				if a := f.e.Decide(job("coscheml:app=heavy-a")); a.TresPerNode != "gres:shard:g"+string(rune('0'+g))+":2" {
					t.Fatalf("submit, typed: %+v", a)
				}
			}
			m := job("coscheml:app=light-b")
			m.Modify, m.JobID, m.Admin = true, 91, true
			r := f.e.Decide(m)
			if r.Code != Rewrite || r.TresPerNode != tc.wantTres || r.ReqNodes != tc.wantNode {
				t.Fatalf("re-decision: %+v; want %s on %q", r, tc.wantTres, tc.wantNode)
			}
		})
	}
}
