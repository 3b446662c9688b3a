// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/truth"
)

// train stores the pair file's measurements (without the excluded families'),
// and --no-measured-pairs none; info names them.
func TestTrainMeasuredPairs(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		none    bool
		without string // a family none of the measured pairs may name
	}{
		{"default", nil, false, ""},
		{"families excluded", []string{"--exclude-families", "resnet18"}, false, "resnet18"},
		{"off", []string{"--no-measured-pairs"}, true, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".model")
			args := append([]string{"train", "--skip-cv", "--out", out}, tc.args...)
			code, stdout, stderr := runTrain(args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s %s", code, stdout, stderr)
			}
			m, err := model.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			if tc.none != (len(m.Measured) == 0) || strings.Contains(stdout, "measured pairs:") == tc.none {
				t.Fatalf("%d measured pairs; stdout %q", len(m.Measured), stdout)
			}
			for _, p := range m.Measured {
				if tc.without != "" && (model.Family(p.Job) == tc.without || model.Family(p.Co) == tc.without) {
					t.Fatalf("measured pair %+v of an excluded family", p)
				}
			}
			if i == 0 {
				// as many as the ground truth counts measured ordered pairs
				tt, err := truth.FromLucid(models.DefaultSoloCSV, models.DefaultPairsCSV)
				if err != nil {
					t.Fatal(err)
				}
				if measured, _, _ := tt.Coverage(); len(m.Measured) != measured {
					t.Errorf("%d measured pairs from the shipped Lucid pairs, want %d ordered pairs", len(m.Measured), measured)
				}
			}
		})
	}
}
