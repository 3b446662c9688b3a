// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
)

func TestParseQueueIDs(t *testing.T) {
	const m = "@0123456789abcdef@"
	rec := func(job, c string) string { return m + job + "|" + c + m + "\n" }
	for _, tc := range []struct {
		name, out string
		want      QueueListing
		err       string
	}{
		{"empty", "", QueueListing{}, ""},
		{"tokens", rec("10", "coscheml:app=a coscheml-id=abc-1-0123456789ab:2") + rec("11", "coscheml:app=b coscheml-id=abc-2-0123456789ab:4"),
			QueueListing{"abc-1-0123456789ab": "10", "abc-2-0123456789ab": "11"}, ""},
		{"untagged and null comments", rec("10", "(null)") + rec("11", "my own words") + rec("12", ""), QueueListing{}, ""},
		{"a user's text around a token", rec("12_3", "coscheml:app=a coscheml-id=x-9-0123456789ab:1 and more"), QueueListing{"x-9-0123456789ab": "12_3"}, ""},
		// A comment that spans lines and imitates a record names nothing: only
		// the marker, drawn for the listing, frames a record.
		{"a comment forging another job's record", rec("10", "x\n13|coscheml-id=abc-1-0123456789ab:2"), QueueListing{}, ""},
		// One decision id in two jobs' comments belongs to neither.
		{"one id in two jobs", rec("10", "coscheml-id=abc-1-0123456789ab:2") + rec("11", "coscheml-id=abc-1-0123456789ab:2"), QueueListing{"abc-1-0123456789ab": ""}, ""},
		{"not framed by the marker", "10|coscheml-id=abc-1-0123456789ab:2\n", nil, "outside a record"},
		{"unbalanced", m + "10|x", nil, "unbalanced"},
		{"no job id", rec("x;y", "coscheml-id=abc-1-0123456789ab:2"), nil, "without a job id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseQueueIDs([]byte(tc.out), m)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ids %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseQueueIDs(f *testing.F) {
	const m = "@0123456789abcdef@"
	f.Add([]byte(m + "10|coscheml:app=a coscheml-id=abc-1-0123456789ab:2" + m + "\n" + m + "11|(null)" + m))
	f.Fuzz(func(t *testing.T, out []byte) {
		ids, err := ParseQueueIDs(out, m)
		if err != nil {
			return
		}
		for id, job := range ids {
			if id == "" || strings.ContainsAny(id, " \n\t") || strings.ContainsAny(job, " \n\t|@") {
				t.Fatalf("bad id %q of job %q", id, job)
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
			f.e.poll.queueIDs = func(context.Context) (QueueListing, error) {
				if tc.fail {
					return nil, errors.New("squeue: connection refused")
				}
				l := QueueListing{"other-1-0123456789ab": "7"}
				if tc.listed {
					l[d.DecisionID] = "8"
				}
				return l, nil
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
