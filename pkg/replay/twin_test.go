// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/pairmem"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

// compared decides with Co-scheML and asks the oracle about the same cluster
// and request, counting where they differ (the decision is Co-scheML's).
type compared struct {
	cos, orc placement.Policy
	n        map[string]int
	refused  map[string]string // job -> the first share refused that the oracle takes: "infer" (an infer job), "joining infer" or "other"
}

func (c *compared) Name() string { return c.cos.Name() }

func (c *compared) Place(cl *placement.Cluster, r *placement.Request) placement.Decision {
	d, o := c.cos.Place(cl, r), c.orc.Place(cl, r)
	k := d.Action.String() + " / oracle " + o.Action.String()
	switch {
	case d.Action == placement.ActionShare && o.Action == placement.ActionShare:
		if d.Placement[0] != o.Placement[0] {
			k += ", another GPU"
		}
	case o.Action == placement.ActionShare:
		// the resident the oracle would have joined (single-GPU jobs)
		res := cl.Nodes[o.Placement[0].Node].GPUs[o.Placement[0].GPU].Residents
		side := "other"
		if r.Class == profile.ClassInfer || slices.ContainsFunc(res, func(x placement.Resident) bool { return x.Class == profile.ClassInfer }) {
			k += ", an infer job on either side"
			side = "joining infer"
			if r.Class == profile.ClassInfer {
				side = "infer"
			}
		} else {
			k += ", no infer job"
		}
		if _, ok := c.refused[r.JobID]; !ok {
			c.refused[r.JobID] = side
		}
	}
	c.n[k]++
	return d
}

