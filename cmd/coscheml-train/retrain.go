// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// minHoldout is the fewest held-out observations a comparison may rest on.
const minHoldout = 5

// retrainCommand is `coscheml-train retrain`: train on the site's profile store
// and accumulated observations, and replace the current model only if the new
// one is not worse on held-out observations.
func retrainCommand() *cli.Command {
	return &cli.Command{
		Name:  "retrain",
		Usage: "retrain from the profile store and accumulated observations; keep the better model",
		UsageText: "coscheml-train retrain --profiles DIR --obs DIR|FILE [--solo S.csv --pairs P.csv] --current M --out M\n" +
			"                       [--holdout-dir DIR] [--force] [--forest N] [--max-depth D] [--min-leaf L] [--bins B] [--seed S]",
		Description: "Reads the profiles in DIR (coscheml's profile store) and the generic observation CSVs that the\n" +
			"node Epilog accumulates (a folder of *.csv, or one file), plus optionally the Lucid solo/pair\n" +
			"files. Each user contributes at most 3 observations per pair (the newest). The new and the\n" +
			"current model are scored on a held-out set that users cannot write into: the *.csv of the\n" +
			"admin-only --holdout-dir, or, without one, the shipped Lucid pairs; held-out observations are\n" +
			"never trained on. If the new model's MAE is higher, nothing is written and the exit code is 1,\n" +
			"with both MAEs in the message, unless --force. Observations naming a tag with no profile are\n" +
			"dropped and counted. The model file is replaced atomically. See docs/profiling.md.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "profiles", Usage: "profile store `DIR` (required)"},
			&cli.StringFlag{Name: "obs", Usage: "accumulated observations: a `DIR` of *.csv or one FILE (required)"},
			&cli.StringFlag{Name: "solo", Usage: "extra Lucid solo-profile CSV `FILE` (profiles in the store win)"},
			&cli.StringFlag{Name: "pairs", Usage: "extra Lucid co-located pairs CSV `FILE` (training only, never held out)"},
			&cli.StringFlag{Name: "current", Usage: "the current model `FILE` to beat (required; a missing file means there is none yet)"},
			&cli.StringFlag{Name: "out", Usage: "write the new model to `FILE` (required; may equal --current)"},
			&cli.StringFlag{Name: "holdout-dir", Usage: "admin-only `DIR` of observation CSVs held out for the comparison (root- or admin-owned, not group/world-writable, not inside --obs; default: the shipped Lucid pairs)"},
			&cli.BoolFlag{Name: "force", Usage: "write the new model even if it scores worse"},
		}, paramFlags()...),
		Action: func(c *cli.Context) error { return retrain(c, c.App.Writer, c.App.ErrWriter) },
	}
}

