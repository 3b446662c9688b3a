package placement

import (
	"fmt"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Names lists the policies ByName knows, Co-scheML first.
func Names() []string {
	return []string{"coscheml", "exclusive", "blind", "least-loaded", "utilsum", "random", "oracle"}
}

// ByName returns a new policy by its name (see Names) for the CLI and the config.
// pred is the model's predictor for "coscheml" and the true speeds for "oracle";
// the other policies ignore it. opts.UtilSumThreshold and opts.Seed configure the
// utilsum and random baselines.
func ByName(name string, pred model.Predictor, opts Options) (Policy, error) {
	var (
		p   Policy
		err error
	)
	switch name {
	case "coscheml":
		p, err = pol(NewCoScheML(pred, opts))
	case "oracle":
		p, err = pol(NewOracle(pred, opts))
	case "exclusive":
		p, err = pol(NewExclusive(opts))
	case "blind":
		p, err = pol(NewBlind(opts))
	case "least-loaded":
		p, err = pol(NewLeastLoaded(opts))
	case "utilsum":
		p, err = pol(NewUtilSum(0, opts))
	case "random":
		p, err = pol(NewRandom(opts.Seed, opts))
	default:
		return nil, fmt.Errorf("unknown placement policy %q: want one of %v", profile.Sanitize(name), Names())
	}
	return p, err
}

// pol keeps a typed nil out of the Policy interface.
func pol[P Policy](p P, err error) (Policy, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}
