// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/residency"
)

// installed installs entries and done markers as a residency read would.
func (f *fixture) installed(entries []residency.Entry, done []string) {
	f.e.refresh.mu.Lock()
	f.e.install(f.e.snap.Load(), entries, done, f.clock())
	f.e.refresh.mu.Unlock()
}

func (f *fixture) ctxOf(id string) *jobCtx {
	f.e.view.mu.Lock()
	defer f.e.view.mu.Unlock()
	return f.e.view.ctxLocked(id)
}

// TestContextReleasedWhenJobLeaves: a decision's job context goes when its job
// starts (a residency entry), has run (a done marker) or left the queue unseen
// (the queue check), so that a week of finished jobs never fills the bound; an
// array's stays while its other tasks may still wait, and a queued job's stays.
func TestContextReleasedWhenJobLeaves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		array    bool
		leave    func(f *fixture, id, node string)
		released bool
	}{
		{"started: residency entry", false, func(f *fixture, id, node string) {
			f.installed([]residency.Entry{{V: 1, JobID: "300", Node: node, GPUs: []int{0}, Shards: 2, Tag: "heavy-a", DecisionID: id, Start: f.clock(), Expires: f.clock().Add(time.Hour)}}, nil)
		}, true},
		{"ran and ended: done marker", false, func(f *fixture, id, _ string) { f.installed(nil, []string{id}) }, true},
		{"cancelled while queued: gone from the queue", false, func(f *fixture, id, _ string) {
			f.advance(time.Minute)
			f.e.poll.queueIDs = func(context.Context) (QueueListing, error) { return QueueListing{"x-1-0123456789ab": "9"}, nil }
			f.e.checkQueue()
		}, true},
		{"still queued: listed", false, func(f *fixture, id, _ string) {
			f.advance(time.Minute)
			f.e.poll.queueIDs = func(context.Context) (QueueListing, error) { return QueueListing{id: "300"}, nil }
			f.e.checkQueue()
		}, false},
		{"array, one task started: kept", true, func(f *fixture, id, node string) {
			f.installed([]residency.Entry{{V: 1, JobID: "300_0", Node: "n1", GPUs: []int{0}, Tag: "heavy-a", DecisionID: id, Start: f.clock(), Expires: f.clock().Add(time.Hour)}}, nil)
		}, false},
		{"array gone from the queue", true, func(f *fixture, id, _ string) {
			f.advance(time.Minute)
			f.e.poll.queueIDs = func(context.Context) (QueueListing, error) { return QueueListing{}, nil }
			f.e.checkQueue()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) { c.DecisionLog = "" })
			j := job("coscheml:app=heavy-a")
			j.ExcNodes = "n1"
			if tc.array {
				j.ArrayInx = "0-3"
			}
			res := f.e.Decide(j)
			id := comment.ParseComment(res.Comment).DecisionID
			if res.Code != Rewrite || id == "" || f.ctxOf(id) == nil {
				t.Fatalf("no context remembered: %+v", res)
			}
			tc.leave(f, id, res.ReqNodes)
			if got := f.ctxOf(id) == nil; got != tc.released {
				t.Fatalf("context released %v, want %v", got, tc.released)
			}
		})
	}
}

// TestLiveContextSurvivesFinishedFlood: 70,000 decisions whose jobs ran and
// ended (more than the bound) leave a queued job's context whole: the finished
// ones are released as their ends are read, and the queued job's later
// job_modify is decided with its partition, -w and -x.
func TestLiveContextSurvivesFinishedFlood(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.DecisionLog = "" })
	live := job("coscheml:app=heavy-a")
	live.Partition, live.ReqNodes, live.ExcNodes = "gpu", "n3", "n1"
	res := f.e.Decide(live)
	liveID := comment.ParseComment(res.Comment).DecisionID
	if res.Code != Rewrite || res.ReqNodes != "n3" || liveID == "" {
		t.Fatalf("live job: %+v", res)
	}
	const total, batch = maxCtx + 4464, 1024
	var done []string
	for i := 0; i < total; i++ {
		id := fmt.Sprintf("%s-f%d", f.e.idPfx, i)
		f.e.view.mu.Lock()
		f.e.view.rememberLocked(id, jobCtx{partition: "gpu", excNodes: "n2", at: f.clock()})
		f.e.view.mu.Unlock()
		done = append(done, id)
		if len(done) == batch || i == total-1 {
			f.installed(nil, done) // these jobs ran and ended
			for _, d := range []string{done[0], done[len(done)-1]} {
				if f.ctxOf(d) != nil {
					t.Fatalf("context of finished job %s kept after %d decisions", d, i+1)
				}
			}
			done = done[:0]
		}
	}
	c := f.ctxOf(liveID)
	if c == nil || c.partition != "gpu" || c.reqNodes != "n3" || c.excNodes != "n1" {
		t.Fatalf("live job's context after %d finished jobs: %+v", total, c)
	}
	m := JobFields{Comment: res.Comment, TresPerNode: "gres:gpu:1", UserID: 1000, MinNodes: 1, JobID: 77, Modify: true, Admin: true}
	if r := f.e.Decide(m); r.Code != Rewrite || r.ReqNodes != "n3" {
		t.Fatalf("job_modify of the live job not decided on its -w n3: %+v", r)
	}
}

