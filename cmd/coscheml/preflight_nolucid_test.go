// SPDX-License-Identifier: Apache-2.0

//go:build nolucid

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

// Built like the packaged programs (make unit): with model_path empty,
// preflight passes only when coscheml-model-lucid installed the default model.
func TestCheckModelNoLucid(t *testing.T) {
	saved := models.LucidDir
	t.Cleanup(func() { models.LucidDir = saved })
	src, err := os.ReadFile(filepath.Join("..", "..", "models", "default.model"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		installed bool
		fails     int
		want      string
	}{
		{"without coscheml-model-lucid", false, 1, "coscheml-model-lucid package is not installed"},
		{"with coscheml-model-lucid", true, 0, "ok    model      model_path is empty: default ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			models.LucidDir = t.TempDir()
			if tc.installed {
				if err := os.WriteFile(models.ModelPath(), src, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			p := &preflight{w: &out}
			checkModel(p, config.Default())
			if p.fails != tc.fails || !strings.Contains(out.String(), tc.want) {
				t.Errorf("fails %d, want %d; output does not say %q:\n%s", p.fails, tc.fails, tc.want, out.String())
			}
		})
	}
}
