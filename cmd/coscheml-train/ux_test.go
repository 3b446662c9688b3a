// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
)

// Exit codes match coscheml's: a missing file is "not found" (3) in both.
func TestExitCodes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.model")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"missing model file", []string{"eval", "--model", missing}, exitNotFound},
		{"missing solo file", []string{"train", "--solo", missing, "--out", missing + ".out"}, exitNotFound},
		{"bad flag", []string{"train", "--no-such-flag"}, exitUsage},
		{"unknown command", []string{"frobnicate"}, exitUsage},
		{"version", []string{"--version"}, exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _, stderr := runCLI(t, tt.args...); code != tt.want {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.want, stderr)
			}
		})
	}
}

func TestTrainReportsProgressOnStderr(t *testing.T) {
	_, solo, pairs := writeData(t)
	out := filepath.Join(t.TempDir(), "m.model")
	code, stdout, stderr := runCLI(t, append([]string{"train", "--solo", solo, "--pairs", pairs, "--out", out}, fastTrain...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2-fold cross-validation (2 models) ...", "2-fold cross-validation (2 models): done in",
		"leave-families-out cross-validation", "training the model on all samples: done in"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "coscheml-train: ") {
		t.Errorf("progress leaked into stdout (the report):\n%s", stdout)
	}
}

func TestStage(t *testing.T) {
	var w bytes.Buffer
	stage(&w, "step")()
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) != 2 || lines[0] != "coscheml-train: step ..." || !strings.HasPrefix(lines[1], "coscheml-train: step: done in ") {
		t.Errorf("stage output %q", w.String())
	}
}

// `info FILE` reads FILE, as `info --model FILE` does; without either it
// describes the default model.
func TestInfoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "default.model")
	if err := os.WriteFile(path, models.DefaultModel, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"FILE", []string{"info", path}, exitOK, "model " + path},
		{"--model FILE", []string{"info", "--model", path}, exitOK, "model " + path},
		{"neither", []string{"info"}, exitOK, "model " + model.DefaultModelName},
		{"both", []string{"info", "--model", path, path}, exitUsage, "give the model file once"},
		{"two files", []string{"info", path, path}, exitUsage, "unexpected argument"},
		{"missing FILE", []string{"info", path + ".nope"}, exitNotFound, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q in:\n%s%s", code, tc.code, tc.want, stdout, stderr)
			}
		})
	}
}
