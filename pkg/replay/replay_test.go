// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/emulate"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/sim"
	"github.com/coscheml/coscheml/pkg/trace"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPrepare(t *testing.T) {
	var all []trace.Job
	for i := 0; i < 50; i++ {
		all = append(all, trace.Job{ID: string(rune('a'+i%26)) + string(rune('a'+i/26)), Submit: float64(100 * i), Duration: float64(60 * (i + 1)), GPUs: 1 + i%3})
	}
	tags := []string{"x", "y"}
	cases := []struct {
		name    string
		spec    Spec
		wantN   int
		wantErr bool
	}{
		{"compress 10", Spec{Jobs: 20, Seed: 1, Compress: 10}, 20, false},
		{"min work", Spec{Jobs: 20, Seed: 2, Compress: 100, MinWork: 5}, 20, false},
		{"max duration leaves too few", Spec{Jobs: 20, Seed: 1, Compress: 1, MaxDuration: 600}, 0, true},
		{"load", Spec{Jobs: 30, Seed: 3, Compress: 2, Load: 2, GPUs: 4}, 30, false},
		{"no compression", Spec{Jobs: 5, Seed: 1}, 0, true},
		{"load without GPUs", Spec{Jobs: 5, Seed: 1, Compress: 1, Load: 1}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := Prepare(all, tags, tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if len(jobs) != tc.wantN {
				t.Fatalf("%d jobs, want %d", len(jobs), tc.wantN)
			}
			// The same sample the simulator draws, then compressed.
			ref := trace.Sample(trace.MaxDuration(all, tc.spec.MaxDuration), tc.spec.Jobs, tc.spec.Seed)
			for i := range ref {
				ref[i].GPUs = 1
			}
			f := 1.0
			if tc.spec.Load > 0 {
				f, _ = trace.SetLoad(ref, tc.spec.GPUs, tc.spec.Load)
			}
			for i, j := range jobs {
				if j.ID != ref[i].ID || j.GPUs != 1 || j.Tag == "" || j.Class == "" {
					t.Fatalf("job %d = %+v, want trace job %s on 1 GPU with a tag and class", i, j, ref[i].ID)
				}
				if !near(j.Submit, ref[i].Submit/tc.spec.Compress) {
					t.Errorf("job %s submit %v, want %v", j.ID, j.Submit, ref[i].Submit/tc.spec.Compress)
				}
				if want := max(ref[i].Duration/tc.spec.Compress, tc.spec.MinWork); !near(j.Duration, want) {
					t.Errorf("job %s work %v, want %v", j.ID, j.Duration, want)
				}
				if i > 0 && j.Submit < jobs[i-1].Submit {
					t.Errorf("not sorted at %d", i)
				}
			}
			if tc.spec.Load > 0 {
				// The load was set before compression; compression keeps it
				// (work and span shrink alike) unless MinWork adds work.
				if got := trace.OfferedLoad(jobs, tc.spec.GPUs); math.Abs(got-tc.spec.Load) > 1e-6 {
					t.Errorf("offered load %v (factor %v), want %v", got, f, tc.spec.Load)
				}
			}
		})
	}
}

func TestTimeLimitMinutes(t *testing.T) {
	for _, tc := range []struct {
		work, slack float64
		want        int
	}{{1, 3, 1}, {20, 3, 1}, {21, 3, 2}, {600, 2, 20}, {0, 3, 1}} {
		if got := TimeLimitMinutes(tc.work, tc.slack); got != tc.want {
			t.Errorf("TimeLimitMinutes(%v, %v) = %d, want %d", tc.work, tc.slack, got, tc.want)
		}
	}
}

func TestUnionLength(t *testing.T) {
	for _, tc := range []struct {
		spans [][2]float64
		want  float64
	}{
		{nil, 0},
		{[][2]float64{{0, 10}}, 10},
		{[][2]float64{{0, 10}, {5, 12}}, 12},
		{[][2]float64{{20, 30}, {0, 10}}, 20},
		{[][2]float64{{0, 10}, {2, 3}, {10, 11}}, 11},
	} {
		if got := unionLength(tc.spans); !near(got, tc.want) {
			t.Errorf("union %v = %v, want %v", tc.spans, got, tc.want)
		}
	}
}

func result(id, node string, gpu int, start, end, work float64, below, shared bool) emulate.Result {
	return emulate.Result{JobID: id, Node: node, GPU: gpu, Tag: "a", Class: profile.ClassTrain, Work: work,
		Start: start, End: end, MinSpeed: 1, Floor: 0.75, BelowFloor: below, Shared: shared}
}

