// SPDX-License-Identifier: Apache-2.0

// Package truth is the simulator's ground truth: measured speeds of applications
// sharing one GPU, kept apart from the model so that the model is judged against
// measurements, never against its own predictions.
//
// Rules (see docs/evaluation.md):
//   - The speed of A next to B is the mean of every measurement of A next to B
//     (both rows of a pair file and both directions of a row count), clipped to 1:
//     values above 1 are the sources' measurement noise.
//   - The simulated catalog is the applications that appear in at least one
//     measured pair (with Options.AllProfiles, every profile given).
//   - An unmeasured pair inside the catalog gets the mean speed of the K measured
//     ordered pairs (C next to D) nearest to it in solo-profile space, distance
//     |f(A)-f(C)| + |f(B)-f(D)| with f = (SM util/100, memory-bandwidth util/100,
//     memory used / largest memory used), Euclidean. Ties go to file order.
//   - More than one co-runner: the product of the pairwise speeds (each co-runner
//     slows the job independently). The project's placement allows two jobs per
//     GPU by default, so this rule only matters for larger max_corunners.
//   - Measurement noise (NoiseSD): the pooled standard deviation of repeated
//     measurements of one ordered pair (after clipping), or DefaultNoiseSD when
//     no pair was measured twice. The simulator's measured speeds (the pair
//     memory's observations) are the true speed plus Gaussian noise of this size.
//   - Kernel utilization of a GPU (NVML utilization.gpu, for the utilization
//     metric): alone, the application's solo SM utilization; a measured pair, the
//     mean measured utilization of the shared GPU; otherwise the sum over the jobs
//     of solo utilization x true speed, capped at 100.
package truth

