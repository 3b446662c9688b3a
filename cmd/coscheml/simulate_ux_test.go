// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/sim"
)

func TestDroppedText(t *testing.T) {
	run := func(seed int64, dropped int) *sim.PolicyRun {
		return &sim.PolicyRun{Policy: "p", Seed: seed, Result: &sim.Result{Dropped: dropped}}
	}
	tests := []struct {
		name string
		runs []*sim.PolicyRun
		want string
	}{
		{"none", []*sim.PolicyRun{run(1, 0), run(2, 0)}, "dropped: none (no job asked for more than the cluster's 64 GPUs)"},
		{"per seed, counted once per seed", []*sim.PolicyRun{run(1, 2), run(1, 2), run(2, 0), run(3, 1)},
			"dropped: 3 jobs asked for more GPUs than the cluster's 64 and could never start under any policy; left out of every figure (seed 1: 2, seed 2: 0, seed 3: 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := droppedText(tt.runs, 64); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestSimProgressText(t *testing.T) {
	got := simProgressText(10500, 42000, 0, 21, 7*time.Second)
	if want := "simulate: 25% of jobs finished (10500/42000 over 21 runs), 0 runs complete, 7s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A simulation that drops a job says so in its output, and the output points to
// the evaluation doc.
func TestSimulateReportsDroppedAndDoc(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	b.WriteString("submit,duration,gpus,tag,class\n")
	for i := 0; i < 6; i++ {
		gpus := 1
		if i == 3 {
			gpus = 4 // more than the 1 x 2 GPUs below
		}
		fmt.Fprintf(&b, "%d,100,%d,,\n", i*1000, gpus)
	}
	trace := filepath.Join(e.dir, "jobs.csv")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "report")
	code, out, errOut := e.run("simulate", "--trace", "generic", "--file", trace, "--nodes", "1", "--gpus-per-node", "2",
		"--seeds", "1", "--policies", "exclusive", "--report", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{out, string(md)} {
		for _, want := range []string{"dropped: 1 jobs asked for more GPUs than the cluster's 2", "docs/evaluation.md"} {
			if !strings.Contains(text, want) {
				t.Errorf("lacks %q:\n%s", want, text)
			}
		}
	}
	if strings.Contains(errOut, "--demo preset") {
		t.Errorf("flags were given, yet it ran the demo: %q", errOut)
	}
}
