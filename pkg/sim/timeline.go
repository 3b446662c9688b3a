// SPDX-License-Identifier: Apache-2.0

package sim

import "github.com/coscheml/coscheml/pkg/trace"

// timeline integrates allocated GPUs and progress rate into equal-width buckets.
// The width starts at the jobs' submission span (or total work) over the bucket
// count and doubles, merging neighbours, whenever time runs past the last bucket,
// so it never holds more than 2x buckets and never needs the makespan in advance.
type timeline struct {
	max    int
	width  float64
	alloc  []float64 // integrals per bucket
	useful []float64
	kernel []float64
}

func newTimeline(buckets int, jobs []trace.Job) timeline {
	span := 0.0
	if len(jobs) > 0 {
		span = jobs[len(jobs)-1].Submit
		for _, j := range jobs {
			span = max(span, j.Submit+j.Duration)
		}
	}
	if span <= 0 {
		span = 1
	}
	return timeline{max: buckets, width: span / float64(buckets)}
}

func (tl *timeline) grow(b int) {
	for len(tl.alloc) <= b {
		tl.alloc = append(tl.alloc, 0)
		tl.useful = append(tl.useful, 0)
		tl.kernel = append(tl.kernel, 0)
	}
}

func (tl *timeline) add(t0, t1, alloc, useful, kernel float64) {
	for t0 < t1 {
		b := int(t0 / tl.width)
		for b >= 2*tl.max {
			tl.coarsen()
			b = int(t0 / tl.width)
		}
		tl.grow(b)
		end := min(t1, float64(b+1)*tl.width)
		if end <= t0 { // t0 sits on a bucket edge after rounding: use the next bucket
			b++
			tl.grow(b)
			end = min(t1, float64(b+1)*tl.width)
		}
		dt := end - t0
		tl.alloc[b] += dt * alloc
		tl.useful[b] += dt * useful
		tl.kernel[b] += dt * kernel
		t0 = end
	}
}

func (tl *timeline) coarsen() {
	n := (len(tl.alloc) + 1) / 2
	for i := 0; i < n; i++ {
		a, u, k := tl.alloc[2*i], tl.useful[2*i], tl.kernel[2*i]
		if 2*i+1 < len(tl.alloc) {
			a += tl.alloc[2*i+1]
			u += tl.useful[2*i+1]
			k += tl.kernel[2*i+1]
		}
		tl.alloc[i], tl.useful[i], tl.kernel[i] = a, u, k
	}
	tl.alloc, tl.useful, tl.kernel = tl.alloc[:n], tl.useful[:n], tl.kernel[:n]
	tl.width *= 2
}

// samples returns per-bucket averages as fractions of gpus.
func (tl *timeline) samples(gpus int) []Sample {
	out := make([]Sample, len(tl.alloc))
	for i := range out {
		d := tl.width * float64(gpus)
		out[i] = Sample{T: float64(i) * tl.width, Alloc: tl.alloc[i] / d, Useful: tl.useful[i] / d, Kernel: tl.kernel[i] / d}
	}
	return out
}
