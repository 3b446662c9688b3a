// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/residency"
)

// BenchmarkSustainedWeek is a week at a large site through the real engine:
// 1,024 nodes x 8 GPUs, 100 tagged decisions a simulated minute (1,008,000 in
// the week: submissions, users' job_modify, the re-decide loop's updates of
// deferred waits), jobs that start, run and end (residency entries appear and
// go, done markers), cancellations (the queue check), and two slurmctld
// restarts (a new Engine rebuilt from the decision log on disk). It reports the
// decision's p99 thread CPU in the first and the last simulated hour and the
// heap's growth between them, and fails when a queued job's reservation or job
// context is wrong at the end. One iteration is the whole week (minutes):
//
//	go test -run '^$' -bench BenchmarkSustainedWeek -benchtime 1x ./pkg/submit
//
// COSCHEML_WEEK_DAYS (or -short: 1) shortens the simulated time.
func BenchmarkSustainedWeek(b *testing.B) {
	days := 7.0
	if testing.Short() {
		days = 1
	}
	if s := os.Getenv("COSCHEML_WEEK_DAYS"); s != "" {
		d, err := strconv.ParseFloat(s, 64)
		if err != nil || d <= 0 {
			b.Fatalf("COSCHEML_WEEK_DAYS=%q: want a positive number of days", s)
		}
		days = d
	}
	for range b.N {
		runWeek(b, int(days*24*60))
	}
}

// Per simulated minute: decisions made, and the share of them that are users'
// updates of queued jobs (the rest: new submissions, or the loop's updates of
// deferred waits when due).
const (
	weekPerMinute  = 100
	weekModifyRate = 0.12
	weekUsers      = 200
	// weekRefreshMinutes: how often the residency is installed (a site's
	// refresh runs every 500 ms; the simulation batches a minute's changes,
	// fewer than maxDeltaJobs: applied in place, as on a site).
	weekRefreshMinutes = 1
	// weekSeeded jobs already run at the start, ending over its first two
	// hours, so the first hour is measured on a loaded cluster as the last.
	weekSeeded = 5000
)

type weekJob struct {
	id, comment, tres string
	uid               uint32
	jobID             uint32
	jobIDs            string
	tag               string
	part, req, exc    string // what the job asked for
	node              string // the pin ("": none)
	gpus              []int
	shards            int
	decided           time.Time
	epoch             int  // the engine that made the last decision
	ctxLost           bool // decided again by an engine that never knew its context
	startAt, endAt    time.Time
	cancelAt          time.Time
	deferUntil        time.Time // a deferred wait: the loop updates it then
	tries             int
	running           bool
	// loopSigned: the re-decide loop's update (root's, as the shim hands it)
	// signed the job's token for uid 0, which its user's own update then
	// no longer presents validly: the simulation updates such jobs no more.
	loopSigned bool
	pos        int // index in its list (pending or running)
}

type weekSim struct {
	b        *testing.B
	f        *fixture
	rng      *rand.Rand
	tags     []string
	nodes    int
	nextJob  uint32
	epoch    int
	pending  []*weekJob // queued: pinned, deferred, or waiting long
	running  []*weekJob
	fresh    []*weekJob // decided this minute, pin not read yet
	deferred []*weekJob // by deferUntil (wait_defer is constant: FIFO)
	done     []weekDone
	counts   map[string]int
	cpu      []time.Duration // the current hour's decisions
}

type weekDone struct {
	id string
	at time.Time
}

