// SPDX-License-Identifier: Apache-2.0

package training

import (
	"math"
	"sort"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
)

// MeasuredPairs summarizes an admin's pair measurements (one co-runner each)
// per ordered pair for model.Model.Measured: the mean speed (each clipped to
// 1, as the ground truth does) and the count, sorted by job then co-runner;
// and the pooled standard deviation of repeated measurements of one pair
// (0 when nothing was measured twice). A measurement of A next to A counts
// its two jobs as one (they ran together, not as repeats), as pkg/truth does.
// Observations with more than one co-runner, or none, are not pair
// measurements and are skipped. Only data users cannot write belongs here: the
// shipped or --pairs measurements, never the Epilog's observations.
func MeasuredPairs(obs []observation.Observation) ([]model.MeasuredPair, float64) {
	type acc struct{ sum, sq, n float64 }
	by := map[[2]string]*acc{}
	for _, o := range obs {
		if len(o.CoTags) != 1 || !(o.Speed > 0) || math.IsInf(o.Speed, 0) {
			continue
		}
		k := [2]string{o.Tag, o.CoTags[0]}
		a := by[k]
		if a == nil {
			a = &acc{}
			by[k] = a
		}
		s := min(o.Speed, 1)
		a.sum, a.sq, a.n = a.sum+s, a.sq+s*s, a.n+1
	}
	out := make([]model.MeasuredPair, 0, len(by))
	var dev2, dof float64
	for k, a := range by {
		n := a.n
		if k[0] == k[1] {
			n = math.Ceil(a.n / 2) // both jobs of one run
		}
		out = append(out, model.MeasuredPair{Job: k[0], Co: k[1], Speed: a.sum / a.n, N: int(n)})
		if k[0] != k[1] && a.n >= 2 {
			dev2 += max(a.sq-a.sum*a.sum/a.n, 0)
			dof += a.n - 1
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Job != out[j].Job {
			return out[i].Job < out[j].Job
		}
		return out[i].Co < out[j].Co
	})
	sd := 0.0
	if dof > 0 {
		sd = math.Sqrt(dev2 / dof)
	}
	return out, sd
}