// two is a result of a job on several GPUs of one node.
func two(id, node string, gpus []int, start, end, work float64) emulate.Result {
	r := result(id, node, gpus[len(gpus)-1], start, end, work, false, false)
	r.GPUs = gpus
	return r
}

func TestMeasure(t *testing.T) {
	r := Run{Setup: CoScheML, Seed: 1, GPUs: 4,
		Submitted: []Submitted{
			{JobID: "1", Trace: "t1", Submit: 1000, Intended: "n1/0", Decided: true},
			{JobID: "2", Trace: "t2", Submit: 1002, Intended: "n1/0", Decided: true},
			{JobID: "3", Trace: "t3", Submit: 1004, Intended: "n1/1", Decided: true},
			{JobID: "4", Trace: "t4", Submit: 1006, Decided: true},
			{JobID: "5", Trace: "t5", Submit: 1008},
			{JobID: "6", Trace: "t6", Submit: 1009, Intended: "n2/1,0", Decided: true},
		},
		Results: []emulate.Result{
			result("1", "n1", 0, 1001, 1011, 8, false, true),
			result("2", "n1", 0, 1003, 1013, 8, true, true),
			result("3", "n1", 2, 1005, 1009, 4, false, false), // not where intended
			result("4", "n2", 3, 1010, 1020, 10, false, false),
			two("6", "n2", []int{0, 1}, 1021, 1031, 10), // its decision listed the GPUs in another order
		},
	}
	m, err := Measure(r)
	if err != nil {
		t.Fatal(err)
	}
	if m.Placement != (Placement{Decided: 5, Pinned: 4, Landed: 3, Unpinned: 1}) {
		t.Errorf("placement %+v", m.Placement)
	}
	if len(m.Elsewhere) != 1 || m.Elsewhere[0] != "job 3: intended n1/1, ran on n1/2" {
		t.Errorf("elsewhere %q", m.Elsewhere)
	}
	if len(m.Missing) != 1 || m.Missing[0] != "5" {
		t.Errorf("missing %v, want [5]", m.Missing)
	}
	res := m.Result
	// GPU n1/0 busy 1..13, n1/2 5..9, n2/3 10..20, n2/0 and n2/1 21..31:
	// 12 + 4 + 10 + 2 x 10; job 6's work counts on both its GPUs.
	if !near(res.AllocGPUS, 46) || !near(res.Makespan, 31) || !near(res.Useful, 50) {
		t.Errorf("alloc %v makespan %v useful %v, want 46 31 50", res.AllocGPUS, res.Makespan, res.Useful)
	}
	all, _ := sim.Summarize(res)
	// JCTs: 11, 11, 5, 14, 22.
	if all.Jobs != 5 || !near(all.AvgJCT, 63.0/5) || !near(all.MedianJCT, 11) || all.BelowFloor != 1 || all.Shared != 2 {
		t.Errorf("metrics %+v", all)
	}
	if !near(all.AvgQueue, (1+1+1+4+12)/5.0) || !near(all.UsefulUtil, 50.0/(4*31)) {
		t.Errorf("queue %v useful %v", all.AvgQueue, all.UsefulUtil)
	}
	if got := m.Placement.AsIntended(); !near(got, 75) {
		t.Errorf("as intended %v", got)
	}
}

func seedResult(setup string, seed int64, avg, simAvg float64, below int, p Placement) SeedResult {
	return SeedResult{Setup: setup, Seed: seed, Jobs: 10, Ended: 10,
		Real: sim.Metrics{AvgJCT: avg, BelowFloor: below}, Sim: sim.Metrics{AvgJCT: simAvg}, Placement: p}
}

