// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Done markers are created by the root Epilog, so slurmctld cannot remove them;
// reconcile (root) prunes them by age, and only them.
func TestReconcilePrunesDoneMarkersByAge(t *testing.T) {
	s, _ := Open(t.TempDir())
	now := time.Now()
	for i, age := range []time.Duration{0, DoneTTL / 2, DoneTTL + time.Minute, DoneTTL + 2*time.Hour, 30 * 24 * time.Hour} {
		e := entry(fmt.Sprint(500+i), "n1", []int{0}, "a", now.Add(-time.Hour))
		e.DecisionID = fmt.Sprintf("d%d", i)
		if err := s.Start(e); err != nil {
			t.Fatal(err)
		}
		if _, err := s.End(e.JobID, "n1", now); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(s.Dir(), "done", e.DecisionID)
		if err := os.Chtimes(marker, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Reconcile(now, 10*time.Minute, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(s.Dir(), "done"))
	var names []string
	for _, de := range left {
		names = append(names, de.Name())
	}
	// d2 is DoneTTL+1m old: still inside DoneTTL + grace (10m).
	if res.DonePruned != 2 || fmt.Sprint(names) != "[d0 d1 d2]" {
		t.Errorf("pruned %d, left %v; want 2 pruned and [d0 d1 d2] left (problems %v)", res.DonePruned, names, res.Problems)
	}
}

// A writer that died between create and rename leaves a temp file in active/;
// reconcile removes it once it is older than grace, and never a young one.
func TestReconcileRemovesLeftoverTmp(t *testing.T) {
	s, _ := Open(t.TempDir())
	now := time.Now()
	if err := s.Start(entry("600", "n1", []int{0}, "a", now)); err != nil {
		t.Fatal(err)
	}
	active := filepath.Join(s.Dir(), "active")
	oldTmp := filepath.Join(active, ".600@n1.json.1234.tmp")
	youngTmp := filepath.Join(active, ".601@n1.json.5678.tmp")
	other := filepath.Join(active, ".keep")
	for _, p := range []string{oldTmp, youngTmp, other} {
		os.WriteFile(p, []byte("{"), 0o644)
	}
	os.Chtimes(oldTmp, now.Add(-time.Hour), now.Add(-time.Hour))
	os.Chtimes(other, now.Add(-time.Hour), now.Add(-time.Hour))
	res, err := s.Reconcile(now, 10*time.Minute, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TmpRemoved) != 1 || res.TmpRemoved[0] != filepath.Base(oldTmp) {
		t.Errorf("removed %v", res.TmpRemoved)
	}
	for p, want := range map[string]bool{oldTmp: false, youngTmp: true, other: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if _, err := s.Get("600", "n1"); err != nil {
		t.Errorf("live entry touched: %v", err)
	}
}

// Root appends never follow a symlink someone planted in the shared folder.
func TestRootWritesRefuseSymlinks(t *testing.T) {
	s, _ := Open(t.TempDir())
	now := time.Now()
	outside := t.TempDir()
	// A done marker whose name is a symlink to a file root would create.
	os.MkdirAll(filepath.Join(s.Dir(), "done"), 0o755)
	created := filepath.Join(outside, "nologin")
	os.Symlink(created, filepath.Join(s.Dir(), "done", "evil-1"))
	// A history log that is a symlink to a file root would append to.
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	os.MkdirAll(filepath.Join(s.Dir(), "history", "n1"), 0o755)
	os.Symlink(victim, filepath.Join(s.Dir(), "history", "n1", "gpu0.log"))

	e := entry("700", "n1", []int{0}, "a", now)
	e.DecisionID = "evil-1"
	if err := s.Start(e); err == nil {
		t.Error("start appended through a symlinked history log")
	}
	if _, err := s.End("700", "n1", now); err == nil {
		t.Error("end wrote through symlinks without an error")
	}
	if _, err := os.Stat(created); err == nil {
		t.Error("the done marker was created through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("history appended through a symlink: %q", b)
	}
}

// A folder full of junk costs reconcile one bounded pass: young unreadable files
// (more than the batch size) are each reported once in total as a count beyond the
// first maxProblems, old ones removed, and the good entry stays.
func TestReconcileJunkIsBounded(t *testing.T) {
	s, _ := Open(t.TempDir())
	now := time.Now()
	if err := s.Start(entry("700", "n1", []int{0}, "a", now)); err != nil {
		t.Fatal(err)
	}
	active := filepath.Join(s.Dir(), "active")
	const young, old = 4200, 300
	for i := 0; i < young+old; i++ {
		p := filepath.Join(active, fmt.Sprintf("%d@n9.json", 10000+i))
		if err := os.WriteFile(p, []byte("{torn"), 0o644); err != nil {
			t.Fatal(err)
		}
		if i >= young {
			os.Chtimes(p, now.Add(-time.Hour), now.Add(-time.Hour))
		}
	}
	for _, tc := range []struct {
		name           string
		corrupt, total int
	}{{"first pass", old, young + old}, {"second pass", 0, young}} {
		res, err := s.Reconcile(now, 10*time.Minute, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Corrupt) != tc.corrupt || len(res.Problems) != maxProblems || len(res.Problems)+res.MoreProblems != tc.total {
			t.Fatalf("%s: %d removed, %d problems + %d more; want %d removed, %d + %d", tc.name, len(res.Corrupt),
				len(res.Problems), res.MoreProblems, tc.corrupt, maxProblems, tc.total-maxProblems)
		}
	}
	if _, err := s.Get("700", "n1"); err != nil {
		t.Fatalf("the good entry went: %v", err)
	}
}
