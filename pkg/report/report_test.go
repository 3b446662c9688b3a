// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/sim"
)

func fakeRuns() []*sim.PolicyRun {
	var runs []*sim.PolicyRun
	for _, p := range []string{"exclusive", "coscheml"} {
		for seed := int64(1); seed <= 2; seed++ {
			scale := 1.0
			if p == "coscheml" {
				scale = 0.5
			}
			res := &sim.Result{Policy: p, GPUs: 2, Makespan: 1000 * scale, AllocGPUS: 1500 * scale, Useful: 1500,
				Timeline: []sim.Sample{{T: 0, Alloc: 1, Useful: 1}, {T: 500 * scale, Alloc: 0.5, Useful: 0.5}}}
			for i := 0; i < 10; i++ {
				res.Jobs = append(res.Jobs, sim.JobResult{ID: strconv.Itoa(i), Class: sim.Classes[i%3], GPUs: 1,
					Submit: float64(i), Start: float64(i) + 10*scale*float64(seed), End: float64(i) + 100*scale*float64(seed), Duration: 50})
			}
			all, by := sim.Summarize(res)
			runs = append(runs, &sim.PolicyRun{Policy: p, Seed: seed, Overall: all, ByClass: by, Result: res,
				BelowFloorPer: []int{int(seed) * 4, int(seed) * 2}})
		}
	}
	return runs
}

func TestWriteReadBack(t *testing.T) {
	runs := fakeRuns()
	in := Input{Title: "t", Command: "coscheml simulate --demo", Setup: []string{"trace: x"}, Baseline: "exclusive",
		Summaries: sim.SummarizeRuns(runs, "exclusive"), Runs: runs}
	dir := filepath.Join(t.TempDir(), "out")
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	// summary.md has one row per policy with the avg JCT in hours.
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "| " + "coscheml" + " | " + hours((runs[2].Overall.AvgJCT+runs[3].Overall.AvgJCT)/2)
	if !strings.Contains(string(md), want) {
		t.Errorf("summary.md lacks %q:\n%s", want, md)
	}
	if !strings.Contains(string(md), "| coscheml | -") {
		t.Errorf("summary.md lacks the change against exclusive:\n%s", md)
	}
	// results.csv: header + (1 all + 3 classes) rows per run, values as written.
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+4*len(runs) || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("results.csv: %d rows, header %v", len(rows), rows[0])
	}
	got, _ := strconv.ParseFloat(rows[1][4], 64)
	if rows[1][0] != "exclusive" || rows[1][2] != "all" || got != runs[0].Overall.AvgJCT {
		t.Errorf("first row %v, want exclusive all avg_jct %v", rows[1], runs[0].Overall.AvgJCT)
	}
	// results.json decodes back to the same summaries.
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc JSONDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Summaries) != 2 || doc.Summaries[1].Policy != "coscheml" {
		t.Fatalf("json summaries %+v", doc.Summaries)
	}
	if v := doc.Summaries[1].VsBase["makespan"].Mean; v != -0.5 {
		t.Errorf("coscheml makespan change %v, want -0.5", v)
	}
	if len(doc.Runs) != 4 || doc.Runs[0].ByClass[profile.ClassHPC].Jobs != 4 {
		t.Errorf("json runs %d, hpc jobs %d", len(doc.Runs), doc.Runs[0].ByClass[profile.ClassHPC].Jobs)
	}
	// Every SVG is well-formed XML with an <svg> root and draws something.
	// The below-floor table: blocks of 500 jobs, mean over seeds (4 and 8 -> 6).
	if !strings.Contains(string(md), "| jobs 1-500 | jobs 501-1000 |") || !strings.Contains(string(md), "| coscheml | 6.0 | 3.0 |") {
		t.Errorf("summary.md lacks the below-floor-over-time table:\n%s", md)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "below_floor.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"jobs started (count, in order of start)", "jobs below floor per 500 jobs"} {
		if !strings.Contains(string(svg), label) {
			t.Errorf("below_floor.svg lacks the axis label %q", label)
		}
	}
	for _, name := range []string{"jct_cdf.svg", "utilization.svg", "kernel_util.svg", "improvement.svg", "below_floor.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var root struct {
			XMLName xml.Name
		}
		if err := xml.Unmarshal(b, &root); err != nil || root.XMLName.Local != "svg" {
			t.Errorf("%s: not an svg document: %v", name, err)
		}
		if !strings.Contains(string(b), "<polyline") && !strings.Contains(string(b), "<rect x=") {
			t.Errorf("%s draws nothing", name)
		}
		if !strings.Contains(string(b), "coscheml") {
			t.Errorf("%s has no legend", name)
		}
	}
}
