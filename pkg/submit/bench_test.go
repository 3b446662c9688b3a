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
func bigFixture(tb testing.TB) (*fixture, []string) {
	f := newFixture(tb, func(c *config.Config) {
		c.Cluster = config.ClusterSpec{Nodes: "n[1-1000]", GPUsPerNode: 8, GPUMemoryMiB: 80000}
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
	for n := 1; n <= 1000; n++ {
		for g := 0; g < 8; g++ {
			if rng.IntN(2) == 0 {
				continue
			}
			entries = append(entries, residency.Entry{V: 1, JobID: fmt.Sprint(n*100 + g), Node: fmt.Sprintf("n%d", n),
				GPUs: []int{g}, Shards: 2, Tag: tags[rng.IntN(len(tags))], Start: f.now, Expires: f.now.Add(time.Hour)})
		}
	}
	f.e.bgMu.Lock()
	f.e.install(f.e.snap.Load(), entries, nil, f.now)
	f.e.bgMu.Unlock()
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

// TestDecideLatencyReport measures the latency distribution of Decide on the big
// cluster and only reports it (run with -v; see docs/performance-submit.md).
func TestDecideLatencyReport(t *testing.T) {
	if testing.Short() {
		t.Skip("report only")
	}
	f, tags := bigFixture(t)
	const n = 3000
	lat := make([]time.Duration, 0, n)
	cpu := make([]time.Duration, 0, n)
	rewrites := 0
	// Thread CPU time excludes the time the thread waited for a CPU: on a shared,
	// overloaded test machine the wall-clock tail is mostly preemption.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < n; i++ {
		j := job("coscheml:app=" + tags[i%len(tags)])
		c0 := threadCPU()
		start := time.Now()
		r := f.e.Decide(j)
		lat = append(lat, time.Since(start))
		cpu = append(cpu, threadCPU()-c0)
		if r.Code == Rewrite {
			rewrites++
			d := comment.ParseComment(r.Comment)
			f.e.view.mu.Lock()
			f.e.view.dropLocked(d.DecisionID, j.UserID, false, "")
			f.e.view.mu.Unlock()
		}
	}
	slices.Sort(lat)
	slices.Sort(cpu)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	qc := func(p float64) time.Duration { return cpu[int(p*float64(len(cpu)-1))] }
	// A coarse histogram in powers of two microseconds.
	hist := map[int]int{}
	for _, d := range lat {
		b := 1
		for time.Duration(b)*time.Microsecond < d {
			b *= 2
		}
		hist[b]++
	}
	var buckets []int
	for b := range hist {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	t.Logf("Decide on 1000 nodes x 8 GPUs, half busy: %d decisions (%d rewrites) p50=%v p90=%v p99=%v max=%v",
		n, rewrites, q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
	t.Logf("thread CPU time per decision: p50=%v p90=%v p99=%v max=%v", qc(0.5), qc(0.9), qc(0.99), cpu[len(cpu)-1])
	for _, b := range buckets {
		t.Logf("  <= %5d us: %d", b, hist[b])
	}
}

// BenchmarkInstall1000x8 is the background rebuild of the cluster after the
// residency changed (outside the decision lock).
func BenchmarkInstall1000x8(b *testing.B) {
	f, _ := bigFixture(b)
	f.e.bgMu.Lock()
	defer f.e.bgMu.Unlock()
	st, entries := f.e.snap.Load(), f.e.entries
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.e.install(st, entries, nil, f.now)
	}
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, Linux).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}
