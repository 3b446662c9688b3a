// SPDX-License-Identifier: Apache-2.0

//go:build nolucid

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
)

// Built like the packaged programs (go test -tags nolucid, part of make unit):
// without coscheml-model-lucid, train works from the site's own files and says
// what is missing when it has none.
func TestTrainNoLucid(t *testing.T) {
	saved := models.LucidDir
	models.LucidDir = t.TempDir() // nothing installed
	t.Cleanup(func() { models.LucidDir = saved })
	dir := t.TempDir()
	site := func(name, src string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "models", "data", "lucid-train", src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	solo, pairs := site("site-solo.csv", "solo_profiles.csv"), site("site-pairs.csv", "colocate_pairs.csv")
	out := filepath.Join(dir, "site.model")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"no files", []string{"train", "--out", out}, exitFailure, []string{"no profiles to train on", "--solo or --generic-profiles", "coscheml-model-lucid"}},
		{"profiles only", []string{"train", "--solo", solo, "--out", out}, exitFailure, []string{"no observations to train on", "--pairs or --obs"}},
		{"the site's own files", append([]string{"train", "--solo", solo, "--pairs", pairs, "--out", out}, fastTrain...), exitOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.wantCode, stderr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr)
				}
			}
		})
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no model written from the site's own files: %v", err)
	}
}
