// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"fmt"
	"github.com/coscheml/coscheml/pkg/comment"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// bigFixture is a 1,000-node x 8-GPU cluster with half its GPUs holding one tagged
// job, installed as the residency reader would install it.
func bigFixture(tb testing.TB) (*fixture, []string) { return bigFixtureNodes(tb, 1000) }

// bigFixtureNodes is bigFixture with the given number of 8-GPU nodes.
func bigFixtureNodes(tb testing.TB, nodes int) (*fixture, []string) {
	f := newFixture(tb, func(c *config.Config) {
		c.Cluster = config.ClusterSpec{Nodes: fmt.Sprintf("n[1-%d]", nodes), GPUsPerNode: 8, GPUMemoryMiB: 80000}
		c.DecisionLog = "" // measured without the log writer's goroutine competing
	})
	rng := rand.New(rand.NewPCG(1, 2))
	var tags []string
	for i := 0; i < 40; i++ {
		tag := fmt.Sprintf("app%02d", i)
		cl := []profile.Class{profile.ClassHPC, profile.ClassTrain, profile.ClassInfer}[i%3]
		f.cat[tag] = prof(tag, cl, 10+rng.Float64()*80)
		tags = append(tags, tag)
	}
	// pair_memory is on by default: give it evidence on 40 pairs (3 users each),
	// so every prediction goes through the memory as it does on a live site.
	var obs []observation.Observation
	for i, tag := range tags {
		for u := 0; u < 3; u++ {
			obs = append(obs, observation.Observation{Tag: tag, CoTags: []string{tags[(i+1)%len(tags)]},
				Speed: 0.5 + 0.4*rng.Float64(), UID: strconv.Itoa(1000 + u)})
		}
	}
	if err := observation.AppendFile(filepath.Join(f.cfg.ObservationDir, "n1.csv"), obs...); err != nil {
		tb.Fatal(err)
	}
	f.e.Reload()
	if f.e.snap.Load().mem.known != len(tags) {
		tb.Fatalf("pair memory knows %d pairs, want %d", f.e.snap.Load().mem.known, len(tags))
	}
	var entries []residency.Entry
	for n := 1; n <= nodes; n++ {
		for g := 0; g < 8; g++ {
			if rng.IntN(2) == 0 {
				continue
			}
			entries = append(entries, residency.Entry{V: 1, JobID: fmt.Sprint(n*100 + g), Node: fmt.Sprintf("n%d", n),
				GPUs: []int{g}, Shards: 2, Tag: tags[rng.IntN(len(tags))], Start: f.now, Expires: f.now.Add(time.Hour)})
		}
	}
	f.e.refresh.mu.Lock()
	f.e.install(f.e.snap.Load(), entries, nil, f.now)
	f.e.refresh.mu.Unlock()
	return f, tags
}

func decideAndForget(f *fixture, j JobFields) Result {
	r := f.e.Decide(j)
	if r.Code == Rewrite {
		d := comment.ParseComment(r.Comment)
		f.e.view.mu.Lock()
		f.e.view.dropLocked(d.DecisionID, j.UserID, false, "")
		f.e.view.mu.Unlock()
	}
	return r
}

func BenchmarkDecide1000x8(b *testing.B) {
	f, tags := bigFixture(b)
	jobs := make([]JobFields, len(tags))
	for i, t := range tags {
		jobs[i] = job("coscheml:app=" + t)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := decideAndForget(f, jobs[i%len(jobs)])
		if r.Code != Rewrite {
			b.Fatalf("decision %+v", r)
		}
	}
}

// latencies are per-decision wall-clock and thread CPU times, sorted.
type latencies struct {
	wall, cpu   []time.Duration
	predictions int64 // model predictions made during the decisions
}

func (l latencies) q(p float64) (wall, cpu time.Duration) {
	i := int(p * float64(len(l.wall)-1))
	return l.wall[i], l.cpu[i]
}

func (l latencies) String() string {
	w50, c50 := l.q(0.5)
	w90, c90 := l.q(0.9)
	w99, c99 := l.q(0.99)
	return fmt.Sprintf("%d decisions, %d predictions: wall p50=%v p90=%v p99=%v max=%v | thread CPU p50=%v p90=%v p99=%v max=%v",
		len(l.wall), l.predictions, w50, w90, w99, l.wall[len(l.wall)-1], c50, c90, c99, l.cpu[len(l.cpu)-1])
}

