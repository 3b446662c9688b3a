// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSince(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(id string, at time.Time) []byte {
		b, err := json.Marshal(Record{ID: id, Time: at, Op: "submit", Outcome: "rewrite", Action: "share", GPU: 1})
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	var old, cur bytes.Buffer
	old.Write(rec("a", t0))
	old.Write(rec("b", t0.Add(time.Minute)))
	cur.WriteString("not json\n")
	cur.Write(rec("c", t0.Add(2*time.Minute)))
	cur.WriteString(strings.Repeat("x", maxLine+10) + "\n")
	cur.Write(rec("d", t0.Add(3*time.Minute)))
	cur.WriteString(`{"id":"torn","time":"2026-01-02T03:10`) // a crash mid-line
	if err := os.WriteFile(path+".1", old.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, cur.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		since time.Time
		want  string
	}{
		{"all", time.Time{}, "a b c d"},
		{"from b on, across the rotation", t0.Add(time.Minute), "b c d"},
		{"only the newest", t0.Add(3 * time.Minute), "d"},
		{"none", t0.Add(time.Hour), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := Since(path, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if got := strings.Join(ids, " "); got != tt.want {
				t.Errorf("ids %q, want %q", got, tt.want)
			}
		})
	}
	if recs, err := Since(filepath.Join(dir, "missing.log"), time.Time{}); err != nil || len(recs) != 0 {
		t.Errorf("missing log: %v, %v", recs, err)
	}
}

func FuzzReadSince(f *testing.F) {
	f.Add([]byte(`{"id":"a","time":"2026-01-02T03:04:05Z","gpu":1}` + "\n"))
	f.Add([]byte("garbage\n\n{\"id\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readRecords(bytes.NewReader(data), func(*Record) bool { return true })
		if err != nil {
			t.Fatalf("in-memory read failed: %v", err)
		}
		if len(recs) > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d records from %d lines", len(recs), bytes.Count(data, []byte("\n"))+1)
		}
	})
}
