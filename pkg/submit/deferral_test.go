// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/redecide"
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
	f.loopRuns(t)
	f.e.Decide(job("coscheml:app=heavy-a"))
	w := f.e.Decide(job("coscheml:app=heavy-b"))
	if w.BeginTime == 0 {
		t.Fatalf("not deferred: %+v", w)
	}
	f.e.Close()
	f.advance(10 * time.Second)
	e := New(f.sources(), Options{Now: f.clock})
	t.Cleanup(e.Close)
	m := JobFields{Comment: w.Comment, StoredComment: w.Comment, TresPerNode: w.TresPerNode, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
	r := e.Decide(m)
	if want := f.clock().Add(30 * time.Second).Unix(); r.Code != Rewrite || r.BeginTime != want {
		t.Fatalf("re-decision after restart: begin %d, want %d (deferred again): %+v", r.BeginTime, want, r)
	}
}

// fixedPolicy places every job on GPU gpu of the first node with 2 slots, or
// answers "wait" while gpu < 0: a re-decision test chooses the GPU itself.
type fixedPolicy struct{ gpu int }

func (*fixedPolicy) Name() string { return "fixed" }
func (p *fixedPolicy) Place(_ *placement.Cluster, _ *placement.Request) placement.Decision {
	if p.gpu < 0 {
		return placement.Decision{Action: placement.ActionWait, Reason: "fixed: wait"}
	}
	return placement.Decision{Action: placement.ActionShare, Placement: []placement.Slot{{Node: 0, GPU: p.gpu, Slots: 2}}, PredictedSpeed: 1, MinResidentSpeed: 1, Reason: "fixed"}
}

// A deferred wait re-decided under typed pinning: releases whose updates take a
// typed shard request get the chosen GPU by its type; older ones get untyped
// shards Slurm lands on it, and when no count does the job is deferred again
// (never released to a whole GPU that nothing could join).
func TestTypedRedecision(t *testing.T) {
	const v2205, v2311, v2605 = 22<<16 | 5<<8 | 8, 23<<16 | 11<<8 | 11, 26<<16 | 5<<8 | 3
	cases := []struct {
		name      string
		version   uint32
		gpu       int
		wantTres  string
		wantNode  string
		wantBegin int64 // seconds from now
	}{
		{"26.05: typed, GPU 1", v2605, 1, "gres:shard:g1:2", "n1", 0},
		{"26.05: typed, GPU 0", v2605, 0, "gres:shard:g0:2", "n1", 0},
		{"23.11: typed, GPU 1", v2311, 1, "gres:shard:g1:2", "n1", 0},
		{"22.05: first fit lands on GPU 0", v2205, 0, "gres:shard:2", "n1", 0},
		{"22.05: no untyped count lands on GPU 1: deferred again", v2205, 1, "gres:shard:4", "", 30},
		{"unknown release: as 22.05", 0, 1, "gres:shard:4", "", 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", 2
				c.ShardPinning, c.ShardTypePrefix = config.PinTyped, "g"
				c.WaitDefer = 30 * time.Second
			})
			pol := &fixedPolicy{gpu: -1}
			f.policy = func(config.Config, model.Predictor) (placement.Policy, error) { return pol, nil }
			f.loopRuns(t)
			f.e.Close()
			e := New(f.sources(), Options{Now: f.clock, SlurmVersion: func() uint32 { return tc.version }})
			t.Cleanup(e.Close)
			w := e.Decide(job("coscheml:app=light-a"))
			if w.Code != Rewrite || w.BeginTime == 0 || w.TresPerNode != "gres:shard:4" {
				t.Fatalf("submit: not a deferred wait: %+v", w)
			}
			pol.gpu = tc.gpu
			f.advance(2 * time.Second)
			m := JobFields{Comment: w.Comment, StoredComment: w.Comment, TresPerNode: w.TresPerNode, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
			r := e.Decide(m)
			if r.Code != Rewrite || r.TresPerNode != tc.wantTres || r.ReqNodes != tc.wantNode {
				t.Fatalf("re-decision: %+v; want %s on %q", r, tc.wantTres, tc.wantNode)
			}
			if want := f.clock().Unix() + tc.wantBegin; r.BeginTime != want {
				t.Fatalf("re-decision begin %d, want %d (%+d s): %+v", r.BeginTime, want, tc.wantBegin, r)
			}
		})
	}
}

// With typed pinning a re-decision (job_modify) on a release that refuses typed
// updates (22.05; unknown counts as such) asks for untyped shards that only the
// chosen GPU can hold, else that first fit lands on it.
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

