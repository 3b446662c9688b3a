// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSimulateCommand runs `coscheml simulate` on a generic trace whose jobs never
// overlap, so every policy must report each job's JCT as its duration, and reads the
// report back from disk.
func TestSimulateCommand(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	b.WriteString("submit,duration,gpus,tag,class\n")
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, "%d,%d,1,,\n", i*1000, 100+10*i) // durations 100..210, mean 155
	}
	trace := filepath.Join(e.dir, "jobs.csv")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "report")
	code, out, errOut := e.run("simulate", "--trace", "generic", "--file", trace, "--nodes", "1", "--gpus-per-node", "2",
		"--seeds", "2", "--policies", "coscheml,exclusive,oracle", "--report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, p := range []string{"| coscheml |", "| exclusive |", "| oracle |"} {
		if !strings.Contains(out, p) {
			t.Errorf("table lacks %q:\n%s", p, out)
		}
	}
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	all := 0
	for _, r := range rows[1:] {
		if r[2] != "all" {
			continue
		}
		all++
		jct, _ := strconv.ParseFloat(r[4], 64)
		if r[3] != "12" || jct != 155 {
			t.Errorf("%s seed %s: %s jobs, avg JCT %v; want 12 jobs, 155 s (no job ever waits or shares)", r[0], r[1], r[3], jct)
		}
	}
	if all != 6 {
		t.Errorf("%d overall rows, want 3 policies x 2 seeds", all)
	}
	// Decided at submit (the plugin's model), with or without the re-decide
	// loop: these jobs never meet, so nothing changes.
	for _, extra := range [][]string{{"--redecide", "2s"}, {"--redecide", "0s"},
		{"--redecide", "2s", "--shard-pinning", "typed", "--untyped-updates", "--start-delay", "1s"}} {
		args := append([]string{"simulate", "--trace", "generic", "--file", trace, "--nodes", "1", "--gpus-per-node", "2",
			"--seeds", "1", "--policies", "coscheml,exclusive", "--decide-at", "submit"}, extra...)
		code, out, errOut := e.run(args...)
		if code != 0 || !strings.Contains(out, "| coscheml |") {
			t.Fatalf("--decide-at submit %v: exit %d: %s\n%s", extra, code, errOut, out)
		}
	}
	for _, name := range []string{"summary.md", "results.json", "jct_cdf.svg", "utilization.svg", "kernel_util.svg", "improvement.svg"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSimulateUsage(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"simulate", "--seeds", "0"},
		{"simulate", "--policies", "coscheml,nope"},
		{"simulate", "--trace", "alibaba"},
		{"simulate", "--nodes", "0"},
		{"simulate", "extra-arg"},
		{"simulate", "--decide-at", "later"},
		{"simulate", "--redecide", "2s"}, // needs --decide-at submit
		{"simulate", "--decide-at", "submit", "--redecide", "-1s"},
		{"simulate", "--untyped-updates"}, // needs --decide-at submit
		{"simulate", "--decide-at", "submit", "--start-delay", "-1s"},
	} {
		if code, _, errOut := e.run(args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, exitUsage)
		}
	}
	if code, _, _ := e.run("simulate", "--trace", "generic", "--file", filepath.Join(e.dir, "missing.csv")); code != exitNotFound {
		t.Errorf("missing trace: exit %d, want %d", code, exitNotFound)
	}
}
