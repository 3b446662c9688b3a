// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
)

func TestParseQueueIDs(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"empty", "", nil},
		{"tokens", "coscheml:app=a coscheml-id=abc-1-0123456789ab:2\ncoscheml:app=b coscheml-id=abc-2-0123456789ab:4\n", []string{"abc-1-0123456789ab", "abc-2-0123456789ab"}},
		{"untagged and null comments", "(null)\nmy own words\n\n", nil},
		{"a user's text around a token", "coscheml:app=a coscheml-id=x-9-0123456789ab:1 and more\n", []string{"x-9-0123456789ab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseQueueIDs([]byte(tc.out))
			if len(got) != len(tc.want) {
				t.Fatalf("ids %v, want %v", got, tc.want)
			}
			for _, id := range tc.want {
				if !got[id] {
					t.Errorf("id %s missing from %v", id, got)
				}
			}
		})
	}
}

func FuzzParseQueueIDs(f *testing.F) {
	f.Add([]byte("coscheml:app=a coscheml-id=abc-1-0123456789ab:2\n(null)\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for id := range ParseQueueIDs(out) {
			if id == "" || strings.ContainsAny(id, " \n\t") {
				t.Fatalf("bad id %q", id)
			}
		}
	})
}

// TestQueueCheckDropsGone: a reservation whose job left the queue unstarted
// (cancelled while pending: job_submit plugins hear of no cancellation) is
// dropped by the queue check once older than the grace, so its GPU is free for
// the next job; a young one, a listed one, and any when the listing fails stay.
func TestQueueCheckDropsGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		age      time.Duration
		listed   bool
		fail     bool
		wantKept bool
	}{
		{"gone and old: dropped", time.Minute, false, false, false},
		{"gone but young: kept", 2 * time.Second, false, false, true},
		{"still queued: kept", time.Minute, true, false, true},
		{"listing failed: kept", time.Minute, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			res := f.e.Decide(job("coscheml:app=heavy-a"))
			d := comment.ParseComment(res.Comment)
			if res.Code != Rewrite || d.DecisionID == "" {
				t.Fatalf("no reservation made: %+v", res)
			}
			f.advance(tc.age)
			f.e.poll.queueIDs = func(context.Context) (map[string]bool, error) {
				if tc.fail {
					return nil, errors.New("squeue: connection refused")
				}
				return map[string]bool{"other-1-0123456789ab": true, d.DecisionID: tc.listed}, nil
			}
			f.e.checkQueue()
			kept := false
			for _, rv := range f.e.view.reservations() {
				kept = kept || rv.id == d.DecisionID
			}
			if kept != tc.wantKept {
				t.Errorf("reservation kept = %v, want %v", kept, tc.wantKept)
			}
		})
	}
}

// TestRunClient: the runner of sinfo and squeue returns the output, refuses more
// than its bound, and names the command and its stderr when it fails.
func TestRunClient(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		max          int
		want, errHas string
	}{
		{"output", "echo n1 idle", 100, "n1 idle\n", ""},
		{"too large", "echo 0123456789", 5, "", "larger than 5 bytes"},
		{"fails", "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1", 100, "", "Unable to contact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runClient(context.Background(), "/bin/sh", "", tc.max, "-c", tc.script)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "/bin/sh") {
					t.Fatalf("error %v, want one naming /bin/sh and %q", err, tc.errHas)
				}
				return
			}
			if err != nil || string(out) != tc.want {
				t.Fatalf("got %q, %v; want %q", out, err, tc.want)
			}
		})
	}
}
