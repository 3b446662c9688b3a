// SPDX-License-Identifier: Apache-2.0

package training

import (
	"slices"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
)

func TestCrossValidation(t *testing.T) {
	ds := lucidDataset(t)
	p := model.Params{MaxDepth: 3, MinLeaf: 20, Trees: 1, Bins: 16, Seed: 1}
	kf, err := KFold(ds, 4, p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(kf.Folds) != 4 || kf.Metrics.Samples != ds.Len() {
		t.Fatalf("k-fold: %d folds, %d samples", len(kf.Folds), kf.Metrics.Samples)
	}
	for _, f := range kf.Folds {
		if f.Train+f.Test != ds.Len() || f.Test < ds.Len()/4 {
			t.Errorf("%s: train %d test %d", f.Name, f.Train, f.Test)
		}
	}
	lao, err := LeaveAppsOut(ds, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lao.Metrics.Samples != ds.Len() {
		t.Fatalf("leave-apps-out tested %d samples, want each of %d once", lao.Metrics.Samples, ds.Len())
	}
	var names []string
	for _, f := range lao.Folds {
		names = append(names, f.Name)
		// Count independently: test = job in the app; train = app nowhere.
		test, train := 0, 0
		for i := range ds.Samples {
			s := &ds.Samples[i]
			inJob, inCo := model.Family(s.Tag) == f.Name, model.Family(s.CoTags[0]) == f.Name
			if inJob {
				test++
			} else if !inCo {
				train++
			}
		}
		if f.Test != test || f.Train != train {
			t.Errorf("%s: train %d test %d, want %d and %d", f.Name, f.Train, f.Test, train, test)
		}
	}
	if got := strings.Join(names, ","); got != "dcgan,efficientnet,mobilenetv2,mobilenetv3,neumf,pointnet,ppo,resnet18" {
		t.Fatalf("applications %s", got)
	}
	// A custom grouping: by first letter (d, e, m, n, p, r).
	per, err := LeaveAppsOut(ds, p, func(tag string) string { return tag[:1] })
	if err != nil {
		t.Fatal(err)
	}
	if len(per.Folds) != 6 || per.Metrics.Samples != ds.Len() {
		t.Fatalf("first-letter grouping gave %d folds, %d samples", len(per.Folds), per.Metrics.Samples)
	}
	if _, err := KFold(ds, 1, p, 1); err == nil {
		t.Fatal("k=1 accepted")
	}
}

// Leave-pairs-out tests every sample once and splits the data in each fold;
// PairKey gives both orders of a pair one key (so they share a fold).
func TestLeavePairsOut(t *testing.T) {
	ds := lucidDataset(t)
	p := model.Params{MaxDepth: 3, MinLeaf: 20, Trees: 1, Bins: 16, Seed: 1}
	rep, err := LeavePairsOut(ds, 4, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.OutOfFold) != ds.Len() || rep.Metrics.Samples != ds.Len() || len(rep.Folds) != 4 {
		t.Fatalf("%d residuals, %d samples scored, %d folds; want %d, %d, 4", len(rep.OutOfFold), rep.Metrics.Samples, len(rep.Folds), ds.Len(), ds.Len())
	}
	for _, f := range rep.Folds {
		if f.Train+f.Test != ds.Len() {
			t.Errorf("%s: %d train + %d test != %d", f.Name, f.Train, f.Test, ds.Len())
		}
	}
	if _, err := LeavePairsOut(ds, 1, p, 1); err == nil {
		t.Error("k=1 accepted")
	}
	tests := []struct {
		tag  string
		co   []string
		want string
	}{
		{"b", []string{"a"}, "a+b"},
		{"a", []string{"b"}, "a+b"},
		{"c", []string{"b", "a"}, "a+b+c"},
	}
	for _, tc := range tests {
		if got := PairKey(tc.tag, tc.co); got != tc.want {
			t.Errorf("PairKey(%q, %q) = %q, want %q", tc.tag, tc.co, got, tc.want)
		}
	}
	tags := ds.Tags()
	if len(tags) < 2 || !slices.IsSorted(tags) {
		t.Fatalf("dataset tags %v: want several, sorted", tags)
	}
}
