// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coscheml/coscheml/internal/nohang"
)

// A FIFO where the configuration should be is refused with an error naming it;
// before, Load blocked forever in open(2) (slurmctld's start with it). The
// goroutine and bound only fail the test cleanly on a regression.
func TestLoadRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "coscheml.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"fifo", fifo, "FIFO"},
		{"folder", dir, "folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := nohang.Call(t, "Load of "+tc.name, func() error { _, err := Load(tc.path); return err })
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(%s) = %v; want an error naming it as %s", tc.path, err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "none.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want not-exist", err)
	}
}
