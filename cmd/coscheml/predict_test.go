// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
)

// marginPairs scans the embedded catalog's ordered pairs (job, co-runner) for
// those the plugin keeps apart only for the calibrated margin: both point
// predictions clear their floors, the job's lower bound at its floor does not,
// and the pair fits memory (so the margin alone decides). Sorted by tag.
func marginPairs(t *testing.T) [][2]string {
	t.Helper()
	cat, err := embeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	tags := make([]string, 0, len(cat))
	for tag := range cat {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	floorOf := func(p *profile.Profile) float64 { return cfg.SpeedFloor.Floor(string(p.Class)) }
	var out [][2]string
	for _, a := range tags {
		for _, b := range tags {
			pa, pb := cat[a], cat[b]
			if a == b || pa.MemUsedMiB+pb.MemUsedMiB+cfg.MemReserveMiB > defaultPredictGPUMemMiB {
				continue
			}
			sa, la := m.Bound(pa, []*profile.Profile{pb}, model.Query{Coverage: cfg.FloorConfidence, Floor: floorOf(pa)})
			sb := m.PredictSpeed(pb, []*profile.Profile{pa})
			if sa >= floorOf(pa) && sb >= floorOf(pb) && la < floorOf(pa) {
				out = append(out, [2]string{a, b})
			}
		}
	}
	return out
}

// TestPredictVerdictIsThePlacements: for pairs whose point predictions clear
// their floors but whose lower bound does not, predict says keep apart, as
// place --dry-run does on a GPU holding the co-runner; and on every kind of
// pair predict's verdict is place's.
func TestPredictVerdictIsThePlacements(t *testing.T) {
	pairs := marginPairs(t)
	if len(pairs) == 0 {
		t.Fatal("no pair of the embedded catalog clears its floors by prediction but not by lower bound: choose another case")
	}
	e := newEnv(t)
	// the memory predict tests the fit on, so place sees the same GPU
	cfgBody := fmt.Sprintf("profile_dir: %s\ncluster:\n  gpu_memory_mib: %d\n", filepath.Join(e.dir, "no-profiles"), defaultPredictGPUMemMiB)
	if err := os.WriteFile(e.config, []byte(cfgBody), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		job, co   string
		wantShare bool
	}{
		{name: "cleared by prediction, not by lower bound", job: pairs[0][0], co: pairs[0][1], wantShare: false},
		{name: "cleared by prediction, not by lower bound (last found)", job: pairs[len(pairs)-1][0], co: pairs[len(pairs)-1][1], wantShare: false},
		{name: "light pair", job: "ppo-bs64", co: "pointnet-bs32-amp", wantShare: true},
		{name: "heavy pair", job: "resnet18-bs128", co: "dcgan-bs128", wantShare: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := e.run("predict", "--json", tc.job, tc.co)
			if code != exitOK {
				t.Fatalf("predict: exit %d: %s", code, stderr)
			}
			var out predictOut
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("predict JSON %q: %v", stdout, err)
			}
			if out.Share != tc.wantShare {
				t.Errorf("predict %s %s: share %v, want %v (reason %q)", tc.job, tc.co, out.Share, tc.wantShare, out.Reason)
			}
			_, text, _ := e.run("predict", tc.job, tc.co)
			if wantWords := map[bool]string{true: "verdict: may share", false: "verdict: keep apart"}[tc.wantShare]; !strings.Contains(text, wantWords) {
				t.Errorf("predict text lacks %q:\n%s", wantWords, text)
			}
			state := filepath.Join(t.TempDir(), "state.yaml")
			body := fmt.Sprintf("nodes:\n  - name: n1\n    gpus:\n      - index: 0\n        residents:\n          - job: \"1\"\n            tag: %s\n", tc.co)
			if err := os.WriteFile(state, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr = e.run("place", "--dry-run", "--json", "--state", state, "--tag", tc.job)
			if code != exitOK {
				t.Fatalf("place: exit %d: %s", code, stderr)
			}
			var pl placeOut
			if err := json.Unmarshal([]byte(stdout), &pl); err != nil {
				t.Fatalf("place JSON %q: %v", stdout, err)
			}
			if (pl.Action == "share") != out.Share {
				t.Errorf("place says %s (%s), predict says share=%v", pl.Action, pl.Reason, out.Share)
			}
		})
	}
}

// TestPredictWording: an infer job's speed is worded as the latency ratio its
// floor bounds, a train job's as a speed; every line shows the lower bound the
// placement tests and the floor; a refusal says why.
func TestPredictWording(t *testing.T) {
	e := newEnv(t)
	small := filepath.Join(e.dir, "small-gpu.yaml")
	if err := os.WriteFile(small, []byte(fmt.Sprintf("profile_dir: %s\ncluster:\n  gpu_memory_mib: 1000\n", filepath.Join(e.dir, "no-profiles"))), 0o644); err != nil {
		t.Fatal(err)
	}
	// An infer job's speed is the lower of the model's and the latency bound.
	inferSpeed := min(speeds(t, "mobilenetv3-bs64", "resnet18-bs32"), latencyBound(t, "resnet18-bs32"))
	cases := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{name: "infer job by --class", args: []string{"predict", "--class", "infer", "mobilenetv3-bs64", "resnet18-bs32"},
			want: []string{fmt.Sprintf("mobilenetv3-bs64 next to resnet18-bs32: latency speed %.3f (solo latency / shared latency: latency %.2fx alone's); lower bound ", inferSpeed, 1/inferSpeed),
				"its infer floor 0.90", "resnet18-bs32 next to mobilenetv3-bs64: speed ", "its train floor 0.75"}},
		{name: "--class after the tags", args: []string{"predict", "mobilenetv3-bs64", "resnet18-bs32", "--class=infer"},
			want: []string{"mobilenetv3-bs64 next to resnet18-bs32: latency speed", "infer floor 0.90"}},
		{name: "train pair: speeds", args: []string{"predict", "ppo-bs64", "pointnet-bs32-amp"},
			want: []string{"ppo-bs64 next to pointnet-bs32-amp: speed ", "; lower bound 0.", "clears its train floor 0.75", "verdict: may share"},
			not:  []string{"latency"}},
		{name: "memory does not fit", args: []string{"--config", small, "predict", "ppo-bs64", "pointnet-bs32-amp"},
			want: []string{"verdict: keep apart: the placement refuses:", "memory would not fit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var out, errs string
			if tc.args[0] == "--config" {
				code, out, errs = runCLI(tc.args...)
			} else {
				code, out, errs = e.run(tc.args...)
			}
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
	if code, _, errs := e.run("predict", "--class", "gpu", "ppo-bs64", "ppo-bs32"); code != exitUsage || !strings.Contains(errs, "invalid class") {
		t.Errorf("bad --class: exit %d, %q", code, errs)
	}
}
