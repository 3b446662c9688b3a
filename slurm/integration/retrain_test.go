// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
)

// testRetrain runs the retrain procedure of docs/retrain.md on what the
// suite's jobs recorded: fill the held-out set with the admin's own rows, then
// retrain against the model the plugin uses. It must either refuse for too
// little data, saying how much more is needed, or write a model that beat the
// current one, with its margins, creation time and format.
func testRetrain(t *testing.T, c *cluster) {
	dir := t.TempDir()
	train := filepath.Join(dir, "coscheml-train")
	if c.a.installed {
		train = "coscheml-train"
	} else {
		build := exec.Command("go", "build", "-o", train, "./cmd/coscheml-train")
		build.Dir = c.a.repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build coscheml-train: %v\n%s", err, out)
		}
	}
	hold, out := filepath.Join(dir, "holdout"), filepath.Join(dir, "model.new")
	// The guide's commands, with the suite's paths.
	script := `set -e
install -d -m 0755 "$HOLD"
cat "$OBS"/*.csv 2>/dev/null | awk -F, -v uid="$(id -u)" 'NR == 1 || ($9 == uid && ++n % 2 == 0)' > "$HOLD/admin.csv"
chmod 0644 "$HOLD/admin.csv"
exec "$TRAIN" retrain --config "$CONFIG" --holdout-dir "$HOLD" --out "$OUT"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "HOLD="+hold, "OBS="+c.cfg.ObservationDir, "TRAIN="+train, "CONFIG="+c.cfgPath, "OUT="+out)
	b, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("retrain: %v", err)
	}
	t.Logf("retrain exit %d:\n%s", code, b)
	switch code {
	case 4:
		if s := string(b); !strings.Contains(s, "needs") && !strings.Contains(s, "no profiles in") {
			t.Errorf("refused for too little data without saying how much more:\n%s", s)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a refused retrain wrote a model")
		}
	case 0:
		m, err := model.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		if in := m.Info(); !m.Calibrated() || in.CreatedAt.IsZero() || in.Format != model.FormatVersion {
			t.Errorf("written model: calibrated %v, created %v, format %d", m.Calibrated(), in.CreatedAt, in.Format)
		}
	default:
		t.Errorf("retrain exit %d: want 4 (not enough data) or 0 (a better model)", code)
	}
}
