// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/placement"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/trace"
	"github.com/coscheml/coscheml/pkg/truth"
)

var nan = math.NaN()

// The setups, in report order, and the simulator's policy for each.
const (
	Exclusive = "exclusive" // plugin off, --gres=gpu:1: whole GPUs
	Blind     = "blind"     // plugin off, --gres=shard:<share>: Slurm's own shard pick
	CoScheML  = "coscheml"  // plugin on
)

// Setups lists the setups in report order.
var Setups = []string{Exclusive, Blind, CoScheML}

// SimPolicy is the simulator's policy standing for a setup.
func SimPolicy(setup string) (string, error) {
	switch setup {
	case Exclusive, Blind, CoScheML:
		return setup, nil
	}
	return "", fmt.Errorf("replay: unknown setup %q: want %s", setup, strings.Join(Setups, ", "))
}

// SimSetup is the simulated twin of the real cluster.
type SimSetup struct {
	Config     sim.Config
	Options    placement.Options
	Truth      *truth.Table
	Model      model.Predictor // for coscheml
	PairMemory bool            // as the plugin's pair_memory
	// Submit, when set, is the plugin's decision at submit (sim.SubmitModel);
	// Simulate runs coscheml under it as well.
	Submit *sim.SubmitModel
}

// Simulate runs the simulator on the same jobs with the setup's policy, placing
// each job when it starts (the evaluation's model).
func Simulate(setup string, jobs []trace.Job, seed int64, s SimSetup) (*sim.PolicyRun, error) {
	s.Submit = nil
	return simulate(setup, jobs, seed, s)
}

// SimulateAtSubmit is Simulate with the plugin's decision at submit (s.Submit);
// nil when s has none or the setup runs without the plugin.
func SimulateAtSubmit(setup string, jobs []trace.Job, seed int64, s SimSetup) (*sim.PolicyRun, error) {
	if s.Submit == nil || setup != CoScheML {
		return nil, nil
	}
	return simulate(setup, jobs, seed, s)
}

func simulate(setup string, jobs []trace.Job, seed int64, s SimSetup) (*sim.PolicyRun, error) {
	pol, err := SimPolicy(setup)
	if err != nil {
		return nil, err
	}
	cfg := s.Config
	cfg.Submit = s.Submit
	opts := s.Options
	if setup == Blind {
		// Blind sharing asks Slurm for a share of one GPU; a job of several
		// GPUs asks for whole GPUs (no per-GPU shard request without coscheml).
		opts.WholeMultiGPU = true
	}
	exp := sim.Experiment{Config: cfg, Truth: s.Truth, Model: s.Model, PairMemory: s.PairMemory,
		Options: opts, Policies: []string{pol}, Seeds: []int64{seed}, Mix: trace.DefaultClassMix, Workers: 1,
		Jobs: func(int64) ([]trace.Job, error) { return append([]trace.Job(nil), jobs...), nil }}
	runs, err := exp.Execute()
	if err != nil {
		return nil, fmt.Errorf("replay: simulating %s seed %d: %w", setup, seed, err)
	}
	return runs[0], nil
}

// SeedResult is one setup on one seed, real beside simulated.
type SeedResult struct {
	Setup   string      `json:"setup"`
	Seed    int64       `json:"seed"`
	Jobs    int         `json:"jobs"`  // submitted
	Ended   int         `json:"ended"` // with a result record
	Missing []string    `json:"missing,omitempty"`
	Real    sim.Metrics `json:"real"`
	Sim     sim.Metrics `json:"sim"`
	// SimSubmit: the simulator with the plugin's decision at submit (coscheml),
	// and its placements: on the GPU the decision chose unless Slurm's first fit
	// started a re-decided job elsewhere (sim.SubmitModel).
	SimSubmit          *sim.Metrics `json:"sim_at_submit,omitempty"`
	SimSubmitPlacement *Placement   `json:"sim_at_submit_placement,omitempty"`
	Placement          Placement    `json:"placement"`
	WallS              float64      `json:"wall_s"` // wall time of the real run
}

// NewSeedResult combines a measured run with its simulations (atSubmit may be nil).
func NewSeedResult(r Run, m Measured, simRun, atSubmit *sim.PolicyRun, wall float64) SeedResult {
	real, _ := sim.Summarize(m.Result)
	sr := SeedResult{Setup: r.Setup, Seed: r.Seed, Jobs: len(r.Submitted), Ended: len(m.Result.Jobs),
		Missing: m.Missing, Real: real, Sim: simRun.Overall, Placement: m.Placement, WallS: wall}
	if atSubmit != nil {
		o := atSubmit.Overall
		sr.SimSubmit = &o
		if res := atSubmit.Result; res != nil {
			pinned := len(res.Jobs) - res.Whole
			sr.SimSubmitPlacement = &Placement{Decided: len(res.Jobs), Pinned: pinned, Landed: pinned - res.Redirected, Unpinned: res.Whole}
		}
	}
	return sr
}

