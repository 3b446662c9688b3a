// SPDX-License-Identifier: Apache-2.0

package model

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// halfPred is a plain predictor: every job runs at half speed next to anyone.
type halfPred struct{}

func (halfPred) PredictSpeed(_ *profile.Profile, co []*profile.Profile) float64 {
	if len(co) == 0 {
		return 1
	}
	return 0.5
}

// Bounds hands a Bounder back as itself and gives a plain predictor a bound
// equal to its prediction, whatever the query, and a revision that never
// changes.
func TestBounds(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	tests := []struct {
		name    string
		pred    Predictor
		wantOwn bool
	}{
		{"plain predictor", halfPred{}, false},
		{"model", m, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, own := Bounds(tc.pred)
			if own != tc.wantOwn {
				t.Fatalf("own %v, want %v", own, tc.wantOwn)
			}
			if b.Revision() != 0 {
				t.Fatalf("revision %d of a predictor that never learns", b.Revision())
			}
			for _, q := range []Query{{}, {Coverage: 0.99}, {Floor: 0.9}} {
				speed, lower := b.Bound(job, co, q)
				if speed != tc.pred.PredictSpeed(job, co) {
					t.Fatalf("query %+v: speed %v, PredictSpeed %v", q, speed, tc.pred.PredictSpeed(job, co))
				}
				if !own && lower != speed {
					t.Fatalf("query %+v: plain predictor's lower %v, want its prediction %v", q, lower, speed)
				}
				if own && !(lower <= speed) {
					t.Fatalf("query %+v: lower %v above the prediction %v", q, lower, speed)
				}
			}
		})
	}
	b, _ := Bounds(halfPred{})
	if n := testing.AllocsPerRun(100, func() { _, _ = b.Bound(job, co, Query{}) }); n != 0 {
		t.Fatalf("the adapter allocates %v times", n)
	}
}

func TestOptimisticSaysFullSpeed(t *testing.T) {
	heavy := &profile.Profile{Tag: "heavy", SMUtil: profile.Stat{Mean: 100}}
	var o Optimistic
	b, own := Bounds(o)
	if !own {
		t.Fatal("Optimistic is not its own Bounder")
	}
	for _, co := range [][]*profile.Profile{nil, {heavy}, {heavy, heavy, heavy}} {
		s, lo := b.Bound(heavy, co, Query{Floor: 0.9})
		if s != 1 || lo != 1 || o.PredictSpeed(heavy, co) != 1 {
			t.Fatalf("%d co-runners: speed %v lower %v, want 1 and 1", len(co), s, lo)
		}
	}
}
