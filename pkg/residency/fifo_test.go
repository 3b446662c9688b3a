package residency

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	done := make(chan result, 1)
	go func() { r, err := s.List(now, time.Minute); done <- result{r, err} }()
	var got result
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("List blocked on a FIFO in active/")
	}
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
	gdone := make(chan error, 1)
	go func() { _, err := s.Get("2", "n1"); gdone <- err }()
	select {
	case err := <-gdone:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("Get of a FIFO: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Get blocked on a FIFO")
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
			done := make(chan error, 1)
			go func() { _, err := s.List(time.Now(), time.Minute); done <- err }()
			select {
			case err := <-done:
				if sub == "active" && (err == nil || !strings.Contains(err.Error(), "not a folder")) {
					t.Fatalf("List with a FIFO for active/: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("List blocked on a FIFO for %s/", sub)
			}
		})
	}
}
