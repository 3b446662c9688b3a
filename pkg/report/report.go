// SPDX-License-Identifier: Apache-2.0

// Package report writes a simulation comparison for people and for programs: a
// Markdown summary, CSV and JSON of every figure, and SVG plots drawn by hand (JCT
// CDF per policy, GPU utilization and kernel-busy fraction over time, change
// against the baseline, jobs below their floor per 500 jobs over time).
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/sim"
)

// Input is everything a report shows.
type Input struct {
	Title     string
	Command   string   // how to reproduce the run
	Setup     []string // one line each: trace, cluster, load, seeds, ...
	Baseline  string   // the policy others are compared to (e.g. "exclusive")
	Summaries []sim.PolicySummary
	Runs      []*sim.PolicyRun
}

// Files are the names Write creates inside its directory.
var Files = []string{"summary.md", "results.csv", "results.json", "jct_cdf.svg", "utilization.svg", "kernel_util.svg", "improvement.svg", "below_floor.svg"}

// Write creates dir (if needed) and writes every file of Files into it.
func Write(dir string, in Input) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	writers := []func(io.Writer, Input) error{Markdown, CSV, JSON, JCTCDF, Utilization, KernelUtilization, Improvement, BelowFloorOverTime}
	for i, name := range Files {
		if err := writeFile(filepath.Join(dir, name), in, writers[i]); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, in Input, fn func(io.Writer, Input) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("report: %s: %w", path, cerr)
		}
	}()
	if err := fn(f, in); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return nil
}

// hours formats seconds as hours with 2 decimals.
func hours(s float64) string { return strconv.FormatFloat(s/3600, 'f', 2, 64) }

