// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const mk = "@0123456789abcdef@"

// rec is one record: id, state, reason, tres, begin, excluded, features, comment.
func rec(fields ...string) string {
	n := len(fields)
	if n < 2 {
		return mk + strings.Join(fields, "|") + mk + "\n"
	}
	return mk + strings.Join(fields[:n-1], "|") + fieldSep(mk) + fields[n-1] + mk + "\n"
}

func TestParseQueue(t *testing.T) {
	cases := []struct {
		name    string
		out     string
		want    []Job
		wantErr string
	}{
		{name: "empty", out: "", want: nil},
		{name: "two jobs, comment with separators and spaces",
			out: rec("12", "PENDING", "BeginTime", "gres:shard:4", "1900000000", "n[1-2]", "1", "a100&ib", "nightly a|b coscheml:app=x coscheml-id=ab-1:4") +
				rec("13", "RUNNING", "None", "gres/shard:g1:2", "N/A", "(null)", "2", "(null)", "(null)"),
			want: []Job{
				{ID: 12, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Begin: 1900000000, Exclude: "n[1-2]", Nodes: 1, Features: "a100&ib", Comment: "nightly a|b coscheml:app=x coscheml-id=ab-1:4"},
				{ID: 13, State: "RUNNING", Reason: "None", Tres: "gres/shard:g1:2", Nodes: 2},
			}},
		{name: "array record skipped", out: rec("14_[1-3]", "PENDING", "BeginTime", "gres:shard:4", "0", "(null)", "1", "(null)", "coscheml:app=x"), want: nil},
		{name: "no tres", out: rec("15", "PENDING", "Priority", "N/A", "Unknown", "bad list[", "-3", "(null)", "x"), want: []Job{{ID: 15, State: "PENDING", Reason: "Priority", Nodes: 1, Comment: "x"}}},
		// A comment with a newline and a forged record cannot make a record: it
		// does not know the marker.
		{name: "forged line inside a comment",
			out:  rec("16", "PENDING", "BeginTime", "gres:shard:4", "5", "(null)", "1", "(null)", "coscheml:app=x\n17|PENDING|BeginTime|gres:gpu:8|9|(null)|(null)|coscheml:app=y coscheml-id=z-1:4"),
			want: []Job{{ID: 16, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Begin: 5, Nodes: 1, Comment: "coscheml:app=x\n17|PENDING|BeginTime|gres:gpu:8|9|(null)|(null)|coscheml:app=y coscheml-id=z-1:4"}}},
		// Features with separators (a user's --constraint) stay in their field and
		// are not sent back unless they are a plain list.
		{name: "constraint expression",
			out:  rec("18", "PENDING", "BeginTime", "gres:gpu:1", "7", "(null)", "1", "a100|h100", "coscheml:app=x"),
			want: []Job{{ID: 18, State: "PENDING", Reason: "BeginTime", Tres: "gres:gpu:1", Begin: 7, Nodes: 1, Comment: "coscheml:app=x"}}},
		{name: "text outside records", out: "squeue: error: x\n" + rec("1", "PENDING", "None", "", "0", "", "1", "", ""), wantErr: "outside a record"},
		{name: "unbalanced", out: mk + "1|PENDING|None||0|||x\n", wantErr: "unbalanced"},
		{name: "no field separator", out: mk + "1|PENDING|None||0|||x" + mk + "\n", wantErr: "fields"},
		{name: "too few fields", out: rec("1", "PENDING", "None", "0"), wantErr: "fields"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseQueue(tc.out, mk)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDeferredAndRunning(t *testing.T) {
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	jobs := []Job{
		{ID: 30, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Comment: "coscheml:app=a coscheml-id=p-2:4"},
		{ID: 21, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Comment: "coscheml:app=b coscheml-id=p-1:4"},
		{ID: 22, State: "PENDING", Reason: "Resources", Tres: "gres:shard:2", Comment: "coscheml:app=b coscheml-id=p-3:2"},  // placed, waiting for Slurm
		{ID: 23, State: "PENDING", Reason: "BeginTime", Tres: "gres:gpu:1", Comment: "coscheml:app=b"},                      // no decision token
		{ID: 24, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Comment: "coscheml:app=B! coscheml-id=p-4:4"}, // bad tag
		{ID: 25, State: "PENDING", Reason: "BeginTime", Tres: "", Comment: "coscheml:app=b coscheml-id=p-5:4"},              // no GPU
		{ID: 26, State: "PENDING", Reason: "BeginTime", Tres: "gres:gpu:1", Comment: "--begin by hand"},                     // untagged
		{ID: 9, State: "RUNNING", Reason: "None", Tres: "gres:shard:2", Comment: "coscheml:app=a coscheml-id=p-0:2"},
		{ID: 11, State: "COMPLETING", Reason: "None"},
		// Just re-deferred: Reason=None until the scheduler's next pass, begin ahead.
		{ID: 27, State: "PENDING", Reason: "None", Tres: "gres:shard:4", Begin: now.Unix() + 10, Comment: "coscheml:app=a coscheml-id=p-6:4"},
		{ID: 28, State: "PENDING", Reason: "None", Tres: "gres:shard:4", Begin: now.Unix(), Comment: "coscheml:app=a coscheml-id=p-7:4"}, // due: Slurm's now
		// Placed by the loop a moment ago (begin time now): the Reason stays
		// BeginTime until the scheduler's next pass; not deferred.
		{ID: 29, State: "PENDING", Reason: "BeginTime", Tres: "gres/shard:g1:2", Begin: now.Unix() - 1, Comment: "coscheml:app=a coscheml-id=p-8:2"},
		// Deferred, begin time ahead, Reason already BeginTime.
		{ID: 31, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Begin: now.Unix() + 3, Comment: "coscheml:app=a coscheml-id=p-9:4"},
	}
	var ids []uint32
	for _, j := range Deferred(jobs, now) {
		ids = append(ids, j.ID)
	}
	if !reflect.DeepEqual(ids, []uint32{21, 27, 30, 31}) {
		t.Fatalf("deferred %v, want [21 27 30 31] (submit order)", ids)
	}
	if r := Running(jobs); r != "11,9" {
		t.Fatalf("running %q", r)
	}
	if got := UpdateArgs(jobs[1]); !reflect.DeepEqual(got, []string{"update", "JobId=21", "Comment=coscheml:app=b coscheml-id=p-1:4", "TresPerNode=gres:shard:4"}) {
		t.Fatalf("update args %q", got)
	}
	// A job the guard requeued away from a node keeps that exclusion in the
	// re-decision.
	jobs[1].Exclude = "n4"
	if got := UpdateArgs(jobs[1]); !reflect.DeepEqual(got, []string{"update", "JobId=21", "Comment=coscheml:app=b coscheml-id=p-1:4", "TresPerNode=gres:shard:4", "ExcNodeList=n4"}) {
		t.Fatalf("update args %q", got)
	}
	// A job that asked for a GPU model keeps its constraint, also after a
	// slurmctld restart made the plugin forget it.
	jobs[1].Features = "a100"
	if got := UpdateArgs(jobs[1]); !reflect.DeepEqual(got, []string{"update", "JobId=21", "Comment=coscheml:app=b coscheml-id=p-1:4", "TresPerNode=gres:shard:4", "ExcNodeList=n4", "Features=a100"}) {
		t.Fatalf("update args %q", got)
	}
	// A job of several nodes names its count: an update without one hands the
	// plugin no node count.
	jobs[1].Nodes = 2
	if got := UpdateArgs(jobs[1]); !reflect.DeepEqual(got, []string{"update", "JobId=21", "Comment=coscheml:app=b coscheml-id=p-1:4", "TresPerNode=gres:shard:4", "ExcNodeList=n4", "Features=a100", "NumNodes=2"}) {
		t.Fatalf("update args %q", got)
	}
}

// fakeSlurm answers squeue with the current queue (in the caller's marker) and
// records scontrol updates.
type fakeSlurm struct {
	queue   []Job
	updates []string
	failID  string
}

func (f *fakeSlurm) run(_ context.Context, name string, args ...string) (string, error) {
	switch name {
	case "squeue":
		format := args[len(args)-1]
		marker := format[:strings.Index(format, "%i")]
		var b strings.Builder
		for _, j := range f.queue {
			fmt.Fprintf(&b, "%s%d|%s|%s|%s|%d|%s|%d|%s%s%s%s\n", marker, j.ID, j.State, j.Reason, j.Tres, j.Begin, j.Exclude, max(j.Nodes, 1), j.Features, fieldSep(marker), j.Comment, marker)
		}
		return b.String(), nil
	case "scontrol":
		if args[1] == "JobId="+f.failID {
			return "", fmt.Errorf("exit status 1: Invalid job id specified")
		}
		f.updates = append(f.updates, args[1])
		return "", nil
	}
	return "", fmt.Errorf("unexpected %s", name)
}

func TestLoopPasses(t *testing.T) {
	deferred := func(id uint32) Job {
		return Job{ID: id, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Comment: fmt.Sprintf("coscheml:app=a coscheml-id=p-%d:4", id)}
	}
	running := func(id uint32) Job { return Job{ID: id, State: "RUNNING", Reason: "None"} }
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	steps := []struct {
		name  string
		queue []Job
		at    time.Duration
		fail  string
		want  []string
	}{
		{name: "first pass: everything deferred, in submit order", queue: []Job{running(1), deferred(5), deferred(3)}, want: []string{"JobId=3", "JobId=5"}},
		// Nothing ran or ended, but the pass before saw a change: once more (the
		// plugin learns of ended jobs a moment after squeue).
		{name: "after a change, once more", queue: []Job{running(1), deferred(5), deferred(3)}, at: time.Second, want: []string{"JobId=3", "JobId=5"}},
		{name: "nothing changed, not due", queue: []Job{running(1), deferred(5), deferred(3)}, at: 2 * time.Second, want: nil},
		{name: "a job ended: all again, a failed update does not stop the rest", queue: []Job{deferred(5), deferred(3), deferred(7)}, at: 3 * time.Second, fail: "5", want: []string{"JobId=3", "JobId=7"}},
		{name: "once more after the change", queue: []Job{deferred(5), deferred(3), deferred(7)}, at: 4 * time.Second, want: []string{"JobId=3", "JobId=5", "JobId=7"}},
		{name: "settled", queue: []Job{deferred(5), deferred(3), deferred(7)}, at: 5 * time.Second},
		{name: "refresh due for all", queue: []Job{deferred(5), deferred(3), deferred(7)}, at: 15 * time.Second, want: []string{"JobId=3", "JobId=5", "JobId=7"}},
	}
	f := &fakeSlurm{}
	var logged []string
	l := &Loop{Run: f.run, Refresh: 10 * time.Second, Log: func(format string, a ...any) { logged = append(logged, fmt.Sprintf(format, a...)) }}
	for _, s := range steps {
		f.queue, f.updates, f.failID = s.queue, nil, s.fail
		n, err := l.Pass(context.Background(), t0.Add(s.at))
		if err != nil || !reflect.DeepEqual(f.updates, s.want) || n != len(s.want) {
			t.Fatalf("%s: updates %v (n=%d, err %v), want %v", s.name, f.updates, n, err, s.want)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "job 5") {
		t.Fatalf("log %q", logged)
	}
}

// TestLoopMaxPerPass: with a bound, the jobs re-decided least recently go first
// (in submit order within a pass), so every deferred job gets its turn.
func TestLoopMaxPerPass(t *testing.T) {
	deferred := func(id uint32) Job {
		return Job{ID: id, State: "PENDING", Reason: "BeginTime", Tres: "gres:shard:4", Comment: fmt.Sprintf("coscheml:app=a coscheml-id=p-%d:4", id)}
	}
	running := func(id uint32) Job { return Job{ID: id, State: "RUNNING", Reason: "None"} }
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	f := &fakeSlurm{}
	l := &Loop{Run: f.run, Refresh: time.Hour, MaxPerPass: 2}
	steps := []struct {
		queue []Job
		want  []string
	}{
		{[]Job{running(1), deferred(4), deferred(3), deferred(2)}, []string{"JobId=2", "JobId=3"}},
		{[]Job{running(9), deferred(4), deferred(3), deferred(2)}, []string{"JobId=2", "JobId=4"}}, // 4 never tried: first; then 2 (tried at 0s, before 3)
		{[]Job{running(8), deferred(4), deferred(3), deferred(2), deferred(7)}, []string{"JobId=3", "JobId=7"}},
	}
	for i, s := range steps {
		f.queue, f.updates = s.queue, nil
		if _, err := l.Pass(context.Background(), t0.Add(time.Duration(i)*time.Second)); err != nil || !reflect.DeepEqual(f.updates, s.want) {
			t.Fatalf("pass %d: updates %v (err %v), want %v", i, f.updates, err, s.want)
		}
	}
}

func FuzzParseQueue(f *testing.F) {
	f.Add(rec("12", "PENDING", "BeginTime", "gres:shard:4", "1900000000", "(null)", "1", "a100&ib", "coscheml:app=x coscheml-id=ab-1:4"))
	f.Add(rec("13", "PENDING", "BeginTime", "gres:gpu:1", "5", "n1", "1", "a|b&c", "x|y"))
	f.Add(mk + "1|x" + mk + mk)
	f.Add("junk")
	f.Fuzz(func(t *testing.T, out string) {
		jobs, err := ParseQueue(out, mk)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if strings.Contains(j.State+j.Reason+j.Tres, "|") || strings.Contains(j.Comment, mk) ||
				j.Features != "" && !plainFeaturesRE.MatchString(j.Features) {
				t.Fatalf("field spans a separator: %+v", j)
			}
		}
		_ = Deferred(jobs, time.Unix(1_800_000_000, 0))
	})
}