// measureDecide times n tagged single-GPU decisions cycling through tags. With
// keep, each rewrite's reservation stays (a burst of submissions filling the
// cluster); otherwise it is dropped so the state stays the same. The goroutine is
// locked to its thread: thread CPU time excludes the time the thread waited for
// a CPU, which on a shared, overloaded test machine is most of the wall-clock tail.
func measureDecide(t testing.TB, f *fixture, tags []string, n int, keep bool) (latencies, int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := latencies{wall: make([]time.Duration, 0, n), cpu: make([]time.Duration, 0, n)}
	rewrites := 0
	p0 := smPredictions.Load()
	for i := 0; i < n; i++ {
		j := job("coscheml:app=" + tags[i%len(tags)])
		c0 := threadCPU()
		start := time.Now()
		r := f.e.Decide(j)
		l.wall = append(l.wall, time.Since(start))
		l.cpu = append(l.cpu, threadCPU()-c0)
		if r.Code == Rewrite {
			rewrites++
			if !keep {
				d := comment.ParseComment(r.Comment)
				f.e.view.mu.Lock()
				f.e.view.dropLocked(d.DecisionID, j.UserID, false, "")
				f.e.view.mu.Unlock()
			}
		}
	}
	slices.Sort(l.wall)
	slices.Sort(l.cpu)
	l.predictions = smPredictions.Load() - p0
	return l, rewrites
}

// BenchmarkDecideLatencyReport is the latency distribution of Decide on the
// big cluster: each of b.N decisions is timed with the wall clock and the
// thread's CPU clock, and p50/p90/p99 are reported as metrics, the full
// distribution and a histogram in the log (see docs/performance-submit.md;
// -benchtime 3000x is the sample the figures there were taken on).
func BenchmarkDecideLatencyReport(b *testing.B) {
	f, tags := bigFixture(b)
	b.ResetTimer()
	l, rewrites := measureDecide(b, f, tags, b.N, false)
	b.StopTimer()
	reportLatency(b, l)
	b.Logf("Decide on 1000 nodes x 8 GPUs, half busy (%d rewrites): %v", rewrites, l)
	// A coarse histogram in powers of two microseconds.
	hist := map[int]int{}
	for _, d := range l.wall {
		us := 1
		for time.Duration(us)*time.Microsecond < d {
			us *= 2
		}
		hist[us]++
	}
	var buckets []int
	for us := range hist {
		buckets = append(buckets, us)
	}
	slices.Sort(buckets)
	for _, us := range buckets {
		b.Logf("  <= %5d us: %d", us, hist[us])
	}
}

// BenchmarkDecideLatencyAt8192 is the decision at 1,024 nodes x 8 GPUs with
// the residency the plugin really holds, one sub-benchmark per situation, in
// this order on one fixture: running jobs on half the GPUs (warm), then also a
// burst of kept reservations, then the first decisions after a residency
// change, after a full rebuild, with cold caches, and after a model reload
// (cold prediction memo). Each reports p50/p90/p99 (figures in
// docs/performance-submit.md; -benchtime 3000x is their sample).
func BenchmarkDecideLatencyAt8192(b *testing.B) {
	f, tags := bigFixtureNodes(b, 1024)
	measureDecide(b, f, tags, 500, false) // warm-up: memo and caches
	b.Run("warm", func(b *testing.B) {
		l, _ := measureDecide(b, f, tags, b.N, false)
		b.StopTimer()
		reportLatency(b, l)
		b.Logf("8,192 GPUs, half running, warm memo: %v", l)
	})

	_, kept := measureDecide(b, f, tags, 2000, true)
	b.Run("reserved", func(b *testing.B) {
		l, _ := measureDecide(b, f, tags, b.N, false)
		b.StopTimer()
		reportLatency(b, l)
		b.Logf("8,192 GPUs, half running + %d reservations, warm memo: %v", kept, l)
	})

	// The background loop refreshes the cluster after every residency change
	// (every 500 ms on a busy site): time the first decisions after each. A
	// change of a few jobs is applied in place (delta.go); a full rebuild
	// (a restart, a change of more than maxDeltaJobs jobs) walks every GPU.
	reinstall := func(entries []residency.Entry) {
		f.e.refresh.mu.Lock()
		f.e.install(f.e.snap.Load(), entries, nil, f.now)
		f.e.refresh.mu.Unlock()
	}
	round := 0
	b.Run("residency-change", func(b *testing.B) {
		l := measureAfterEach(b, f, tags, 100, func() {
			round++
			reinstall(churn(f.e.refresh.entries, 16, round))
		})
		reportLatency(b, l)
		b.Logf("8,192 GPUs, first 100 decisions after each residency change (16 jobs ended, 16 started): %v", l)
	})
	b.Run("full-rebuild", func(b *testing.B) {
		l := measureAfterEach(b, f, tags, 100, func() {
			f.e.refresh.builtFor = nil // as after a change too large for an update in place
			reinstall(f.e.refresh.entries)
		})
		reportLatency(b, l)
		b.Logf("8,192 GPUs, first 100 decisions after each full rebuild: %v", l)
	})

	// In slurmctld the worker sleeps between two submissions while slurmctld
	// works: the decision's data and code are then out of the CPU's caches.
	// Time single decisions each after writing twice this machine's per-core
	// L2 (2 x 4 MiB).
	evict := make([]byte, 8<<20)
	b.Run("cold-caches", func(b *testing.B) {
		l := measureAfterEach(b, f, tags, 1, func() {
			for i := range evict {
				evict[i]++
			}
		})
		reportLatency(b, l)
		b.Logf("8,192 GPUs, decisions each after 8 MiB written (cold caches): %v", l)
	})

	// Each reload builds a new policy, so its memo starts empty: time the first
	// decisions after it, over several reloads.
	running := f.e.refresh.entries // the fixture's residency, installed without files
	b.Run("after-reload", func(b *testing.B) {
		l := measureAfterEach(b, f, tags, 100, func() { f.e.Reload(); reinstall(running) })
		reportLatency(b, l)
		b.Logf("8,192 GPUs, same residency, first 100 decisions after each reload (cold memo): %v", l)
	})
}