func runWeek(b *testing.B, minutes int) {
	b.StopTimer()
	const nodes = 1024
	f := newFixture(b, func(c *config.Config) {
		c.Cluster = config.ClusterSpec{Nodes: fmt.Sprintf("n[1-%d]", nodes), GPUsPerNode: 8, GPUMemoryMiB: 80000}
		c.WaitDefer = 2 * time.Minute
	})
	s := &weekSim{b: b, f: f, rng: rand.New(rand.NewPCG(7, 11)), nodes: nodes, nextJob: 1000, counts: map[string]int{}}
	for i := 0; i < 40; i++ {
		tag := fmt.Sprintf("app%02d", i)
		cl := []profile.Class{profile.ClassHPC, profile.ClassTrain, profile.ClassInfer}[i%3]
		f.cat[tag] = prof(tag, cl, 10+s.rng.Float64()*80)
		s.tags = append(s.tags, tag)
	}
	for i := 0; i < weekSeeded; i++ {
		s.nextJob++
		j := &weekJob{jobID: s.nextJob, jobIDs: strconv.Itoa(int(s.nextJob)), tag: s.tags[s.rng.IntN(len(s.tags))], running: true,
			node: fmt.Sprintf("n%d", 1+s.rng.IntN(nodes)), gpus: []int{s.rng.IntN(8)}, shards: 2, startAt: f.clock().Add(-time.Hour),
			endAt: f.clock().Add(time.Duration(s.rng.Int64N(int64(2 * time.Hour))))}
		j.pos = len(s.running)
		s.running = append(s.running, j)
	}
	// The re-decide loop runs all week: waits are deferred.
	if err := redecide.WriteHeartbeat(f.cfg.HeartbeatPath(), f.clock().Add(time.Duration(minutes+24*60)*time.Minute)); err != nil {
		b.Fatal(err)
	}
	f.e.Reload()

	// Closes the engine running at the end; one closure for all, so that an
	// engine a restart replaced is not kept alive (the heap's growth is the
	// running engine's).
	b.Cleanup(func() { s.f.e.Close() })

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ms runtime.MemStats
	var p99First, p99Last time.Duration
	var heapFirst uint64
	b.StartTimer()
	for m := 1; m <= minutes; m++ {
		if m == minutes/3 || m == 2*minutes/3 {
			s.restart()
		}
		for k := 0; k < weekPerMinute; k++ {
			s.decideOne()
			f.advance(time.Minute / weekPerMinute)
		}
		s.minute(m)
		switch {
		case m == 60:
			p99First = p99(s.cpu)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			heapFirst = ms.HeapAlloc
		case m == minutes:
			p99Last = p99(s.cpu)
		}
		if m%60 == 0 {
			if m%(24*60) == 0 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				b.Logf("day %d, last hour: thread CPU p50 %v p99 %v; heap %.1f MiB; %d queued, %d running, %d contexts held",
					m/(24*60), pct(s.cpu, 0.5), pct(s.cpu, 0.99), float64(ms.HeapAlloc)/(1<<20), len(s.pending), len(s.running), s.contexts())
			}
			s.cpu = s.cpu[:0]
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	s.check()
	b.ReportMetric(float64(p99First.Nanoseconds())/1e3, "p99_first_hour_us")
	b.ReportMetric(float64(p99Last.Nanoseconds())/1e3, "p99_last_hour_us")
	b.ReportMetric((float64(ms.HeapAlloc)-float64(heapFirst))/(1<<20), "heap_growth_mib")
	b.Logf("%d minutes, %d decisions: %v; heap %.1f MiB after the first hour, %.1f MiB at the end",
		minutes, minutes*weekPerMinute, s.counts, float64(heapFirst)/(1<<20), float64(ms.HeapAlloc)/(1<<20))
}

func p99(d []time.Duration) time.Duration { return pct(d, 0.99) }

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	c := slices.Clone(d)
	slices.Sort(c)
	return c[int(p*float64(len(c)-1))]
}

// contexts counts the job contexts the engine holds (those of the queued jobs
// the simulation knows, since the others are released).
func (s *weekSim) contexts() int {
	n := 0
	s.f.e.view.mu.Lock()
	defer s.f.e.view.mu.Unlock()
	for _, j := range s.pending {
		if s.f.e.view.ctxLocked(j.id) != nil {
			n++
		}
	}
	return n
}

// decide runs one decision on this thread and keeps its thread CPU time.
func (s *weekSim) decide(j JobFields) Result {
	c0 := threadCPU()
	r := s.f.e.Decide(j)
	s.cpu = append(s.cpu, threadCPU()-c0)
	return r
}

func (s *weekSim) decideOne() {
	now := s.f.clock()
	for len(s.deferred) > 0 && s.deferred[0].pos < 0 {
		s.deferred = s.deferred[1:] // cancelled while deferred
	}
	switch {
	case len(s.deferred) > 0 && !s.deferred[0].deferUntil.After(now):
		j := s.deferred[0]
		s.deferred = s.deferred[1:]
		j.loopSigned = true
		s.redecide(j, JobFields{Comment: j.comment, TresPerNode: j.tres, MinNodes: 1, JobID: j.jobID, Modify: true, Admin: true}, "loop")
	case s.rng.Float64() < weekModifyRate && len(s.pending) > 0:
		j := s.pending[s.rng.IntN(len(s.pending))]
		if !j.deferUntil.IsZero() || j.running || j.loopSigned {
			s.submit()
			return
		}
		m := JobFields{Comment: j.comment, TresPerNode: "gres:gpu:1", UserID: j.uid, SubmitUID: j.uid, MinNodes: 1, JobID: j.jobID, Modify: true}
		if j.req == "" && s.rng.IntN(3) == 0 {
			m.ExcNodes = fmt.Sprintf("n%d", 1+s.rng.IntN(s.nodes))
			j.exc = m.ExcNodes
		}
		s.redecide(j, m, "modify")
	default:
		s.submit()
	}
}

