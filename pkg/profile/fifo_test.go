// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coscheml/coscheml/internal/nohang"
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
			err := nohang.Call(t, "Get("+tc.tag+")", func() error { _, err := s.Get(tc.tag); return err })
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get(%s) = %v; want an error naming %s as %s", tc.tag, err, tc.path, tc.want)
			}
		})
	}
	// List reports both as problems and still returns (no hang).
	var probs []error
	nohang.Call(t, "List", func() error { _, probs = s.List(); return nil })
	if len(probs) != 2 {
		t.Fatalf("List problems %v, want 2", probs)
	}
}
