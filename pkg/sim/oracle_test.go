package sim

import (
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/trace"
)

// TestOracleNotWorseThanCoScheML: the oracle is Co-scheML's policy handed the true
// speeds instead of predictions, so on the same jobs it should not finish them
// later on average, on a queueing setup where sharing matters.
//
// Finding (docs/evaluation.md): the check holds for the mean over seeds, not for
// every seed. The oracle is greedy, like Co-scheML: each decision is best for the
// true speeds now, not for the whole schedule, so on a single seed a misprediction
// can happen to leave a better packing for later jobs; per seed the two differ by a
// few percent either way (the oracle ahead on average). The test therefore asserts
// the mean and logs every seed.
func TestOracleNotWorseThanCoScheML(t *testing.T) {
	oracleVsCoScheML(t, testModel(t))
}

func oracleVsCoScheML(t *testing.T, m model.Predictor) {
	tt := shipped(t)
	exp := Experiment{
		Config:   Config{Nodes: 4, GPUsPerNode: 8},
		Truth:    tt,
		Model:    m,
		Options:  placement.DefaultOptions(),
		Policies: []string{"coscheml", "oracle"},
		Seeds:    []int64{1, 2, 3},
		Jobs: func(seed int64) ([]trace.Job, error) {
			return phillySample(t, 800, 32, 1.5, seed, tt), nil
		},
	}
	runs, err := exp.Execute()
	if err != nil {
		t.Fatal(err)
	}
	jct := map[string]map[int64]float64{"coscheml": {}, "oracle": {}}
	for _, r := range runs {
		jct[r.Policy][r.Seed] = r.Overall.AvgJCT
	}
	var om, cm float64
	for _, s := range exp.Seeds {
		o, c := jct["oracle"][s], jct["coscheml"][s]
		t.Logf("seed %d: avg JCT oracle %.0f s, coscheml %.0f s (%+.1f%%)", s, o, c, 100*(c-o)/o)
		om += o / float64(len(exp.Seeds))
		cm += c / float64(len(exp.Seeds))
	}
	if om > cm {
		t.Errorf("mean over seeds: oracle avg JCT %.0f s > coscheml %.0f s", om, cm)
	}
}
