// SPDX-License-Identifier: Apache-2.0

package training

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/model"
)

// Fold is one cross-validation fold's result.
type Fold struct {
	Name    string        `json:"name"`
	Train   int           `json:"train"`
	Test    int           `json:"test"`
	Metrics model.Metrics `json:"metrics"`
}

// CVReport is a cross-validation result: Metrics pools the out-of-fold
// predictions of all folds (each sample is tested exactly once).
type CVReport struct {
	Kind    string        `json:"kind"` // "kfold" or "leave-apps-out"
	Params  model.Params  `json:"params"`
	Metrics model.Metrics `json:"metrics"`
	Folds   []Fold        `json:"folds"`
	// OutOfFold holds every sample's out-of-fold prediction, with the fold
	// (application) it was held out in: the residuals Calibrate uses.
	OutOfFold []OutOfFold `json:"-"`
}

// OutOfFold is one sample's prediction by a model that did not see it.
type OutOfFold struct {
	Fold        string
	Pred, Truth float64
	// Spread is the fold model's tree spread for the sample (the difficulty
	// estimate normalized margins scale by).
	Spread float64
	// Index is the sample's index in the dataset cross-validated, Tag its
	// job application (what JobScale margins are normalized by).
	Index int
	Tag   string
}

// KFold runs k-fold cross-validation with a seeded shuffle.
func KFold(ds Dataset, k int, p model.Params, seed int64) (CVReport, error) {
	n := ds.Len()
	if k < 2 || k > n {
		return CVReport{}, fmt.Errorf("k-fold: k=%d with %d samples: want 2..%d", k, n, n)
	}
	perm := rand.New(rand.NewPCG(uint64(seed), 0x6b666f6c64)).Perm(n)
	rep := CVReport{Kind: "kfold", Params: p}
	var all []Scored
	for f := 0; f < k; f++ {
		train, test := splitBy(perm, func(j int) bool { return j%k == f })
		r, err := runFold(ds, train, test, p)
		if err != nil {
			return CVReport{}, fmt.Errorf("k-fold: fold %d: %w", f+1, err)
		}
		rep.Folds = append(rep.Folds, Fold{Name: "fold " + strconv.Itoa(f+1), Train: len(train), Test: len(test), Metrics: MetricsOf(r)})
		for j, x := range r {
			rep.OutOfFold = append(rep.OutOfFold, OutOfFold{Fold: model.Family(ds.Samples[test[j]].Tag), Pred: x.Pred, Truth: x.Truth, Spread: x.Spread, Index: test[j], Tag: ds.Samples[test[j]].Tag})
		}
		all = append(all, r...)
	}
	rep.Metrics = MetricsOf(all)
	return rep, nil
}

// LeaveFamiliesOut is LeaveAppsOut with the default grouping: a family is a
// model name (model.Family: every batch size and precision of resnet18 is one
// family), so the model is scored on families it has never seen.
func LeaveFamiliesOut(ds Dataset, p model.Params) (CVReport, error) {
	return LeaveAppsOut(ds, p, model.Family)
}

// LeaveAppsOut holds out one application at a time: the test set is every sample
// whose job belongs to the application, and the training set is every sample in
// which the application appears neither as the job nor as a co-runner, so the
// model has never seen it. group maps a tag to its application (nil: model.Family).
func LeaveAppsOut(ds Dataset, p model.Params, group func(tag string) string) (CVReport, error) {
	if group == nil {
		group = model.Family
	}
	var apps []string
	seen := map[string]bool{}
	for i := range ds.Samples {
		if g := group(ds.Samples[i].Tag); !seen[g] {
			seen[g] = true
			apps = append(apps, g)
		}
	}
	slices.Sort(apps)
	if len(apps) < 2 {
		return CVReport{}, errors.New("leave-apps-out: need at least 2 applications")
	}
	rep := CVReport{Kind: "leave-apps-out", Params: p}
	var all []Scored
	for _, app := range apps {
		var train, test []int
		for i := range ds.Samples {
			s := &ds.Samples[i]
			if group(s.Tag) == app {
				test = append(test, i)
				continue
			}
			involved := false
			for _, ct := range s.CoTags {
				if group(ct) == app {
					involved = true
					break
				}
			}
			if !involved {
				train = append(train, i)
			}
		}
		r, err := runFold(ds, train, test, p)
		if err != nil {
			return CVReport{}, fmt.Errorf("leave-apps-out: holding out %s: %w", app, err)
		}
		rep.Folds = append(rep.Folds, Fold{Name: app, Train: len(train), Test: len(test), Metrics: MetricsOf(r)})
		for j, x := range r {
			rep.OutOfFold = append(rep.OutOfFold, OutOfFold{Fold: app, Pred: x.Pred, Truth: x.Truth, Spread: x.Spread, Index: test[j], Tag: ds.Samples[test[j]].Tag})
		}
		all = append(all, r...)
	}
	rep.Metrics = MetricsOf(all)
	return rep, nil
}