// TestSimTwin is the simulator half of make e2e without the daemons
// (make e2e-sim; docs/evaluation.md, "Issue 9 follow-up 5"): the same jobs
// (replay.Prepare with make e2e's defaults; E2E_JOBS, E2E_SEEDS), cluster and
// configuration as the benchmark's twin with typed pinning, for exclusive,
// blind, Co-scheML and the oracle, placing at start and (Co-scheML, oracle)
// deciding at submit with the re-decide loop every second, as E2E_WAIT_DEFER
// runs it. It also counts, at submit, where Co-scheML's decisions differ from
// the oracle's on the same cluster state. E2E_SIM=1 to run (seconds).
func TestSimTwin(t *testing.T) {
	if os.Getenv("E2E_SIM") == "" {
		t.Skip("set E2E_SIM=1 (make e2e-sim)")
	}
	n, seeds, compress := 200, 3, 500
	for name, dst := range map[string]*int{"E2E_JOBS": &n, "E2E_SEEDS": &seeds, "E2E_COMPRESS": &compress} {
		if v := os.Getenv(name); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > 5000 {
				t.Fatalf("%s=%q: want 1..5000", name, v)
			}
			*dst = k
		}
	}
	tt, err := truth.FromLucid(models.DefaultSoloCSV, models.DefaultPairsCSV)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.ReadPhilly(bytes.NewReader(models.PhillyCSV))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	// the benchmark's twin (slurm/integration/e2e_test.go, runReplay)
	cfg := config.Default()
	cfg.ShardPinning, cfg.ShardTypePrefix, cfg.SlotsPerGPU = config.PinTyped, "g", 4
	opts := placeconf.Options(cfg)
	base := sim.Config{Nodes: 4, GPUsPerNode: 4, GPUMemMiB: 143771, Slots: 4, MaxCoRunners: opts.MaxCoRunners,
		Floors: cfg.SpeedFloor, Reach: placeconf.Reach(cfg)}
	type row struct {
		policy string
		submit bool
	}
	rows := []row{{"exclusive", false}, {"blind", false}, {"coscheml", false}, {"oracle", false}, {"coscheml", true}, {"oracle", true}}
	type acc struct{ jct, below, shared float64 }
	sum := make([]acc, len(rows))
	byClass := make([]map[profile.Class]float64, len(rows)) // avg JCT per class, mean over seeds
	for i := range byClass {
		byClass[i] = map[profile.Class]float64{}
	}
	diff, refused := map[string]int{}, map[string]string{}
	// each job's JCT at submit, by "seed/job": what a refusal cost it against the oracle
	jctAt := map[string]map[string]float64{"coscheml": {}, "oracle": {}}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		jobs, err := Prepare(tr.Jobs, tt.Tags(), Spec{Jobs: n, Seed: seed, MaxDuration: 24 * 3600, Load: 2, GPUs: 16, Compress: float64(compress), MinWork: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			c := base
			c.Seed = uint64(seed)
			if r.submit {
				// As the benchmark: the jobs one loop pass re-decides start at
				// the next backfill pass (bf_interval=1).
				c.Submit = &sim.SubmitModel{Redecide: 1, StartDelay: 1}
			}
			o := opts
			o.Seed = uint64(seed)
			var pol placement.Policy
			var cmp *compared
			switch r.policy {
			case "coscheml":
				// as sim.Experiment with the pair memory, the comparison around it
				mp, err := pairmem.NewPredictor(m, pairmem.New(pairmem.Options{}))
				if err != nil {
					t.Fatal(err)
				}
				c.OnCoRunEnd = func(job, co *profile.Profile, uid string, speed float64) {
					_ = mp.Observe(job, []*profile.Profile{co}, uid, speed)
				}
				cos, err := placement.NewCoScheML(mp, o)
				if err != nil {
					t.Fatal(err)
				}
				pol = cos
				if r.submit {
					orc, err := placement.NewOracle(tt, o)
					if err != nil {
						t.Fatal(err)
					}
					cmp = &compared{cos: cos, orc: orc, n: diff, refused: map[string]string{}}
					pol = cmp
				}
			default:
				if pol, err = placement.ByName(r.policy, tt, o); err != nil {
					t.Fatal(err)
				}
			}
			res, err := sim.Run(c, slices.Clone(jobs), tt, pol)
			if err != nil {
				t.Fatal(err)
			}
			if cmp != nil {
				for j, side := range cmp.refused {
					refused[fmt.Sprint(seed, "/", j)] = side
				}
			}
			if r.submit {
				for _, j := range res.Jobs {
					jctAt[r.policy][fmt.Sprint(seed, "/", j.ID)] = j.JCT()
				}
			}
			all, by := sim.Summarize(res)
			for cl, mt := range by {
				byClass[i][cl] += mt.AvgJCT / float64(seeds)
			}
			if all.Jobs != len(jobs) {
				t.Fatalf("%s seed %d: %d of %d jobs ended", r.policy, seed, all.Jobs, len(jobs))
			}
			if r.policy == "oracle" && all.BelowFloor > 0 {
				t.Errorf("oracle seed %d: %d jobs below their floor with true speeds", seed, all.BelowFloor)
			}
			sum[i].jct += all.AvgJCT / float64(seeds)
			sum[i].below += float64(all.BelowFloor) / float64(seeds)
			sum[i].shared += float64(all.Shared) / float64(seeds)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs, seeds 1-%d, 4 nodes x 4 GPUs x 4 shards, 500x, typed pinning\n\n", n, seeds)
	b.WriteString("| policy | decided | avg JCT (s) | below floor / seed | shared jobs / seed |\n|---|---|---|---|---|\n")
	for i, r := range rows {
		at := "at start"
		if r.submit {
			at = "at submit + loop (1 s)"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.1f | %.1f |\n", r.policy, at, sum[i].jct, sum[i].below, sum[i].shared)
	}
	b.WriteString("\nCo-scheML's decisions at submit against the oracle's on the same state (all seeds):\n\n| Co-scheML / oracle | decisions |\n|---|---|\n")
	keys := make([]string, 0, len(diff))
	for k := range diff {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %d |\n", k, diff[k])
	}
	jobsBy, cost := map[string]int{}, map[string]float64{}
	for j, side := range refused {
		jobsBy[side]++
		cost[side] += jctAt["coscheml"][j] - jctAt["oracle"][j]
	}
	fmt.Fprintf(&b, "\nJobs refused at least one share the oracle takes, at submit: %d of %d (avg JCT against the same job under the oracle):\n", len(refused), n*seeds)
	for _, side := range []string{"infer", "joining infer", "other"} {
		fmt.Fprintf(&b, "- %s: %d jobs, %+.2f s\n", map[string]string{"infer": "infer jobs", "joining infer": "other jobs, refused next to an infer job",
			"other": "other jobs, refused next to a non-infer job"}[side], jobsBy[side], cost[side]/max(float64(jobsBy[side]), 1))
	}
	b.WriteString("\n| policy | decided | avg JCT infer (s) | train | hpc |\n|---|---|---|---|---|\n")
	for i, r := range rows {
		at := "at start"
		if r.submit {
			at = "at submit + loop (1 s)"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f |\n", r.policy, at, byClass[i][profile.ClassInfer], byClass[i][profile.ClassTrain], byClass[i][profile.ClassHPC])
	}
	t.Log("\n" + b.String())
}
