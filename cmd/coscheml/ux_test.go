// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Without any configuration, profile list/show read what predict reads: the
// embedded Lucid catalog (when the default profile_dir holds nothing).
func TestProfileListWithoutConfigFallsBack(t *testing.T) {
	if _, err := os.Stat(systemConfig); err == nil {
		t.Skipf("%s exists on this machine: not a machine without configuration", systemConfig)
	}
	if _, err := os.Stat("/var/lib/coscheml/profiles"); err == nil {
		t.Skip("/var/lib/coscheml/profiles exists: the default store is not empty")
	}
	t.Setenv("COSCHEML_CONFIG", "")
	want, err := embeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, stdout string)
	}{
		{"list", []string{"profile", "list"}, func(t *testing.T, out string) {
			if n := strings.Count(out, "\n"); n != len(want)+1 {
				t.Errorf("%d lines, want %d profiles + header", n, len(want))
			}
		}},
		{"list --json", []string{"profile", "list", "--json"}, func(t *testing.T, out string) {
			var got []*profile.Profile
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != len(want) {
				t.Errorf("%d profiles (%v), want %d", len(got), err, len(want))
			}
			for i := 1; i < len(got); i++ {
				if got[i-1].Tag >= got[i].Tag {
					t.Errorf("not sorted by tag: %s before %s", got[i-1].Tag, got[i].Tag)
				}
			}
		}},
		{"show", []string{"profile", "show", "resnet18-bs128"}, func(t *testing.T, out string) {
			if !strings.Contains(out, "resnet18-bs128") {
				t.Errorf("show: %q", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if code := run(append([]string{"coscheml"}, tt.args...), &out, &errw); code != exitOK {
				t.Fatalf("exit %d: %s", code, errw.String())
			}
			if !strings.Contains(errw.String(), "embedded Lucid catalog") {
				t.Errorf("fallback not said on stderr: %q", errw.String())
			}
			tt.check(t, out.String())
		})
	}
	var out, errw bytes.Buffer
	if code := run([]string{"coscheml", "profile", "show", "no-such-tag"}, &out, &errw); code != exitNotFound {
		t.Errorf("show of an unknown tag: exit %d, want %d", code, exitNotFound)
	}
}

func TestPredictHonoursMaxCorunners(t *testing.T) {
	e := newEnv(t)
	tags := []string{"ppo-bs64", "pointnet-bs32-amp", "resnet18-bs32"}
	code, stdout, stderr := e.run(append([]string{"predict", "--json"}, tags...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out predictOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Share || !strings.Contains(out.Reason, "max_corunners 2") || !strings.Contains(stderr, "max_corunners") {
		t.Errorf("3 jobs with max_corunners 2: share %v, reason %q, stderr %q", out.Share, out.Reason, stderr)
	}
	if len(out.Predictions) != 3 {
		t.Errorf("%d predictions, want 3", len(out.Predictions))
	}
	// Two jobs are within the limit: no reason, no warning.
	code, stdout, stderr = e.run("predict", "--json", tags[0], tags[1])
	out = predictOut{}
	if err := json.Unmarshal([]byte(stdout), &out); code != exitOK || err != nil || out.Reason != "" || strings.Contains(stderr, "max_corunners") {
		t.Errorf("pair: exit %d, reason %q, stderr %q", code, out.Reason, stderr)
	}
}

func TestPredictExplainIsShort(t *testing.T) {
	e := newEnv(t)
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Trees) < 2 {
		t.Skip("the embedded model is a single tree: nothing to summarize")
	}
	_, short, _ := e.run("predict", "ppo-bs64", "pointnet-bs32-amp", "--explain")
	_, full, _ := e.run("predict", "ppo-bs64", "pointnet-bs32-amp", "--explain-full")
	ns, nf := strings.Count(short, "\n"), strings.Count(full, "\n")
	// Two predictions of one path each plus a few summary lines, against one line
	// per split of every tree.
	if ns > 40 || ns*5 > nf {
		t.Errorf("--explain prints %d lines, --explain-full %d", ns, nf)
	}
	// the pair was measured: both forms say the answer is the measurement
	for _, want := range []string{"forest of", "closest to the average", "split on most", "--explain-full", "measured pair: "} {
		if !strings.Contains(short, want) {
			t.Errorf("--explain lacks %q:\n%s", want, short)
		}
	}
	if !strings.Contains(full, "tree 2: ") || !strings.Contains(full, "measured pair: ") {
		t.Errorf("--explain-full lacks the trees' paths:\n%s", full)
	}
}

func TestSummarizeExplain(t *testing.T) {
	forest := []string{
		"tree 1: a 1 < 2", "tree 1: b 3 >= 2", "tree 1: leaf: speed 0.900 (mean of 10 training samples)",
		"tree 2: a 1 < 5", "tree 2: leaf: speed 0.800 (mean of 12 training samples)",
		"tree 3: c 9 >= 1", "tree 3: leaf: speed 0.700 (mean of 3 training samples)",
		"forest of 3 trees: speed 0.800 (average), trees spread 0.082 (standard deviation)",
	}
	tests := []struct {
		name string
		in   []string
		want []string // exact output
	}{
		{"forest", forest, []string{
			"path of tree 2, the one closest to the average (leaf 0.800):",
			"  a 1 < 5",
			"features the paths split on most (in how many of the 3 trees): a (2), b (1), c (1)",
			"tree leaves range 0.700 .. 0.900",
			forest[len(forest)-1],
		}},
		{"single tree kept whole", []string{"a 1 < 2", "leaf: speed 0.9 (mean of 3 training samples)"},
			[]string{"a 1 < 2", "leaf: speed 0.9 (mean of 3 training samples)"}},
		{"no co-runners kept whole", []string{"no co-runners: speed 1.000 (runs alone)"}, []string{"no co-runners: speed 1.000 (runs alone)"}},
		{"unrecognised kept whole", []string{"tree x: what", "forest of 1 trees"}, []string{"tree x: what", "forest of 1 trees"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarizeExplain(tt.in)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestDecisionWords(t *testing.T) {
	tests := []struct {
		action string
		gpus   []placeGPU
		want   string
	}{
		{"exclusive", []placeGPU{{Slots: 2, GPUSlots: 4}}, "IDLE GPU"},
		{"exclusive", []placeGPU{{Slots: 4, GPUSlots: 4}}, "WHOLE GPU"},
		{"share", []placeGPU{{Slots: 2, GPUSlots: 4, Residents: []string{"1"}}}, "SHARE"},
		{"wait", nil, "WAIT"},
	}
	for _, tt := range tests {
		got := decisionWords(tt.action, tt.gpus)
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("decisionWords(%s, %+v) = %q, want prefix %q", tt.action, tt.gpus, got, tt.want)
		}
		if strings.Contains(got, "EXCLUSIVE") {
			t.Errorf("decisionWords(%s) still says EXCLUSIVE: %q", tt.action, got)
		}
	}
	// The example state's idle-GPU decision, end to end.
	e := newEnv(t)
	code, out, _ := e.run("place", "--dry-run", "--state", example("keep-apart-heavy.yaml"), "--tag", "dcgan-bs128")
	if code != exitOK || strings.Contains(out, "EXCLUSIVE") || !strings.Contains(out, "decision: IDLE GPU") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestVersionFlag(t *testing.T) {
	var out, errw bytes.Buffer
	if code := run([]string{"coscheml", "--version"}, &out, &errw); code != exitOK || !strings.HasPrefix(out.String(), "coscheml version ") {
		t.Errorf("--version: exit %d, %q %q", code, out.String(), errw.String())
	}
}
