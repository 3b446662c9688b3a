// SPDX-License-Identifier: Apache-2.0

//go:build unix

package observation

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The Epilog appends as root: a symlink or a FIFO planted at the path is refused.
func TestAppendFileRefusesSymlinkAndFIFO(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	link := filepath.Join(dir, "n1.csv")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := AppendFile(link, Observation{Tag: "a", Speed: 1}); err == nil {
		t.Error("appended through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("symlink target changed: %q", b)
	}
	fifo := filepath.Join(dir, "n2.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendFile(fifo, Observation{Tag: "a", Speed: 1}); err == nil {
		t.Error("appended to a FIFO")
	}
}