// Summary is one setup over its seeds: means of the real and simulated metrics.
type Summary struct {
	Setup     string             `json:"setup"`
	Seeds     int                `json:"seeds"`
	Jobs      int                `json:"jobs"`
	Ended     int                `json:"ended"`
	Real      map[string]float64 `json:"real"`
	Sim       map[string]float64 `json:"sim"`
	Placement Placement          `json:"placement"`
	// GainReal and GainSim: mean over seeds of 1 - avg JCT / exclusive's avg JCT
	// of the same seed (absent for exclusive, or without exclusive runs).
	GainReal *float64 `json:"avg_jct_gain_real,omitempty"`
	GainSim  *float64 `json:"avg_jct_gain_sim,omitempty"`
	// SimSubmit and GainSimSubmit: the same for the simulator at submit, over
	// the seeds that have it.
	SimSubmit          map[string]float64 `json:"sim_at_submit,omitempty"`
	GainSimSubmit      *float64           `json:"avg_jct_gain_sim_at_submit,omitempty"`
	SimSubmitPlacement *Placement         `json:"sim_at_submit_placement,omitempty"`
}

// Metrics reported, in table order (names of sim.Metrics.Value).
var Metrics = []string{"avg_jct", "median_jct", "p95_jct", "avg_queue", "makespan", "useful_util", "below_floor"}

// Summarize aggregates seed results per setup, in Setups order.
func Summarize(rs []SeedResult) []Summary {
	excl := map[int64]SeedResult{}
	for _, r := range rs {
		if r.Setup == Exclusive {
			excl[r.Seed] = r
		}
	}
	var out []Summary
	for _, setup := range Setups {
		s := Summary{Setup: setup, Real: map[string]float64{}, Sim: map[string]float64{}}
		var gr, gs, gsub []float64
		subSeeds := 0
		for _, r := range rs {
			if r.Setup != setup {
				continue
			}
			s.Seeds++
			s.Jobs += r.Jobs
			s.Ended += r.Ended
			s.Placement.add(r.Placement)
			for _, name := range Metrics {
				s.Real[name] += r.Real.Value(name)
				s.Sim[name] += r.Sim.Value(name)
			}
			e, ok := excl[r.Seed]
			ok = ok && setup != Exclusive && e.Real.AvgJCT > 0 && e.Sim.AvgJCT > 0
			if ok {
				gr = append(gr, 1-r.Real.AvgJCT/e.Real.AvgJCT)
				gs = append(gs, 1-r.Sim.AvgJCT/e.Sim.AvgJCT)
			}
			if r.SimSubmit != nil {
				if s.SimSubmit == nil {
					s.SimSubmit = map[string]float64{}
				}
				subSeeds++
				if p := r.SimSubmitPlacement; p != nil {
					if s.SimSubmitPlacement == nil {
						s.SimSubmitPlacement = &Placement{}
					}
					s.SimSubmitPlacement.add(*p)
				}
				for _, name := range Metrics {
					s.SimSubmit[name] += r.SimSubmit.Value(name)
				}
				// Exclusive runs without the plugin: its simulation is the same
				// whatever the decision model.
				if ok {
					gsub = append(gsub, 1-r.SimSubmit.AvgJCT/e.Sim.AvgJCT)
				}
			}
		}
		if s.Seeds == 0 {
			continue
		}
		for _, name := range Metrics {
			s.Real[name] /= float64(s.Seeds)
			s.Sim[name] /= float64(s.Seeds)
		}
		for name := range s.SimSubmit {
			s.SimSubmit[name] /= float64(subSeeds)
		}
		if len(gr) > 0 {
			a, b := mean(gr), mean(gs)
			s.GainReal, s.GainSim = &a, &b
		}
		if len(gsub) > 0 {
			g := mean(gsub)
			s.GainSimSubmit = &g
		}
		out = append(out, s)
	}
	return out
}

func mean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// Check is one of the "done when" targets.
type Check struct {
	What string `json:"what"`
	Met  bool   `json:"met"`
	Why  string `json:"why"`
}