import (
	"fmt"
	"math"
	"sort"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Options configure how a table is built.
type Options struct {
	K           int  // nearest measured pairs averaged for an unmeasured one (default 3)
	AllProfiles bool // keep applications with no measured pair (all their pairs estimated)
}

// Table holds the speed of every application next to every other, dense.
type Table struct {
	tags     []string
	profiles []*profile.Profile
	index    map[string]int
	speed    []float64 // speed[i*n+j]: application i next to application j
	measured []bool
	samples  int
	noiseSD  float64
	pairUtil []float64 // pairUtil[i*n+j] = pairUtil[j*n+i]: measured shared-GPU util, 0 = none
}

// New builds a table from solo profiles (for the catalog and the distance) and
// pair measurements. A pair naming an application without a profile is an error.
func New(profiles []*profile.Profile, pairs []Pair, opts Options) (*Table, error) {
	if opts.K == 0 {
		opts.K = 3
	}
	if opts.K < 1 {
		return nil, fmt.Errorf("truth: K = %d, want >= 1", opts.K)
	}
	byTag := map[string]*profile.Profile{}
	for _, p := range profiles {
		if p == nil {
			continue
		}
		if err := profile.ValidateTag(p.Tag); err != nil {
			return nil, fmt.Errorf("truth: %w", err)
		}
		byTag[p.Tag] = p
	}
	inPairs := map[string]bool{}
	for i, pr := range pairs {
		for _, t := range []string{pr.A, pr.B} {
			if byTag[t] == nil {
				return nil, fmt.Errorf("truth: pair %d names %q, which has no solo profile", i+1, profile.Sanitize(t))
			}
			inPairs[t] = true
		}
	}
	t := &Table{index: map[string]int{}}
	for tag := range byTag {
		if opts.AllProfiles || inPairs[tag] {
			t.tags = append(t.tags, tag)
		}
	}
	if len(t.tags) == 0 {
		return nil, fmt.Errorf("truth: no application has a measured pair")
	}
	sort.Strings(t.tags)
	n := len(t.tags)
	for i, tag := range t.tags {
		t.index[tag] = i
		t.profiles = append(t.profiles, byTag[tag])
	}
	sum := make([]float64, n*n)
	cnt := make([]int, n*n)
	add := func(a, b string, s float64) {
		k := t.index[a]*n + t.index[b]
		sum[k] += min(s, 1)
		cnt[k]++
	}
	// Noise: repeated measurements of an ordered pair. A row of A next to A
	// measures that pair twice in one run: it counts once (the mean of its two
	// speeds), as the two are not independent repeats.
	nsum := make([]float64, n*n)
	nsq := make([]float64, n*n)
	ncnt := make([]int, n*n)
	addNoise := func(a, b string, s float64) {
		k := t.index[a]*n + t.index[b]
		nsum[k] += s
		nsq[k] += s * s
		ncnt[k]++
	}
	usum := make([]float64, n*n)
	ucnt := make([]int, n*n)
	for _, pr := range pairs {
		add(pr.A, pr.B, pr.SpeedA)
		add(pr.B, pr.A, pr.SpeedB)
		if pr.A == pr.B {
			addNoise(pr.A, pr.B, (min(pr.SpeedA, 1)+min(pr.SpeedB, 1))/2)
		} else {
			addNoise(pr.A, pr.B, min(pr.SpeedA, 1))
			addNoise(pr.B, pr.A, min(pr.SpeedB, 1))
		}
		t.samples += 2
		if pr.Util > 0 {
			i, j := t.index[pr.A], t.index[pr.B]
			for _, k := range []int{i*n + j, j*n + i} {
				usum[k] += pr.Util
				ucnt[k]++
			}
			if i == j {
				usum[i*n+j] -= pr.Util // counted twice above
				ucnt[i*n+j]--
			}
		}
	}
	t.pairUtil = make([]float64, n*n)
	for k := range usum {
		if ucnt[k] > 0 {
			t.pairUtil[k] = usum[k] / float64(ucnt[k])
		}
	}
	t.noiseSD = DefaultNoiseSD
	var dev2, dof float64
	for k := range nsum {
		if ncnt[k] >= 2 {
			dev2 += max(nsq[k]-nsum[k]*nsum[k]/float64(ncnt[k]), 0)
			dof += float64(ncnt[k] - 1)
		}
	}
	if dof > 0 {
		t.noiseSD = math.Sqrt(dev2 / dof)
	}
	t.speed = make([]float64, n*n)
	t.measured = make([]bool, n*n)
	var known []int
	for k := range sum {
		if cnt[k] > 0 {
			t.speed[k] = sum[k] / float64(cnt[k])
			t.measured[k] = true
			known = append(known, k)
		}
	}
	t.fill(known, opts.K)
	return t, nil
}

// fill estimates every unmeasured ordered pair from its K nearest measured ones.
func (t *Table) fill(known []int, k int) {
	n := len(t.tags)
	maxMem := 0.0
	for _, p := range t.profiles {
		maxMem = max(maxMem, p.MemUsedMiB)
	}
	if maxMem == 0 {
		maxMem = 1
	}
	f := make([][3]float64, n)
	for i, p := range t.profiles {
		f[i] = [3]float64{p.SMUtil.Mean / 100, p.MemBWUtil.Mean / 100, p.MemUsedMiB / maxMem}
	}
	dist := func(a, b int) float64 {
		d := 0.0
		for x := range f[a] {
			d += (f[a][x] - f[b][x]) * (f[a][x] - f[b][x])
		}
		return math.Sqrt(d)
	}
	// best holds the k nearest measured pairs so far, nearest first (selection,
	// not a sort: k is tiny). Ties keep the earlier measured pair.
	best := make([]int, 0, k)
	bestD := make([]float64, 0, k)
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if t.measured[a*n+b] {
				continue
			}
			best, bestD = best[:0], bestD[:0]
			for _, kk := range known {
				d := dist(a, kk/n) + dist(b, kk%n)
				if len(best) == k && d >= bestD[k-1] {
					continue
				}
				i := len(best)
				if i < k {
					best, bestD = append(best, 0), append(bestD, 0)
				} else {
					i = k - 1
				}
				for i > 0 && bestD[i-1] > d {
					best[i], bestD[i] = best[i-1], bestD[i-1]
					i--
				}
				best[i], bestD[i] = kk, d
			}
			if len(best) == 0 {
				t.speed[a*n+b] = 1 // nothing measured at all: AllProfiles with no pairs
				continue
			}
			s := 0.0
			for _, kk := range best {
				s += t.speed[kk]
			}
			t.speed[a*n+b] = s / float64(len(best))
		}
	}
}

