// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// retrainFixture is a site: a profile store of the Lucid solo profiles, an
// observation folder holding the first Lucid pairs as if epilogs had recorded
// them (each pair observed by two users, as retrain asks of a pair), and an
// admin-only held-out folder holding the next ones.
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
	// Every pair is seen by a second user too (uid 30000+i).
	second := append([]observation.Observation(nil), site...)
	for i := range second {
		second[i].UID = strconv.Itoa(30000 + i)
	}
	if err := observation.AppendFile(filepath.Join(f.obs, "n1.csv"), append(slices.Clone(site), second...)...); err != nil {
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

// writeConfig writes a configuration naming the fixture's folders and
// modelPath ("" = the default model) and returns its path.
func (f *retrainFixture) writeConfig(t *testing.T, modelPath string) string {
	t.Helper()
	path := filepath.Join(f.dir, "coscheml.yaml")
	yaml := "model_path: \"" + modelPath + "\"\nprofile_dir: " + f.profiles + "\nobservation_dir: " + f.obs + "\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeHoldout replaces the held-out folder's contents with obs.
func (f *retrainFixture) writeHoldout(t *testing.T, obs []observation.Observation) {
	t.Helper()
	if err := os.RemoveAll(f.hold); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.hold, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := observation.AppendFile(filepath.Join(f.hold, "admin.csv"), obs...); err != nil {
		t.Fatal(err)
	}
}

// fileFormat is the format version in a model file's header.
func fileFormat(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 12 {
		t.Fatalf("read %s: %v", path, err)
	}
	return binary.BigEndian.Uint32(b[8:12])
}

// Each way retrain refuses: nothing is written, the exit code says which kind
// of refusal, and the message says what is missing or why the new model lost.
func TestRetrainRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nObs  int
		setup func(t *testing.T, f *retrainFixture) []string // extra arguments
		code  int
		want  []string // in stderr
		not   []string // not in stderr
	}{
		{
			// model_path "" and no --current: the current model is the default
			// one, trained on every Lucid pair, the held-out ones too.
			name: "the default model is found without --current and not replaced", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				return []string{"--config", f.writeConfig(t, "")}
			},
			code: exitFailure,
			want: []string{"does not beat the current model the default model (model_path is empty)", "MAE", "nothing written"},
		},
		{
			name: "a worse MAE is refused, --force or not", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				cur := f.saveModel(t, "current.model", model.Params{MaxDepth: 20, MinLeaf: 1, Trees: 1, Bins: 0, Seed: 1}, nil)
				return []string{"--config", f.writeConfig(t, cur), "--force"}
			},
			code: exitFailure,
			want: []string{"does not beat the current model", "the new one must be lower"},
		},
		{
			// The current model predicts 0.3 for everything, so it accepts no
			// co-location; the new one predicts the held-out pairs fast, but
			// they were measured below the 0.75 floor: a lower MAE, less safe.
			name: "a lower MAE with more co-locations below their floor is refused", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				cur := f.saveModel(t, "bad.model", training.DefaultParams(), func(float64) float64 { return 0.3 })
				var slow []observation.Observation
				for _, o := range f.all[:300] {
					if o.Speed >= 0.98 && len(slow) < 20 {
						o.Speed, o.UID = 0.7, ""
						slow = append(slow, o)
					}
				}
				f.writeHoldout(t, slow)
				return []string{"--config", f.writeConfig(t, cur)}
			},
			code: exitFailure,
			want: []string{"below floor", "the new one must be no higher"},
			not:  []string{"must be lower"},
		},
		{
			name: "a current model that cannot be read needs --force", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				bad := filepath.Join(f.dir, "garbage.model")
				if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"--config", f.writeConfig(t, bad)}
			},
			code: exitFailure,
			want: []string{"current model", "not a coscheml model", "--force"},
		},
		{
			name: "a young cluster's few observations: how much more", nObs: 6,
			setup: func(t *testing.T, f *retrainFixture) []string {
				return []string{"--config", f.writeConfig(t, "")}
			},
			code: exitNeedsData,
			want: []string{"not enough data yet", "training set: 12 observations (12 accumulated + 0 --pairs), needs 88 more",
				"distinct pairs", "from 12 users over", "a pair counts once 2 users observed it", "at least 30 more (user, pair) combinations", "3 solo runs of at least 60 s by 2 users"},
			not: []string{"held-out set"},
		},
		{
			name: "no held-out folder yet", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				return []string{"--config", f.writeConfig(t, ""), "--holdout-dir", filepath.Join(f.dir, "none")}
			},
			code: exitNeedsData,
			want: []string{"held-out set: " + "", "none does not exist: create it", "at least 5 observations you measured yourself"},
			not:  []string{"training set"},
		},
		{
			name: "too few held out", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				f.writeHoldout(t, f.all[300:302])
				return []string{"--config", f.writeConfig(t, "")}
			},
			code: exitNeedsData,
			want: []string{"2 observations with profiles, needs 3 more"},
		},
		{
			name: "no profiles yet", nObs: 300,
			setup: func(t *testing.T, f *retrainFixture) []string {
				empty := filepath.Join(f.dir, "noprofiles")
				if err := os.Mkdir(empty, 0o755); err != nil {
					t.Fatal(err)
				}
				return []string{"--config", f.writeConfig(t, ""), "--profiles", empty}
			},
			code: exitNeedsData,
			want: []string{"no profiles in", "solo runs"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRetrainFixture(t, tc.nObs)
			args := tc.setup(t, f)
			out := filepath.Join(f.dir, "new.model")
			code, stdout, errOut := runTrain(append([]string{"retrain", "--holdout-dir", f.hold, "--out", out}, args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr has %q", w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused retrain wrote a model")
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, errOut)
			}
		})
	}
}

