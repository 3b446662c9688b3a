// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// Outputs of `scontrol ping` as scontrol.c's _print_ping writes them (the same
// format in 22.05.8, 23.11.11 and 26.05.3; the single-controller one is read
// from real daemons by the integration suite).
const (
	pingOne     = "Slurmctld(primary) at ctl1 is UP\n"
	pingHA      = "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is UP\n"
	pingFailed  = "Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n"
	pingThree   = "Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup1) at ctl2 is DOWN\nSlurmctld(backup2) at ctl3 is UP\n"
	pingAllDown = "Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is DOWN\n"
)

func TestParsePing(t *testing.T) {
	tests := []struct {
		name, out string
		want      []Controller
	}{
		{"one controller", pingOne, []Controller{{"primary", "ctl1", true}}},
		{"primary and backup", pingHA, []Controller{{"primary", "ctl1", true}, {"backup", "ctl2", true}}},
		{"primary down, banner", pingFailed, []Controller{{"primary", "ctl1", false}, {"backup", "ctl2", true}}},
		{"two backups", pingThree, []Controller{{"primary", "ctl1", false}, {"backup1", "ctl2", false}, {"backup2", "ctl3", true}}},
		{"fully qualified name, CRLF", "Slurmctld(primary) at ctl1.example.org is UP\r\n", []Controller{{"primary", "ctl1.example.org", true}}},
		{"empty", "", nil},
		{"other state", "Slurmctld(primary) at ctl1 is MAYBE\n", nil},
		{"no role", "Slurmctld() at ctl1 is UP\n", nil},
		{"space in the host", "Slurmctld(primary) at ctl1 ctl2 is UP\n", nil},
		{"no host", "Slurmctld(primary) at  is UP\n", nil},
		{"nested parenthesis", "Slurmctld(pri(mary) at ctl1 is UP\n", nil},
		{"an error instead", "slurm_ping: Unable to contact slurm controller\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParsePing(tt.out); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePing(%q) = %+v, want %+v", tt.out, got, tt.want)
			}
		})
	}
}

func TestInControl(t *testing.T) {
	tests := []struct {
		out, host string
		want      bool
		why       string
	}{
		{pingOne, "ctl1", true, ""},
		{pingOne, "login3", true, ""}, // not a controller host: acts as without the check
		{pingHA, "ctl1", true, ""},
		{pingHA, "ctl2", false, "Slurmctld(primary) at ctl1 is in control"},
		{pingHA, "CTL2.example.org", false, "Slurmctld(primary) at ctl1 is in control"},
		{pingFailed, "ctl2", true, ""},
		{pingFailed, "ctl1", false, "Slurmctld(backup) at ctl2 is in control"}, // its own slurmctld does not answer
		{pingThree, "ctl3", true, ""},
		{pingThree, "ctl2", false, "Slurmctld(backup2) at ctl3 is in control"},
		{pingAllDown, "ctl2", true, ""}, // nobody answers: the pass's squeue fails and says so
		{"", "ctl2", true, ""},
		{pingHA, "", true, ""},
	}
	for _, tt := range tests {
		got, why := InControl(ParsePing(tt.out), tt.host)
		if got != tt.want || why != tt.why {
			t.Errorf("InControl(%q, %q) = %v, %q; want %v, %q", tt.out, tt.host, got, why, tt.want, tt.why)
		}
	}
}

// TestLoopStandsBy: on a standby controller host a pass lists nothing, updates
// nothing and writes no heartbeat; each change between standing by and acting
// is logged once; a ping that fails keeps the loop acting.
func TestLoopStandsBy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "redecide.alive")
	var (
		mu    sync.Mutex
		ping  = pingHA // ctl1 in control
		fail  bool
		calls []string
		logs  []string
	)
	l := &Loop{Refresh: time.Second, Heartbeat: p, Host: "ctl2", CheckEvery: 10 * time.Millisecond,
		Run: func(_ context.Context, name string, args ...string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, name+" "+args[0])
			if name == "scontrol" && args[0] == "ping" {
				if fail {
					return "", errors.New("scontrol ping: exit status 1")
				}
				return ping, nil
			}
			return "", nil
		},
		Log: func(format string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, a...))
		}}
	take := func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		c, g := calls, logs
		calls, logs = nil, nil
		return c, g
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if n, err := l.Pass(ctx, time.Now()); n != 0 || err != nil {
			t.Fatalf("standby pass %d: %d, %v", i, n, err)
		}
	}
	ran, said := take()
	if want := []string{"scontrol ping"}; !reflect.DeepEqual(ran, want) {
		t.Errorf("standby passes ran %q, want only %q (asked once, then the answer kept)", ran, want)
	}
	if len(said) != 1 || !strings.Contains(said[0], "standing by: this host (ctl2) is a standby controller and Slurmctld(primary) at ctl1 is in control") {
		t.Errorf("standby logs %q, want one standing-by line", said)
	}

	// Forever on the standby host writes no heartbeat.
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Forever(fctx, 10*time.Millisecond) }()
	time.Sleep(60 * time.Millisecond)
	if _, err := ReadHeartbeat(p); !errors.Is(err, ErrNoHeartbeat) {
		t.Errorf("heartbeat written by a standby loop: %v", err)
	}
	// The primary fails: the backup (this host) is in control and acts.
	mu.Lock()
	ping = pingFailed
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := ReadHeartbeat(p); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat after this host took over")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ran, said = take()
	if !contains(ran, "squeue --noheader") {
		t.Errorf("the loop in control listed no queue: %q", ran)
	}
	if n := count(said, "this host (ctl2) is in control now: re-deciding"); n != 1 {
		t.Errorf("taking over logged %d times, want once: %q", n, said)
	}

	// A ping that fails keeps a loop acting (and says nothing about standing by).
	mu.Lock()
	fail = true
	mu.Unlock()
	fresh := &Loop{Refresh: time.Second, Host: "ctl2", Run: l.Run, Log: l.Log}
	if _, err := fresh.Pass(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	ran, said = take()
	if !contains(ran, "squeue --noheader") || len(said) != 0 {
		t.Errorf("failed ping: ran %q, logged %q; want the queue listed, nothing logged", ran, said)
	}
}

func contains(xs []string, x string) bool { return count(xs, x) > 0 }

func count(xs []string, sub string) int {
	n := 0
	for _, x := range xs {
		if strings.Contains(x, sub) {
			n++
		}
	}
	return n
}

// FuzzParsePing: scontrol's output is read, never trusted: any text parses
// without panicking into controllers of the line's exact shape.
func FuzzParsePing(f *testing.F) {
	for _, s := range []string{pingOne, pingHA, pingFailed, pingThree, "", "Slurmctld(", "Slurmctld(x) at  is UP", "Slurmctld(a) at b is UP is DOWN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range ParsePing(s) {
			if c.Role == "" || c.Host == "" || strings.ContainsAny(c.Host, " \t\n") || strings.ContainsAny(c.Role, " ()\n") {
				t.Fatalf("ParsePing(%q) gave %+v", s, c)
			}
			state := "DOWN"
			if c.Up {
				state = "UP"
			}
			if line := "Slurmctld(" + c.Role + ") at " + c.Host + " is " + state; !strings.Contains(s, line) {
				t.Fatalf("ParsePing(%q) gave %+v, which no line of it says", s, c)
			}
		}
		InControl(ParsePing(s), "ctl1")
	})
}
