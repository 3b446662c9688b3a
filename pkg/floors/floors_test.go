// SPDX-License-Identifier: Apache-2.0

package floors

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

func TestFor(t *testing.T) {
	f := Floors{HPC: 0.6, Train: 0.7, Infer: 0.95}
	for _, tc := range []struct {
		class string
		want  float64
	}{{"hpc", 0.6}, {"train", 0.7}, {"infer", 0.95}, {"", 0.95}, {"bogus", 0.95}} {
		if got := f.For(profile.Class(tc.class)); got != tc.want {
			t.Errorf("For(%q) = %v, want %v", tc.class, got, tc.want)
		}
		if got := f.Floor(tc.class); got != tc.want {
			t.Errorf("Floor(%q) = %v, want %v", tc.class, got, tc.want)
		}
	}
	if d := Default(); d.Infer <= d.HPC || d.Infer <= d.Train {
		t.Errorf("inference must be protected most: %+v", d)
	}
}
