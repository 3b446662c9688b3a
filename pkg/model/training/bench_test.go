// SPDX-License-Identifier: Apache-2.0

package training

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/sjwhitworth/golearn/trees"
)

// BenchmarkPredictTree: one compiled depth-6 tree.
func BenchmarkPredictTree(b *testing.B) {
	m, err := Train(lucidDataset(b), model.Params{MaxDepth: 6, MinLeaf: 10, Trees: 1, Bins: 32, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	job := prof("j", 70, 40, 4000)
	co := []*profile.Profile{prof("a", 60, 30, 3000)}
	b.ReportAllocs()
	for b.Loop() {
		_ = m.PredictSpeed(job, co)
	}
}

// BenchmarkTrain compares golearn's own recursive Fit on all 1,580 Lucid samples
// and every feature with the node-by-node driver (Train), both one depth-6 tree.
func BenchmarkTrain(b *testing.B) {
	ds := lucidDataset(b)
	b.Run("golearn-raw", func(b *testing.B) {
		inst := golearnInstances(b, ds)
		for b.Loop() {
			g := trees.NewDecisionTreeRegressor(trees.MSE, 6)
			if err := g.Fit(inst); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bins := range []int{0, 32} {
		name := "driver-bins-all"
		if bins > 0 {
			name = "driver-bins-32"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Train(ds, model.Params{MaxDepth: 6, MinLeaf: 10, Trees: 1, Bins: bins, Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