// The acceptance path: a new model that beats the current one on the held-out
// set is written with its calibrated margins, its creation time and the
// current format; the held-out set is neither trained on nor answers pairs.
func TestRetrainWritesBetterModel(t *testing.T) {
	f := newRetrainFixture(t, 300)
	// The current model says every pair runs at full speed, without margins:
	// it accepts every co-location, the slow ones too.
	cur := f.saveModel(t, "optimistic.model", training.DefaultParams(), func(float64) float64 { return 1 })
	cfg := f.writeConfig(t, cur)
	out := filepath.Join(f.dir, "new.model")
	before := time.Now().UTC().Truncate(time.Second)
	code, stdout, errOut := runTrain("retrain", "--config", cfg, "--holdout-dir", f.hold, "--out", out, "--seed", "7")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	for _, w := range []string{"600 accumulated + 0 shared); 60 held out", "current model: MAE", "(" + cur + ")", "wrote " + out + " (format 3, created"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	nm, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !nm.Calibrated() || nm.Calibration.Residuals != 600 || len(nm.Calibration.FloorCoverage) == 0 {
		t.Errorf("leave-families-out margins: calibrated %v, %d residuals, %d floor coverages", nm.Calibrated(), nm.Calibration.Residuals, len(nm.Calibration.FloorCoverage))
	}
	if len(nm.SeenCalibration.Levels) == 0 || nm.SeenCalibration.Scale <= 0 {
		t.Errorf("seen-pairs margins: %d levels, scale %v", len(nm.SeenCalibration.Levels), nm.SeenCalibration.Scale)
	}
	if nm.CreatedAt.Before(before) || nm.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("created %v, want about now (%v)", nm.CreatedAt, before)
	}
	if v := fileFormat(t, out); v != model.FormatVersion {
		t.Errorf("file format %d, want %d", v, model.FormatVersion)
	}
	if nm.TrainSamples != 600 || len(nm.Measured) != 0 {
		t.Errorf("%d training samples (want 600), %d measured pairs (want none: only --pairs answers pairs)", nm.TrainSamples, len(nm.Measured))
	}
	if nm.CV.Apps < 2 {
		t.Errorf("leave-apps-out summary over %d applications", nm.CV.Apps)
	}

	// --pairs is training only: its rows that are also held out are not
	// trained on (and said so); the rest are, and answer their pairs.
	// The first 200 Lucid rows: the site's 150 rows, the 30 held out, 20 more.
	lines := strings.SplitAfter(string(models.DefaultPairsCSV), "\n")
	pairsCSV := filepath.Join(f.dir, "pairs.csv")
	if err := os.WriteFile(pairsCSV, []byte(strings.Join(lines[:201], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(f.dir, "new2.model")
	code, stdout, errOut = runTrain("retrain", "--config", cfg, "--holdout-dir", f.hold, "--out", out2, "--pairs", pairsCSV)
	if code != exitOK {
		t.Fatalf("--pairs: exit %d: %s %s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "not training on 60 --pairs observations that are also in the held-out set") ||
		!strings.Contains(stdout, "(600 accumulated + 340 shared); 60 held out") {
		t.Errorf("--pairs: stdout %q stderr %q", stdout, errOut)
	}
	nm2, err := model.Load(out2)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, o := range f.all[300:] {
		held[o.Tag+"|"+strings.Join(o.CoTags, ",")] = true
	}
	if len(nm2.Measured) == 0 {
		t.Error("--pairs answers no pair")
	}
	for _, p := range nm2.Measured {
		if held[p.Job+"|"+p.Co] {
			t.Errorf("measured pair %+v is a held-out pair's", p)
		}
	}
}

// Data trust: one user's repeats of a pair are capped, and a held-out file
// others could write is skipped.
func TestRetrainDataTrust(t *testing.T) {
	f := newRetrainFixture(t, 300)
	cur := f.saveModel(t, "optimistic.model", training.DefaultParams(), func(float64) float64 { return 1 })
	cfg := f.writeConfig(t, cur)
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
	code, stdout, errOut := runTrain("retrain", "--config", cfg, "--holdout-dir", f.hold, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "dropped 7 accumulated observations over 3 per user per pair") ||
		!strings.Contains(stdout, "(603 accumulated + 0 shared); 60 held out") {
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
	code, stdout, errOut = runTrain("retrain", "--config", cfg, "--holdout-dir", f.hold, "--out", out)
	if code != exitOK || !strings.Contains(errOut, "group- or world-writable") || !strings.Contains(stdout, "; 60 held out") {
		t.Errorf("writable held-out file: exit %d stdout %q stderr %q", code, stdout, errOut)
	}
}

func TestRetrainInputErrors(t *testing.T) {
	f := newRetrainFixture(t, 12)
	cfg := f.writeConfig(t, "")
	cur := filepath.Join(f.dir, "m")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no --out", []string{"--config", cfg}, exitUsage, "--out is required"},
		{"random holdout is gone", []string{"--config", cfg, "--out", cur, "--holdout", "0.2"}, exitUsage, "holdout"},
		{"holdout inside obs", []string{"--config", cfg, "--obs", f.dir, "--holdout-dir", f.hold, "--out", cur}, exitFailure, "inside it"},
		{"holdout is obs", []string{"--config", cfg, "--holdout-dir", f.obs, "--out", cur}, exitFailure, "site observation folder"},
		{"no such obs", []string{"--config", cfg, "--obs", filepath.Join(f.dir, "nope"), "--out", cur}, exitNotFound, "--obs"},
		{"profiles not a folder", []string{"--config", cfg, "--profiles", filepath.Join(f.obs, "n1.csv"), "--out", cur}, exitFailure, "not a folder"},
		{"no such config", []string{"--config", filepath.Join(f.dir, "nope.yaml"), "--out", cur}, exitNotFound, "nope.yaml"},
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

// The refusal for too little data estimates the time to enough data from the
// rate the observations accumulated at.
func TestRetrainShortfallRate(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	obsAt := func(n int, every time.Duration) []observation.Observation {
		var obs []observation.Observation
		for i := range n {
			obs = append(obs, observation.Observation{Tag: "a-bs" + strconv.Itoa(i%3), CoTags: []string{"b-bs1"}, Speed: 0.9,
				UID: strconv.Itoa(i % 2), When: now.Add(-time.Duration(n-i) * every)})
		}
		return obs
	}
	hold := obsAt(5, time.Hour)
	for _, tc := range []struct {
		name string
		site []observation.Observation
		want string // "" = no rate line
	}{
		{"10 a day over 2 days: 80 more in 8 days", obsAt(20, 144*time.Minute), "10.0 counted observations a day over 2 days), that is about 8 days more"},
		{"all within an hour: no rate", obsAt(20, time.Minute), ""},
		{"no times: no rate", func() []observation.Observation {
			o := obsAt(20, time.Hour)
			for i := range o {
				o[i].When = time.Time{}
			}
			return o
		}(), ""},
		{"one observation: no rate", obsAt(1, 24*time.Hour), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := shortfall(tc.site, tc.site, hold, "/h", false, config.Default(), now)
			if tc.want == "" && strings.Contains(msg, "At the rate so far") || tc.want != "" && !strings.Contains(msg, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, msg)
			}
			if !strings.Contains(msg, "needs "+strconv.Itoa(training.DefaultMinResiduals-len(tc.site))+" more") {
				t.Errorf("no count of the observations needed:\n%s", msg)
			}
		})
	}
}

// One user's word does not train a pair: a user who reports a pair measured
// slow as fast, three times (the per-user cap), leaves the written model
// exactly as it would be without those reports, and retrain says so.
func TestRetrainOneUserCannotTrainAPair(t *testing.T) {
	f := newRetrainFixture(t, 300)
	cur := f.saveModel(t, "optimistic.model", training.DefaultParams(), func(float64) float64 { return 1 })
	cfg := f.writeConfig(t, cur)
	obs, err := observation.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	// A slow pair neither the site nor the held-out set has observed.
	var slow observation.Observation
	for _, o := range obs[len(f.all):] {
		if o.Speed < 0.6 {
			slow = o
			break
		}
	}
	if slow.Tag == "" {
		t.Fatal("no slow pair beyond the fixture's")
	}
	train := func(name string) *model.Model {
		out := filepath.Join(f.dir, name)
		code, stdout, errOut := runTrain("retrain", "--config", cfg, "--holdout-dir", f.hold, "--out", out, "--seed", "7")
		if code != exitOK {
			t.Fatalf("exit %d: %s %s", code, stdout, errOut)
		}
		if name == "hostile.model" && !strings.Contains(errOut, "left out 3 accumulated observations of 1 pairs observed by fewer than 2 users") {
			t.Errorf("stderr does not say the lone user's observations were left out: %s", errOut)
		}
		m, err := model.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	honest := train("honest.model")
	lie := make([]observation.Observation, 3)
	for i := range lie {
		lie[i] = slow
		lie[i].UID, lie[i].Speed = "6666", 1.0
	}
	if err := observation.AppendFile(filepath.Join(f.obs, "n2.csv"), lie...); err != nil {
		t.Fatal(err)
	}
	hostile := train("hostile.model")
	co := []*profile.Profile{f.cat[slow.CoTags[0]]}
	hs, hl := honest.Bound(f.cat[slow.Tag], co, model.Query{Floor: 0.75})
	xs, xl := hostile.Bound(f.cat[slow.Tag], co, model.Query{Floor: 0.75})
	t.Logf("pair %s next to %s measured %.2f: honest model %.3f (bound %.3f), with the lone user's reports %.3f (bound %.3f)", slow.Tag, slow.CoTags[0], slow.Speed, hs, hl, xs, xl)
	if xs != hs || xl != hl {
		t.Errorf("one user's reports moved the pair's prediction from %.3f (bound %.3f) to %.3f (bound %.3f)", hs, hl, xs, xl)
	}
}