// Checks evaluates the targets: coscheml's avg-JCT gain over exclusive within
// 10% (relative) of the simulator's; coscheml beats blind on avg JCT and on jobs
// below their floor; at least 99% of pinned placements on the intended GPU.
func Checks(ss []Summary) []Check {
	by := map[string]Summary{}
	for _, s := range ss {
		by[s.Setup] = s
	}
	var out []Check
	c, okC := by[CoScheML]
	b, okB := by[Blind]
	if okC && c.GainReal != nil {
		rel := math.Abs(*c.GainReal-*c.GainSim) / math.Abs(*c.GainSim)
		out = append(out, Check{What: "avg-JCT gain over exclusive within 10% (relative) of the simulator's (placing at start)",
			Met: rel <= 0.10, Why: fmt.Sprintf("real %.1f%%, simulator %.1f%%: %.0f%% apart", 100**c.GainReal, 100**c.GainSim, 100*rel)})
		if c.GainSimSubmit != nil {
			rel := math.Abs(*c.GainReal-*c.GainSimSubmit) / math.Abs(*c.GainSimSubmit)
			out = append(out, Check{What: "avg-JCT gain over exclusive within 10% (relative) of the simulator's at submit",
				Met: rel <= 0.10, Why: fmt.Sprintf("real %.1f%%, simulator at submit %.1f%%: %.0f%% apart", 100**c.GainReal, 100**c.GainSimSubmit, 100*rel)})
		}
	}
	if okC && okB {
		out = append(out, Check{What: "coscheml beats blind on avg JCT", Met: c.Real["avg_jct"] < b.Real["avg_jct"],
			Why: fmt.Sprintf("%.1f s vs %.1f s", c.Real["avg_jct"], b.Real["avg_jct"])})
		out = append(out, Check{What: "coscheml beats blind on jobs below their floor", Met: c.Real["below_floor"] < b.Real["below_floor"],
			Why: fmt.Sprintf("%.1f vs %.1f per seed", c.Real["below_floor"], b.Real["below_floor"])})
	}
	if okC {
		p := c.Placement
		out = append(out, Check{What: "GPU as intended for at least 99% of placements", Met: p.Pinned > 0 && p.AsIntended() >= 99,
			Why: fmt.Sprintf("%d of %d pinned placements (%d decided, %d not pinned)", p.Landed, p.Pinned, p.Decided, p.Unpinned)})
	}
	return out
}

// Markdown writes the comparison table: one row per setup, each cell "real
// (simulator)", then the targets.
func Markdown(w io.Writer, ss []Summary) error {
	var b strings.Builder
	b.WriteString("| setup | jobs ended | avg JCT (s) | median JCT (s) | p95 JCT (s) | avg queue (s) | makespan (s) | useful util (%) | below floor | avg JCT gain vs exclusive | GPU as intended (%) | avg JCT, gain: simulator at submit |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "| %s | %d/%d |", s.Setup, s.Ended, s.Jobs)
		for _, name := range Metrics {
			r, m := s.Real[name], s.Sim[name]
			if name == "useful_util" {
				r, m = 100*r, 100*m
			}
			fmt.Fprintf(&b, " %.1f (%.1f) |", r, m)
		}
		if s.GainReal != nil {
			fmt.Fprintf(&b, " %+.1f%% (%+.1f%%) |", 100**s.GainReal, 100**s.GainSim)
		} else {
			b.WriteString(" - |")
		}
		if p := s.Placement; p.Pinned > 0 {
			fmt.Fprintf(&b, " %.1f (%d/%d) |", p.AsIntended(), p.Landed, p.Pinned)
		} else {
			b.WriteString(" - |")
		}
		switch {
		case s.SimSubmit != nil && s.GainSimSubmit != nil:
			fmt.Fprintf(&b, " %.1f s, %+.1f%%", s.SimSubmit["avg_jct"], 100**s.GainSimSubmit)
		case s.SimSubmit != nil:
			fmt.Fprintf(&b, " %.1f s", s.SimSubmit["avg_jct"])
		default:
			b.WriteString(" -")
		}
		if p := s.SimSubmitPlacement; p != nil && p.Pinned > 0 {
			fmt.Fprintf(&b, ", %.1f%% as intended", p.AsIntended())
		}
		b.WriteString(" |\n")
	}
	b.WriteString("\nEach cell: real Slurm (simulator placing each job when it starts, same jobs). Means over seeds; below floor is jobs per seed.\n" +
		"Last column: the simulator modelling the plugin's decision at submit (sim.SubmitModel), where the setup runs the plugin; as intended: its placements started on the GPU decided (Slurm's first fit may start an untyped re-decision elsewhere).\n")
	if cs := Checks(ss); len(cs) > 0 {
		b.WriteString("\nTargets:\n")
		for _, c := range cs {
			mark := "NOT met"
			if c.Met {
				mark = "met"
			}
			fmt.Fprintf(&b, "- %s: %s (%s)\n", c.What, mark, c.Why)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Report is results.json.
type Report struct {
	Command   string       `json:"command"`
	Date      string       `json:"date"`
	Setup     []string     `json:"setup"` // free-text lines: cluster, trace, compression
	Runs      []SeedResult `json:"runs"`
	Summaries []Summary    `json:"summaries"`
	Checks    []Check      `json:"checks"`
}

// Write puts results.json and summary.md into dir.
func Write(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("replay report: %w", err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("replay report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("replay report: %w", err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# coscheml on real Slurm: trace replay\n\n%s\n\nCommand: `%s`\n\n", rep.Date, rep.Command)
	for _, l := range rep.Setup {
		fmt.Fprintf(&md, "- %s\n", l)
	}
	md.WriteString("\n")
	if err := Markdown(&md, rep.Summaries); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("replay report: %w", err)
	}
	return nil
}