func retrain(c *cli.Context, stdout, stderr io.Writer) error {
	if c.Args().Present() {
		return usagef("retrain: unexpected argument %q", profile.Sanitize(c.Args().First()))
	}
	for _, f := range []string{"profiles", "obs", "current", "out"} {
		if c.String(f) == "" {
			return usagef("retrain: --%s is required", f)
		}
	}
	params, err := paramsFrom(c)
	if err != nil {
		return err
	}

	cat, err := retrainCatalog(c, stderr)
	if err != nil {
		return err
	}
	site, err := readObservations(c.String("obs"), stderr)
	if err != nil {
		return err
	}
	var shared []observation.Observation
	if path := c.String("pairs"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--pairs: %w", err)
		}
		if shared, err = observation.ReadLucidPairs(strings.NewReader(string(b))); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	site = keepKnown(cat, site, "accumulated", stderr)
	shared = keepKnown(cat, shared, "--pairs", stderr)
	// One user may not make up a pair's evidence (docs/observations.md#trust).
	site, capped := observation.CapPerUser(site, observation.DefaultMaxPerUser)
	if capped > 0 {
		fmt.Fprintf(stderr, "warning: dropped %d accumulated observations over %d per user per pair (the oldest)\n", capped, observation.DefaultMaxPerUser)
	}

	// The held-out set comes from where users cannot write: never a part of the
	// accumulated observations, which users' jobs measured.
	hold, holdFrom, err := readHoldout(c.String("holdout-dir"), c.String("obs"), stderr)
	if err != nil {
		return err
	}
	hold = keepKnown(cat, hold, "held-out", stderr)
	if len(hold) < minHoldout {
		return fmt.Errorf("retrain: %d held-out observations with profiles in %s, fewer than %d: add more to the held-out set", len(hold), holdFrom, minHoldout)
	}
	site, dropSite := withoutHeldOut(site, hold)
	shared, dropShared := withoutHeldOut(shared, hold)
	if dropSite+dropShared > 0 {
		fmt.Fprintf(stderr, "warning: not training on %d observations that are also held out\n", dropSite+dropShared)
	}
	train := append(append([]observation.Observation(nil), site...), shared...)
	if len(site) == 0 {
		return fmt.Errorf("retrain: no accumulated observations with profiles to train on: collect more before retraining")
	}
	trainDS, err := training.BuildDataset(cat, train)
	if err != nil {
		return fmt.Errorf("retrain: training set: %w", err)
	}
	holdDS, err := training.BuildDataset(cat, hold)
	if err != nil {
		return fmt.Errorf("retrain: held-out set: %w", err)
	}

	m, err := training.Train(trainDS, params)
	if err != nil {
		return fmt.Errorf("retrain: %w", err)
	}
	m.Source = fmt.Sprintf("retrain: profiles %s (%d), observations %s (%d), pairs %s (%d); held out %s (%d); seed %d",
		c.String("profiles"), len(cat), c.String("obs"), len(site),
		orNone(c.String("pairs")), len(shared), holdFrom, len(hold), params.Seed)
	if len(m.Source) > profile.MaxTextLen*4 {
		m.Source = m.Source[:profile.MaxTextLen*4]
	}
	if lfo, err := training.LeaveFamiliesOut(trainDS, params); err != nil {
		fmt.Fprintf(stderr, "warning: no calibrated margins from this data (%v)\n", err)
	} else if cal, _, err := training.Calibrate(lfo.OutOfFold, training.CalibrationOptions{}); err != nil {
		fmt.Fprintf(stderr, "warning: no calibrated margins from this data (%v)\n", err)
	} else {
		m.Calibration = cal
		fmt.Fprintf(stdout, "calibrated margins from %d leave-families-out residuals; default coverage %.3g\n", cal.Residuals, cal.DefaultCoverage)
	}
	if m.Calibrated() {
		if seen, _, err := training.CalibrateSeen(trainDS, params, training.SeenCalibrationOptions()); err != nil {
			fmt.Fprintf(stderr, "warning: no seen-pairs margins from this data (%v)\n", err)
		} else {
			m.SeenCalibration = seen
			fmt.Fprintf(stdout, "seen-pairs margins from %d leave-pairs-out residuals; default coverage %.3g\n", seen.Residuals, seen.DefaultCoverage)
		}
	}
	// The admin's measurements (--pairs and the held-out set, which users
	// cannot write) answer the pairs they measured; the users' accumulated
	// observations reach the decisions only through the model and the pair
	// memory's per-user caps.
	m.Measured, m.MeasuredSD = training.MeasuredPairs(append(append([]observation.Observation(nil), shared...), hold...))
	newM := training.Evaluate(m, holdDS)
	fmt.Fprintf(stdout, "trained on %d observations (%d accumulated + %d shared); %d held out (%s)\n",
		trainDS.Len(), len(site), len(shared), holdDS.Len(), holdFrom)
	fmt.Fprintf(stdout, "new model:     MAE %.4f  RMSE %.4f  (mean predictor MAE %.4f)\n", newM.MAE, newM.RMSE, newM.MeanPredictorMAE)

	cur, err := model.Load(c.String("current"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(stdout, "current model: none (%s does not exist)\n", c.String("current"))
	case err != nil:
		if !c.Bool("force") {
			return fmt.Errorf("retrain: %w (use --force to replace it without a comparison)", err)
		}
		fmt.Fprintf(stderr, "warning: %v; replacing it (--force)\n", err)
	default:
		if !m.Calibrated() && cur.Calibrated() {
			// Too little data to calibrate: keep the current model's margins (from
			// a subset of this training data) rather than none.
			m.Calibration = cur.Calibration
			fmt.Fprintf(stderr, "warning: keeping the current model's calibrated margins\n")
		}
		curM := training.Evaluate(cur, holdDS)
		fmt.Fprintf(stdout, "current model: MAE %.4f  RMSE %.4f\n", curM.MAE, curM.RMSE)
		if newM.MAE > curM.MAE {
			if !c.Bool("force") {
				return fmt.Errorf("retrain: refusing to replace %s: the new model scores worse on %d held-out observations (MAE %.4f, current %.4f); use --force to replace it anyway",
					c.String("current"), holdDS.Len(), newM.MAE, curM.MAE)
			}
			fmt.Fprintf(stderr, "warning: the new model scores worse (MAE %.4f, current %.4f); replacing it (--force)\n", newM.MAE, curM.MAE)
		}
	}
	if err := m.Save(c.String("out")); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", c.String("out"))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// retrainCatalog is the profile store plus --solo profiles the store lacks.
func retrainCatalog(c *cli.Context, stderr io.Writer) (profile.Catalog, error) {
	dir := c.String("profiles")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--profiles %s: not a folder", dir)
	}
	st, err := profile.Open(dir)
	if err != nil {
		return nil, err
	}
	cat, problems := st.Catalog()
	for _, p := range problems {
		fmt.Fprintf(stderr, "warning: skipped: %v\n", p)
	}
	if cat == nil {
		cat = profile.Catalog{}
	}
	if path := c.String("solo"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--solo: %w", err)
		}
		defer f.Close()
		ps, err := profile.ReadLucidSolo(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, p := range ps {
			if _, ok := cat[p.Tag]; !ok {
				cat[p.Tag] = p
			}
		}
	}
	if len(cat) == 0 {
		return nil, fmt.Errorf("retrain: no profiles in %s", dir)
	}
	return cat, nil
}

// readObservations reads a folder of observation CSVs or one file.
func readObservations(path string, stderr io.Writer) ([]observation.Observation, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--obs: %w", err)
	}
	if !fi.IsDir() {
		return observation.ReadFile(path)
	}
	obs, problems := observation.ReadDir(path)
	for _, p := range problems {
		fmt.Fprintf(stderr, "warning: skipped: %v\n", p)
	}
	return obs, nil
}

