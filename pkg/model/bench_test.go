// SPDX-License-Identifier: Apache-2.0

package model

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// BenchmarkPredict: the default model (a forest) on one job with two co-runners.
func BenchmarkPredict(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000), prof("b", 20, 10, 2000)}
	b.ReportAllocs()
	s := 0.0
	for b.Loop() {
		s += m.PredictSpeed(job, co)
	}
	_ = s
}

// BenchmarkPredictLower: the prediction and its calibrated lower bound, what
// placement asks for each affected job.
func BenchmarkPredictLower(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	b.ReportAllocs()
	s := 0.0
	for b.Loop() {
		_, lo := m.Bound(job, co, Query{})
		s += lo
	}
	_ = s
}
