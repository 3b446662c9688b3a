// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
)

// passFixture is a fixture whose engine behaves as with its background loop
// running (a watchdog, a refresh just completed), reporting its pass window.
func passFixture(t testing.TB, edit func(*config.Config)) (*fixture, *[]time.Duration) {
	f := newFixture(t, edit)
	var mu sync.Mutex
	var seen []time.Duration
	f.e.opts.PassWindow = func(d time.Duration) {
		mu.Lock()
		seen = append(seen, d)
		mu.Unlock()
	}
	f.e.refresh.running.Store(true)
	f.e.markFresh()
	return f, &seen
}

// TestPassUntaggedFor: the window is open exactly while an untagged submission
// is certain to be answered Unchanged with nothing to log, and every change is
// published.
func TestPassUntaggedFor(t *testing.T) {
	stale := 30 * time.Second // the default StaleAfter
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		do   func(f *fixture)
		open bool
	}{
		{"ready and fresh", nil, func(*fixture) {}, true},
		{"no background loop", nil, func(f *fixture) { f.e.refresh.running.Store(false) }, false},
		{"untagged: exclusive", func(c *config.Config) { c.Untagged = "exclusive" }, func(*fixture) {}, false},
		{"configuration unusable", nil, func(f *fixture) { f.cfgErr = errors.New("bad key"); f.e.Reload() }, false},
		{"a note waits for the next job", nil, func(f *fixture) { f.e.note("x", "something broke") }, false},
		{"view stale", nil, func(f *fixture) {
			f.e.refresh.clock.completed.Store(int64(time.Since(f.e.refresh.clock.epoch) - stale - time.Second))
		}, false},
		{"stale view noted", nil, func(f *fixture) {
			f.e.refresh.clock.completed.Store(int64(time.Since(f.e.refresh.clock.epoch) - stale - time.Second))
			f.e.Decide(job(""))
			f.e.markFresh() // refreshed again: the next decision logs "watchdog ok again"
		}, false},
		{"closed", nil, func(f *fixture) { f.e.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, seen := passFixture(t, tc.edit)
			tc.do(f)
			d := f.e.PassUntaggedFor()
			if open := d > 0; open != tc.open || d > stale {
				t.Fatalf("PassUntaggedFor = %v, want open=%v (at most %v)", d, tc.open, stale)
			}
			f.e.publishPass()
			if last := (*seen)[len(*seen)-1]; (last > 0) != tc.open {
				t.Errorf("published %v, want open=%v", last, tc.open)
			}
		})
	}
}

// TestPassWindowReopens: a note shuts the window at once; the decision that
// logs it opens it again.
func TestPassWindowReopens(t *testing.T) {
	f, seen := passFixture(t, nil)
	f.e.note("x", "something broke")
	if last := (*seen)[len(*seen)-1]; last != 0 {
		t.Fatalf("after a note the window is %v, want shut", last)
	}
	r := f.e.Decide(job(""))
	if !strings.Contains(logOf(r), "something broke") {
		t.Fatalf("the note was not logged: %+v", r)
	}
	if last := (*seen)[len(*seen)-1]; last <= 0 {
		t.Fatalf("after the note was logged the window is %v, want open", last)
	}
}

// FuzzUntaggedPass holds the engine to what the C side assumes while the
// window is open: a submission whose comment has no "coscheml" (any case) and
// whose GPU requests have no "shard" (any case) gets the zero Result: left
// unchanged, nothing logged, and the window stays open (no note).
func FuzzUntaggedPass(f *testing.F) {
	for _, s := range [][6]string{
		{"", "gres:gpu:1", "", "", "", ""},
		{"nightly run", "gres/gpu:2", "gpu", "", "", ""},
		{"", "", "gres/gpu:1", "gres/gpu:1", "n[1-2]", "1-10"},
		{"cosche ml", "gres:gpu:a100:1", "", "", "n1", ""},
		{"coscheml-ish", "gres:shard:2", "", "", "", ""}, // skipped: C sends it to Go
		{"x", "gres:gpu:1,gres:shard:1", "", "", "", ""}, // skipped
		{"", "gres:gpu:1", "gres:gpu:one", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], uint32(1))
	}
	fx, _ := passFixture(f, nil)
	f.Fuzz(func(t *testing.T, comment, tpn, tpj, tpt, nodes, array string, minNodes uint32) {
		if containsFoldASCII(comment, "coscheml") {
			return
		}
		for _, r := range []string{tpn, tpj, tpt} {
			if containsFoldASCII(r, "shard") {
				return
			}
		}
		fx.e.markFresh()
		j := JobFields{Comment: comment, TresPerNode: tpn, TresPerJob: tpj, TresPerTask: tpt, ReqNodes: nodes,
			ArrayInx: array, UserID: 1000, MinNodes: minNodes, MaxNodes: minNodes, JobID: NoVal}
		if d := fx.e.PassUntaggedFor(); d <= 0 {
			t.Fatalf("window shut before the job: %v", d)
		}
		if r := fx.e.Decide(j); r != (Result{}) {
			t.Fatalf("untagged job %+v answered %+v, want the zero Result", j, r)
		}
		if d := fx.e.PassUntaggedFor(); d <= 0 {
			t.Fatalf("window shut by the job: %v (%v)", d, fx.e.Problems())
		}
	})
}

// containsFoldASCII is queue.c's cq_mentions in Go (ASCII letters, any case).
func containsFoldASCII(s, word string) bool {
	return strings.Contains(strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s), word)
}
