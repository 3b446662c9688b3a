// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/residency"
)

// explainEnv writes a config, a decision log with one decision, a residency entry
// for job 4242 and a fake squeue that knows jobs 4242 (tagged), 4343 (hostile name) and 7 (untagged).
func explainEnv(t *testing.T) string {
	t.Helper()
	t.Setenv("COSCHEML_CONFIG", "")
	dir := t.TempDir()
	dlog := filepath.Join(dir, "decisions.log")
	res := filepath.Join(dir, "residency")
	cfg := filepath.Join(dir, "coscheml.yaml")
	guardDir := filepath.Join(dir, "guard")
	os.WriteFile(cfg, []byte("decision_log: "+dlog+"\nresidency_dir: "+res+"\nprofile_dir: "+filepath.Join(dir, "p")+"\nguard:\n  event_dir: "+guardDir+"\n"), 0o644)
	w := decisionlog.NewWriter(dlog, 0, 0)
	w.Log(decisionlog.Record{ID: "abc-7", Time: time.Now(), Op: "submit", Tag: "light-b", Class: "train", Outcome: "rewrite",
		Action: "share", Node: "n1", GPU: 0, Shards: 2, PredictedSpeed: 0.98, MinResidentSpeed: 0.97,
		CoRunners: []string{"light-a"}, Policy: "coscheml", Reason: "n1/gpu0 with light-a", TresIn: "gres:gpu:1", TresOut: "gres:shard:2"})
	w.Close()
	store, _ := residency.Open(res)
	now := time.Now()
	if err := store.Start(residency.Entry{JobID: "4242", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "light-b", DecisionID: "abc-7", Start: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A fake squeue that fills in the format it is given, as squeue does, from
	// per-job fields; job 4343's name is hostile (it would have faked the state and
	// nodes of `scontrol show job -o`), and its comment holds '|' and a newline.
	script := filepath.Join(dir, "squeue")
	os.WriteFile(script, []byte(`#!/bin/sh
all=
while [ $# -gt 0 ]; do
	case "$1" in -j) job=$2; shift;; -o) fmt=$2; shift;; --states=all) all=1;; esac
	shift
done
case "$job" in
4444) [ "$all" ] || exit 0  # squeue hides ended jobs without --states=all
	state=COMPLETED nodes=n1 name=z comment='(null)';;
4242) state=RUNNING nodes=n1 name=x comment='run coscheml:app=light-b coscheml-id=abc-7:2';;
4343) state=PENDING nodes= name='x JobState=COMPLETED NodeList=n9' comment='a|COMPLETED|n9|b
4343|COMPLETED|n9|x';;
7) state=PENDING nodes= name=y comment='(null)';;
*) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1;;
esac
printf '%s\n' "$fmt" | awk -v i="$job" -v t="$state" -v n="$nodes" -v j="$name" -v k="$comment" '{
	out = ""
	for (p = 1; p <= length($0); p++) {
		c = substr($0, p, 1)
		if (c == "%") { p++; c = substr($0, p, 1)
			out = out (c == "i" ? i : c == "T" ? t : c == "N" ? n : c == "j" ? j : c == "k" ? k : "")
		} else out = out c
	}
	print out
}'
`), 0o755)
	t.Setenv("COSCHEML_SQUEUE", script)
	return cfg
}

// writeGuardEvents writes node n1's guard log: job 4242 (uid 1000) observed,
// then requeued; job 4545 (uid 2000) ended, known only to the guard.
func writeGuardEvents(t *testing.T, cfgPath string) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(cfgPath), "guard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := decisionlog.NewWriter(filepath.Join(dir, "n1.log"), 0, 0)
	w.Log(decisionlog.Record{ID: "g1-1", Time: at, Op: decisionlog.OpGuard, JobID: "4242", UserID: 1000, Tag: "light-b", Class: "train",
		Outcome: "observed", Action: "observe", Node: "n1", GPU: 0, Reason: "job 4242 below its floor; rate limited"})
	w.Log(decisionlog.Record{ID: "g1-2", Time: at.Add(time.Minute), Op: decisionlog.OpGuard, JobID: "4242", UserID: 1000, Tag: "light-b", Class: "train",
		Outcome: "taken", Action: "requeue", Node: "n1", GPU: 0, Reason: "coscheml guard: job 4242 uses 9000 MiB, over its budget; requeue it"})
	w.Log(decisionlog.Record{ID: "g1-3", Time: at, Op: decisionlog.OpGuard, JobID: "4545", UserID: 2000, Outcome: "taken", Action: "cancel", Node: "n1", GPU: 1, Reason: "over budget"})
	w.Close()
}

// explain shows the guard's events for a job, oldest first, and to a user
// other than root and the log's owner only those of their own jobs.
func TestExplainGuardEvents(t *testing.T) {
	cfg := explainEnv(t)
	writeGuardEvents(t, cfg)
	tests := []struct {
		name     string
		uid      int
		job      string
		wantCode int
		want     []string
		dontWant []string
	}{
		{name: "root sees the job's events in order", uid: 0, job: "4242", want: []string{"runtime guard:",
			"2026-12-01T10:00:00Z n1 GPU 0: observe (observed): job 4242 below its floor",
			"2026-12-01T10:01:00Z n1 GPU 0: requeue (taken): coscheml guard: job 4242 uses 9000 MiB"}, dontWant: []string{"cancel"}},
		{name: "owner sees own job", uid: 1000, job: "4242", want: []string{"requeue (taken)"}},
		{name: "another user sees none", uid: 3000, job: "4242", dontWant: []string{"runtime guard:"}},
		{name: "other job's events not shown", uid: 0, job: "7", dontWant: []string{"runtime guard:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := callerUID
			callerUID = func() int { return tt.uid }
			defer func() { callerUID = old }()
			code, out, errs := runCLI("--config", cfg, "explain", tt.job)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s %s", code, tt.wantCode, out, errs)
			}
			first := -1
			for _, w := range tt.want {
				i := strings.Index(out, w)
				if i < 0 {
					t.Errorf("output lacks %q:\n%s", w, out)
				} else if i < first {
					t.Errorf("%q out of order:\n%s", w, out)
				}
				first = i
			}
			for _, w := range tt.dontWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
	code, out, _ := runCLI("--config", cfg, "explain", "--json", "4242")
	var o explainOut
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || len(o.Guard) != 2 || o.Guard[1].Action != "requeue" || o.Guard[1].Op != decisionlog.OpGuard {
		t.Fatalf("json: %d %s", code, out)
	}
}

func runCLI(args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := run(append([]string{"coscheml"}, args...), &out, &errw)
	return code, out.String(), errw.String()
}

func TestExplain(t *testing.T) {
	cfg := explainEnv(t)
	code, out, errs := runCLI("--config", cfg, "explain", "4242")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"job 4242: RUNNING on n1", "decision abc-7 (submit", "share on n1 GPU 0 with 2 shards",
		"predicted speed: 0.98", "co-runners at decision: light-a", "gres:gpu:1 -> gres:shard:2", "reason: n1/gpu0 with light-a",
		"running on n1 GPU 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("--config", cfg, "explain", "--json", "4242")
	var o explainOut
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Decision == nil || o.Decision.Node != "n1" || o.DecisionID != "abc-7" || o.Comment != "run coscheml:app=light-b coscheml-id=abc-7:2" {
		t.Fatalf("json: %d %s", code, out)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "--json", "4343")
	o = explainOut{}
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.JobState != "PENDING" || o.NodeList != "" {
		t.Fatalf("hostile job name: %d %+v (want PENDING, no nodes)", code, o)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "4444")
	if code != 0 || !strings.Contains(out, "job 4444: COMPLETED on n1") {
		t.Fatalf("ended job still in slurmctld's memory: %d %s", code, out)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "7")
	if code != 0 || !strings.Contains(out, "PENDING") || !strings.Contains(out, "did not rewrite") {
		t.Fatalf("untagged job: %d %s", code, out)
	}
	code, out, _ = runCLI("--config", cfg, "explain", "--decision", "abc-7")
	if code != 0 || !strings.Contains(out, "decision abc-7") {
		t.Fatalf("--decision: %d %s", code, out)
	}
	if code, _, _ = runCLI("--config", cfg, "explain", "999"); code != exitNotFound {
		t.Fatalf("unknown job: exit %d", code)
	}
	if code, _, _ = runCLI("--config", cfg, "explain", "--decision", "zzz-1"); code != exitNotFound {
		t.Fatalf("unknown decision: exit %d", code)
	}
	for _, bad := range [][]string{{"explain"}, {"explain", "1;rm"}, {"explain", "1", "2"}, {"explain", "--decision", "../x"}} {
		if code, _, _ = runCLI(append([]string{"--config", cfg}, bad...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}

// A caller other than root and the log's owner (SlurmUser) sees only decisions
// of their own uid; another user's is reported exactly as a missing one.
func TestExplainOwnDecisionsOnly(t *testing.T) {
	t.Setenv("COSCHEML_CONFIG", "")
	dir := t.TempDir()
	dlog := filepath.Join(dir, "decisions.log")
	cfg := filepath.Join(dir, "coscheml.yaml")
	os.WriteFile(cfg, []byte("decision_log: "+dlog+"\nresidency_dir: "+filepath.Join(dir, "r")+"\nprofile_dir: "+filepath.Join(dir, "p")+"\n"), 0o644)
	w := decisionlog.NewWriter(dlog, 0, 0)
	w.Log(decisionlog.Record{ID: "mine-1", Time: time.Now(), Op: "submit", UserID: 4200001, Tag: "a", Outcome: "rewrite", Action: "share", Node: "n1", Reason: "r"})
	w.Log(decisionlog.Record{ID: "theirs-1", Time: time.Now(), Op: "submit", UserID: 4200002, Tag: "secret", Outcome: "rewrite", Action: "share", Node: "n2", Reason: "r"})
	w.Log(decisionlog.Record{ID: "theirs-2", Time: time.Now(), Op: "modify", JobID: "55", UserID: 4200002, Tag: "secret", Outcome: "rewrite", Action: "share", Node: "n2", Reason: "r"})
	w.Close()
	st, _ := os.Stat(dlog)
	owner := int(st.Sys().(*syscall.Stat_t).Uid)
	for _, tc := range []struct {
		name   string
		uid    int
		args   []string
		wantOK bool
	}{
		{"own decision", 4200001, []string{"--decision", "mine-1"}, true},
		{"other's decision", 4200001, []string{"--decision", "theirs-1"}, false},
		{"other's by job id", 4200001, []string{"--decision", "theirs-2"}, false},
		{"owner sees all", owner, []string{"--decision", "theirs-1"}, true},
		{"root sees all", 0, []string{"--decision", "theirs-1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.uid == 4200001 && owner == 4200001 {
				t.Skip("test uid collides with the log's owner")
			}
			old := callerUID
			callerUID = func() int { return tc.uid }
			defer func() { callerUID = old }()
			code, out, errs := runCLI(append([]string{"--config", cfg, "explain"}, tc.args...)...)
			if tc.wantOK && (code != 0 || !strings.Contains(out, "decision "+tc.args[1])) {
				t.Fatalf("exit %d: %s%s", code, out, errs)
			}
			if !tc.wantOK && (code != exitNotFound || strings.Contains(out+errs, "secret") || strings.Contains(out+errs, "n2")) {
				t.Fatalf("another user's decision shown (exit %d): %s%s", code, out, errs)
			}
		})
	}
}

func TestParseSqueue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want squeueInfo
		bad  bool
	}{
		{in: "4242|RUNNING|n1|run coscheml-id=abc-7:2\n", want: squeueInfo{"4242", "RUNNING", "n1", "run coscheml-id=abc-7:2"}},
		{in: "7|PENDING||(null)\n", want: squeueInfo{"7", "PENDING", "", ""}},
		{in: "12_3|RUNNING|gpu[01-02]|a|b|c\n", want: squeueInfo{"12_3", "RUNNING", "gpu[01-02]", "a|b|c"}},
		{in: "12_[4-9%2]|PENDING|(null)|x\n13|RUNNING|n9|y\n", want: squeueInfo{"12_[4-9%2]", "PENDING", "", "x"}},
		{in: "4343|PENDING||c\n4343|COMPLETED|n9|x", want: squeueInfo{"4343", "PENDING", "", "c"}},
		{in: "4242|RUNNING JobState=X|n1|c", bad: true},
		{in: "4242|RUNNING|n1 n2|c", bad: true},
		{in: "x|RUNNING|n1|c", bad: true},
		{in: "4242|RUNNING|n1", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseSqueue(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %+v", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseSqueue(f *testing.F) {
	for _, s := range []string{"4242|RUNNING|n1|c\n", "7|PENDING||(null)", "12_[1-3]|PENDING|(null)|a|b\nx", "|||", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := parseSqueue(s)
		if err != nil {
			return
		}
		if !squeueStateRE.MatchString(j.State) || strings.ContainsAny(j.Nodes, " |\n") || strings.ContainsAny(j.ID, " |\n") || strings.Contains(j.Comment, "\n") {
			t.Fatalf("%q parsed to %+v", s, j)
		}
	})
}

// TestExplainUserView: a user who may not read the decision log (mode 0640)
// reads their own decisions from their per-user view, written by root, and
// nothing of another user's; status shows their own reservations from it
// without a "permission denied" warning. Without a view, explain says why.
func TestExplainUserView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing the views chowns them: needs root")
	}
	cfg := explainEnv(t)
	dlog := filepath.Join(filepath.Dir(cfg), "decisions.log")
	w := decisionlog.NewWriter(dlog, 0, 0)
	now := time.Now()
	w.Log(decisionlog.Record{ID: "u1-1", Time: now, Op: "submit", JobID: "5001", UserID: 1000, Tag: "light-a", Class: "train", Outcome: "rewrite",
		Action: "share", Node: "n1", GPU: 1, Shards: 2, PredictedSpeed: 0.97, MinResidentSpeed: 0.96, Reason: "first user's reason"})
	w.Log(decisionlog.Record{ID: "u2-1", Time: now, Op: "submit", JobID: "5002", UserID: 2000, Tag: "secret-app", Class: "infer", Outcome: "rewrite",
		Action: "share", Node: "n1", GPU: 2, Shards: 2, PredictedSpeed: 0.95, MinResidentSpeed: 0.94, Reason: "second user's reason"})
	w.Close()
	if n, err := (&decisionlog.ViewPublisher{LogPath: dlog, MaxPerUser: decisionlog.MaxUserView}).Publish(); err != nil || n != 2 {
		t.Fatalf("publish: %d views, %v", n, err)
	}
	oldUID, oldReadable := callerUID, readable
	defer func() { callerUID, readable = oldUID, oldReadable }()
	readable = func(p string) bool { return p != dlog && p != dlog+".1" } // the log is 0640
	for _, tc := range []struct {
		uid      int
		args     []string
		code     int
		want     []string
		dontWant []string
	}{
		{1000, []string{"explain", "--decision", "u1-1"}, 0, []string{"decision u1-1", "first user's reason"}, []string{"second user's"}},
		{1000, []string{"explain", "--decision", "u2-1"}, exitNotFound, nil, []string{"second user's", "secret-app"}},
		{3000, []string{"explain", "--decision", "u1-1"}, exitNotFound, []string{"no decision of yours is published yet", "by-user/3000.log"}, []string{"first user's"}},
		{1000, []string{"status", "--json"}, 0, []string{`"decision_id": "u1-1"`}, []string{"u2-1", "permission denied", "secret-app"}},
	} {
		callerUID = func() int { return tc.uid }
		code, out, errs := runCLI(append([]string{"--config", cfg}, tc.args...)...)
		got := out + errs
		if code != tc.code {
			t.Errorf("uid %d %v: exit %d, want %d:\n%s", tc.uid, tc.args, code, tc.code, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("uid %d %v: lacks %q:\n%s", tc.uid, tc.args, w, got)
			}
		}
		for _, w := range tc.dontWant {
			if strings.Contains(got, w) {
				t.Errorf("uid %d %v: shows %q:\n%s", tc.uid, tc.args, w, got)
			}
		}
	}
}
