// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coscheml/coscheml/internal/nohang"
)

// The log lists every job's uid, tag and node, so it is created 0640 (readable by
// SlurmUser's group, not by everyone: Slurm's PrivateData must not be sidestepped),
// and an existing log with wider modes is tightened when the writer opens it.
func TestLogMode(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		existing os.FileMode // 0: no file before
	}{
		{"new", 0},
		{"existing 0644", 0o644},
		{"existing 0666", 0o666},
		{"existing 0600", 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".log")
			want := os.FileMode(0o640)
			if tc.existing != 0 {
				if err := os.WriteFile(path, nil, tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil {
					t.Fatal(err)
				}
				want = tc.existing &^ 0o027
			}
			w := NewWriter(path, 0, 0)
			w.Log(Record{ID: "m1", Reason: "x"})
			w.Close()
			if err := w.Err(); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != want {
				t.Fatalf("mode %v, want %v", st.Mode().Perm(), want)
			}
		})
	}
}

// A symlink or FIFO where the log should be is refused (the writer is SlurmUser,
// the folder may be shared), and readers do not hang on a FIFO.
func TestLogRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, nil, 0o644)
	link := filepath.Join(dir, "link.log")
	os.Symlink(target, link)
	w := NewWriter(link, 0, 0)
	w.Log(Record{ID: "s1", Reason: "x"})
	w.Close()
	if b, _ := os.ReadFile(target); len(b) != 0 || w.Err() == nil {
		t.Fatalf("wrote through a symlink (%q), err %v", b, w.Err())
	}
	fifo := filepath.Join(dir, "fifo.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	err := nohang.Call(t, "Find on a FIFO", func() error { _, err := Find(fifo, "x", ""); return err })
	if err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("Find on a FIFO: %v", err)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// Two controllers (HA) appending to one log both see it full; the second must not
// rotate again, which would move the first's fresh (nearly empty) file over the
// full rotated one and lose it. Driven step by step through rotate so that the
// interleaving is the bad one every time.
func TestRotationTwoWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	a := &Writer{path: path, maxBytes: 1000}
	b := &Writer{path: path, maxBytes: 1000}
	fa, err := a.open()
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.open()
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	for i := 0; i < 10; i++ { // 1000 bytes: full
		fa.Write(line)
	}
	if fa, err = a.rotate(fa, len(line)); err != nil {
		t.Fatal(err)
	}
	fa.Write(line) // a's first record in the new file
	if fb, err = b.rotate(fb, len(line)); err != nil {
		t.Fatal(err)
	}
	fb.Write(line)
	fa.Close()
	fb.Close()
	if n := countLines(t, path+".1"); n != 10 {
		t.Fatalf("%s.1 has %d lines, want the 10 of the full log (rotated twice?)", path, n)
	}
	if n := countLines(t, path); n != 2 {
		t.Fatalf("%s has %d lines, want 2 (one from each writer)", path, n)
	}
}

// While the other controller holds the rotation lock, a writer keeps its file and
// does not rename (it checks again at its next record).
func TestRotationWaitsForLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	w := &Writer{path: path, maxBytes: 100}
	f, err := w.open()
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(strings.Repeat("x", 99) + "\n"))
	other, err := os.Open(path) // another open file description: flock conflicts
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := flock(other, syscall.LOCK_EX|syscall.LOCK_NB); !ok || err != nil {
		t.Skipf("no flock here: %v", err)
	}
	g, err := w.rotate(f, 10)
	if err != nil || g != f {
		t.Fatalf("rotate under a held lock: %v, same file %v", err, g == f)
	}
	if _, err := os.Stat(path + ".1"); !os.IsNotExist(err) {
		t.Fatalf("rotated under the other writer's lock: %v", err)
	}
	flock(other, syscall.LOCK_UN)
	other.Close()
	if g, err = w.rotate(f, 10); err != nil || g == f {
		t.Fatalf("rotate after unlock: %v", err)
	}
	g.Close()
	if n := countLines(t, path+".1"); n != 1 {
		t.Fatalf("%s.1: %d lines, want 1", path, n)
	}
}
