// SPDX-License-Identifier: Apache-2.0

package training

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

func TestDefaultModel(t *testing.T) {
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	in := m.Info()
	if in.TrainSamples != 1580 || in.Trees < 1 || in.CV.Apps != 8 {
		t.Fatalf("default model info: %+v", in)
	}
	ds := lucidDataset(t)
	if in.TrainDigest != ds.Digest() {
		t.Fatalf("default model trained on %s, the embedded data digests to %s", in.TrainDigest, ds.Digest())
	}
	cat, _ := lucidData(t)
	pred := func(a, b string) float64 { return m.PredictSpeed(cat[a], []*profile.Profile{cat[b]}) }
	heavy := pred("resnet18-bs128", "resnet18-bs128")
	light := pred("neumf-bs64", "ppo-bs32")
	if !(heavy < 0.85 && light > 0.9 && heavy < light) {
		t.Fatalf("two heavy jobs: %.3f, two light jobs: %.3f", heavy, light)
	}
	met := Evaluate(m, ds)
	if met.Samples != 1580 || met.MAE >= met.MeanPredictorMAE {
		t.Fatalf("in-sample metrics %+v", met)
	}
}

func TestBuildDataset(t *testing.T) {
	cat := profile.Catalog{"a-bs1": prof("a-bs1", 50, 20, 1000), "b-bs1": prof("b-bs1", 30, 10, 1000)}
	tests := []struct {
		name    string
		obs     []observation.Observation
		wantErr string
		notFnd  bool
	}{
		{"ok", []observation.Observation{{Tag: "a-bs1", CoTags: []string{"b-bs1"}, Speed: 0.9}}, "", false},
		{"missing job", []observation.Observation{{Tag: "zz-bs1", CoTags: []string{"b-bs1"}, Speed: 0.9}}, `"zz-bs1"`, true},
		{"missing co-runner", []observation.Observation{{Tag: "a-bs1", CoTags: []string{"qq"}, Speed: 0.9}}, `"qq"`, true},
		{"bad speed", []observation.Observation{{Tag: "a-bs1", CoTags: []string{"b-bs1"}, Speed: math.NaN()}}, "speed", false},
		{"bad tag", []observation.Observation{{Tag: "../x", Speed: 0.9}}, "invalid tag", false},
		{"empty", nil, "no observations", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := BuildDataset(cat, tc.obs)
			if tc.wantErr == "" {
				if err != nil || ds.Len() != len(tc.obs) {
					t.Fatalf("err %v, %d samples", err, ds.Len())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want it to mention %s", err, tc.wantErr)
			}
			if tc.notFnd != errors.Is(err, profile.ErrNotFound) {
				t.Fatalf("errors.Is(ErrNotFound) = %v", !tc.notFnd)
			}
		})
	}
	kept, dropped, missing := FilterKnown(cat, []observation.Observation{
		{Tag: "a-bs1", CoTags: []string{"b-bs1"}}, {Tag: "x", CoTags: []string{"b-bs1"}},
		{Tag: "a-bs1", CoTags: []string{"y", "x"}},
	})
	if len(kept) != 1 || dropped != 2 || strings.Join(missing, ",") != "x,y" {
		t.Fatalf("FilterKnown: kept %d dropped %d missing %v", len(kept), dropped, missing)
	}
	if model.Family("resnet18-bs32-amp") != "resnet18" || model.Family("lammps") != "lammps" {
		t.Fatal("Family")
	}
}
