// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/version"
)

// TestRedecideWaitDeferOff: the service starts with slurmctld wherever the plugin
// is installed, so with wait_defer 0 the loop exits 0 with one line (systemd's
// Restart=on-failure leaves it stopped); a one-shot pass is a usage error.
func TestRedecideWaitDeferOff(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("wait_defer: 0s\ndecision_log: "+filepath.Join(e.dir, "d.log")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := e.run("redecide", "--loop", "--user-views=false", "--squeue", "/nonexistent/squeue")
	if code != 0 || !strings.Contains(errOut, "wait_defer is 0") {
		t.Fatalf("--loop with wait_defer 0: exit %d, stderr %q; want 0 and why", code, errOut)
	}
	if code, _, errOut := e.run("redecide"); code != exitUsage || !strings.Contains(errOut, "wait_defer is 0") {
		t.Fatalf("one pass with wait_defer 0: exit %d, stderr %q; want %d", code, errOut, exitUsage)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "redecide.alive")); !os.IsNotExist(err) {
		t.Fatalf("a loop with nothing to do left a heartbeat: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer safe to write from run's goroutine while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedecideLoopStartLine: the loop's log says at once which version runs
// with which configuration (it is silent otherwise while nothing is deferred),
// and says when it stops.
func TestRedecideLoopStartLine(t *testing.T) {
	e := newEnv(t)
	hb := filepath.Join(e.dir, "redecide.alive")
	if err := os.WriteFile(e.config, []byte("wait_defer: 20s\ndecision_log: "+filepath.Join(e.dir, "d.log")+"\nredecide_heartbeat: "+hb+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	squeue := filepath.Join(e.dir, "squeue")
	if err := os.WriteFile(squeue, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errw lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"coscheml", "--config", e.config, "redecide", "--loop", "--interval", "200ms",
			"--standby-check=false", "--user-views=false", "--squeue", squeue, "--scontrol", "/bin/true"}, &out, &errw)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errw.String(), "coscheml: redecide: start ") {
		if time.Now().After(deadline) {
			t.Fatalf("no start line: %q", errw.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The loop has caught SIGTERM since before it wrote the start line.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errw.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not stop on SIGTERM")
	}
	got := errw.String()
	for _, want := range []string{"start " + version.String() + ": config " + e.config + ": wait_defer=20s interval=200ms refresh=10s max_per_pass=20 heartbeat=" + hb +
		" standby_check=off squeue=" + squeue + " scontrol=/bin/true\n", "coscheml: redecide: stopped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// TestRedecidePublishesViews: as root the loop copies each user's decisions
// into their view, also with wait_defer 0 (nothing to re-decide, but users
// still read their decisions), until stopped.
func TestRedecidePublishesViews(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing the views chowns them: needs root")
	}
	e := newEnv(t)
	dlog := filepath.Join(e.dir, "d.log")
	if err := os.WriteFile(e.config, []byte("wait_defer: 0s\ndecision_log: "+dlog+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := decisionlog.NewWriter(dlog, 0, 0)
	w.Log(decisionlog.Record{ID: "v-1", Time: time.Now(), Op: "submit", JobID: "9", UserID: 61001, Reason: "the user's own"})
	w.Close()
	var out, errw lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"coscheml", "--config", e.config, "redecide", "--loop", "--interval", "100ms", "--standby-check=false"}, &out, &errw)
	}()
	view := decisionlog.UserViewPath(dlog, 61001)
	deadline := time.Now().Add(20 * time.Second)
	for decisionlog.OpenableUserView(dlog, 61001) == "" || !strings.Contains(errw.String(), "publishing the per-user decision views") {
		if time.Now().After(deadline) {
			t.Fatalf("no view %s: %q", view, errw.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errw.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not stop on SIGTERM")
	}
	if b, err := os.ReadFile(view); err != nil || !strings.Contains(string(b), "the user's own") {
		t.Errorf("view: %v %s", err, b)
	}
}