// reportLatency reports l's percentiles as b's metrics (nanoseconds, wall
// clock and thread CPU).
func reportLatency(b *testing.B, l latencies) {
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		wall, cpu := l.q(p.q)
		b.ReportMetric(float64(wall.Nanoseconds()), p.name+"-ns")
		b.ReportMetric(float64(cpu.Nanoseconds()), p.name+"-cpu-ns")
	}
}

// churn returns entries with the first n jobs ended and n new ones started
// on their GPUs (a residency change between two refreshes).
func churn(entries []residency.Entry, n, round int) []residency.Entry {
	out := slices.Clone(entries)
	for i := range out[:n] {
		out[i].JobID = fmt.Sprintf("%d%03d", 900000+round, i)
		out[i].Tag = entries[(i+round)%len(entries)].Tag
	}
	return out
}

// measureAfterEach times b.N decisions in rounds of perRound, running before
// (with b's timer stopped) ahead of each round, and pools the rounds'
// latencies.
func measureAfterEach(b *testing.B, f *fixture, tags []string, perRound int, before func()) latencies {
	var all latencies
	for left := b.N; left > 0; left -= perRound {
		b.StopTimer()
		before()
		b.StartTimer()
		l, _ := measureDecide(b, f, tags, min(perRound, left), false)
		all.wall = append(all.wall, l.wall...)
		all.cpu = append(all.cpu, l.cpu...)
		all.predictions += l.predictions
	}
	b.StopTimer()
	slices.Sort(all.wall)
	slices.Sort(all.cpu)
	return all
}

// BenchmarkInstall1000x8 is the background rebuild of the cluster after the
// residency changed (outside the decision lock).
func BenchmarkInstall1000x8(b *testing.B) {
	f, _ := bigFixture(b)
	f.e.refresh.mu.Lock()
	defer f.e.refresh.mu.Unlock()
	st, entries := f.e.snap.Load(), f.e.refresh.entries
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.e.refresh.builtFor = nil // a full rebuild, not an update in place
		f.e.install(st, entries, nil, f.now)
	}
}

// BenchmarkInstallDelta1000x8 is the background refresh after a residency
// change of 16 jobs ended and 16 started, applied in place (delta.go).
func BenchmarkInstallDelta1000x8(b *testing.B) {
	f, _ := bigFixture(b)
	f.e.refresh.mu.Lock()
	defer f.e.refresh.mu.Unlock()
	st, a := f.e.snap.Load(), f.e.refresh.entries
	c := churn(a, 16, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			f.e.install(st, c, nil, f.now)
		} else {
			f.e.install(st, a, nil, f.now)
		}
	}
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, Linux).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkDecideCold8192 is one decision after 8 MiB were written (twice this
// machine's per-core L2): a decision inside slurmctld, whose own work between two
// submissions evicts the decision's code and data.
func BenchmarkDecideCold8192(b *testing.B) {
	f, tags := bigFixtureNodes(b, 1024)
	jobs := make([]JobFields, len(tags))
	for i, t := range tags {
		jobs[i] = job("coscheml:app=" + t)
	}
	for i := 0; i < 500; i++ {
		decideAndForget(f, jobs[i%len(jobs)])
	}
	evict := make([]byte, 8<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evictCaches(b, evict)
		decideAndForget(f, jobs[i%len(jobs)])
	}
}

// evictCaches writes every byte of evict (twice this machine's per-core L2)
// with b's timer stopped: what slurmctld's own work between two submissions
// does to the decision's code and data.
func evictCaches(b *testing.B, evict []byte) {
	b.StopTimer()
	for k := range evict {
		evict[k]++
	}
	b.StartTimer()
}

// BenchmarkIDMAC is the decision id's MAC (signIDBytes), warm and after 8 MiB
// were written (cold caches: the case inside slurmctld).
func BenchmarkIDMAC(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	base := []byte("c7-123456")
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			signIDBytes(key, base, 4, 1000, "")
		}
	})
	b.Run("cold", func(b *testing.B) {
		evict := make([]byte, 8<<20)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			evictCaches(b, evict)
			signIDBytes(key, base, 4, 1000, "")
		}
	})
}
