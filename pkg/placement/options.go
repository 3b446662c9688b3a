// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/floors"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Floors is the lowest predicted speed sharing may push a job of each class to
// (pkg/floors' type: the configuration reads the same one).
type Floors = floors.Floors

// classOf is a job's effective class: its own, else its profile's (an empty class
// then gets the strictest floor).
func classOf(cl profile.Class, p *profile.Profile) profile.Class {
	if cl == "" && p != nil {
		return p.Class
	}
	return cl
}

// Options are the knobs shared by every policy, so baselines are measured under the
// same rules (slots, co-runner limit, memory fit) as Co-scheML.
type Options struct {
	// Floors per class (defaults: hpc 0.75, train 0.75, infer 0.9).
	Floors Floors
	// MaxCoRunners is the most jobs on one GPU, the new one included (default 2).
	MaxCoRunners int
	// ShareSlots is the slots a sharing placement takes on one GPU; 0 means
	// GPU.Slots / MaxCoRunners (at least 1).
	ShareSlots int
	// MemReserveMiB is kept free on a shared GPU: a job may join residents only when
	// the sum of all their profiles' MemUsedMiB plus this reserve fits in GPU.MemMiB.
	// A job alone on a GPU always fits (it gets the whole device).
	MemReserveMiB float64
	// PreferShareSpeed: while idle GPUs exist, Co-scheML co-locates only when every
	// affected job's predicted speed is at least this (default 0.85); otherwise it
	// opens an idle GPU. Without idle GPUs, any placement above the floors is taken.
	PreferShareSpeed float64
	// UtilSumThreshold is the UtilSum baseline's limit on the summed solo SM
	// utilization (%) of the jobs on one GPU (default 100).
	UtilSumThreshold float64
	// FloorConfidence is the coverage level (0..1) at which Co-scheML's
	// predictions must clear the floors: a job is co-located only if its
	// prediction less the model's calibrated margin at this coverage
	// (model.Query.Coverage) is at least its floor. 0 (default) uses the coverage
	// the model chose by cross-validation at training; predictors without a
	// lower bound (the oracle's truth) are unaffected. docs/model.md.
	FloorConfidence float64
	// WholeMultiGPU keeps a job of several GPUs on whole idle GPUs. By default
	// (false) such a job may take, on one node, GPUs that are idle or shared
	// with compatible residents, each judged like a one-GPU share, where Slurm
	// can express it: a typed cluster (Reach typed: one shard Type per GPU, so
	// "K shards on each of GPUs i, j" is a request). A job spread over nodes
	// always takes whole idle GPUs.
	WholeMultiGPU bool
	// Seed drives the Random baseline.
	Seed uint64
	// ShareScore is the Lucid peer's per-job sharing score (package
	// sharescore trains one); only the simulator's Lucid uses it.
	ShareScore ShareScorer
}

// ShareScorer gives a job's sharing score from its solo profile: 0 (light)
// to 2 (heavy), as Lucid's classifier does. An interface, not a func, so that
// Options stay comparable.
type ShareScorer interface {
	Score(p *profile.Profile) int
}

// DefaultOptions are the safe defaults (they match etc/coscheml.yaml's).
func DefaultOptions() Options {
	return Options{
		Floors:           floors.Default(),
		MaxCoRunners:     DefaultMaxCoRunners,
		PreferShareSpeed: 0.85,
		UtilSumThreshold: 100,
	}
}

// withDefaults fills zero values with defaults and rejects nonsense.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Floors == (Floors{}) {
		o.Floors = d.Floors
	}
	if o.MaxCoRunners == 0 {
		o.MaxCoRunners = d.MaxCoRunners
	}
	if o.PreferShareSpeed == 0 {
		o.PreferShareSpeed = d.PreferShareSpeed
	}
	if o.UtilSumThreshold == 0 {
		o.UtilSumThreshold = d.UtilSumThreshold
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"floors.hpc", o.Floors.HPC}, {"floors.train", o.Floors.Train}, {"floors.infer", o.Floors.Infer}, {"prefer_share_speed", o.PreferShareSpeed}} {
		if f.v < 0 || f.v > 1 {
			return o, fmt.Errorf("placement option %s = %g: want 0..1", f.name, f.v)
		}
	}
	switch {
	case o.MaxCoRunners < 1:
		return o, fmt.Errorf("placement option max_corunners = %d: want >= 1", o.MaxCoRunners)
	case o.ShareSlots < 0:
		return o, fmt.Errorf("placement option share_slots = %d: want >= 0", o.ShareSlots)
	case o.MemReserveMiB < 0:
		return o, fmt.Errorf("placement option mem_reserve_mib = %g: want >= 0", o.MemReserveMiB)
	case !(o.FloorConfidence >= 0 && o.FloorConfidence < 1):
		return o, fmt.Errorf("placement option floor_confidence = %g: want a coverage level in [0, 1) (0: the model's default)", o.FloorConfidence)
	case o.UtilSumThreshold < 0:
		return o, fmt.Errorf("placement option utilsum_threshold = %g: want >= 0", o.UtilSumThreshold)
	}
	return o, nil
}

// shareSlots is the slots one sharing job takes on a GPU with the given slot count.
func (o *Options) shareSlots(gpuSlots int32) int32 {
	if o.ShareSlots > 0 {
		return int32(o.ShareSlots)
	}
	return max(gpuSlots/int32(o.MaxCoRunners), 1)
}

// sharesMulti says whether a several-GPU job may share GPUs on cluster c.
func (o *Options) sharesMulti(c *Cluster) bool { return !o.WholeMultiGPU && c.Reach == ReachTyped }
