// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// rampCalibration: at level l the margin is (l+1) x 0.01 everywhere, except that
// predictions at or above 0.9 get twice that.
func rampCalibration() Calibration {
	c := Calibration{Levels: []float64{0.5, 0.9, 0.99}, DefaultCoverage: 0.9, Window: 0.05, MinResiduals: 10, Residuals: 100}
	for l := range c.Levels {
		row := make([]float64, GridSteps+1)
		for g := range row {
			row[g] = float64(l+1) * 0.01
			if g >= 90 {
				row[g] *= 2
			}
		}
		c.Margins = append(c.Margins, row)
	}
	return c
}

func TestMargin(t *testing.T) {
	m := smallModel(t)
	m.Calibration = Calibration{}
	if m.Calibrated() || m.Margin(0.8, 0.9) != 0 {
		t.Fatal("a model without calibration must have margin 0")
	}
	m.Calibration = rampCalibration()
	tests := []struct {
		speed, coverage, want float64
	}{
		{0.8, 0.5, 0.01},
		{0.8, 0.9, 0.02},
		{0.8, 0, 0.02},     // the default coverage
		{0.8, 0.6, 0.02},   // between levels: the higher (safer) one
		{0.8, 0.999, 0.03}, // above the highest: the highest
		{0.95, 0.9, 0.04},
		{1.3, 0.9, 0.04},  // above 1: the last grid point
		{-0.2, 0.9, 0.02}, // below 0: the first
		{math.NaN(), 0.9, 0.04},
	}
	for _, tc := range tests {
		if got := m.Margin(tc.speed, tc.coverage); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Margin(%v, %v) = %v, want %v", tc.speed, tc.coverage, got, tc.want)
		}
	}
	cm := m.ClassMargins(map[profile.Class]float64{profile.ClassInfer: 0.9, profile.ClassTrain: 0.75}, 0)
	if cm[profile.ClassInfer] != 0.04 || cm[profile.ClassTrain] != 0.02 {
		t.Fatalf("class margins %v", cm)
	}
}

func TestBound(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Calibrated() {
		t.Fatal("the default model carries no calibration")
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	speed, lower := m.Bound(job, co, Query{})
	if speed != m.PredictSpeed(job, co) || math.Abs(speed-lower-m.Margin(speed, 0)) > 1e-12 {
		t.Fatalf("(%v, %v): want the prediction and the prediction less its margin %v", speed, lower, m.Margin(speed, 0))
	}
	_, lo50 := m.Bound(job, co, Query{Coverage: 0.5})
	_, lo99 := m.Bound(job, co, Query{Coverage: 0.99})
	if !(lo99 <= lower && lower <= lo50) {
		t.Fatalf("lower bounds not ordered by coverage: 0.5 %v, default %v, 0.99 %v", lo50, lower, lo99)
	}
	if s, l := m.Bound(job, nil, Query{Coverage: 0.99}); s != 1 || l != 1 {
		t.Fatalf("alone: (%v, %v), want (1, 1)", s, l)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = m.Bound(job, co, Query{Coverage: 0.9}) }); a != 0 {
		t.Fatalf("Bound allocates %v times per call", a)
	}
}

// A calibrated model survives the file round trip; invalid calibrations are refused.
func TestCalibrationFile(t *testing.T) {
	m := smallModel(t)
	m.Calibration = rampCalibration()
	path := filepath.Join(t.TempDir(), "c.model")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Margin(0.95, 0.99) != 0.06 || got.Calibration.DefaultCoverage != 0.9 {
		t.Fatalf("after reload: margin %v, default %v", got.Margin(0.95, 0.99), got.Calibration.DefaultCoverage)
	}
	bad := []func(c *Calibration){
		func(c *Calibration) { c.Levels[1] = 0.4 },               // not ascending
		func(c *Calibration) { c.Levels[2] = 1 },                 // not below 1
		func(c *Calibration) { c.Margins[0] = c.Margins[0][:5] }, // short row
		func(c *Calibration) { c.Margins[1][3] = math.NaN() },
		func(c *Calibration) { c.Margins[1][3] = -0.1 },
		func(c *Calibration) { c.Margins = c.Margins[:2] },
		func(c *Calibration) { c.DefaultCoverage = 1.5 },
	}
	for i, f := range bad {
		c := rampCalibration()
		f(&c)
		m.Calibration = c
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(b); err == nil {
			t.Errorf("case %d: invalid calibration accepted", i)
		}
	}
}

