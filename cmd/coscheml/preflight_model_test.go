// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
)

func TestCheckModel(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "site.model")
	if err := os.WriteFile(good, models.DefaultModel, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.model")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		modelPath string
		fails     int
		want      string
	}{
		{"default model", "", 0, "ok    model      model_path is empty: embedded default"},
		{"site model", good, 0, "ok    model      " + good + " loads"},
		{"not a model", bad, 1, "FAIL  model"},
		{"missing", filepath.Join(dir, "none.model"), 1, "tagged jobs pass through unchanged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &preflight{w: &out}
			cfg := config.Default()
			cfg.ModelPath = tc.modelPath
			checkModel(p, cfg)
			if p.fails != tc.fails || !strings.Contains(out.String(), tc.want) {
				t.Errorf("fails %d, want %d; output does not say %q:\n%s", p.fails, tc.fails, tc.want, out.String())
			}
		})
	}
}
