// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteFind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "decisions.log")
	w := NewWriter(path, 0, 0)
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	recs := []Record{
		{ID: "a1", Time: t0, Op: "submit", Tag: "x", Outcome: "rewrite", Action: "share", Node: "n2", GPU: 1, Shards: 2, PredictedSpeed: 0.9, Reason: "fits"},
		{ID: "a2", Time: t0, Op: "submit", Tag: "y", Outcome: "reject", Action: "pass", GPU: -1, Reason: "unknown profile"},
		{ID: "a1", Time: t0.Add(time.Second), Op: "modify", JobID: "17", Tag: "x", Outcome: "rewrite", Action: "exclusive", Node: "n3", GPU: 0, Reason: "again"},
	}
	for _, r := range recs {
		if !w.Log(r) {
			t.Fatal("Log dropped a record")
		}
	}
	w.Close()
	if w.Log(recs[0]) {
		t.Fatal("Log after Close succeeded")
	}
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	// Simulate a torn last line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"a9","ti`)
	f.Close()
	got, err := Find(path, "a1", "")
	if err != nil || got.Op != "modify" || got.Node != "n3" {
		t.Fatalf("Find a1: %+v, %v", got, err)
	}
	got, err = Find(path, "", "17")
	if err != nil || got.ID != "a1" {
		t.Fatalf("Find job 17: %+v, %v", got, err)
	}
	got, err = Find(path, "a2", "")
	if err != nil || got.Reason != "unknown profile" || got.GPU != -1 {
		t.Fatalf("Find a2: %+v, %v", got, err)
	}
	if _, err := Find(path, "a9", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("torn record found: %v", err)
	}
}

func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	w := NewWriter(path, 1000, 0)
	for i := 0; i < 40; i++ {
		w.Log(Record{ID: "id" + strings.Repeat("x", i%3), Reason: strings.Repeat("r", 50), GPU: i})
	}
	w.Close()
	for _, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1000 {
			t.Errorf("%s is %d bytes, bound 1000", p, fi.Size())
		}
	}
	got, err := Find(path, "idxx", "")
	if err != nil || got.GPU != 38 {
		t.Fatalf("newest idxx: %+v %v", got, err)
	}
}

func TestLogNeverBlocks(t *testing.T) {
	// An unwritable path: records are dropped or fail, never block the caller.
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o644)
	w := NewWriter(filepath.Join(blocker, "d.log"), 0, 2)
	for i := 0; i < 100; i++ {
		w.Log(Record{ID: "x"})
	}
	w.Close()
	if w.Err() == nil {
		t.Fatal("want a write error")
	}
	if w.Dropped() == 0 {
		t.Fatal("want dropped records")
	}
}

// TestLinger: with a linger, the first record after a pause reaches the file
// at once; the rest of a burst waits for the linger (here an hour, so only
// Close can write them), and Close writes every queued record without waiting.
func TestLinger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	w := NewWriterLinger(path, 0, 0, time.Hour)
	w.Log(Record{ID: "first", Time: time.Now(), Op: "submit", Outcome: "rewrite", Action: "share"})
	// The first record is written without waiting for the linger.
	deadline := time.Now().Add(10 * time.Second)
	var recs []Record
	for time.Now().Before(deadline) {
		var err error
		if recs, err = Since(path, time.Time{}); err == nil && len(recs) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(recs) != 1 || recs[0].ID != "first" {
		t.Fatalf("the first record is not in the log: %+v", recs)
	}
	for i := range 5 {
		w.Log(Record{ID: fmt.Sprintf("burst-%d", i), Time: time.Now(), Op: "submit", Outcome: "rewrite", Action: "share"})
	}
	time.Sleep(50 * time.Millisecond)
	// A burst's first record is written at once, the others wait.
	if recs, err := Since(path, time.Time{}); err != nil || len(recs) > 2 {
		t.Errorf("during the linger the log holds %d records (%v), want at most 2", len(recs), err)
	}
	w.Close() // must not wait for the hour
	recs, err := Since(path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if want := []string{"first", "burst-0", "burst-1", "burst-2", "burst-3", "burst-4"}; !slices.Equal(ids, want) {
		t.Errorf("records after Close %v, want %v", ids, want)
	}
}

// TestLingerBatch: a burst's records queued during the linger reach the file
// together after it, in order, without Close.
func TestLingerBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	w := NewWriterLinger(path, 0, 0, 30*time.Millisecond)
	defer w.Close()
	var want []string
	for i := range 50 {
		id := fmt.Sprintf("r-%d", i)
		want = append(want, id)
		w.Log(Record{ID: id, Time: time.Now(), Op: "submit", Outcome: "rewrite", Action: "share"})
	}
	deadline := time.Now().Add(10 * time.Second)
	var ids []string
	for time.Now().Before(deadline) {
		recs, err := Since(path, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		if len(ids) == len(want) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(ids, want) || w.Dropped() != 0 {
		t.Fatalf("log holds %v (dropped %d), want %v", ids, w.Dropped(), want)
	}
}

// JobRecords returns one job's records of one op, oldest first, across the
// rotated and the current file, the newest limit of them.
func TestJobRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n1.log")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := func(i int, job, op string) Record {
		return Record{ID: fmt.Sprintf("g%d", i), Time: t0.Add(time.Duration(i) * time.Minute), Op: op, JobID: job, Outcome: "taken", Action: "requeue", GPU: 0, Reason: "r"}
	}
	old := NewWriter(path+".1", 0, 0)
	old.Log(rec(1, "5", OpGuard))
	old.Log(rec(2, "6", OpGuard))
	old.Close()
	w := NewWriter(path, 0, 0)
	w.Log(rec(3, "5", "modify"))
	w.Log(rec(4, "5", OpGuard))
	w.Log(rec(5, "5", OpGuard))
	w.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"torn","op":"guard","job_id":"5"`) // a crash mid-line
	f.Close()
	tests := []struct {
		name, path, job, op string
		limit               int
		want                []string
	}{
		{name: "all of a job, rotated first", path: path, job: "5", op: OpGuard, want: []string{"g1", "g4", "g5"}},
		{name: "newest within the limit", path: path, job: "5", op: OpGuard, limit: 2, want: []string{"g4", "g5"}},
		{name: "other op", path: path, job: "5", op: "modify", want: []string{"g3"}},
		{name: "other job", path: path, job: "6", op: OpGuard, want: []string{"g2"}},
		{name: "unknown job", path: path, job: "7", op: OpGuard},
		{name: "no file", path: filepath.Join(dir, "none.log"), job: "5", op: OpGuard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JobRecords(tt.path, tt.job, tt.op, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("records %v, want %v", ids, tt.want)
			}
		})
	}
}
