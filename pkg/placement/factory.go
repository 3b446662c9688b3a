// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/policyname"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Names lists the policies ByName knows, Co-scheML first (pkg/policyname's registry).
func Names() []string { return policyname.All() }

// constructors builds each policy of the registry; a test checks that every
// registered name has one.
var constructors = map[string]func(pred model.Predictor, opts Options) (Policy, error){
	policyname.CoScheML:    func(pred model.Predictor, o Options) (Policy, error) { return pol(NewCoScheML(pred, o)) },
	policyname.Oracle:      func(pred model.Predictor, o Options) (Policy, error) { return pol(NewOracle(pred, o)) },
	policyname.Exclusive:   func(_ model.Predictor, o Options) (Policy, error) { return pol(NewExclusive(o)) },
	policyname.Blind:       func(_ model.Predictor, o Options) (Policy, error) { return pol(NewBlind(o)) },
	policyname.LeastLoaded: func(_ model.Predictor, o Options) (Policy, error) { return pol(NewLeastLoaded(o)) },
	policyname.UtilSum:     func(_ model.Predictor, o Options) (Policy, error) { return pol(NewUtilSum(0, o)) },
	policyname.Random:      func(_ model.Predictor, o Options) (Policy, error) { return pol(NewRandom(o.Seed, o)) },
	policyname.Lucid:       func(_ model.Predictor, o Options) (Policy, error) { return pol(NewLucid(o.ShareScore, o)) },
	policyname.Gandiva:     func(_ model.Predictor, o Options) (Policy, error) { return pol(NewGandiva(o)) },
	policyname.FGD:         func(_ model.Predictor, o Options) (Policy, error) { return pol(NewFGD(o)) },
}

// ByName returns a new policy by its name (see Names) for the CLI and the config.
// pred is the model's predictor for "coscheml" and the true speeds for "oracle";
// the other policies ignore it. opts.UtilSumThreshold and opts.Seed configure the
// utilsum and random baselines.
func ByName(name string, pred model.Predictor, opts Options) (Policy, error) {
	mk, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown placement policy %q: want one of %v", profile.Sanitize(name), Names())
	}
	return mk(pred, opts)
}

// pol keeps a typed nil out of the Policy interface.
func pol[P Policy](p P, err error) (Policy, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}
