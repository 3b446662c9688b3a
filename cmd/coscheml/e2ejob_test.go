// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
)

// An emulated job's reading is its true speed times its solo SM share and its
// profile's memory, or the grown memory once --grow-after has passed.
func TestReadingWriter(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ProfileDir = filepath.Join(dir, "profiles")
	cfg.Cluster.GPUMemoryMiB = 80000
	ps, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Put(&profile.Profile{Tag: "app", Class: profile.ClassTrain, SoloRuntimeS: 10, CollectedAt: time.Now(),
		MemUsedMiB: 3000, SMUtil: profile.Stat{Mean: 80}}); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(dir, "metrics")
	start := time.Now()
	for _, tc := range []struct {
		name     string
		at       time.Duration
		speed    float64
		co       []string
		grow     float64
		wantSM   float64
		wantMiB  float64
		wantBusy bool
	}{
		{name: "alone", speed: 1, wantSM: 80, wantMiB: 3000},
		{name: "slowed by a co-runner", speed: 0.5, co: []string{"other"}, wantSM: 40, wantMiB: 3000, wantBusy: true},
		{name: "before growing", at: time.Second, speed: 1, grow: 70000, wantSM: 80, wantMiB: 3000},
		{name: "grown", at: 3 * time.Second, speed: 1, grow: 70000, wantSM: 80, wantMiB: 70000},
		{name: "grown past the GPU is the GPU", at: 3 * time.Second, speed: 1, grow: 90000, wantSM: 80, wantMiB: 80000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := newReadingWriter(cfg, metrics, "n1", []int{2}, "42", "app", tc.grow, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			w.growAt = start.Add(2 * time.Second)
			w.report(start.Add(tc.at), tc.speed, [][]string{tc.co})
			r, err := nvml.ReadDirReading(metrics, "n1", 2, "42")
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.SMUtil-tc.wantSM) > 1e-9 || r.MemBytes != uint64(tc.wantMiB)<<20 || r.Busy != tc.wantBusy ||
				r.PID != uint32(os.Getpid()) || r.MemTotal != 80000<<20 {
				t.Errorf("reading %+v, want SM %v, %v MiB, busy %v", r, tc.wantSM, tc.wantMiB, tc.wantBusy)
			}
			w.remove()
			if _, err := nvml.ReadDirReading(metrics, "n1", 2, "42"); err == nil {
				t.Error("the reading is still there after remove")
			}
		})
	}
}