// TestContextEvictionOldestFirst: at the bound, one more context evicts the
// oldest one only (no walk of the map picking any).
func TestContextEvictionOldestFirst(t *testing.T) {
	var v clusterView
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	for i := 0; i < maxCtx; i++ {
		v.rememberLocked(fmt.Sprint("d", i), jobCtx{partition: fmt.Sprint("p", i), at: at})
	}
	v.rememberLocked("newest", jobCtx{partition: "p-new", at: at})
	for _, tc := range []struct {
		id   string
		kept bool
	}{{"d0", false}, {"d1", true}, {fmt.Sprint("d", maxCtx/2), true}, {fmt.Sprint("d", maxCtx-1), true}, {"newest", true}} {
		if got := v.ctxLocked(tc.id) != nil; got != tc.kept {
			t.Errorf("context %s kept %v, want %v", tc.id, got, tc.kept)
		}
	}
}

// TestCtxStore drives the list through adds, releases, evictions and a sweep,
// checking order and links against a plain slice model after each step.
func TestCtxStore(t *testing.T) {
	type step struct {
		op string // put, release, sweep
		id string
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
		want  []string
	}{
		{"insertion order", 4, []step{{"put", "a"}, {"put", "b"}, {"put", "c"}}, []string{"a", "b", "c"}},
		{"oldest evicted at the bound", 3, []step{{"put", "a"}, {"put", "b"}, {"put", "c"}, {"put", "d"}, {"put", "e"}}, []string{"c", "d", "e"}},
		{"release head, middle, tail", 5, []step{{"put", "a"}, {"put", "b"}, {"put", "c"}, {"put", "d"}, {"release", "a"}, {"release", "c"}, {"release", "d"}, {"put", "e"}}, []string{"b", "e"}},
		{"freed node reused", 2, []step{{"put", "a"}, {"release", "a"}, {"put", "b"}, {"put", "c"}, {"put", "d"}}, []string{"c", "d"}},
		{"sweep releases the gone", 8, []step{{"put", "a"}, {"put", "gone1"}, {"put", "b"}, {"put", "gone2"}, {"sweep", ""}, {"put", "c"}}, []string{"a", "b", "c"}},
		{"release everything", 3, []step{{"put", "a"}, {"release", "a"}, {"release", "a"}, {"put", "b"}, {"release", "b"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ctxStore{max: tc.max}
			var model []string
			for _, st := range tc.steps {
				switch st.op {
				case "put":
					s.put(st.id, jobCtx{partition: st.id})
					if len(model) >= tc.max {
						model = model[1:]
					}
					model = append(model, st.id)
				case "release":
					s.release(st.id)
					model = slices.DeleteFunc(model, func(x string) bool { return x == st.id })
				case "sweep":
					s.sweepStart()
					for end := false; !end; {
						_, end = s.sweepStep(1, func(id string, _ *jobCtx) (bool, string) { return len(id) > 3 && id[:4] == "gone", "" })
					}
					model = slices.DeleteFunc(model, func(x string) bool { return len(x) > 3 && x[:4] == "gone" })
				}
				if got := s.order(); !slices.Equal(got, model) {
					t.Fatalf("after %v: order %v, want %v", st, got, model)
				}
			}
			if got := s.order(); !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
			for _, id := range tc.want {
				if c, ok := s.get(id); !ok || c.partition != id {
					t.Errorf("context %s: %+v %v", id, c, ok)
				}
			}
		})
	}
}

// order lists the ids oldest first, walking the links both ways.
func (s *ctxStore) order() []string {
	var fwd, back []string
	for i := s.head; i >= 0; i = s.nodes[i].next {
		fwd = append(fwd, s.nodes[i].id)
	}
	for i := s.tail; i >= 0; i = s.nodes[i].prev {
		back = append(back, s.nodes[i].id)
	}
	slices.Reverse(back)
	if !slices.Equal(fwd, back) || len(fwd) != s.len() {
		return append([]string{"broken links:"}, append(fwd, back...)...)
	}
	return fwd
}

// TestDeferralReleasedWhenJobStarts: a deferred job that started is forgotten
// at once, not kept until its begin time plus the TTL.
func TestDeferralReleasedWhenJobStarts(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.DecisionLog = "" })
	f.e.view.mu.Lock()
	f.e.view.deferLocked("started-1", f.clock().Add(time.Minute), f.clock())
	f.e.view.deferLocked("queued-1", f.clock().Add(time.Minute), f.clock())
	f.e.view.mu.Unlock()
	f.installed(nil, []string{"started-1"})
	f.e.view.mu.Lock()
	defer f.e.view.mu.Unlock()
	if f.e.view.takeDeferredLocked("started-1") {
		t.Error("deferral of a job that started kept")
	}
	if !f.e.view.takeDeferredLocked("queued-1") {
		t.Error("deferral of a queued job lost")
	}
}

