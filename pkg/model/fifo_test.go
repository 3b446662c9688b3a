package model

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO where the model file should be is refused with an error naming it;
// before, Load blocked forever in open(2) (and with it slurmctld's start).
func TestLoadRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("Load = %v; want an error naming %s as a FIFO", err, fifo)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
