// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// TestOracleNotWorseThanCoScheML: the oracle is Co-scheML's policy handed the true
// speeds instead of predictions, so on the same jobs it must not finish them later
// on average, seed by seed, on a queueing setup where sharing matters: single-GPU
// jobs, the only ones that may share. (A several-GPU job takes whole idle GPUs;
// a policy that shares more leaves fewer of them idle, so with Philly's several-GPU
// jobs in the mix better speeds need not mean shorter JCT: the oracle was 3.5%
// behind Co-scheML over the same three seeds.)
//
// Both are greedy (each decision is best for the speeds it believes now, not for
// the whole schedule), so this is a property of the setup, not a theorem: with
// other settings (lower floors, near-zero prefer_share_speed) single seeds were
// seen where a misprediction happened to leave a better packing for later jobs
// (docs/evaluation.md). Since the model answers measured pairs from their
// measurements Co-scheML comes within a percent of the oracle on some seeds, where
// greedy packing noise decides the sign: so a single seed may not have the oracle
// behind by more than 2%, and over the seeds the oracle must be ahead. A model or
// policy change that breaks that should be looked at.
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
			return phillySingleGPUSample(t, 800, 32, 1.5, seed, tt), nil
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
	var so, sc float64
	for _, s := range exp.Seeds {
		o, c := jct["oracle"][s], jct["coscheml"][s]
		so, sc = so+o, sc+c
		t.Logf("seed %d: avg JCT oracle %.0f s, coscheml %.0f s (%+.1f%%)", s, o, c, 100*(c-o)/o)
		if o == 0 || c == 0 {
			t.Fatalf("seed %d: missing runs (oracle %v, coscheml %v)", s, o, c)
		}
		if o > 1.02*c {
			t.Errorf("seed %d: oracle avg JCT %.0f s is more than 2%% worse than coscheml's %.0f s", s, o, c)
		}
	}
	if so > sc {
		t.Errorf("over the seeds the oracle's avg JCT (%.0f s) is worse than coscheml's (%.0f s)", so/float64(len(exp.Seeds)), sc/float64(len(exp.Seeds)))
	}
}

// phillySingleGPUSample is phillySample drawn from the trace's single-GPU jobs.
func phillySingleGPUSample(t testing.TB, n int, gpus int, load float64, seed int64, tt *truth.Table) []trace.Job {
	t.Helper()
	tr, err := trace.ReadPhilly(bytes.NewReader(testPhilly(t)))
	if err != nil {
		t.Fatal(err)
	}
	var single []trace.Job
	for _, j := range tr.Jobs {
		if j.GPUs == 1 {
			single = append(single, j)
		}
	}
	jobs := trace.Sample(single, n, seed)
	if _, err := trace.SetLoad(jobs, gpus, load); err != nil {
		t.Fatal(err)
	}
	if err := trace.Assign(jobs, tt.Tags(), trace.DefaultClassMix, seed); err != nil {
		t.Fatal(err)
	}
	return jobs
}