func (s *weekSim) submit() {
	now := s.f.clock()
	j := &weekJob{uid: uint32(1000 + s.rng.IntN(weekUsers)), tag: s.tags[s.rng.IntN(len(s.tags))], part: []string{"gpu", "long"}[s.rng.IntN(2)]}
	switch r := s.rng.IntN(20); {
	case r < 2:
		j.exc = fmt.Sprintf("n%d", 1+s.rng.IntN(s.nodes))
	case r < 3:
		j.req = fmt.Sprintf("n%d", 1+s.rng.IntN(s.nodes))
	}
	in := job("coscheml:app=" + j.tag)
	in.UserID, in.SubmitUID, in.Partition, in.ReqNodes, in.ExcNodes = j.uid, j.uid, j.part, j.req, j.exc
	in.TimeLimit = uint32(60 + s.rng.IntN(180))
	res := s.decide(in)
	s.nextJob++
	j.jobID, j.jobIDs = s.nextJob, strconv.Itoa(int(s.nextJob))
	if !s.took(j, res, "submit") {
		return
	}
	switch r := s.rng.Float64(); {
	case r < 0.05:
		j.cancelAt = now.Add(time.Minute + time.Duration(s.rng.Int64N(int64(2*time.Hour))))
	case r < 0.15:
		j.startAt = now.Add(time.Hour + time.Duration(s.rng.Int64N(int64(47*time.Hour))))
	default:
		j.startAt = now.Add(time.Minute + time.Duration(s.rng.Int64N(int64(9*time.Minute))))
	}
	j.endAt = j.startAt.Add(20*time.Minute + time.Duration(s.rng.Int64N(int64(100*time.Minute))))
	j.pos = len(s.pending)
	s.pending = append(s.pending, j)
}

// took records a decision's answer on j; false when the job is no longer the
// simulation's to follow (passed through, or unpinned: Slurm places it).
func (s *weekSim) took(j *weekJob, res Result, what string) bool {
	d := comment.ParseComment(res.Comment)
	if res.Code != Rewrite || d.DecisionID == "" {
		s.counts[what+" unchanged"]++
		return false
	}
	j.id, j.comment, j.tres, j.decided, j.node, j.gpus = d.DecisionID, res.Comment, res.TresPerNode, s.f.clock(), res.ReqNodes, nil
	j.epoch = s.epoch
	if j.req != "" && res.ReqNodes != "" && res.ReqNodes != j.req || j.exc != "" && res.ReqNodes == j.exc {
		// A user's update never moves a job outside its own node list, also
		// when a restart forgot its context; only the loop's (an
		// administrator's) may, after a restart.
		if !j.ctxLost || what == "modify" {
			s.b.Fatalf("%s of job %d pinned to %s despite -w %q -x %q: %+v", what, j.jobID, res.ReqNodes, j.req, j.exc, res)
		}
	}
	j.deferUntil = time.Time{}
	switch {
	case res.ReqNodes != "":
		s.counts[what+" pinned"]++
		s.fresh = append(s.fresh, j)
		return true
	case res.BeginTime != 0 && j.tries < 5:
		s.counts[what+" deferred"]++
		j.deferUntil = time.Unix(res.BeginTime, 0)
		j.tries++
		s.deferred = append(s.deferred, j)
		return true
	}
	s.counts[what+" unpinned"]++
	return false
}

// redecide runs an update of queued job j and follows its new answer.
func (s *weekSim) redecide(j *weekJob, m JobFields, what string) {
	if j.epoch != s.epoch {
		j.ctxLost = true // a restart forgot the job's context, by design
	}
	res := s.decide(m)
	if !s.took(j, res, what) {
		s.removePending(j)
		return
	}
	if !j.startAt.IsZero() && j.startAt.Before(s.f.clock()) {
		j.startAt = s.f.clock().Add(time.Minute)
		j.endAt = j.startAt.Add(time.Hour)
	}
}

func (s *weekSim) removePending(j *weekJob) {
	if j.pos < len(s.pending) && s.pending[j.pos] == j {
		last := s.pending[len(s.pending)-1]
		s.pending[j.pos], last.pos = last, j.pos
		s.pending = s.pending[:len(s.pending)-1]
	}
	j.pos = -1
}

