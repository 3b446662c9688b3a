// SPDX-License-Identifier: Apache-2.0

package placeconf

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/policyname"
	"github.com/coscheml/coscheml/pkg/profile"
)

// The configuration's defaults are placement's defaults, and its slots too.
func TestDefaultsMatchConfig(t *testing.T) {
	cfg := config.Default()
	d := placement.DefaultOptions()
	got := Options(cfg)
	if got != d || cfg.SlotsPerGPU != placement.DefaultSlots {
		t.Fatalf("config defaults %+v with %d slots; placement %+v with %d", got, cfg.SlotsPerGPU, d, placement.DefaultSlots)
	}
	if Reach(cfg) != placement.ReachFirstFit {
		t.Fatalf("default reach %v, want first-fit (Slurm 22.05's allocator)", Reach(cfg))
	}
}

func TestOptionsAndReach(t *testing.T) {
	cfg := config.Default()
	cfg.SpeedFloor.Infer = 0.95
	cfg.MaxCoRunners = 3
	cfg.MemReserveMiB = 512
	cfg.FloorConfidence = 1.5
	cfg.ShardPinning = config.PinTyped
	o := Options(cfg)
	if o.Floors.Infer != 0.95 || o.MaxCoRunners != 3 || o.MemReserveMiB != 512 || o.FloorConfidence != 1.5 {
		t.Fatalf("options %+v do not follow the configuration", o)
	}
	if Reach(cfg) != placement.ReachTyped {
		t.Fatalf("shard_pinning typed: reach %v", Reach(cfg))
	}
}

// Every configurable policy name builds through the adapter; a bad name names it.
func TestPolicy(t *testing.T) {
	for _, name := range policyname.Configurable() {
		cfg := config.Default()
		cfg.Policy = name
		p, err := Policy(cfg, constPred(0.9))
		if err != nil || p.Name() != name {
			t.Fatalf("%s: %v, %v", name, p, err)
		}
	}
	if _, err := PolicyNamed("fifo", config.Default(), constPred(1)); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

type constPred float64

func (c constPred) PredictSpeed(_ *profile.Profile, co []*profile.Profile) float64 {
	if len(co) == 0 {
		return 1
	}
	return float64(c)
}
