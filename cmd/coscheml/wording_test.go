// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/sharestatus"
)

// TestExplainWording: what explain prints for the decisions readers misread.
func TestExplainWording(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	// A reason longer than any line limit, whose words past 300 bytes matter.
	var long strings.Builder
	long.WriteString("coscheml: share: job 9 (light-b, train)")
	for long.Len() < 600 {
		long.WriteString("; n1/gpu0 with job 7 (light-a, train): predicted speed new job 0.98 (floor 0.75)")
	}
	long.WriteString("; closing words")
	cases := []struct {
		name string
		rec  decisionlog.Record
		want []string
		not  []string
	}{
		{
			name: "exclusive with share slots reads as alone at decision, not exclusive for life",
			rec: decisionlog.Record{ID: "d1", Time: at, Op: "submit", Tag: "light-a", Class: "train", Outcome: "rewrite",
				Action: "exclusive", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 1, MinResidentSpeed: 1, Reason: "idle GPU"},
			want: []string{"alone on an idle GPU at decision (exclusive) on n1 GPU 0 with 2 shards", "free for a co-runner that may join later"},
			not:  []string{"rewrite, exclusive on"},
		},
		{
			name: "whole-GPU exclusive keeps its word",
			rec: decisionlog.Record{ID: "d2", Time: at, Op: "submit", Tag: "big", Class: "train", Outcome: "rewrite",
				Action: "exclusive", Node: "n1", GPU: 1, Reason: "several GPUs"},
			want: []string{"rewrite, exclusive on n1 GPU 1"},
			not:  []string{"co-runner"},
		},
		{
			name: "long reason printed whole",
			rec: decisionlog.Record{ID: "d3", Time: at, Op: "submit", Tag: "light-b", Class: "train", Outcome: "rewrite",
				Action: "share", Node: "n1", GPU: 0, Shards: 2, Reason: long.String()},
			want: []string{"reason: " + long.String() + "\n"},
			not:  []string{"..."},
		},
		{
			name: "no class says which floor applies",
			rec: decisionlog.Record{ID: "d4", Time: at, Op: "submit", Tag: "bootstrap-app", Outcome: "rewrite",
				Action: "exclusive", Node: "n1", GPU: 0, Reason: "no profile"},
			want: []string{"application: bootstrap-app (no class: the strictest floor applies)"},
			not:  []string{"()"},
		},
		{
			name: "infer speed is a latency ratio",
			rec: decisionlog.Record{ID: "d5", Time: at, Op: "submit", Tag: "svc", Class: "infer", Outcome: "rewrite",
				Action: "share", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 0.95, MinResidentSpeed: 0.97, Reason: "r"},
			want: []string{"predicted latency speed: 0.95 (solo latency / shared latency", "application: svc (infer)"},
			not:  []string{"  predicted speed:"},
		},
		{
			name: "train speed stays a speed",
			rec: decisionlog.Record{ID: "d6", Time: at, Op: "submit", Tag: "tr", Class: "train", Outcome: "rewrite",
				Action: "share", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 0.9, MinResidentSpeed: 0.8, Reason: "r"},
			want: []string{"predicted speed: 0.90 (lowest resident after joining: 0.80)"},
			not:  []string{"latency"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			rec := tc.rec
			printExplain(&b, &explainOut{DecisionID: rec.ID, Decision: &rec})
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestExplainJoinedLater: a job placed alone and joined since says who shares
// its GPU now; another user's job is shown without its id or tag to a caller
// who may not see it.
func TestExplainJoinedLater(t *testing.T) {
	cfg := explainEnv(t)
	// explainEnv's residency store: job 4242 on n1 GPU 0
	dir := strings.TrimSuffix(cfg, "coscheml.yaml")
	store, err := residency.Open(dir + "residency")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range []residency.Entry{
		{JobID: "5000", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "light-a", User: "alice", Start: now, Expires: now.Add(time.Hour)},
		{JobID: "5001", Node: "n1", GPUs: []int{1}, Shards: 2, Tag: "other-gpu", User: "alice", Start: now, Expires: now.Add(time.Hour)},
		{JobID: "5002", Node: "n2", GPUs: []int{0}, Shards: 2, Tag: "other-node", User: "alice", Start: now, Expires: now.Add(time.Hour)},
	} {
		if err := store.Start(e); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		uid  func() int
		want []string
		not  []string
	}{
		{name: "log owner sees the job", uid: callerUID, want: []string{"sharing its GPU now with: job 5000 (light-a)"},
			not: []string{"5001", "5002", "other-gpu", "other-node"}},
		{name: "another user sees that a job joined, not which", uid: func() int { return 4200009 },
			want: []string{"sharing its GPU now with: another user's job"}, not: []string{"5000", "light-a", "5001", "5002"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := callerUID
			callerUID = tc.uid
			defer func() { callerUID = old }()
			code, out, errs := runCLI("--config", cfg, "explain", "4242")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestStatusWording: ages under a minute are not "0s", and a floor of a job
// without a class says it is the strictest default.
func TestStatusWording(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	speed := 0.95
	cases := []struct {
		name string
		job  sharestatus.Job
		want []string
		not  []string
	}{
		{name: "24 seconds old", job: sharestatus.Job{JobID: "1", Tag: "a", Class: "train", Start: now.Add(-24 * time.Second), Floor: 0.75, PredictedSpeed: &speed},
			want: []string{"24s"}, not: []string{" 0s"}},
		{name: "minutes", job: sharestatus.Job{JobID: "2", Tag: "a", Class: "train", Start: now.Add(-(5*time.Minute + 10*time.Second)), Floor: 0.75},
			want: []string{"5m\n"}, not: []string{"5m10s", "5m0s"}},
		{name: "hours", job: sharestatus.Job{JobID: "3", Tag: "a", Class: "train", Start: now.Add(-(2*time.Hour + 13*time.Minute)), Floor: 0.75},
			want: []string{"2h13m\n"}, not: []string{"2h13m0s"}},
		{name: "no class: strictest floor said", job: sharestatus.Job{JobID: "4", Tag: "bootstrap-app", Start: now.Add(-time.Hour), Floor: 0.9},
			want: []string{"0.90 (no class: strictest)"}},
		{name: "classed floor is a number", job: sharestatus.Job{JobID: "5", Tag: "a", Class: "infer", Start: now.Add(-time.Hour), Floor: 0.9},
			want: []string{"0.90"}, not: []string{"strictest"}},
		{name: "hidden job's floor is a number", job: sharestatus.Job{JobID: "hidden-1", User: hiddenUser, Start: now.Add(-time.Hour), Floor: 0.75},
			want: []string{"0.75"}, not: []string{"strictest"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &sharestatus.Snapshot{Time: now, GPUs: []sharestatus.GPU{{Node: "n1", Index: 0, Jobs: []sharestatus.Job{tc.job}}}}
			var b bytes.Buffer
			if err := printStatus(&b, s, "/r", true); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}
