// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/nohang"
)

// A FIFO or a symlink in active/ (a folder node-side writers share) is refused
// with an error naming it; before, the reader slurmctld runs blocked forever on the
// FIFO and followed the symlink.
func TestReadRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := Entry{JobID: "1", Node: "n1", GPUs: []int{0}, Shards: 1, Tag: "a", DecisionID: "d-1", Start: now, Expires: now.Add(time.Hour)}
	if err := s.Start(good); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "active", fileName("2", "n1"))
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "active", fileName("3", "n1"))
	goodPath, _ := s.activePath("1", "n1")
	if err := os.Symlink(goodPath, link); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res ReadResult
		err error
	}
	var got result
	nohang.Call(t, "List with a FIFO in active/", func() error {
		got.res, got.err = s.List(now, time.Minute)
		return nil
	})
	if got.err != nil || len(got.res.Entries) != 1 || got.res.Entries[0].JobID != "1" {
		t.Fatalf("List = %+v, %v; want job 1 alone", got.res.Entries, got.err)
	}
	probs := ""
	for _, p := range got.res.NewProblems {
		probs += p.Error() + "\n"
	}
	for _, want := range []string{fileName("2", "n1"), "FIFO", fileName("3", "n1"), "symlink"} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems lack %q:\n%s", want, probs)
		}
	}
	err = nohang.Call(t, "Get of a FIFO", func() error { _, err := s.Get("2", "n1"); return err })
	if err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("Get of a FIFO: %v", err)
	}
}

// A FIFO where active/ or done/ should be is an error (or, for done/, no markers),
// never a hang of the reader slurmctld runs.
func TestReadRefusesFIFOFolders(t *testing.T) {
	for _, sub := range []string{"active", "done"} {
		t.Run(sub, func(t *testing.T) {
			dir := t.TempDir()
			if err := syscall.Mkfifo(filepath.Join(dir, sub), 0o644); err != nil {
				t.Fatal(err)
			}
			s, _ := Open(dir)
			err := nohang.Call(t, "List with a FIFO for "+sub+"/", func() error { _, err := s.List(time.Now(), time.Minute); return err })
			if sub == "active" && (err == nil || !strings.Contains(err.Error(), "not a folder")) {
				t.Fatalf("List with a FIFO for active/: %v", err)
			}
		})
	}
}
