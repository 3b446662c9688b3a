// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHeartbeat writes, reads back from disk and removes heartbeats, and refuses
// the files a user could have forged or broken.
func TestHeartbeat(t *testing.T) {
	until := time.Unix(1_900_000_000, 0)
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string // "" ok; else a substring of the error
	}{
		{"written by the loop", func(t *testing.T, p string) {
			if err := WriteHeartbeat(p, until); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"missing", func(*testing.T, string) {}, ErrNoHeartbeat.Error()},
		{"writable by others", func(t *testing.T, p string) {
			write(t, p, "coscheml-redecide until=1900000000 pid=1\n", 0o666)
		}, "lets others write it"},
		{"a symlink", func(t *testing.T, p string) {
			real := p + ".real"
			write(t, real, "coscheml-redecide until=1900000000 pid=1\n", 0o644)
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
		}, "symlink"},
		{"a folder", func(t *testing.T, p string) { os.Mkdir(p, 0o755) }, "folder"},
		{"garbage", func(t *testing.T, p string) { write(t, p, "alive\n", 0o644) }, "not a heartbeat line"},
		{"no newline", func(t *testing.T, p string) { write(t, p, "coscheml-redecide until=1900000000 pid=1", 0o644) }, "not a heartbeat line"},
		{"bad time", func(t *testing.T, p string) { write(t, p, "coscheml-redecide until=soon pid=1\n", 0o644) }, "malformed"},
		{"negative time", func(t *testing.T, p string) { write(t, p, "coscheml-redecide until=-5 pid=1\n", 0o644) }, "malformed"},
		{"huge", func(t *testing.T, p string) { write(t, p, strings.Repeat("x", 1<<20), 0o644) }, "not a heartbeat line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "redecide.alive")
			tc.setup(t, p)
			got, err := ReadHeartbeat(p)
			switch {
			case tc.want == "" && (err != nil || !got.Equal(until)):
				t.Fatalf("ReadHeartbeat = %v, %v; want %v", got, err, until)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ReadHeartbeat = %v, %v; want an error with %q", got, err, tc.want)
			}
		})
	}
}

// TestRemoveHeartbeat: a stopping loop removes its own heartbeat, never another
// loop's.
func TestRemoveHeartbeat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "redecide.alive")
	write(t, p, "coscheml-redecide until=1900000000 pid=1\n", 0o644) // pid 1: not us
	if err := RemoveHeartbeat(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("another loop's heartbeat was removed: %v", err)
	}
	if err := WriteHeartbeat(p, time.Unix(1_900_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	if err := RemoveHeartbeat(p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHeartbeat(p); !errors.Is(err, ErrNoHeartbeat) {
		t.Fatalf("own heartbeat still there: %v", err)
	}
	if err := RemoveHeartbeat(p); err != nil {
		t.Fatalf("removing a missing heartbeat: %v", err)
	}
}

// TestForeverBeats: the loop renews the heartbeat after each pass that listed the
// queue, not after one that could not, and removes it when it stops.
func TestForeverBeats(t *testing.T) {
	p := filepath.Join(t.TempDir(), "redecide.alive")
	var fail atomic.Bool
	fail.Store(true)
	l := &Loop{Refresh: time.Second, Heartbeat: p, Run: func(_ context.Context, name string, args ...string) (string, error) {
		if fail.Load() {
			return "", errors.New("squeue: slurmctld not responding")
		}
		return "", nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Forever(ctx, 10*time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	if _, err := ReadHeartbeat(p); !errors.Is(err, ErrNoHeartbeat) {
		t.Fatalf("heartbeat while squeue fails: %v", err)
	}
	fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		until, err := ReadHeartbeat(p)
		if err == nil {
			if d := time.Until(until); d < 5*time.Second || d > 11*time.Second {
				t.Fatalf("heartbeat counts for %v, want HeartbeatTTL(10ms) = 10 s", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat after passes that listed the queue: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHeartbeat(p); !errors.Is(err, ErrNoHeartbeat) {
		t.Fatalf("heartbeat left behind by a stopped loop: %v", err)
	}
}

func FuzzParseHeartbeat(f *testing.F) {
	f.Add("coscheml-redecide until=1900000000 pid=42\n")
	f.Add("coscheml-redecide until= pid=\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		hb, err := parseHeartbeat(s)
		if err != nil {
			return
		}
		if hb.until.Unix() <= 0 || hb.pid <= 0 {
			t.Fatalf("accepted %q as %+v", s, hb)
		}
	})
}

func write(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
