// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// retrainFixture is a site: a profile store of the Lucid solo profiles, an
// observation folder holding the first Lucid pairs as if epilogs had recorded
// them (each observation from its own user), and an admin-only held-out folder
// holding the next ones.
type retrainFixture struct {
	dir, profiles, obs, hold string
	cat                      profile.Catalog
	all                      []observation.Observation // site and held out
	nHold                    int
}

// fixtureHoldout is the size of the fixture's held-out set.
const fixtureHoldout = 60

func newRetrainFixture(t *testing.T, nObs int) *retrainFixture {
	t.Helper()
	f := &retrainFixture{dir: t.TempDir()}
	f.profiles = filepath.Join(f.dir, "profiles")
	f.obs = filepath.Join(f.dir, "obs")
	st, err := profile.Open(f.profiles)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	if err != nil {
		t.Fatal(err)
	}
	f.cat = profile.Catalog{}
	for _, p := range ps {
		if err := st.Put(p); err != nil {
			t.Fatal(err)
		}
		f.cat[p.Tag] = p
	}
	obs, err := observation.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	for i := range obs {
		obs[i].UID = strconv.Itoa(1000 + i)
	}
	site := obs[:min(nObs, len(obs))]
	held := obs[len(site):min(len(site)+fixtureHoldout, len(obs))]
	f.all, f.nHold = obs[:len(site)+len(held)], len(held)
	f.hold = filepath.Join(f.dir, "holdout")
	for _, d := range []string{f.obs, f.hold} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := observation.AppendFile(filepath.Join(f.obs, "n1.csv"), site...); err != nil {
		t.Fatal(err)
	}
	if err := observation.AppendFile(filepath.Join(f.hold, "admin.csv"), held...); err != nil {
		t.Fatal(err)
	}
	return f
}

// saveModel trains a model on obs (with speeds replaced by speed(i) if given)
// and saves it.
func (f *retrainFixture) saveModel(t *testing.T, name string, p model.Params, speed func(float64) float64) string {
	t.Helper()
	obs := append([]observation.Observation(nil), f.all...)
	if speed != nil {
		for i := range obs {
			obs[i].Speed = speed(obs[i].Speed)
		}
	}
	ds, err := training.BuildDataset(f.cat, obs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := training.Train(ds, p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, name)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func runTrain(args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := run(append([]string{"coscheml-train"}, args...), &out, &errw)
	return code, out.String(), errw.String()
}

func TestRetrainRefusesWorseModel(t *testing.T) {
	f := newRetrainFixture(t, 300)
	// The current model has memorized every observation, the held-out ones too,
	// so a model trained without them cannot beat it.
	cur := f.saveModel(t, "current.model", model.Params{MaxDepth: 20, MinLeaf: 1, Trees: 1, Bins: 0, Seed: 1}, nil)
	before, _ := os.ReadFile(cur)

	code, out, errOut := runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold, "--current", cur, "--out", cur)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stdout %s stderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "refusing to replace") || strings.Count(errOut, "MAE") != 1 || !strings.Contains(errOut, "current 0.") || !strings.Contains(errOut, "--force") {
		t.Errorf("refusal message %q", errOut)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	after, _ := os.ReadFile(cur)
	if !bytes.Equal(before, after) {
		t.Error("the current model was modified by a refused retrain")
	}

	code, out, errOut = runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold, "--current", cur, "--out", cur, "--force")
	if code != exitOK || !strings.Contains(errOut, "--force") {
		t.Fatalf("--force: exit %d; %s %s", code, out, errOut)
	}
	m, err := model.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Source, "retrain") || !strings.Contains(m.Source, f.hold) || m.TrainSamples != 300 {
		t.Errorf("forced model: source %q, %d samples (want 300)", m.Source, m.TrainSamples)
	}
}

func TestRetrainReplacesWorseCurrent(t *testing.T) {
	f := newRetrainFixture(t, 300)
	// A current model trained on nonsense (every speed 0.3) scores badly.
	cur := f.saveModel(t, "bad.model", training.DefaultParams(), func(float64) float64 { return 0.3 })
	out := filepath.Join(f.dir, "new.model")
	code, stdout, errOut := runTrain("retrain", "--profiles", f.profiles, "--obs", filepath.Join(f.obs, "n1.csv"),
		"--holdout-dir", f.hold, "--current", cur, "--out", out, "--seed", "7")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	if !strings.Contains(stdout, "300 accumulated + 0 shared); 60 held out") || !strings.Contains(stdout, "wrote "+out) {
		t.Errorf("stdout %q", stdout)
	}
	nm, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// The new model is calibrated from its own training data's residuals.
	if !nm.Calibrated() || !strings.Contains(stdout, "calibrated margins from") || nm.Calibration.Residuals != 300 {
		t.Errorf("new model calibrated %v (%d residuals); stdout %q", nm.Calibrated(), nm.Calibration.Residuals, stdout)
	}
	// Its measured pairs are the admin's held-out measurements only: the
	// users' 300 observations never answer a pair directly.
	want, _ := training.MeasuredPairs(f.all[300:])
	if len(nm.Measured) != len(want) || len(want) == 0 {
		t.Fatalf("%d measured pairs, want the held-out set's %d", len(nm.Measured), len(want))
	}
	for i := range want {
		if nm.Measured[i] != want[i] {
			t.Fatalf("measured pair %d: %+v, want %+v", i, nm.Measured[i], want[i])
		}
	}

	// No current model yet: the first one is written.
	first := filepath.Join(f.dir, "first.model")
	code, stdout, errOut = runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold, "--current", first, "--out", first)
	if code != exitOK || !strings.Contains(stdout, "current model: none") {
		t.Fatalf("first model: exit %d %s %s", code, stdout, errOut)
	}
}

