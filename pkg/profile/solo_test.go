// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		{"two users are not enough", []SoloRun{run(1, 100, "1"), run(2, 100, "2")}, false, 0},
		{"median of three users", []SoloRun{run(1, 100, "1"), run(2, 90, "2"), run(3, 4000, "3")}, true, 100},
		{"median of four users", []SoloRun{run(1, 100, "1"), run(2, 90, "2"), run(3, 110, "3"), run(4, 120, "4")}, true, 105},
		{"short runs never count", []SoloRun{run(1, 100, "1"), run(2, 5, "2"), run(3, 59, "3"), run(4, 100, "4")}, false, 0},
		{"one user alone is never enough", []SoloRun{run(1, 61, "6"), run(2, 61, "6"), run(3, 61, "6"), run(4, 61, "6")}, false, 0},
		{"a user counts by the median of their runs", []SoloRun{run(1, 500, "6"), run(2, 61, "6"), run(3, 61, "6"), run(4, 100, "1"), run(5, 100, "2"), run(6, 110, "3")}, true, 100},
		{"a user's newest five runs count", []SoloRun{run(1, 900, "6"), run(2, 900, "6"), run(3, 900, "6"), run(4, 70, "6"), run(5, 70, "6"), run(6, 70, "6"), run(7, 70, "6"), run(8, 70, "6"), run(9, 100, "1"), run(10, 90, "2")}, true, 90},
		{"unknown uids are one user", []SoloRun{run(1, 100, ""), run(2, 100, ""), run(3, 100, "")}, false, 0},
		// The attack: two runs of one user and one honest run used to give the
		// first user's value (960 s, so an honest co-run of speed 0.60 read 0.96).
		{"two runs of one user and one honest run", []SoloRun{run(1, 960, "66"), run(2, 960, "66"), run(3, 600, "1")}, false, 0},
		{"one user against two honest users", []SoloRun{run(1, 960, "66"), run(2, 960, "66"), run(3, 600, "1"), run(4, 610, "2")}, true, 610},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref := SoloReference(tc.runs)
			if ref.Ready != tc.ready || ref.RuntimeS != tc.want {
				t.Errorf("reference %+v, want ready %v run time %v", ref, tc.ready, tc.want)
			}
		})
	}
	// Throughput: the median of the users' medians once enough users reported one.
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

// One uid's flood of solo runs (15 one-minute `sleep`s) used to push every
// other user's run out of the log and set the reference alone; runs are now
// kept per user, so the honest users' runs and their reference stay.
func TestSoloFloodKeepsOtherUsersRuns(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, rt := range []float64{600, 590, 610} {
		if _, err := s.AddSoloRun("x", SoloRun{RuntimeS: rt, UID: fmt.Sprint(1000 + i), When: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	var ref SoloRef
	for i := 0; i < 15; i++ {
		if ref, err = s.AddSoloRun("x", SoloRun{RuntimeS: 960, UID: "66", When: t0.Add(time.Hour + time.Duration(i)*time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if !ref.Ready || ref.RuntimeS != 605 || ref.Users != 4 {
		t.Errorf("after the flood: %+v, want the median of 590, 600, 610, 960 over 4 users = 605", ref)
	}
	// One honest run after the flood used to be all that was left of the others.
	ref, err = s.AddSoloRun("x", SoloRun{RuntimeS: 600, UID: "1003", When: t0.Add(2 * time.Hour)})
	if err != nil || !ref.Ready || ref.RuntimeS != 600 {
		t.Errorf("after one more honest run: %+v %v, want 600", ref, err)
	}
	runs, _ := s.SoloRuns("x")
	per := map[string]int{}
	for _, r := range runs {
		per[r.UID]++
	}
	if per["66"] != MaxSoloRunsPerUser || per["1000"] != 1 || per["1001"] != 1 || per["1002"] != 1 || per["1003"] != 1 {
		t.Errorf("kept per user %v", per)
	}
}

// The kept users are bounded: the least recently active user goes first.
func TestSoloUsersBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var runs []SoloRun
	for i := 0; i < MaxSoloUsers+5; i++ {
		runs = append(runs, SoloRun{RuntimeS: 100, UID: fmt.Sprint(i), When: t0.Add(time.Duration(i) * time.Minute)})
	}
	kept := keepSoloRuns(runs)
	if len(kept) != MaxSoloUsers || kept[0].UID != "5" {
		t.Errorf("kept %d runs, oldest of uid %s; want %d from uid 5", len(kept), kept[0].UID, MaxSoloUsers)
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
	for i := 0; i < 8; i++ {
		if ref, err = s.AddSoloRun("x", SoloRun{RuntimeS: float64(100 + i), UID: fmt.Sprint(i % 3), JobID: fmt.Sprint(i), When: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.SoloRuns("x")
	if err != nil || len(runs) != 8 || runs[0].RuntimeS != 100 {
		t.Fatalf("kept %d runs (first %+v), err %v", len(runs), runs[0], err)
	}
	// uid 0: 100, 103, 106 -> 103; uid 1: 101, 104, 107 -> 104; uid 2: 102, 105 -> 103.5
	if !ref.Ready || ref.RuntimeS != 103.5 || ref.Users != 3 || ref.Runs != 8 {
		t.Errorf("reference %+v, want the median of 103, 104, 103.5 = 103.5", ref)
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

// A solo log written when the newest 15 runs of anyone were kept still loads, and
// is trimmed to the per-user rule at its next write.
func TestSoloLogOfTheOlderRuleLoads(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for i := 0; i < 15; i++ {
		uid := "66"
		if i < 3 {
			uid = fmt.Sprint(1000 + i)
		}
		runs = append(runs, fmt.Sprintf(`{"runtime_s":%d,"uid":%q,"job_id":"%d","when":"2026-12-01T%02d:00:00Z"}`, 600+i, uid, i, i))
	}
	os.MkdirAll(filepath.Join(s.Dir(), ".solo"), 0o755)
	old := `{"v":1,"tag":"x","runs":[` + strings.Join(runs, ",") + "]}\n"
	if err := os.WriteFile(filepath.Join(s.Dir(), ".solo", "x.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.SoloRuns("x")
	if err != nil || len(got) != 15 {
		t.Fatalf("old log: %d runs, %v", len(got), err)
	}
	ref, err := s.AddSoloRun("x", SoloRun{RuntimeS: 600, UID: "1003", When: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)})
	if got, _ = s.SoloRuns("x"); err != nil || len(got) != 4+MaxSoloRunsPerUser || !ref.Ready || ref.Users != 5 {
		t.Errorf("after a write: %d runs, reference %+v, %v", len(got), ref, err)
	}
}
