package profile

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO or a symlink where a profile should be is refused with an error naming
// the path; before, Get blocked forever on the FIFO and followed the symlink.
func TestGetRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fifoPath, _ := s.Path("fifo-app")
	if err := syscall.Mkfifo(fifoPath, 0o644); err != nil {
		t.Fatal(err)
	}
	// The link points at a valid profile of the same tag, so only the link itself
	// is the problem.
	other := t.TempDir()
	os2, _ := Open(other)
	p := validProfile()
	p.Tag = "link-app"
	if err := os2.Put(p); err != nil {
		t.Fatal(err)
	}
	target, _ := os2.Path("link-app")
	linkPath, _ := s.Path("link-app")
	if err := os.Symlink(target, linkPath); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tag, path, want string }{
		{"fifo-app", fifoPath, "FIFO"},
		{"link-app", linkPath, "symlink"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := s.Get(tc.tag); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Get(%s) = %v; want an error naming %s as %s", tc.tag, err, tc.path, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Get(%s) blocked", tc.tag)
			}
		})
	}
	// List reports both as problems and still returns (no hang).
	done := make(chan []error, 1)
	go func() { _, probs := s.List(); done <- probs }()
	select {
	case probs := <-done:
		if len(probs) != 2 {
			t.Fatalf("List problems %v, want 2", probs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("List blocked")
	}
}