// minute reads the new pins, starts, ends and cancels jobs, installs the
// residency as a refresh would, and lists the queue every five minutes.
func (s *weekSim) minute(m int) {
	now := s.f.clock()
	s.readPins()
	for i := 0; i < len(s.pending); {
		j := s.pending[i]
		switch {
		case !j.cancelAt.IsZero() && !j.cancelAt.After(now):
			s.counts["cancelled"]++
			s.removePending(j)
			continue
		case j.deferUntil.IsZero() && !j.startAt.IsZero() && !j.startAt.After(now) && j.node != "" && len(j.gpus) > 0:
			s.removePending(j)
			j.running, j.pos = true, len(s.running)
			s.running = append(s.running, j)
			s.counts["started"]++
			continue
		}
		i++
	}
	for i := 0; i < len(s.running); {
		j := s.running[i]
		if j.endAt.After(now) {
			i++
			continue
		}
		last := s.running[len(s.running)-1]
		s.running[i], last.pos = last, i
		s.running = s.running[:len(s.running)-1]
		if j.id != "" { // not a job running before the week
			s.done = append(s.done, weekDone{id: j.id, at: now})
		}
		s.counts["ended"]++
	}
	for len(s.done) > 0 && now.Sub(s.done[0].at) > residency.DoneTTL {
		s.done = s.done[1:]
	}
	if m%weekRefreshMinutes != 0 {
		return
	}
	entries := make([]residency.Entry, 0, len(s.running))
	for _, j := range s.running {
		entries = append(entries, residency.Entry{V: 1, JobID: j.jobIDs, Node: j.node, GPUs: j.gpus, Shards: j.shards,
			Tag: j.tag, DecisionID: j.id, Start: j.startAt, Expires: j.endAt.Add(time.Hour)})
	}
	done := make([]string, len(s.done))
	for i := range s.done {
		done[i] = s.done[i].id
	}
	s.f.e.refresh.mu.Lock()
	s.f.e.install(s.f.e.snap.Load(), entries, done, now)
	s.f.e.refresh.mu.Unlock()
	if m%5 == 0 {
		queue := make(QueueListing, len(s.pending)+len(s.running))
		for _, j := range s.pending {
			queue[j.id] = j.jobIDs
		}
		for _, j := range s.running {
			queue[j.id] = j.jobIDs
		}
		s.f.e.poll.queueIDs = func(context.Context) (QueueListing, error) { return queue, nil }
		s.f.e.checkQueue()
	}
}

// readPins reads the GPUs of this minute's pinned decisions from their
// reservations (the Prolog learns them from the job's shards the same way).
func (s *weekSim) readPins() {
	if len(s.fresh) == 0 {
		return
	}
	rvs := map[string]reservation{}
	for _, r := range s.f.e.view.reservations() {
		rvs[r.id] = r
	}
	for _, j := range s.fresh {
		if r, ok := rvs[j.id]; ok && j.node != "" {
			j.gpus, j.shards = r.gpus, r.slots
		} else if j.node != "" {
			s.counts["pin without reservation"]++
		}
	}
	s.fresh = s.fresh[:0]
}

// restart closes the engine and starts a new one on the same files, as a
// slurmctld restart does; the background refresh installs the residency.
func (s *weekSim) restart() {
	s.readPins()
	s.f.e.Close()
	s.f.e = New(s.f.sources(), Options{Now: s.f.clock})
	s.epoch++
	s.counts["restarts"]++
	s.f.advance(time.Second)
	s.minute(weekRefreshMinutes) // the first refresh
}

// check fails the benchmark when a queued job's reservation or context is not
// what its last decision made: a pinned job decided within the reservation TTL
// has its reservation on its node and GPUs; every queued job decided since the
// last restart has its partition, -w and -x.
func (s *weekSim) check() {
	s.readPins()
	now := s.f.clock()
	rvs := map[string]reservation{}
	for _, r := range s.f.e.view.reservations() {
		rvs[r.id] = r
	}
	st := s.f.e.snap.Load()
	var resChecked, ctxChecked, lost int
	for _, j := range s.pending {
		if j.node != "" && len(j.gpus) > 0 && now.Sub(j.decided) < s.f.e.opts.ReservationTTL-time.Minute {
			r, ok := rvs[j.id]
			if !ok || st.nodes[r.node] != j.node || !slices.Equal(r.gpus, j.gpus) {
				s.b.Fatalf("job %d (decision %s, %v ago) lost its reservation on %s GPUs %v: %+v", j.jobID, j.id, now.Sub(j.decided), j.node, j.gpus, r)
			}
			resChecked++
		}
		if j.epoch != s.epoch || j.ctxLost {
			lost++
			continue
		}
		s.f.e.view.mu.Lock()
		c := s.f.e.view.ctxLocked(j.id)
		s.f.e.view.mu.Unlock()
		if c == nil || c.partition != j.part || c.reqNodes != j.req || c.excNodes != j.exc {
			s.b.Fatalf("job %d (decision %s, %v ago) lost its context (partition %q -w %q -x %q): %+v", j.jobID, j.id, now.Sub(j.decided), j.part, j.req, j.exc, c)
		}
		ctxChecked++
	}
	if resChecked == 0 || ctxChecked == 0 {
		s.b.Fatalf("nothing checked: %d reservations, %d contexts of %d queued jobs", resChecked, ctxChecked, len(s.pending))
	}
	s.b.Logf("at the end: %d queued jobs, %d reservations and %d contexts right; %d queued since before the last restart (contexts not kept across restarts)",
		len(s.pending), resChecked, ctxChecked, lost)
}
