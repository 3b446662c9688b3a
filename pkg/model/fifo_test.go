// SPDX-License-Identifier: Apache-2.0

package model

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coscheml/coscheml/internal/nohang"
)

// A FIFO where the model file should be is refused with an error naming it;
// before, Load blocked forever in open(2) (and with it slurmctld's start).
func TestLoadRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	err := nohang.Call(t, "Load of a FIFO", func() error { _, err := Load(fifo); return err })
	if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("Load = %v; want an error naming %s as a FIFO", err, fifo)
	}
}
