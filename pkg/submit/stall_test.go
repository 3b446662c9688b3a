// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/nohang"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
)

// hungFile is a FIFO standing in for a file on a hung shared file system: a plain
// open(2) of it blocks until release opens the other end.
type hungFile struct {
	path string
}

func newHungFile(t *testing.T) *hungFile {
	t.Helper()
	h := &hungFile{path: filepath.Join(t.TempDir(), "hung")}
	if err := syscall.Mkfifo(h.path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.release)
	return h
}

// block opens the FIFO for reading as a careless reader would (no O_NONBLOCK).
func (h *hungFile) block() {
	if f, err := os.Open(h.path); err == nil {
		f.Close()
	}
}

// release lets every blocked reader go (opening the write end non-blocking
// succeeds only while a reader waits, so repeat briefly).
func (h *hungFile) release() {
	for i := 0; i < 50; i++ {
		f, err := os.OpenFile(h.path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			f.Close()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The first load runs in the background: while the configuration hangs, jobs pass
// through unchanged (one log line), coscheml_init's wait and Close are bounded,
// and once the file system answers the engine decides.
func TestFirstLoadHangsAsync(t *testing.T) {
	f := newFixture(t, nil)
	hung := newHungFile(t)
	src := f.sources()
	inner := src.LoadConfig
	src.LoadConfig = func(p string) (config.Config, error) {
		hung.block()
		return inner(p)
	}
	prepped := false
	e := NewAsync(src, Options{Now: f.clock, CloseWait: 100 * time.Millisecond, ResidencyEvery: 10 * time.Millisecond},
		func(s Sources) (Sources, string) { prepped = true; return s, "prep note" })
	nohang.Call(t, "Start with a hung configuration", func() error { e.Start(); return nil })
	if e.WaitReady(50 * time.Millisecond) {
		t.Fatal("ready although the configuration hangs")
	}
	for i, want := range []string{"first load", ""} {
		var r Result
		nohang.Call(t, "Decide during a hung first load", func() error { r = e.Decide(job("coscheml:app=light-a coscheml-id=x-1:2")); return nil })
		// Passed through, and the token no controller issued is still removed.
		if r.Code != Rewrite || r.TresPerNode != "" || r.ReqNodes != "" || strings.Contains(r.Comment, "coscheml-id") {
			t.Fatalf("during the hung load: %+v", r)
		}
		if (want == "") == strings.Contains(logOf(r), "first load") || (want != "" && !strings.Contains(logOf(r), want)) {
			t.Fatalf("job %d log %q: the problem is logged once", i, logOf(r))
		}
	}
	if ps := strings.Join(e.Problems(), "\n"); !strings.Contains(ps, "first load") {
		t.Fatalf("problems: %q", ps)
	}
	hung.release()
	if !e.WaitReady(nohang.Bound) {
		t.Fatal("not ready after the file system answered")
	}
	if !prepped {
		t.Fatal("prep did not run in the first load")
	}
	var r Result
	for i := 0; i < 200; i++ {
		if r = e.Decide(job("coscheml:app=light-a")); r.Code == Rewrite && r.ReqNodes != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.ReqNodes == "" || !strings.Contains(logOf(r), "prep note") {
		t.Fatalf("after the load: %+v", r)
	}
	nohang.Call(t, "Close", func() error { e.Close(); return nil })
}

// Close never waits on a hung load (coscheml_fini runs in slurmctld's shutdown).
func TestCloseBoundedDuringHungLoad(t *testing.T) {
	f := newFixture(t, nil)
	hung := newHungFile(t)
	src := f.sources()
	src.LoadConfig = func(p string) (config.Config, error) { hung.block(); return f.cfg, nil }
	e := NewAsync(src, Options{Now: f.clock, CloseWait: 50 * time.Millisecond}, nil)
	e.Start()
	nohang.Call(t, "Close during a hung first load", func() error { e.Close(); return nil })
}

// The watchdog: a refresh stuck in a hung file system makes jobs pass through
// unchanged with one log line and a problem; reservations still expire; when the
// refresh completes again, decisions resume and the problem clears.
func TestWatchdogStaleView(t *testing.T) {
	f := newFixture(t, nil)
	hung := newHungFile(t)
	var hang atomicBool
	src := f.sources()
	src.LoadCatalog = func(string, int) (profile.Catalog, []error, error) {
		if hang.get() {
			hung.block()
		}
		return f.cat, nil, nil
	}
	e := New(src, Options{Now: f.clock, ResidencyEvery: 5 * time.Millisecond, ReloadEvery: 5 * time.Millisecond,
		StaleAfter: 200 * time.Millisecond, CloseWait: 100 * time.Millisecond})
	e.Start()
	defer e.Close()
	a := e.Decide(job("coscheml:app=heavy-a"))
	if a.ReqNodes == "" {
		t.Fatalf("before the hang: %+v", a)
	}
	hang.set(true)
	e.RequestReload() // the reload hangs in the profile folder
	var r Result
	deadline := time.Now().Add(nohang.Bound)
	for {
		nohang.Call(t, "Decide with a hung refresh", func() error { r = e.Decide(job("coscheml:app=light-b")); return nil })
		if strings.Contains(logOf(r), "stale") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.Code != Unchanged || !strings.Contains(logOf(r), "cluster view stale") {
		t.Fatalf("stale view: %+v", r)
	}
	if r2 := e.Decide(job("coscheml:app=light-b")); r2.Code != Unchanged || strings.Contains(logOf(r2), "stale") {
		t.Fatalf("second job while stale (logged once): %+v", r2)
	}
	if ps := strings.Join(e.Problems(), "\n"); !strings.Contains(ps, "stale") {
		t.Fatalf("problems: %q", ps)
	}
	if fams := e.stateFamilies(); fams[1].Samples[0].Value < 0.2 {
		t.Fatalf("view age metric %v", fams[1].Samples[0].Value)
	}
	// Reservations still expire while the refresh hangs.
	f.advance(16 * time.Minute)
	e.Decide(job("coscheml:app=light-b"))
	e.view.mu.Lock()
	n := len(e.view.res.list)
	e.view.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d reservations survived their TTL during the hang", n)
	}
	hang.set(false)
	hung.release()
	deadline = time.Now().Add(nohang.Bound)
	for {
		r = e.Decide(job("coscheml:app=light-b"))
		if r.Code == Rewrite || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Code != Rewrite || !strings.Contains(logOf(r), "watchdog ok again") {
		t.Fatalf("after the hang: %+v", r)
	}
}

type atomicBool struct{ v atomic.Bool }

func (b *atomicBool) get() bool  { return b.v.Load() }
func (b *atomicBool) set(v bool) { b.v.Store(v) }

// A first load that panics (a broken loader) leaves the engine deciding on what
// it has (pass-through) and its loop alive: a later reload recovers.
func TestFirstLoadPanicRecovers(t *testing.T) {
	f := newFixture(t, nil)
	var broken atomicBool
	broken.set(true)
	src := f.sources()
	inner := src.LoadConfig
	src.LoadConfig = func(p string) (config.Config, error) {
		if broken.get() {
			panic("loader bug")
		}
		return inner(p)
	}
	e := NewAsync(src, Options{Now: f.clock, CloseWait: time.Second, ReloadEvery: 5 * time.Millisecond, ResidencyEvery: 5 * time.Millisecond}, nil)
	e.Start()
	defer e.Close()
	if !e.WaitReady(nohang.Bound) {
		t.Fatal("not ready after a panicking first load")
	}
	if r := e.Decide(job("coscheml:app=light-a")); r.Code != Unchanged || !strings.Contains(logOf(r), "loader bug") {
		t.Fatalf("after the panic: %+v", r)
	}
	broken.set(false)
	var r Result
	nohang.Call(t, "a reload after the panic", func() error { e.RequestReload(); return nil })
	for i := 0; i < 500; i++ {
		if r = e.Decide(job("coscheml:app=light-a")); r.Code == Rewrite {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Code != Rewrite {
		t.Fatalf("no recovery after the panic: %+v", r)
	}
}