// TestDeferralFollowsTheLoop: wait_defer defers a "wait" only while the re-decide
// loop's heartbeat counts; a heartbeat that expired, was removed or could have
// been written by someone else defers nothing, and each change is said once.
func TestDeferralFollowsTheLoop(t *testing.T) {
	cases := []struct {
		name     string
		after    func(t *testing.T, f *fixture) // after the loop was seen running
		deferred bool
		note     string
	}{
		{"running", func(*testing.T, *fixture) {}, true, ""},
		{"expired", func(t *testing.T, f *fixture) {
			if err := redecide.WriteHeartbeat(f.cfg.HeartbeatPath(), f.clock().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			f.advance(5 * time.Second)
		}, false, "expired"},
		{"removed (the loop stopped)", func(t *testing.T, f *fixture) {
			if err := os.Remove(f.cfg.HeartbeatPath()); err != nil {
				t.Fatal(err)
			}
		}, false, "removed"},
		{"writable by others", func(t *testing.T, f *fixture) {
			if err := os.Chmod(f.cfg.HeartbeatPath(), 0o666); err != nil {
				t.Fatal(err)
			}
		}, false, "lets others write it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n1", 1
				c.WaitDefer = 30 * time.Second
			})
			f.loopRuns(t)
			if r := f.e.Decide(job("coscheml:app=heavy-a")); !strings.Contains(logOf(r), "re-decide loop running") {
				t.Fatalf("the loop's appearance is not logged with the next job: %q", logOf(r))
			}
			tc.after(t, f)
			f.e.Reload()
			w := f.e.Decide(job("coscheml:app=heavy-b"))
			if w.Code != Rewrite || w.TresPerNode != "gres:shard:4" {
				t.Fatalf("not a wait: %+v", w)
			}
			if got := w.BeginTime != 0; got != tc.deferred {
				t.Fatalf("deferred %v, want %v: %+v", got, tc.deferred, w)
			}
			if !strings.Contains(w.Log, tc.note) {
				t.Fatalf("log %q lacks %q", w.Log, tc.note)
			}
			if again := f.e.Decide(job("coscheml:app=heavy-b")); tc.note != "" && strings.Contains(logOf(again), tc.note) {
				t.Fatalf("said twice: %q", logOf(again))
			}
		})
	}
}

// typedEngineAt is an engine of two nodes of two GPUs, typed pinning, as
// slurmctld of release version runs it.
func typedEngineAt(t *testing.T, version uint32) *Engine {
	f := newFixture(t, func(c *config.Config) {
		c.Cluster.Nodes, c.Cluster.GPUsPerNode = "n[1-2]", 2
		c.ShardPinning, c.ShardTypePrefix = config.PinTyped, "g"
	})
	f.e.Close()
	e := New(f.sources(), Options{Now: f.clock, SlurmVersion: func() uint32 { return version }})
	t.Cleanup(e.Close)
	return e
}

// A job requeued after it started comes back (through the re-decide loop) with
// the typed pin it ran with. It is placed again, typed on every release: 22.05
// refuses an untyped update of a typed request and accepts a typed one.
func TestRequeuedPinRedecided(t *testing.T) {
	const v2205, v2605 = 22<<16 | 5<<8 | 8, 26<<16 | 5<<8 | 3
	for _, version := range []uint32{v2205, v2605} {
		t.Run(fmt.Sprintf("%d.%02d", version>>16, version>>8&0xff), func(t *testing.T) {
			e := typedEngineAt(t, version)
			first := e.Decide(job("coscheml:app=light-a"))
			if first.Code != Rewrite || first.ReqNodes == "" || !strings.Contains(first.TresPerNode, "shard:g") {
				t.Fatalf("submit: not a typed pin: %+v", first)
			}
			// Requeued away from its node: the guard excluded it.
			m := JobFields{Comment: first.Comment, StoredComment: first.Comment, TresPerNode: first.TresPerNode,
				ExcNodes: first.ReqNodes, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
			r := e.Decide(m)
			if r.Code != Rewrite || r.ReqNodes == "" || r.ReqNodes == first.ReqNodes || !strings.Contains(r.TresPerNode, "shard:g") {
				t.Fatalf("requeued job's update: %+v; want a typed pin on another node than %s", r, first.ReqNodes)
			}
		})
	}
}

// A user's own update carrying the plugin's per-GPU shard Type is not the
// re-decide loop's: on 22.05 a typed update of a pending job is not honoured,
// so answering it with a typed pin would let the job start wherever Slurm's
// first fit puts it while the reservation says otherwise. Only an
// administrator's update (the loop's) is re-placed; a user's meets
// raw_requests like any raw shard request.
func TestUserOwnPinUpdateMeetsRawRequests(t *testing.T) {
	const v2205, v2605 = 22<<16 | 5<<8 | 8, 26<<16 | 5<<8 | 3
	for _, version := range []uint32{v2205, v2605} {
		t.Run(fmt.Sprintf("%d.%02d", version>>16, version>>8&0xff), func(t *testing.T) {
			e := typedEngineAt(t, version)
			sub := job("coscheml:app=light-a")
			sub.UserID, sub.SubmitUID = 1000, 1000
			first := e.Decide(sub)
			if first.Code != Rewrite || first.ReqNodes == "" || !strings.Contains(first.TresPerNode, "shard:g") {
				t.Fatalf("submit: not a typed pin: %+v", first)
			}
			other := "gres:shard:g1:2"
			if strings.Contains(first.TresPerNode, "g1") {
				other = "gres:shard:g0:2"
			}
			// The user repeats the job's own comment, token and all, as
			// guardUpdate's message tells them to.
			m := JobFields{Comment: first.Comment, StoredComment: first.Comment, TresPerNode: other, MinNodes: 1, JobID: 77,
				Modify: true, UserID: 1000, SubmitUID: 1000}
			r := e.Decide(m)
			if r.Code != Deny || !strings.Contains(r.UserMsg, "shards directly") {
				t.Fatalf("user's update %q: %+v; want it refused by raw_requests", other, r)
			}
		})
	}
}
