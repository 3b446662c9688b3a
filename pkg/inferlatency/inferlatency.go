// SPDX-License-Identifier: Apache-2.0

// Package inferlatency estimates how much an inference job's request latency
// stretches when it shares a time-sliced GPU. The guard uses it to judge an
// infer job against its floor; the placement can use the same estimate, so the
// two never disagree on what "too slow" means for inference.
//
// The model: under time-slicing the GPU runs one context at a time and switches
// between the contexts that have work. A request of the inference job needs W of
// GPU time alone. While it runs, every co-runner that wants the GPU takes a slice
// in turn, so for each slice of the request each co-runner i that is busy (a
// fraction c_i of the time) adds one slice of its own in expectation. The
// request's latency becomes W * (1 + sum c_i), and the latency speed (solo
// latency over shared latency) is
//
//	speed = 1 / (1 + sum_i c_i),   c_i in [0, 1]
//
// One co-runner that always wants the GPU halves the inference speed (round
// robin between two contexts); an idle co-runner costs nothing. A co-runner whose
// share was never measured (NaN, negative) counts as always busy (c_i = 1): the
// estimate errs towards protecting inference.
package inferlatency

import (
	"math"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Unmeasured marks a co-runner whose GPU share is not known; Speed counts it as
// always busy.
var Unmeasured = math.NaN()

// Speed returns the estimated latency speed (solo latency / shared latency, in
// (0, 1]) of an inference job whose co-runners are busy the given fractions of
// the time (SM utilization / 100). Shares above 1 count as 1; unknown ones
// (NaN, negative, infinite) count as 1.
func Speed(coShares []float64) float64 {
	load := 0.0
	for _, c := range coShares {
		load += clampShare(c)
	}
	return 1 / (1 + load)
}

// SpeedFromSMUtil is Speed for SM utilizations in percent (NVML's scale).
func SpeedFromSMUtil(coSMUtil []float64) float64 {
	load := 0.0
	for _, u := range coSMUtil {
		load += clampShare(u / 100)
	}
	return 1 / (1 + load)
}

func clampShare(c float64) float64 {
	if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
		return 1
	}
	return min(c, 1)
}

// FromProfiles is the placement's estimate before the jobs run: each
// co-runner busy as much as its solo profile's mean SM utilization says (a
// job never uses more of a shared GPU than alone, so this errs towards
// protecting inference). It does not allocate: placement calls it per
// candidate GPU.
func FromProfiles(coRunners []*profile.Profile) float64 {
	load := 0.0
	for _, c := range coRunners {
		u := math.NaN()
		if c != nil {
			u = c.SMUtil.Mean
		}
		load += clampShare(u / 100)
	}
	return 1 / (1 + load)
}
