// SPDX-License-Identifier: Apache-2.0

package model

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// scaledCalibration is rampCalibration normalized: its quantiles are scaled
// per job application, "j" by 2 and "a" by 0.5, any other by 1.
func scaledCalibration() Calibration {
	c := rampCalibration()
	c.Scale, c.JobScale = 1, map[string]float64{"j": 0.5, "a": 0.25}
	for l := range c.Margins {
		for g := range c.Margins[l] {
			c.Margins[l][g] *= 2 // quantiles of residual / scale
		}
	}
	return c
}

// A normalized (job-scaled) seen-pairs calibration: a job's margin is the
// quantile times its application's scale, or the overall scale without an
// entry; it is written as format 3 and read back so, and a plain model stays
// format 2.
func TestJobScaleMargins(t *testing.T) {
	m := smallModel(t)
	m.Calibration = rampCalibration()
	m.SeenCalibration = scaledCalibration()
	m.Tags = []string{"a", "j", "k"}
	if err := m.Compile(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scaled.model")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if in := got.Info(); in.Format != 3 {
		t.Errorf("format %d, want 3 for normalized margins", in.Format)
	}
	j, a, k := prof("j", 70, 40, 4000), prof("a", 60, 30, 3000), prof("k", 50, 30, 3000)
	x := prof("x", 60, 30, 3000)
	tests := []struct {
		name      string
		job       *profile.Profile
		co        []*profile.Profile
		cov       float64
		wantScale float64 // times the plain ramp's margin; 0: the unseen (plain) calibration
	}{
		{"seen, job j: scale 0.5 x 2", j, []*profile.Profile{a}, 0.9, 1},
		{"seen, job a: scale 0.25 x 2", a, []*profile.Profile{j}, 0.9, 0.5},
		{"seen, job k without an entry: the overall scale 1 x 2", k, []*profile.Profile{a}, 0.99, 2},
		{"unknown co-runner: plain margins", j, []*profile.Profile{x}, 0.9, 0},
	}
	ramp := rampCalibration()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, l := got.Bound(tc.job, tc.co, Query{Coverage: tc.cov})
			want := ramp.margin(s, "", tc.cov)
			if tc.wantScale > 0 {
				want *= tc.wantScale
			}
			if math.Abs(s-l-want) > 1e-12 {
				t.Fatalf("margin %v, want %v", s-l, want)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = got.Bound(j, []*profile.Profile{a}, Query{Floor: 0.9}) }); n != 0 {
		t.Fatalf("Bound allocates %v times per call", n)
	}
	plain := smallModel(t)
	plain.SeenCalibration = rampCalibration()
	b, err := plain.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint32(b[8:12]); v != 2 {
		t.Errorf("a model without normalized margins is written as format %d, want 2 (older programs read it)", v)
	}
}

// Corrupt normalized calibrations are refused, and so is a normalized one
// under a format 2 header (an older reader would take its quantiles for
// margins).
func TestJobScaleInvalid(t *testing.T) {
	m := smallModel(t)
	tests := []struct {
		name string
		f    func(c *Calibration)
		want string
	}{
		{"scale NaN", func(c *Calibration) { c.Scale = math.NaN() }, "scale"},
		{"scale negative", func(c *Calibration) { c.Scale = -0.1 }, "scale"},
		{"scale above 1", func(c *Calibration) { c.Scale = 2 }, "scale"},
		{"scale tiny", func(c *Calibration) { c.Scale = 1e-9 }, "scale"},
		{"application scales without a scale", func(c *Calibration) { c.Scale = 0 }, "scale"},
		{"application scale 0", func(c *Calibration) { c.JobScale["j"] = 0 }, "application scale"},
		{"application scale NaN", func(c *Calibration) { c.JobScale["j"] = math.NaN() }, "application scale"},
		{"application scale +Inf", func(c *Calibration) { c.JobScale["j"] = math.Inf(1) }, "application scale"},
		{"empty tag", func(c *Calibration) { c.JobScale[""] = 0.5 }, "application scale"},
		{"long tag", func(c *Calibration) { c.JobScale[strings.Repeat("t", 300)] = 0.5 }, "application scale"},
		{"quantile above the bound", func(c *Calibration) { c.Margins[0][3] = MaxNormScore + 1 }, "outside"},
		{"quantile NaN", func(c *Calibration) { c.Margins[0][3] = math.NaN() }, "outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := scaledCalibration()
			tc.f(&c)
			m.SeenCalibration = c
			b, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
	// a plain calibration keeps its bound of 10
	c := rampCalibration()
	c.Margins[0][3] = 11
	m.SeenCalibration = c
	if b, err := m.Encode(); err != nil {
		t.Fatal(err)
	} else if _, err := Decode(b); err == nil {
		t.Fatal("a plain margin of 11 accepted")
	}
	// a normalized calibration under a format 2 header
	m.SeenCalibration = scaledCalibration()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[8:12], 2)
	end := len(b) - sha256.Size
	sum := sha256.Sum256(b[:end])
	copy(b[end:], sum[:])
	if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), "normalized margins") {
		t.Fatalf("error %v, want a refusal of normalized margins in format 2", err)
	}
}