// TestDeferrals: expiry by begin time, the bound, lazy deletion and the
// rebuild at start, with the heap's stale items bounded by the live ones.
func TestDeferrals(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	keep := 15 * time.Minute
	for _, tc := range []struct {
		name string
		run  func(d *deferrals) (live, gone []string)
	}{
		{"expired past keep", func(d *deferrals) ([]string, []string) {
			d.add("old", t0, t0, keep)
			d.add("young", t0.Add(20*time.Minute), t0, keep)
			d.add("new", t0.Add(30*time.Minute), t0.Add(16*time.Minute), keep)
			return []string{"young", "new"}, []string{"old"}
		}},
		{"bound drops the earliest", func(d *deferrals) ([]string, []string) {
			d.max = 3
			d.add("b", t0.Add(2*time.Minute), t0, keep)
			d.add("a", t0.Add(time.Minute), t0, keep)
			d.add("c", t0.Add(3*time.Minute), t0, keep)
			d.add("d", t0.Add(4*time.Minute), t0, keep)
			return []string{"b", "c", "d"}, []string{"a"}
		}},
		{"taken then re-added", func(d *deferrals) ([]string, []string) {
			d.add("a", t0.Add(time.Minute), t0, keep)
			d.take("a")
			d.add("a", t0.Add(time.Hour), t0.Add(20*time.Minute), keep)
			return []string{"a"}, nil
		}},
		{"load at start", func(d *deferrals) ([]string, []string) {
			d.load(map[string]time.Time{"x": t0.Add(time.Minute), "y": t0.Add(-time.Hour)}, t0, keep)
			return []string{"x"}, []string{"y"}
		}},
		{"churn keeps the heap small", func(d *deferrals) ([]string, []string) {
			for i := 0; i < 10000; i++ {
				id := fmt.Sprint("j", i)
				d.add(id, t0.Add(time.Hour), t0, keep)
				if i%10 != 0 {
					d.take(id)
				}
			}
			if len(d.h) > 2*d.len()+64 {
				t.Errorf("%d heap items for %d deferrals", len(d.h), d.len())
			}
			return []string{"j0", "j9990"}, []string{"j1", "j9999"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d deferrals
			live, gone := tc.run(&d)
			for _, id := range gone {
				if d.take(id) {
					t.Errorf("%s still deferred", id)
				}
			}
			for _, id := range live {
				if !d.take(id) {
					t.Errorf("%s not deferred", id)
				}
			}
		})
	}
}

// TestReservationIndex: job_modify's drop finds the reservation by its id (its
// owner or an admin) or by its job, and the index follows every removal.
func TestReservationIndex(t *testing.T) {
	var v clusterView
	add := func(id, job string, uid uint32) { v.addReservedLocked(reservation{id: id, jobID: job, uid: uid}) }
	add("a", "", 1)
	add("b", "10", 1)
	add("c", "11", 2)
	add("d", "11", 2)
	add("e", "", 3)
	for _, tc := range []struct {
		name  string
		id    string
		uid   uint32
		admin bool
		job   string
		want  []string
	}{
		{"another user's id", "a", 2, false, "", nil},
		{"own id", "a", 1, false, "", []string{"a"}},
		{"by job, both", "", 0, false, "11", []string{"c", "d"}},
		{"id bound to another job", "b", 1, false, "12", nil},
		{"admin by id", "e", 0, true, "", []string{"e"}},
		{"own id and job", "b", 1, false, "10", []string{"b"}},
	} {
		got := v.dropLocked(tc.id, tc.uid, tc.admin, tc.job)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s: dropped %v, want %v", tc.name, got, tc.want)
		}
		for i, r := range v.res.list {
			if v.res.byID[r.id] != i {
				t.Fatalf("%s: index of %s is %d, at %d", tc.name, r.id, v.res.byID[r.id], i)
			}
		}
	}
	if len(v.res.list) != 0 || len(v.res.byID) != 0 || len(v.res.byJob) != 0 {
		t.Fatalf("left: %v %v %v", v.res.list, v.res.byID, v.res.byJob)
	}
}