// keepKnown drops observations naming a tag without a profile, and says so.
func keepKnown(cat profile.Catalog, obs []observation.Observation, what string, stderr io.Writer) []observation.Observation {
	kept, dropped, missing := training.FilterKnown(cat, obs)
	if dropped > 0 {
		if len(missing) > 5 {
			missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
		}
		for i := range missing {
			missing[i] = profile.Sanitize(missing[i])
		}
		fmt.Fprintf(stderr, "warning: dropped %d %s observations naming tags with no profile: %s\n", dropped, what, strings.Join(missing, ", "))
	}
	return kept
}

// readHoldout reads the held-out set: the admin-only folder dir (checked by
// observation.ReadHeldOut against the site folder obsDir), or, when dir is "",
// the shipped Lucid pairs. It returns where the set came from, for messages.
func readHoldout(dir, obsDir string, stderr io.Writer) ([]observation.Observation, string, error) {
	if dir == "" {
		b, err := models.Pairs()
		if err != nil {
			return nil, "", fmt.Errorf("retrain: no --holdout-dir, and the shipped Lucid pairs are unavailable: %w", err)
		}
		obs, err := observation.ReadLucidPairs(bytes.NewReader(b))
		if err != nil {
			return nil, "", fmt.Errorf("retrain: shipped Lucid pairs: %w", err)
		}
		return obs, "the shipped Lucid pairs", nil
	}
	obs, problems, err := observation.ReadHeldOut(dir, obsDir)
	if err != nil {
		return nil, "", fmt.Errorf("retrain: --holdout-dir: %w", err)
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "warning: skipped: %v\n", p)
	}
	return obs, dir, nil
}

// withoutHeldOut drops the observations of obs that are also in hold (same
// pair and speed), so the new model is never scored on what it trained on.
func withoutHeldOut(obs, hold []observation.Observation) ([]observation.Observation, int) {
	type k struct {
		pair  string
		speed float64
	}
	held := make(map[k]bool, len(hold))
	for _, o := range hold {
		held[k{observation.PairKey(o), o.Speed}] = true
	}
	var kept []observation.Observation
	for _, o := range obs {
		if !held[k{observation.PairKey(o), o.Speed}] {
			kept = append(kept, o)
		}
	}
	return kept, len(obs) - len(kept)
}