func pm(s sim.Stat, f func(float64) string) string {
	if s.N > 1 {
		sd := f
		if f(1)[0] == '+' { // a spread has no sign
			sd = pct
		}
		return f(s.Mean) + " ± " + sd(s.SD)
	}
	return f(s.Mean)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

func signedPct(v float64) string {
	s := strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
	if v >= 0 {
		s = "+" + s
	}
	return s
}

func count(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// Markdown writes the comparison tables.
func Markdown(w io.Writer, in Input) error {
	var b strings.Builder
	if in.Title != "" {
		fmt.Fprintf(&b, "# %s\n\n", in.Title)
	}
	for _, l := range in.Setup {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	if in.Command != "" {
		fmt.Fprintf(&b, "\nReproduce: `%s`\n", in.Command)
	}
	n := 0
	if len(in.Summaries) > 0 {
		n = in.Summaries[0].Overall["avg_jct"].N
	}
	fmt.Fprintf(&b, "\nMean ± sd over %d seed(s); times in hours. Over GPUs x makespan: GPU util (alloc) = time GPUs were allocated to at least one job; GPU busy (kernel) = kernel time (NVML utilization.gpu) from measurements; useful util = work done at solo speed.\n\n", n)
	b.WriteString("| policy | avg JCT | median JCT | p95 JCT | avg queue | makespan | GPU util (alloc) | GPU busy (kernel) | useful util | below floor | job-h below floor | shared jobs | of them several-GPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range in.Summaries {
		o := s.Overall
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Policy,
			pm(o["avg_jct"], hours), pm(o["median_jct"], hours), pm(o["p95_jct"], hours), pm(o["avg_queue"], hours),
			pm(o["makespan"], hours), pm(o["gpu_util"], pct), pm(o["kernel_util"], pct), pm(o["useful_util"], pct), pm(o["below_floor"], count), pm(o["below_floor_hours"], count), pm(o["shared"], count), pm(o["shared_multi_gpu"], count))
	}
	if in.Baseline != "" {
		fmt.Fprintf(&b, "\nChange against %s (per seed, then mean ± sd; negative JCT and makespan are better):\n\n", in.Baseline)
		b.WriteString("| policy | avg JCT | makespan | GPU util (alloc) | GPU busy (kernel) | useful util |\n|---|---|---|---|---|---|\n")
		for _, s := range in.Summaries {
			if s.Policy == in.Baseline || s.VsBase == nil {
				continue
			}
			v := s.VsBase
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Policy, pm(v["avg_jct"], signedPct), pm(v["makespan"], signedPct), pm(v["gpu_util"], signedPct), pm(v["kernel_util"], signedPct), pm(v["useful_util"], signedPct))
		}
	}
	b.WriteString("\nPer class (avg JCT in hours / jobs below their floor):\n\n| policy |")
	for _, c := range sim.Classes {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString("\n|---|")
	for range sim.Classes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, s := range in.Summaries {
		fmt.Fprintf(&b, "| %s |", s.Policy)
		for _, c := range sim.Classes {
			cm, ok := s.ByClass[string(c)]
			if !ok {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(&b, " %s / %s |", pm(cm["avg_jct"], hours), pm(cm["below_floor"], count))
		}
		b.WriteString("\n")
	}
	belowFloorTable(&b, in)
	b.WriteString("\n" + EvaluationNote + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// EvaluationNote points readers of the tables to the document that explains them.
const EvaluationNote = "How to read these figures (what each column measures, why GPU util (alloc) can fall while " +
	"kernel-busy and useful utilization rise, how they compare with the paper's claims, and the simulator's assumptions): " +
	"docs/evaluation.md (installed: /usr/share/doc/coscheml/docs/evaluation.md)."

// belowFloorBlocks returns, per policy (in Summaries order), the mean over
// seeds of the jobs below floor in each block of sim.BelowFloorBlock jobs, and
// the largest number of blocks.
func belowFloorBlocks(in Input) (names []string, means [][]float64, blocks int) {
	for _, s := range in.Summaries {
		var sum []float64
		var n []int
		for _, r := range in.Runs {
			if r.Policy != s.Policy {
				continue
			}
			for k, v := range r.BelowFloorPer {
				if k >= len(sum) {
					sum, n = append(sum, 0), append(n, 0)
				}
				sum[k] += float64(v)
				n[k]++
			}
		}
		for k := range sum {
			sum[k] /= float64(n[k])
		}
		names = append(names, s.Policy)
		means = append(means, sum)
		blocks = max(blocks, len(sum))
	}
	return names, means, blocks
}

// belowFloorTable writes the jobs below floor per block of jobs over time.
func belowFloorTable(b *strings.Builder, in Input) {
	names, means, blocks := belowFloorBlocks(in)
	if blocks == 0 {
		return
	}
	fmt.Fprintf(b, "\nJobs below their floor per %d jobs, in order of start (mean over seeds; below_floor.svg):\n\n| policy |", sim.BelowFloorBlock)
	for k := range blocks {
		fmt.Fprintf(b, " jobs %d-%d |", k*sim.BelowFloorBlock+1, (k+1)*sim.BelowFloorBlock)
	}
	b.WriteString("\n|---|")
	for range blocks {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i, name := range names {
		fmt.Fprintf(b, "| %s |", name)
		for k := range blocks {
			if k < len(means[i]) {
				fmt.Fprintf(b, " %s |", count(means[i][k]))
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
	}
	for _, r := range in.Runs {
		if r.MemoryPairs > 0 {
			fmt.Fprintf(b, "\nPair memory (%s, seed %d): %d ordered pairs observed, %d with enough evidence to override the model at the end of the run.\n", r.Policy, r.Seed, r.MemoryPairs, r.MemoryKnown)
			break
		}
	}
}

// CSVHeader is the header of results.csv: one row per policy, seed and class
// ("all" for every job), times in seconds, utilizations as fractions.
var CSVHeader = []string{"policy", "seed", "class", "jobs", "avg_jct_s", "median_jct_s", "p95_jct_s", "avg_queue_s", "makespan_s", "gpu_util", "kernel_util", "useful_util", "below_floor", "below_floor_hours", "shared", "shared_multi_gpu"}

// CSV writes results.csv.
func CSV(w io.Writer, in Input) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	row := func(r *sim.PolicyRun, class string, m sim.Metrics) error {
		return cw.Write([]string{r.Policy, strconv.FormatInt(r.Seed, 10), class, strconv.Itoa(m.Jobs),
			f(m.AvgJCT), f(m.MedianJCT), f(m.P95JCT), f(m.AvgQueue), f(m.Makespan), f(m.GPUUtil), f(m.KernelUtil), f(m.UsefulUtil),
			strconv.Itoa(m.BelowFloor), f(m.BelowFloorHours), strconv.Itoa(m.Shared), strconv.Itoa(m.SharedMultiGPU)})
	}
	for _, r := range in.Runs {
		if err := row(r, "all", r.Overall); err != nil {
			return err
		}
		for _, c := range sim.Classes {
			if m, ok := r.ByClass[c]; ok {
				if err := row(r, string(c), m); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// JSONDoc is the layout of results.json.
type JSONDoc struct {
	Title     string              `json:"title"`
	Command   string              `json:"command"`
	Setup     []string            `json:"setup"`
	Baseline  string              `json:"baseline"`
	Summaries []sim.PolicySummary `json:"summaries"`
	Runs      []*sim.PolicyRun    `json:"runs"`
}

// JSON writes results.json.
func JSON(w io.Writer, in Input) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(JSONDoc{Title: in.Title, Command: in.Command, Setup: in.Setup, Baseline: in.Baseline, Summaries: in.Summaries, Runs: in.Runs})
}