// TestReservationExpiryOldestFirst: expiry by age walks the reservations in
// the order they were made, skipping those already dropped, and drops exactly
// the ones older than the TTL whatever their place in the slice.
func TestReservationExpiryOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		dropped []string
		after   time.Duration
		want    []string
	}{
		{"none aged", nil, 10 * time.Minute, []string{"r0", "r1", "r2", "r3", "r4", "r5"}},
		{"two aged", nil, 16*time.Minute + 30*time.Second, []string{"r2", "r3", "r4", "r5"}},
		{"aged and dropped mixed", []string{"r0", "r3"}, 17*time.Minute + 30*time.Second, []string{"r4", "r5"}},
		{"all aged", []string{"r5"}, time.Hour, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := clusterView{res: reservationSet{ttl: 15 * time.Minute}}
			for i := 0; i < 6; i++ {
				v.addReservedLocked(reservation{id: fmt.Sprint("r", i), jobID: fmt.Sprint(100 + i%2), uid: 1, at: t0.Add(time.Duration(i) * time.Minute)})
			}
			for _, id := range tc.dropped {
				v.dropLocked(id, 0, true, "")
			}
			v.expireAgedLocked(t0.Add(tc.after))
			var got []string
			for _, r := range v.res.list {
				got = append(got, r.id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
			for i, r := range v.res.list {
				if v.res.byID[r.id] != i {
					t.Fatalf("index of %s is %d, at %d", r.id, v.res.byID[r.id], i)
				}
			}
		})
	}
}

// A user's update whose token does not count (Slurm 22.05 hands the plugin no
// stored comment) finds its job's context by the job id once the queue
// listing bound it, and is placed within the job's own -w; before the binding,
// or with no context at all, it is not pinned (its node list is unknown), and
// nothing it did not know is remembered for the job, so later updates never
// leave that list either.
func TestUserUpdateKeepsItsNodeListByJobID(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.DecisionLog = "" })
	submit := func() (Result, string) {
		sub := job("coscheml:app=heavy-a")
		sub.UserID, sub.SubmitUID, sub.ReqNodes = 1000, 1000, "n3"
		res := f.e.Decide(sub)
		id := comment.ParseComment(res.Comment).DecisionID
		if res.Code != Rewrite || res.ReqNodes != "n3" || id == "" {
			t.Fatalf("submit: %+v", res)
		}
		return res, id
	}
	// 22.05: the update carries the job's comment, but no stored comment, so
	// no token counts for a user's update.
	update := func(jobID uint32, c string) Result {
		return f.e.Decide(JobFields{Comment: c, TresPerNode: "gres:gpu:1", UserID: 1000, SubmitUID: 1000,
			MinNodes: 1, JobID: jobID, Modify: true, Set: FieldComment | FieldTres})
	}
	list := func(l QueueListing) {
		f.advance(time.Minute)
		f.e.poll.queueIDs = func(context.Context) (QueueListing, error) { return l, nil }
		f.e.checkQueue()
	}

	// Job 300: updated before the listing names it.
	res, _ := submit()
	r := update(300, res.Comment)
	if r.Code != Rewrite || r.ReqNodes != "" || r.TresPerNode != "gres:shard:4" {
		t.Fatalf("update before the job id is known: %+v; want a whole GPU, not pinned", r)
	}
	list(QueueListing{comment.ParseComment(r.Comment).DecisionID: "300"})
	if r := update(300, r.Comment); r.ReqNodes != "" {
		t.Fatalf("later update of job 300: %+v; pinned with a node list coscheml never knew", r)
	}

	// Job 301: the listing binds its submit decision first.
	res, id := submit()
	list(QueueListing{id: "301"})
	c := res.Comment
	for i := 0; i < 3; i++ {
		r := update(301, c)
		if r.Code != Rewrite || r.ReqNodes != "n3" {
			t.Fatalf("update %d of a job bound to its context: %+v; want it placed within its own -w n3", i, r)
		}
		c = r.Comment
	}
}