// Files of format 1 (before calibration) still load, with margin 0.
func TestReadsFormat1(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "format1.model"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Calibrated() || len(m.Trees) == 0 {
		t.Fatalf("format 1 model: calibrated %v, %d trees", m.Calibrated(), len(m.Trees))
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	if s, l := m.Bound(job, co, Query{Coverage: 0.9}); s != l {
		t.Fatalf("uncalibrated lower bound %v differs from the prediction %v", l, s)
	}
}

// A co-location of applications the training data held gets the seen-pairs
// margins; any unknown application, or a model without them, the
// leave-families-out ones. Both survive the file round trip.
func TestSeenMargins(t *testing.T) {
	m := smallModel(t)
	m.Calibration = rampCalibration()
	seen := rampCalibration()
	for l := range seen.Margins {
		for g := range seen.Margins[l] {
			seen.Margins[l][g] /= 4
		}
	}
	seen.DefaultCoverage = 0.5
	m.SeenCalibration = seen
	m.Tags = []string{"a", "b", "j"}
	if err := m.Compile(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.model")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if in := got.Info(); in.SeenTags != 3 || in.SeenDefaultCoverage != 0.5 || in.SeenMarginAt075 != got.SeenMargin(0.75, 0) || !strings.Contains(in.String(), "seen-pairs margins (co-locations of its 3 trained applications") {
		t.Errorf("info after reload: %+v", in)
	}
	j, a, b, x := prof("j", 70, 40, 4000), prof("a", 60, 30, 3000), prof("b", 20, 10, 2000), prof("x", 60, 30, 3000)
	tests := []struct {
		name     string
		co       []*profile.Profile
		coverage float64
		seen     bool
	}{
		{"both known, default coverage", []*profile.Profile{a}, 0, true},
		{"both known, 0.99", []*profile.Profile{a}, 0.99, true},
		{"all three known", []*profile.Profile{a, b}, 0.9, true},
		{"unknown co-runner", []*profile.Profile{x}, 0, false},
		{"one of two unknown", []*profile.Profile{a, x}, 0.9, false},
	}
	for _, tc := range tests {
		speed, lower := got.Bound(j, tc.co, Query{Coverage: tc.coverage})
		want := got.Margin(speed, tc.coverage)
		if tc.seen {
			want = got.SeenMargin(speed, tc.coverage)
		}
		if math.Abs(speed-lower-want) > 1e-12 || (tc.seen && want >= got.Margin(speed, tc.coverage)) {
			t.Errorf("%s: margin %v, want %v (leave-families-out %v)", tc.name, speed-lower, want, got.Margin(speed, tc.coverage))
		}
		// the default coverage a pair memory bounds this co-location at: that of
		// the calibration in use
		wantCov := got.Calibration.DefaultCoverage
		if tc.seen {
			wantCov = got.SeenCalibration.DefaultCoverage
		}
		if c := got.DefaultCoverageFor(j, tc.co); c != wantCov {
			t.Errorf("%s: default coverage %v, want %v", tc.name, c, wantCov)
		}
	}
	if c := got.DefaultCoverageFor(nil, []*profile.Profile{a}); c != got.Calibration.DefaultCoverage {
		t.Errorf("no job: default coverage %v, want the leave-families-out one", c)
	}
	if c := got.DefaultCoverageFor(j, []*profile.Profile{a, nil}); c != got.Calibration.DefaultCoverage {
		t.Errorf("a nil co-runner: default coverage %v, want the leave-families-out one", c)
	}
	if _, lower := got.Bound(x, []*profile.Profile{a}, Query{}); lower != func() float64 { s := got.PredictSpeed(x, []*profile.Profile{a}); return s - got.Margin(s, 0) }() {
		t.Error("an unknown job got the seen-pairs margin")
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = got.Bound(j, []*profile.Profile{a}, Query{Coverage: 0.9}) }); a != 0 {
		t.Fatalf("Bound allocates %v times per call", a)
	}
	// without tags: no seen-pairs margins even with a seen calibration
	got.Tags = nil
	if err := got.Compile(); err != nil {
		t.Fatal(err)
	}
	if s, l := got.Bound(j, []*profile.Profile{a}, Query{}); math.Abs(s-l-got.Margin(s, 0)) > 1e-12 {
		t.Errorf("no tags: margin %v, want %v", s-l, got.Margin(s, 0))
	}
	// an invalid seen-pairs calibration is refused like the other
	got.SeenCalibration.Levels[1] = 0.4
	bb, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(bb); err == nil {
		t.Error("invalid seen-pairs calibration accepted")
	}
}

// A calibration with a default coverage per floor clears a stricter floor at
// its higher coverage; the per-floor choice survives the file round trip, and
// a calibration without one (older files) tests every floor at the default.
func TestFloorCoverage(t *testing.T) {
	m := smallModel(t)
	m.Calibration = rampCalibration() // default 0.9
	m.Calibration.FloorCoverage = []FloorCoverage{{0.75, 0.9}, {0.9, 0.99}}
	seen := rampCalibration()
	seen.DefaultCoverage = 0.5
	seen.FloorCoverage = []FloorCoverage{{0.75, 0.5}, {0.9, 0.9}}
	m.SeenCalibration = seen
	m.Tags = []string{"a", "j"}
	if err := m.Compile(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.model")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if in := got.Info(); len(in.FloorCoverage) != 2 || in.SeenFloorCoverage[1] != (FloorCoverage{0.9, 0.9}) ||
		!strings.Contains(in.String(), "default coverage per floor: 0.75 -> 0.9, 0.90 -> 0.99") {
		t.Fatalf("info after reload: %+v\n%s", in, in)
	}
	j, a, x := prof("j", 70, 40, 4000), prof("a", 60, 30, 3000), prof("x", 60, 30, 3000)
	tests := []struct {
		name            string
		co              []*profile.Profile
		coverage, floor float64
		seen            bool
		wantCov         float64
	}{
		{"unseen, hpc/train floor", []*profile.Profile{x}, 0, 0.75, false, 0.9},
		{"unseen, infer floor", []*profile.Profile{x}, 0, 0.9, false, 0.99},
		{"unseen, a floor above every entry", []*profile.Profile{x}, 0, 0.95, false, 0.99},
		{"unseen, a floor between entries: the lower entry's", []*profile.Profile{x}, 0, 0.8, false, 0.9},
		{"unseen, a floor below every entry: the default", []*profile.Profile{x}, 0, 0.5, false, 0.9},
		{"unseen, floor 0: the default", []*profile.Profile{x}, 0, 0, false, 0.9},
		{"seen, hpc/train floor", []*profile.Profile{a}, 0, 0.75, true, 0.5},
		{"seen, infer floor", []*profile.Profile{a}, 0, 0.9, true, 0.9},
		{"a set coverage applies to every floor", []*profile.Profile{x}, 0.5, 0.9, false, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cal := &got.Calibration
			if tc.seen {
				cal = &got.SeenCalibration
			}
			speed, lower := got.Bound(j, tc.co, Query{Coverage: tc.coverage, Floor: tc.floor})
			if want := speed - cal.margin(speed, j.Tag, tc.wantCov); math.Abs(lower-want) > 1e-12 {
				t.Errorf("lower %v, want %v (the margin at coverage %v)", lower, want, tc.wantCov)
			}
			if tc.coverage == 0 {
				if c := got.DefaultCoverageForFloor(j, tc.co, tc.floor); c != tc.wantCov {
					t.Errorf("default coverage for the floor %v, want %v", c, tc.wantCov)
				}
			}
		})
	}
	// Floor 0 is the floor-less question: the class-weighted default
	if s, l := got.Bound(j, []*profile.Profile{x}, Query{}); math.Abs(s-l-got.Margin(s, 0.9)) > 1e-12 {
		t.Errorf("Bound margin at floor 0 %v, want the default coverage's %v", s-l, got.Margin(s, 0.9))
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = got.Bound(j, []*profile.Profile{a}, Query{Floor: 0.9}) }); n != 0 {
		t.Fatalf("Bound allocates %v times per call", n)
	}
	// without per-floor coverage (a file written before it): every floor at the default
	got.Calibration.FloorCoverage = nil
	old := filepath.Join(t.TempDir(), "old.model")
	if err := got.Save(old); err != nil {
		t.Fatal(err)
	}
	o, err := Load(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{0.75, 0.9} {
		if c := o.Calibration.CoverageAt(f); c != 0.9 {
			t.Errorf("no per-floor coverage: floor %v at %v, want the default 0.9", f, c)
		}
	}
}

// Per-floor coverage that is out of range or would test a stricter floor at a
// lower coverage than a looser one is refused when the file is read.
func TestFloorCoverageInvalid(t *testing.T) {
	m := smallModel(t)
	tests := []struct {
		name string
		fc   []FloorCoverage
	}{
		{"coverage 1", []FloorCoverage{{0.9, 1}}},
		{"coverage 0", []FloorCoverage{{0.9, 0}}},
		{"floor 0", []FloorCoverage{{0, 0.9}}},
		{"floor above 1", []FloorCoverage{{1.5, 0.9}}},
		{"NaN", []FloorCoverage{{math.NaN(), 0.9}}},
		{"floors not ascending", []FloorCoverage{{0.9, 0.95}, {0.75, 0.99}}},
		{"a stricter floor at a lower coverage", []FloorCoverage{{0.75, 0.99}, {0.9, 0.95}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m.Calibration = rampCalibration()
			m.Calibration.FloorCoverage = tc.fc
			b, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), "floor coverage") {
				t.Fatalf("error %v, want a refusal naming the floor coverage", err)
			}
		})
	}
}

