// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"

	"github.com/coscheml/coscheml/pkg/profile"
)

// ClassMix is the share of jobs given each class when a trace does not say.
type ClassMix struct{ HPC, Train, Infer float64 }

// DefaultClassMix: most jobs in the Philly and Alibaba GPU traces are training
// jobs; a fifth each are labelled hpc and infer so that every floor is exercised.
var DefaultClassMix = ClassMix{HPC: 0.2, Train: 0.6, Infer: 0.2}

// hash64 maps (seed, salt, id) to a uniform 64-bit value (FNV-1a then a
// splitmix64 finaliser). Keyed by the job's ID, not its position, so that a job
// keeps its application and class when a trace is subsampled or windowed.
func hash64(seed int64, salt, id string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(uint64(seed) >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(id))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// Assign gives every job without a tag an application from tags and every job
// without a class a class, by this documented, seeded rule:
//
//	tag   = sorted(tags)[hash(seed, "tag", job.ID) mod len(tags)]
//	class = by u = hash(seed, "class", job.ID)/2^64 against the cumulative mix
//	        (hpc, then train, then infer); except that an Alibaba pod asking for a
//	        fraction of a GPU (GPUFrac > 0) is labelled infer, the usual reason
//	        for a fractional GPU in that trace.
//
// Jobs that already have a tag must name one of tags. The same seed gives the same
// assignment for the same job IDs on any machine.
func Assign(jobs []Job, tags []string, mix ClassMix, seed int64) error {
	if len(tags) == 0 {
		return fmt.Errorf("assign: empty application catalog")
	}
	sum := mix.HPC + mix.Train + mix.Infer
	if !(sum > 0) || mix.HPC < 0 || mix.Train < 0 || mix.Infer < 0 || math.IsInf(sum, 0) {
		return fmt.Errorf("assign: class mix %+v: want non-negative shares with a positive sum", mix)
	}
	sorted := append([]string(nil), tags...)
	sort.Strings(sorted)
	known := make(map[string]bool, len(sorted))
	for _, t := range sorted {
		known[t] = true
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Tag == "" {
			j.Tag = sorted[hash64(seed, "tag", j.ID)%uint64(len(sorted))]
		} else if !known[j.Tag] {
			return fmt.Errorf("assign: job %s: application %q is not in the catalog (%d applications, e.g. %s)", profile.Sanitize(j.ID), profile.Sanitize(j.Tag), len(sorted), sorted[0])
		}
		if j.Class == "" {
			switch u := unit(hash64(seed, "class", j.ID)) * sum; {
			case j.GPUFrac > 0:
				j.Class = profile.ClassInfer
			case u < mix.HPC:
				j.Class = profile.ClassHPC
			case u < mix.HPC+mix.Train:
				j.Class = profile.ClassTrain
			default:
				j.Class = profile.ClassInfer
			}
		}
	}
	return nil
}

// Window keeps the jobs submitted in [from, to) seconds (to <= 0: no end), made
// relative to from.
func Window(jobs []Job, from, to float64) []Job {
	var out []Job
	for _, j := range jobs {
		if j.Submit < from || (to > 0 && j.Submit >= to) {
			continue
		}
		j.Submit -= from
		out = append(out, j)
	}
	return out
}

// Sample keeps n jobs chosen uniformly at random (seeded, by job ID hash, so it
// is stable), in submission order, with submit times made relative to the first
// kept job. n <= 0 or n >= len(jobs) keeps all.
func Sample(jobs []Job, n int, seed int64) []Job {
	if n <= 0 || n >= len(jobs) {
		return append([]Job(nil), jobs...)
	}
	type keyed struct {
		k uint64
		i int
	}
	ks := make([]keyed, len(jobs))
	for i, j := range jobs {
		ks[i] = keyed{hash64(seed, "sample", j.ID), i}
	}
	sort.Slice(ks, func(a, b int) bool { return ks[a].k < ks[b].k })
	keep := make([]int, n)
	for i := range keep {
		keep[i] = ks[i].i
	}
	sort.Ints(keep)
	out := make([]Job, n)
	for i, k := range keep {
		out[i] = jobs[k]
	}
	base := out[0].Submit
	for i := range out {
		out[i].Submit -= base
	}
	return out
}

// OfferedLoad is the GPU-time the jobs ask for divided by what gpus GPUs offer
// over the span from the first to the last submission (0 when the span is 0).
func OfferedLoad(jobs []Job, gpus int) float64 {
	if len(jobs) < 2 || gpus <= 0 {
		return 0
	}
	span := jobs[len(jobs)-1].Submit - jobs[0].Submit
	if span <= 0 {
		return 0
	}
	work := 0.0
	for _, j := range jobs {
		work += j.Duration * float64(j.GPUs)
	}
	return work / (float64(gpus) * span)
}

// ScaleLoad compresses (factor > 1) or stretches (< 1) inter-arrival times by
// dividing every submit time by factor. Durations are unchanged.
func ScaleLoad(jobs []Job, factor float64) error {
	if !(factor > 0) || math.IsInf(factor, 0) {
		return fmt.Errorf("load factor %v: want a positive number", factor)
	}
	for i := range jobs {
		jobs[i].Submit /= factor
	}
	return nil
}

// SetLoad compresses or stretches inter-arrival times so that OfferedLoad(jobs,
// gpus) becomes load, and returns the factor used.
func SetLoad(jobs []Job, gpus int, load float64) (float64, error) {
	if !(load > 0) || math.IsInf(load, 0) {
		return 0, fmt.Errorf("load %v: want a positive number", load)
	}
	cur := OfferedLoad(jobs, gpus)
	if cur == 0 {
		return 1, nil
	}
	f := load / cur
	return f, ScaleLoad(jobs, f)
}

// MaxDuration keeps the jobs that run at most max seconds alone (max <= 0 keeps
// all). Heavy-tailed traces (Philly's longest job runs 53 days) otherwise let one
// job decide a sample's makespan whatever the scheduler does.
func MaxDuration(jobs []Job, max float64) []Job {
	if max <= 0 {
		return jobs
	}
	out := jobs[:0:0]
	for _, j := range jobs {
		if j.Duration <= max {
			out = append(out, j)
		}
	}
	return out
}
