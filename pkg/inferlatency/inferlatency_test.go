// SPDX-License-Identifier: Apache-2.0

package inferlatency

import (
	"math"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

func TestSpeed(t *testing.T) {
	cases := []struct {
		name   string
		shares []float64
		want   float64
	}{
		{"alone", nil, 1},
		{"idle co-runner", []float64{0}, 1},
		{"busy co-runner halves", []float64{1}, 0.5},
		{"quarter-busy co-runner", []float64{0.25}, 0.8},
		{"two half-busy", []float64{0.5, 0.5}, 0.5},
		{"unmeasured counts as busy", []float64{Unmeasured}, 0.5},
		{"negative counts as busy", []float64{-0.2}, 0.5},
		{"infinite counts as busy", []float64{math.Inf(1)}, 0.5},
		{"over-full clamps", []float64{3}, 0.5},
		{"three busy", []float64{1, 1, 1}, 0.25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Speed(c.shares); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("Speed(%v) = %v, want %v", c.shares, got, c.want)
			}
		})
	}
}

func TestSpeedFromSMUtil(t *testing.T) {
	cases := []struct {
		util []float64
		want float64
	}{
		{[]float64{25}, 0.8},
		{[]float64{100, 100}, 1.0 / 3},
		{[]float64{math.NaN()}, 0.5},
		{[]float64{150}, 0.5},
	}
	for _, c := range cases {
		if got := SpeedFromSMUtil(c.util); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("SpeedFromSMUtil(%v) = %v, want %v", c.util, got, c.want)
		}
	}
}

// More co-runner load never makes inference faster.
func TestSpeedMonotone(t *testing.T) {
	prev := 1.0
	for c := 0.0; c <= 2; c += 0.05 {
		s := Speed([]float64{c, c / 2})
		if s > prev+1e-12 || s <= 0 || s > 1 {
			t.Fatalf("Speed at %v = %v after %v", c, s, prev)
		}
		prev = s
	}
}

// The placement's estimate reads each co-runner's solo SM utilization; a
// co-runner without a profile counts as always busy.
func TestFromProfiles(t *testing.T) {
	sm := func(u float64) *profile.Profile { return &profile.Profile{SMUtil: profile.Stat{Mean: u}} }
	cases := []struct {
		name string
		co   []*profile.Profile
		want float64
	}{
		{"alone", nil, 1},
		{"one light co-runner", []*profile.Profile{sm(10)}, 1 / 1.1},
		{"two busy co-runners", []*profile.Profile{sm(100), sm(100)}, 1.0 / 3},
		{"no profile counts as busy", []*profile.Profile{nil}, 0.5},
		{"unmeasured counts as busy", []*profile.Profile{sm(math.NaN())}, 0.5},
	}
	for _, c := range cases {
		if got := FromProfiles(c.co); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: FromProfiles = %v, want %v", c.name, got, c.want)
		}
	}
}