func TestRetrainInputErrors(t *testing.T) {
	f := newRetrainFixture(t, 12)
	cur := filepath.Join(f.dir, "m")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing flags", []string{"--profiles", f.profiles}, exitUsage, "--obs is required"},
		{"random holdout is gone", []string{"--profiles", f.profiles, "--obs", f.obs, "--current", cur, "--out", cur, "--holdout", "0.2"}, exitUsage, "holdout"},
		{"holdout inside obs", []string{"--profiles", f.profiles, "--obs", f.dir, "--holdout-dir", f.hold, "--current", cur, "--out", cur}, exitFailure, "inside it"},
		{"holdout is obs", []string{"--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.obs, "--current", cur, "--out", cur}, exitFailure, "site observation folder"},
		{"too few held out", []string{"--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.profiles, "--current", cur, "--out", cur}, exitFailure, "fewer than 5"},
		{"no such obs", []string{"--profiles", f.profiles, "--obs", filepath.Join(f.dir, "nope"), "--current", cur, "--out", cur}, exitNotFound, "--obs"},
		{"profiles not a folder", []string{"--profiles", filepath.Join(f.obs, "n1.csv"), "--obs", f.obs, "--current", cur, "--out", cur}, exitFailure, "not a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runTrain(append([]string{"retrain"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d %q, want %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
	if _, err := os.Stat(cur); err == nil {
		t.Error("a model was written by a failed retrain")
	}
}

// Too little data to calibrate: the new model keeps the current model's margins
// rather than none, and says so.
func TestRetrainKeepsMarginsWhenTooFewResiduals(t *testing.T) {
	f := newRetrainFixture(t, 60)
	cur := f.saveModel(t, "bad.model", training.DefaultParams(), func(float64) float64 { return 0.3 })
	m, err := model.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	def, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	m.Calibration = def.Calibration
	if err := m.Save(cur); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(f.dir, "new.model")
	code, stdout, errOut := runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold, "--current", cur, "--out", out, "--min-leaf", "2")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	nm, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "no calibrated margins") || !strings.Contains(errOut, "keeping the current model's calibrated margins") ||
		nm.Calibration.DefaultCoverage != def.Calibration.DefaultCoverage || nm.Margin(0.8, 0) != def.Margin(0.8, 0) {
		t.Errorf("stderr %q; new model default coverage %v", errOut, nm.Calibration.DefaultCoverage)
	}
}

// Data trust: one user's repeats of a pair are capped, the held-out set never
// comes from the site folder, and without --holdout-dir it is the shipped Lucid
// pairs, which are then not trained on.
func TestRetrainDataTrust(t *testing.T) {
	f := newRetrainFixture(t, 200)
	// One user (uid 6666) reports the same pair 10 times more: 3 are kept.
	flood := make([]observation.Observation, 10)
	for i := range flood {
		flood[i] = f.all[0]
		flood[i].UID = "6666"
		flood[i].Speed = 0.2 + 0.01*float64(i)
	}
	if err := observation.AppendFile(filepath.Join(f.obs, "n2.csv"), flood...); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(f.dir, "new.model")
	code, stdout, errOut := runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold,
		"--current", out, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "dropped 7 accumulated observations over 3 per user per pair") ||
		!strings.Contains(stdout, "(203 accumulated + 0 shared); 60 held out") {
		t.Errorf("per-user cap: stdout %q stderr %q", stdout, errOut)
	}

	// A group-writable file in the held-out folder is skipped with a warning.
	bad := filepath.Join(f.hold, "bad.csv")
	if err := observation.AppendFile(bad, f.all[:10]...); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bad, 0o664); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut = runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs, "--holdout-dir", f.hold,
		"--current", out, "--out", out, "--force")
	if code != exitOK || !strings.Contains(errOut, "group- or world-writable") || !strings.Contains(stdout, "; 60 held out") {
		t.Errorf("writable held-out file: exit %d stdout %q stderr %q", code, stdout, errOut)
	}

	// No --holdout-dir: the shipped Lucid pairs are held out; the site folder
	// (here the Lucid pairs themselves) is not split, and nothing held out is
	// trained on, so only the flood's 3 perturbed copies remain to train on.
	shipped, err := observation.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut = runTrain("retrain", "--profiles", f.profiles, "--obs", f.obs,
		"--current", out, "--out", out, "--force", "--min-leaf", "1")
	want := strconv.Itoa(len(shipped)) + " held out (the shipped Lucid pairs)"
	if code != exitOK || !strings.Contains(stdout, want) || !strings.Contains(stdout, "(3 accumulated + 0 shared)") ||
		!strings.Contains(errOut, "not training on 200 observations that are also held out") {
		t.Errorf("fallback: exit %d, want %q; stdout %q stderr %q", code, want, stdout, errOut)
	}
}
