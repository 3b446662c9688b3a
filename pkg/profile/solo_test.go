package profile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSoloReference(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	run := func(h int, secs float64, uid string) SoloRun { return SoloRun{RuntimeS: secs, UID: uid, When: at(h)} }
	tests := []struct {
		name  string
		runs  []SoloRun
		ready bool
		want  float64
	}{
		{"none", nil, false, 0},
		{"two runs are not enough", []SoloRun{run(1, 100, "1"), run(2, 100, "2")}, false, 0},
		{"median of three", []SoloRun{run(1, 100, "1"), run(2, 90, "2"), run(3, 4000, "3")}, true, 100},
		{"median of four", []SoloRun{run(1, 100, "1"), run(2, 90, "2"), run(3, 110, "3"), run(4, 120, "4")}, true, 105},
		{"short runs never count", []SoloRun{run(1, 100, "1"), run(2, 5, "2"), run(3, 59, "3"), run(4, 100, "4")}, false, 0},
		{"one user alone is never enough", []SoloRun{run(1, 61, "6"), run(2, 61, "6"), run(3, 61, "6"), run(4, 61, "6")}, false, 0},
		{"one user's newest two count", []SoloRun{run(1, 500, "6"), run(2, 61, "6"), run(3, 61, "6"), run(4, 100, "1"), run(5, 100, "2"), run(6, 100, "3")}, true, 100},
		{"unknown uids are one user", []SoloRun{run(1, 100, ""), run(2, 100, ""), run(3, 100, "")}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref := SoloReference(tc.runs)
			if ref.Ready != tc.ready || ref.RuntimeS != tc.want {
				t.Errorf("reference %+v, want ready %v run time %v", ref, tc.ready, tc.want)
			}
		})
	}
	// Throughput: the median once enough of the runs used reported one.
	runs := []SoloRun{{RuntimeS: 100, Throughput: 600, UID: "1", When: at(1)}, {RuntimeS: 100, Throughput: 10, UID: "2", When: at(2)},
		{RuntimeS: 100, Throughput: 610, UID: "3", When: at(3)}}
	if ref := SoloReference(runs); ref.Throughput != 600 {
		t.Errorf("throughput %v, want the median 600", ref.Throughput)
	}
	runs[1].Throughput = 0
	if ref := SoloReference(runs); ref.Throughput != 0 || !ref.Ready {
		t.Errorf("two reports: %+v, want ready with no throughput", ref)
	}
}

func TestAddSoloRun(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.AddSoloRun("x", SoloRun{RuntimeS: 5, UID: "1", When: t0}); !errors.Is(err, ErrShortRun) {
		t.Errorf("short run: %v", err)
	}
	var ref SoloRef
	for i := 0; i < MaxSoloRunsKept+5; i++ {
		if ref, err = s.AddSoloRun("x", SoloRun{RuntimeS: float64(100 + i), UID: fmt.Sprint(i), JobID: fmt.Sprint(i), When: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.SoloRuns("x")
	if err != nil || len(runs) != MaxSoloRunsKept || runs[0].RuntimeS != 105 {
		t.Fatalf("kept %d runs (first %+v), err %v", len(runs), runs[0], err)
	}
	if !ref.Ready || ref.RuntimeS != 112 {
		t.Errorf("reference %+v, want the median of 105..119 = 112", ref)
	}
	// The log is invisible to the profile store's readers.
	if ps, problems := s.List(); len(ps) != 0 || len(problems) != 0 {
		t.Errorf("List sees %v %v", ps, problems)
	}
	// A damaged log starts over instead of blocking every run.
	os.WriteFile(filepath.Join(s.Dir(), ".solo", "x.json"), []byte("{"), 0o644)
	if _, err := s.SoloRuns("x"); !errors.Is(err, ErrFormat) {
		t.Errorf("damaged log: %v", err)
	}
	if ref, err := s.AddSoloRun("x", SoloRun{RuntimeS: 100, UID: "1", When: t0}); err != nil || ref.Runs != 1 {
		t.Errorf("after damage: %+v %v", ref, err)
	}
}