func runFold(ds Dataset, train, test []int, p model.Params) ([]Scored, error) {
	m, err := Train(ds.Subset(train), p)
	if err != nil {
		return nil, err
	}
	r := make([]Scored, len(test))
	for j, i := range test {
		s := &ds.Samples[i]
		pred, sd := m.PredictSpeedSpread(s.Job, s.Co)
		r[j] = Scored{Truth: s.Speed, Pred: pred, Spread: sd, MeanPred: m.TrainMean, UtilSum: s.UtilSum()}
	}
	return r, nil
}

// PairKey is the unordered pair (or set) of applications a sample measures:
// its tag and its co-runners' tags, sorted and joined. Both orders of one pair
// share a key.
func PairKey(tag string, coTags []string) string {
	ts := append([]string{tag}, coTags...)
	slices.Sort(ts)
	return strings.Join(ts, "+")
}

// LeavePairsOut is cross-validation for pairs of applications the model knows
// apart but never saw together: the unordered pairs (PairKey) are dealt into k
// folds by a seeded shuffle, and each fold's model is trained on every sample
// of the other pairs, so both applications are usually in its training data
// (with other partners) while this pair is not. Its residuals are the errors
// on such pairs (Calibration.Seen); OutOfFold's Fold is the fold number.
func LeavePairsOut(ds Dataset, k int, p model.Params, seed int64) (CVReport, error) {
	var keys []string
	idx := map[string]int{}
	of := make([]int, ds.Len())
	for i := range ds.Samples {
		key := PairKey(ds.Samples[i].Tag, ds.Samples[i].CoTags)
		j, ok := idx[key]
		if !ok {
			j = len(keys)
			idx[key] = j
			keys = append(keys, key)
		}
		of[i] = j
	}
	if k < 2 || k > len(keys) {
		return CVReport{}, fmt.Errorf("leave-pairs-out: k=%d with %d pairs: want 2..%d", k, len(keys), len(keys))
	}
	fold := make([]int, len(keys))
	for j, pi := range rand.New(rand.NewPCG(uint64(seed), 0x7061697273)).Perm(len(keys)) {
		fold[pi] = j % k
	}
	rep := CVReport{Kind: "leave-pairs-out", Params: p}
	var all []Scored
	for f := 0; f < k; f++ {
		train, test := splitBy(identity(len(ds.Samples)), func(i int) bool { return fold[of[i]] == f })
		r, err := runFold(ds, train, test, p)
		if err != nil {
			return CVReport{}, fmt.Errorf("leave-pairs-out: fold %d: %w", f+1, err)
		}
		name := "pairs " + strconv.Itoa(f+1)
		rep.Folds = append(rep.Folds, Fold{Name: name, Train: len(train), Test: len(test), Metrics: MetricsOf(r)})
		for j, x := range r {
			rep.OutOfFold = append(rep.OutOfFold, OutOfFold{Fold: name, Pred: x.Pred, Truth: x.Truth, Spread: x.Spread, Index: test[j], Tag: ds.Samples[test[j]].Tag})
		}
		all = append(all, r...)
	}
	rep.Metrics = MetricsOf(all)
	return rep, nil
}

// splitBy splits the sample indexes idx into train and test: idx[j] is a test
// sample when inTest(j).
func splitBy(idx []int, inTest func(j int) bool) (train, test []int) {
	for j, i := range idx {
		if inTest(j) {
			test = append(test, i)
		} else {
			train = append(train, i)
		}
	}
	return train, test
}

// identity is 0..n-1.
func identity(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
