// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"coscheml-train"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// fastTrain keeps the test quick: one shallow tree, 2 folds.
var fastTrain = []string{"--forest", "1", "--max-depth", "3", "--min-leaf", "20", "--folds", "2", "--features", "all"}

func writeData(t *testing.T) (dir, solo, pairs string) {
	t.Helper()
	dir = t.TempDir()
	solo, pairs = filepath.Join(dir, "solo.csv"), filepath.Join(dir, "pairs.csv")
	if err := os.WriteFile(solo, models.DefaultSoloCSV, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pairs, models.DefaultPairsCSV, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, solo, pairs
}

func TestTrainThenEval(t *testing.T) {
	dir, solo, pairs := writeData(t)
	out := filepath.Join(dir, "m.model")
	code, stdout, stderr := runCLI(t, append([]string{"train", "--solo", solo, "--pairs", pairs, "--out", out}, fastTrain...)...)
	if code != exitOK {
		t.Fatalf("train: exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{"2-fold CV", "leave-apps-out (8 apps)", "mean predictor", "util-sum heuristic", "pointnet", "1580 samples"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("train report lacks %q:\n%s", want, stdout)
		}
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if in := m.Info(); in.CV.Apps != 8 || in.CV.KFoldK != 2 || in.Params.MaxDepth != 3 || !strings.Contains(in.Source, solo) {
		t.Fatalf("model info %+v", in)
	}
	// The files read through the importers give the training set the shipped
	// default model records.
	def, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	if m.TrainDigest != def.TrainDigest {
		t.Fatalf("training set digest %s, the default model's %s", m.TrainDigest, def.TrainDigest)
	}

	// Score a model on an application it has never seen: train without any
	// PointNet row, then evaluate on the PointNet-with-PointNet rows.
	var sub bytes.Buffer
	lines := strings.Split(strings.TrimSpace(string(models.DefaultPairsCSV)), "\n")
	sub.WriteString(lines[0] + "\n")
	var rest bytes.Buffer
	rest.WriteString(lines[0] + "\n")
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "PointNet,") && strings.Contains(l[9:], ",PointNet,") {
			sub.WriteString(l + "\n")
		} else if !strings.Contains(l, "PointNet") {
			rest.WriteString(l + "\n")
		}
	}
	heldOut, trainPairs := filepath.Join(dir, "pointnet.csv"), filepath.Join(dir, "rest.csv")
	os.WriteFile(heldOut, sub.Bytes(), 0o644)
	os.WriteFile(trainPairs, rest.Bytes(), 0o644)
	out2 := filepath.Join(dir, "nopointnet.model")
	if code, _, stderr := runCLI(t, append([]string{"train", "--solo", solo, "--pairs", trainPairs, "--out", out2, "--skip-cv"}, fastTrain...)...); code != exitOK {
		t.Fatalf("train without pointnet: exit %d %s", code, stderr)
	}
	code, stdout, stderr = runCLI(t, "eval", "--model", out2, "--solo", solo, "--pairs", heldOut, "--json")
	if code != exitOK {
		t.Fatalf("eval: exit %d, %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, stdout)
	}
	for _, k := range []string{"samples", "mae", "rmse", "mean_predictor_mae", "utilsum_auc", "model_auc"} {
		if _, ok := got[k]; !ok {
			t.Errorf("eval JSON lacks %s: %s", k, stdout)
		}
	}
	if got["samples"].(float64) != 42 { // 21 pointnet/pointnet rows, both directions
		t.Errorf("samples = %v, want 42", got["samples"])
	}

	code, stdout, _ = runCLI(t, "eval", "--model", out)
	if code != exitOK || !strings.Contains(stdout, "in-sample") {
		t.Fatalf("eval on the training set: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "info", "--model", out, "--json")
	if code != exitOK || !strings.Contains(stdout, `"train_digest"`) {
		t.Fatalf("info: exit %d\n%s", code, stdout)
	}
}

func TestExitCodesAndErrors(t *testing.T) {
	dir, solo, pairs := writeData(t)
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("model,batchsize\nx,1\n"), 0o644)
	corrupt := filepath.Join(dir, "corrupt.model")
	os.WriteFile(corrupt, []byte("CSMLMODL\x00\x00\x00\x01garbage"), 0o644)
	missingTag := filepath.Join(dir, "obs.csv")
	os.WriteFile(missingTag, []byte("tag,co_tags,speed\nnosuchapp-bs1,resnet18-bs32,0.9\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"help", []string{"--help"}, exitOK, ""},
		{"unknown command", []string{"fly"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"train", "--nope"}, exitUsage, "nope"},
		{"no --out", []string{"train"}, exitUsage, "--out is required"},
		{"bad depth", []string{"train", "--out", "x", "--max-depth", "99"}, exitUsage, "max depth"},
		{"bad feature", []string{"train", "--out", "x", "--features", "foo"}, exitUsage, `unknown feature "foo"`},
		{"stray argument", []string{"eval", "extra"}, exitUsage, "unexpected argument"},
		{"missing solo file", []string{"eval", "--solo", filepath.Join(dir, "none.csv")}, exitNotFound, "none.csv"},
		{"bad solo file", []string{"eval", "--solo", bad, "--pairs", pairs}, exitFailure, "bad.csv"},
		{"bad pairs file", []string{"eval", "--solo", solo, "--pairs", bad}, exitFailure, "bad.csv"},
		{"corrupt model", []string{"eval", "--model", corrupt}, exitFailure, "corrupt.model"},
		{"unknown tag in obs", []string{"eval", "--obs", missingTag}, exitNotFound, "nosuchapp-bs1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr, tc.want)
			}
		})
	}
	// --skip-unknown drops the observation and says so.
	code, _, stderr := runCLI(t, "eval", "--obs", missingTag, "--skip-unknown")
	if code != exitOK || !strings.Contains(stderr, "skipped 1 observations") {
		t.Fatalf("--skip-unknown: exit %d, %s", code, stderr)
	}
}

// train stores a default coverage per floor in both calibrations and prints
// the per-floor table; --class-weighted-coverage stores none. Read back from
// the model file.
func TestTrainFloorCoverage(t *testing.T) {
	dir, solo, pairs := writeData(t)
	tests := []struct {
		name     string
		extra    []string
		perFloor bool
	}{
		{"default: per floor", nil, true},
		{"--class-weighted-coverage", []string{"--class-weighted-coverage"}, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("m%d.model", i))
			args := append(append([]string{"train", "--solo", solo, "--pairs", pairs, "--out", out}, fastTrain...), tc.extra...)
			code, stdout, stderr := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("train: exit %d, stderr %s", code, stderr)
			}
			m, err := model.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, cal := range []model.Calibration{m.Calibration, m.SeenCalibration} {
				if got := len(cal.FloorCoverage) > 0; got != tc.perFloor {
					t.Fatalf("per-floor coverage %v, want %v", cal.FloorCoverage, tc.perFloor)
				}
				if tc.perFloor && (cal.FloorCoverage[0].Floor != 0.75 || cal.FloorCoverage[1].Floor != 0.9 ||
					cal.FloorCoverage[0].Coverage != cal.DefaultCoverage || cal.CoverageAt(0.9) < cal.CoverageAt(0.75)) {
					t.Fatalf("per-floor coverage %v (default %v)", cal.FloorCoverage, cal.DefaultCoverage)
				}
			}
			if printed := strings.Contains(stdout, "floor 0.90: below/acc"); printed != tc.perFloor {
				t.Errorf("per-floor table printed %v, want %v:\n%s", printed, tc.perFloor, stdout)
			}
		})
	}
}