func TestSummarizeAndChecks(t *testing.T) {
	rs := []SeedResult{
		seedResult(Exclusive, 1, 100, 90, 0, Placement{}),
		seedResult(Exclusive, 2, 200, 180, 0, Placement{}),
		seedResult(Blind, 1, 90, 80, 6, Placement{}),
		seedResult(Blind, 2, 170, 160, 4, Placement{}),
		seedResult(CoScheML, 1, 80, 72, 1, Placement{Decided: 10, Pinned: 100, Landed: 99}),
		seedResult(CoScheML, 2, 160, 144, 1, Placement{Decided: 10, Pinned: 100, Landed: 100}),
	}
	// The simulator at submit: 81 and 162 against exclusive's 90 and 180, a
	// gain of 10% on both seeds.
	rs[4].SimSubmit = &sim.Metrics{AvgJCT: 81}
	rs[5].SimSubmit = &sim.Metrics{AvgJCT: 162}
	ss := Summarize(rs)
	if len(ss) != 3 || ss[0].Setup != Exclusive || ss[2].Setup != CoScheML {
		t.Fatalf("summaries %+v", ss)
	}
	c := ss[2]
	if !near(c.Real["avg_jct"], 120) || !near(c.Real["below_floor"], 1) || c.Placement.Landed != 199 {
		t.Errorf("coscheml summary %+v", c)
	}
	// Per seed: real gains 0.2 and 0.2, simulated 0.2 and 0.2.
	if c.GainReal == nil || !near(*c.GainReal, 0.2) || !near(*c.GainSim, 0.2) || ss[0].GainReal != nil {
		t.Errorf("gains %v %v", c.GainReal, c.GainSim)
	}
	if c.GainSimSubmit == nil || !near(*c.GainSimSubmit, 0.1) || !near(c.SimSubmit["avg_jct"], 121.5) || ss[1].SimSubmit != nil {
		t.Errorf("at submit: gain %v, metrics %v; blind %v", c.GainSimSubmit, c.SimSubmit, ss[1].SimSubmit)
	}
	checks := Checks(ss)
	if len(checks) != 5 {
		t.Fatalf("checks %+v", checks)
	}
	// Real gain 20% against the simulator's 20% (met) and 10% at submit (not).
	for i, want := range []bool{true, false, true, true, true} {
		if checks[i].Met != want {
			t.Errorf("%s: met %v, want %v (%s)", checks[i].What, checks[i].Met, want, checks[i].Why)
		}
	}
	// Worse placement fails the last check.
	rs[4].Placement.Landed = 90
	if cs := Checks(Summarize(rs)); cs[4].Met {
		t.Errorf("189 of 200 counted as >= 99%%: %+v", cs[4])
	}
}

func TestMarkdownAndWrite(t *testing.T) {
	rs := []SeedResult{
		seedResult(Exclusive, 1, 100, 90, 0, Placement{}),
		seedResult(Blind, 1, 90, 80, 6, Placement{}),
		seedResult(CoScheML, 1, 80, 72, 1, Placement{Decided: 5, Pinned: 4, Landed: 4}),
	}
	rep := Report{Command: "make e2e", Date: "2026-12-01", Setup: []string{"cluster: 4x4"}, Runs: rs, Summaries: Summarize(rs)}
	rep.Checks = Checks(rep.Summaries)
	var buf bytes.Buffer
	if err := Markdown(&buf, rep.Summaries); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "| GPU as intended (%) |") {
		t.Errorf("header lacks the GPU as intended column: %s", lines[0])
	}
	for i, setup := range Setups {
		if !strings.HasPrefix(lines[2+i], "| "+setup+" |") {
			t.Errorf("row %d = %q, want it to start with | %s |", i, lines[2+i], setup)
		}
	}
	if !strings.Contains(lines[4], "| 100.0 (4/4) | - |") || !strings.Contains(lines[4], "+20.0% (+20.0%)") {
		t.Errorf("coscheml row %q", lines[4])
	}
	// With the simulator at submit, the last column has its avg JCT and gain.
	rs2 := append([]SeedResult(nil), rs...)
	rs2[2].SimSubmit = &sim.Metrics{AvgJCT: 81}
	var buf2 bytes.Buffer
	if err := Markdown(&buf2, Summarize(rs2)); err != nil {
		t.Fatal(err)
	}
	if row := strings.Split(buf2.String(), "\n")[4]; !strings.HasSuffix(row, "| 100.0 (4/4) | 81.0 s, +10.0% |") {
		t.Errorf("coscheml row with the simulator at submit: %q", row)
	}
	// With its placements too (3 of 4 where decided), the share as intended.
	rs2[2].SimSubmitPlacement = &Placement{Decided: 4, Pinned: 4, Landed: 3}
	buf2.Reset()
	if err := Markdown(&buf2, Summarize(rs2)); err != nil {
		t.Fatal(err)
	}
	if row := strings.Split(buf2.String(), "\n")[4]; !strings.HasSuffix(row, "| 81.0 s, +10.0%, 75.0% as intended |") {
		t.Errorf("coscheml row with the simulator's placements: %q", row)
	}
	dir := filepath.Join(t.TempDir(), "e2e-report")
	if err := Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 3 || back.Runs[2].Placement.Landed != 4 || len(back.Checks) != 4 || !near(*back.Summaries[2].GainReal, 0.2) {
		t.Errorf("results.json read back as %+v", back)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil || !strings.Contains(string(md), "| coscheml |") {
		t.Errorf("summary.md: %v\n%s", err, md)
	}
}