// DefaultNoiseSD is the measurement noise assumed when no pair was measured twice.
const DefaultNoiseSD = 0.03

// NoiseSD is the standard deviation of one measurement of a pair's speed around
// its true (mean) speed, from repeated measurements (see the package comment).
func (t *Table) NoiseSD() float64 { return t.noiseSD }

// Tags is the simulated catalog, sorted.
func (t *Table) Tags() []string { return append([]string(nil), t.tags...) }

// Len is the number of applications in the catalog.
func (t *Table) Len() int { return len(t.tags) }

// Index returns the position of tag in Tags.
func (t *Table) Index(tag string) (int, bool) {
	i, ok := t.index[tag]
	return i, ok
}

// Profile returns the solo profile of the application at position i.
func (t *Table) Profile(i int) *profile.Profile { return t.profiles[i] }

// Speed is the true speed of application i next to application j (indexes into
// Tags), measured or estimated.
func (t *Table) Speed(i, j int) float64 { return t.speed[i*len(t.tags)+j] }

// Measured reports whether the speed of i next to j was measured (not estimated).
func (t *Table) Measured(i, j int) bool { return t.measured[i*len(t.tags)+j] }

// Coverage returns the measured ordered pairs, all ordered pairs of the catalog,
// and the number of speed samples read.
func (t *Table) Coverage() (measured, total, samples int) {
	for _, m := range t.measured {
		if m {
			measured++
		}
	}
	return measured, len(t.measured), t.samples
}

// SoloUtil is the kernel utilization (percent) of application i alone.
func (t *Table) SoloUtil(i int) float64 { return min(max(t.profiles[i].SMUtil.Mean, 0), 100) }

// GPUUtil is the kernel utilization (percent, NVML utilization.gpu) of one GPU
// running the applications apps (indexes into Tags; none = idle): the rules in
// the package comment.
func (t *Table) GPUUtil(apps []int32) float64 {
	n := len(t.tags)
	switch len(apps) {
	case 0:
		return 0
	case 1:
		return t.SoloUtil(int(apps[0]))
	case 2:
		if u := t.pairUtil[int(apps[0])*n+int(apps[1])]; u > 0 {
			return u
		}
	}
	u := 0.0
	for k, a := range apps {
		s := 1.0
		for l, b := range apps {
			if l != k {
				s *= t.speed[int(a)*n+int(b)]
			}
		}
		u += t.SoloUtil(int(a)) * s
	}
	return min(u, 100)
}

// PredictSpeed implements model.Predictor with the true speeds, for the oracle
// policy: the product of the pairwise speeds of job next to each co-runner. A job
// or co-runner outside the catalog has speed 0 with co-runners (the oracle never
// co-locates what it knows nothing about); alone, every job runs at 1.
func (t *Table) PredictSpeed(job *profile.Profile, coRunners []*profile.Profile) float64 {
	if len(coRunners) == 0 {
		return 1
	}
	if job == nil {
		return 0
	}
	i, ok := t.index[job.Tag]
	if !ok {
		return 0
	}
	s := 1.0
	for _, c := range coRunners {
		if c == nil {
			return 0
		}
		j, ok := t.index[c.Tag]
		if !ok {
			return 0
		}
		s *= t.speed[i*len(t.tags)+j]
	}
	return s
}
