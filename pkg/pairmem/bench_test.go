// SPDX-License-Identifier: Apache-2.0

package pairmem

import (
	"strconv"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// BenchmarkPredictor: the pair memory in front of the default model, for a pair
// it knows and for one it does not (the model's bound, corrected by the job's
// application residuals), with 1,000 pairs in memory.
func BenchmarkPredictor(b *testing.B) {
	m, err := model.Default()
	if err != nil {
		b.Fatal(err)
	}
	mem := New(Options{})
	for i := range 1000 {
		for u := range 2 {
			_ = mem.Add("app"+strconv.Itoa(i%40), "co"+strconv.Itoa(i/40), "u"+strconv.Itoa(u), 0.8)
		}
	}
	for u := range 5 {
		_ = mem.AddResidual("app1", "u"+strconv.Itoa(u), 0.05)
	}
	p, err := NewPredictor(m, mem)
	if err != nil {
		b.Fatal(err)
	}
	job := &profile.Profile{Tag: "app1", SMUtil: profile.Stat{Mean: 70}, MemBWUtil: profile.Stat{Mean: 40}, MemUsedMiB: 4000}
	known := []*profile.Profile{{Tag: "co0", SMUtil: profile.Stat{Mean: 60}}}
	unknown := []*profile.Profile{{Tag: "new", SMUtil: profile.Stat{Mean: 60}}}
	for _, c := range []struct {
		name string
		co   []*profile.Profile
	}{{"known pair", known}, {"unknown pair", unknown}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0.0
			for b.Loop() {
				_, lo := p.Bound(job, c.co, model.Query{})
				s += lo
			}
			_ = s
		})
	}
}