// A format 2 file written before per-floor coverage (testdata: the shipped
// model of main at 28116f6, cut to 2 trees, saved by that code) still loads,
// and tests every floor at each calibration's class-weighted default.
func TestReadsClassWeightedFormat2(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "format2-class-weighted.model"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Calibrated() || len(m.Calibration.FloorCoverage) != 0 || len(m.SeenCalibration.FloorCoverage) != 0 || len(m.Tags) == 0 {
		t.Fatalf("old file: calibrated %v, floor coverage %v / %v, %d tags", m.Calibrated(), m.Calibration.FloorCoverage, m.SeenCalibration.FloorCoverage, len(m.Tags))
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	seenJob := &profile.Profile{Tag: m.Tags[0], SMUtil: profile.Stat{Mean: 60}, MemBWUtil: profile.Stat{Mean: 30}, MemUsedMiB: 4000}
	seenCo := []*profile.Profile{{Tag: m.Tags[1], SMUtil: profile.Stat{Mean: 50}, MemBWUtil: profile.Stat{Mean: 40}, MemUsedMiB: 3000}}
	for _, floor := range []float64{0.75, 0.9} {
		for _, c := range []struct {
			job *profile.Profile
			co  []*profile.Profile
		}{{job, co}, {seenJob, seenCo}} {
			s1, l1 := m.Bound(c.job, c.co, Query{})
			s2, l2 := m.Bound(c.job, c.co, Query{Floor: floor})
			if s1 != s2 || l1 != l2 || m.DefaultCoverageForFloor(c.job, c.co, floor) != m.DefaultCoverageFor(c.job, c.co) {
				t.Errorf("floor %v, job %s: (%v, %v) at the floor, (%v, %v) without", floor, c.job.Tag, s2, l2, s1, l1)
			}
		}
	}
}
