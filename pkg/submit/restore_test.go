// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/nohang"
	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/residency"
)

// A restarted controller rebuilds the reservations of queued jobs from the
// decision log (read back from disk), so it does not promise their GPUs again.
func TestRestartKeepsReservations(t *testing.T) {
	f := newFixture(t, nil)
	a := f.e.Decide(job("coscheml:app=heavy-a")) // n1 GPU 0
	da := comment.ParseComment(a.Comment)
	f.e.Close() // slurmctld stops; the log is flushed
	for _, tail := range []string{
		"",                               // a clean log
		"{\"id\":\"torn-1\",\"outcome\"", // a torn last line
		"\x00\x00garbage\n{}\n",          // garbage
	} {
		if tail != "" {
			fh, err := os.OpenFile(f.cfg.DecisionLog, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteString(tail)
			fh.Close()
		}
		e := New(f.sources(), Options{Now: f.clock})
		e.view.mu.Lock()
		var ids []string
		for _, r := range e.view.res.list {
			ids = append(ids, r.id)
		}
		e.view.mu.Unlock()
		if len(ids) != 1 || ids[0] != da.DecisionID {
			t.Fatalf("after restart (log tail %q): reservations %v, want [%s]", tail, ids, da.DecisionID)
		}
		// A second heavy job is kept off the reserved GPU, as before the restart.
		if b := e.Decide(job("coscheml:app=heavy-b")); b.TresPerNode != "gres:shard:3" {
			t.Fatalf("after restart: heavy job placed on the reserved GPU: %+v", b)
		}
		// The restored reservation is still the victim's alone: another user's
		// token does not drop it, the job's own update does.
		own := job(a.Comment)
		own.Modify, own.JobID, own.StoredComment = true, 61, a.Comment
		if r := e.Decide(own); !strings.Contains(logOf(r), "modify job=61") {
			t.Fatalf("own update after restart: %+v", r)
		}
		e.view.mu.Lock()
		for _, r := range e.view.res.list {
			if r.id == da.DecisionID {
				t.Errorf("the job's own update did not replace its restored reservation")
			}
		}
		e.view.mu.Unlock()
		e.Close()
		// The next start must not rebuild what the update replaced: start again
		// from the log written so far.
		e2 := New(f.sources(), Options{Now: f.clock})
		e2.view.mu.Lock()
		for _, r := range e2.view.res.list {
			if r.id == da.DecisionID {
				t.Errorf("a replaced reservation was rebuilt")
			}
		}
		e2.view.mu.Unlock()
		e2.Close()
		os.Remove(f.cfg.DecisionLog)
		// Put the first decision back for the next round.
		w := decisionlog.NewWriter(f.cfg.DecisionLog, 0, 0)
		w.Log(decisionlog.Record{ID: da.DecisionID, Time: f.now, Op: "submit", UserID: 1000, Tag: "heavy-a", Class: "hpc",
			Outcome: "rewrite", Action: "exclusive", Node: "n1", GPU: 0, Shards: 2})
		w.Close()
	}
}

// A FIFO where the decision log should be rebuilds nothing and blocks nothing.
func TestRestoreFailsOpen(t *testing.T) {
	f := newFixture(t, nil)
	f.e.Close()
	os.Remove(f.cfg.DecisionLog)
	if err := syscall.Mkfifo(f.cfg.DecisionLog, 0o600); err != nil {
		t.Fatal(err)
	}
	var e *Engine
	nohang.Call(t, "New with a FIFO as decision log", func() error { e = New(f.sources(), Options{Now: f.clock}); return nil })
	defer e.Close()
	if r := e.Decide(job("coscheml:app=light-a")); r.Code != Rewrite || !strings.Contains(logOf(r), "reservations not rebuilt") {
		t.Fatalf("%+v", r)
	}
}

func TestReservationsFrom(t *testing.T) {
	f := newFixture(t, nil)
	st := f.e.snap.Load()
	now := f.now
	rec := func(id string, age time.Duration, edit func(*decisionlog.Record)) decisionlog.Record {
		r := decisionlog.Record{ID: id, Time: now.Add(-age), Op: "submit", UserID: 1000, Tag: "heavy-a",
			Outcome: "rewrite", Action: "share", Node: "n2", GPU: 1, Shards: 2}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	recs := []decisionlog.Record{
		rec("pending", time.Minute, nil),
		rec("expired", 16*time.Minute, nil),
		rec("future", -time.Hour, nil),
		rec("unpinned", time.Minute, func(r *decisionlog.Record) { r.Node, r.GPU = "", -1; r.Action = "exclusive" }),
		rec("rejected", time.Minute, func(r *decisionlog.Record) { r.Outcome = "reject" }),
		rec("gone-node", time.Minute, func(r *decisionlog.Record) { r.Node = "n9" }),
		rec("bad-gpu", time.Minute, func(r *decisionlog.Record) { r.GPU = 7 }),
		rec("replaced", 2*time.Minute, nil),
		rec("update", time.Minute, func(r *decisionlog.Record) { r.Op, r.JobID, r.Replaces = "modify", "42", []string{"replaced"} }),
		rec("multi", time.Minute, func(r *decisionlog.Record) { r.GPU, r.GPUs, r.Shards, r.Action = 0, []int{0, 1}, 0, "exclusive" }),
		rec("span", time.Minute, func(r *decisionlog.Record) { r.GPU, r.GPUs, r.Nodes = 0, []int{0, 1}, []string{"n2", "n1"} }),
		rec("span-gone-node", time.Minute, func(r *decisionlog.Record) { r.GPU, r.GPUs, r.Nodes = 0, []int{0, 1}, []string{"n2", "n9"} }),
		rec("span-not-first", time.Minute, func(r *decisionlog.Record) { r.GPU, r.GPUs, r.Nodes = 0, []int{0, 1}, []string{"n1", "n2"} }),
		rec("span-twice", time.Minute, func(r *decisionlog.Record) { r.GPU, r.GPUs, r.Nodes = 0, []int{0, 1}, []string{"n2", "n2"} }),
	}
	got := map[string]reservation{}
	for _, r := range reservationsFrom(st, recs, now, 15*time.Minute) {
		got[r.id] = r
	}
	want := map[string]struct {
		jobID string
		gpus  int
		slots int
	}{
		"pending": {"", 1, 2},
		"update":  {"42", 1, 2},
		"multi":   {"", 2, 4},
		"span":    {"", 2, 2},
	}
	if len(got) != len(want) {
		t.Fatalf("rebuilt %v, want %v", got, want)
	}
	for id, w := range want {
		r, ok := got[id]
		if !ok || r.jobID != w.jobID || len(r.gpus) != w.gpus || r.slots != w.slots || r.node != 1 || r.uid != 1000 || r.prof == nil {
			t.Errorf("%s: %+v, want %+v", id, r, w)
		}
	}
	if r := got["span"]; !slices.Equal(r.more, []int{0}) {
		t.Errorf("span: further nodes %v, want [0] (n1)", r.more)
	}
}

// A running job of several nodes weighs as all its GPUs: slowing it on one
// GPU of one node slows every GPU of every node it holds.
func TestResidentOfSpan(t *testing.T) {
	f := newFixture(t, nil)
	st := f.e.snap.Load()
	for _, tc := range []struct{ nodes, want int }{{0, 2}, {2, 4}, {3, 6}} {
		en := residency.Entry{JobID: "7", Node: "n1", GPUs: []int{0, 1}, Nodes: tc.nodes, Shards: 2, Tag: "light-a"}
		if _, res, ok := residentOf(st, &en); !ok || res.GPUs != tc.want {
			t.Errorf("entry of %d nodes: resident %+v (ok %v), want %d GPUs", tc.nodes, res, ok, tc.want)
		}
	}
}
