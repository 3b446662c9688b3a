// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

const (
	// minHoldout is the fewest held-out observations a comparison may rest on.
	minHoldout = 5
	// defaultHoldoutDir is the admin-only folder of held-out observations.
	defaultHoldoutDir = "/etc/coscheml/holdout"
	// systemConfig is read when neither --config nor $COSCHEML_CONFIG names a
	// file, as the plugin and the other programs do.
	systemConfig = "/etc/coscheml/coscheml.yaml"
	// minFamilies: leave-families-out calibration holds out one family at a time.
	minFamilies = 2
)

// retrainCommand is `coscheml-train retrain`: train on the site's profile store
// and accumulated observations, calibrate as `train` does, and write the new
// model only if it beats the current one on held-out observations.
func retrainCommand() *cli.Command {
	return &cli.Command{
		Name:  "retrain",
		Usage: "retrain from the profile store and accumulated observations; write the new model only if it beats the current one",
		UsageText: "coscheml-train retrain --out M [--config F] [--profiles DIR] [--obs DIR|FILE] [--current M]\n" +
			"                       [--holdout-dir DIR] [--solo S.csv --pairs P.csv] [--force]\n" +
			"                       [--forest N] [--max-depth D] [--min-leaf L] [--bins B] [--seed S]",
		Description: "Reads the profiles and the observation CSVs the node Epilogs accumulate (by default the\n" +
			"configuration's profile_dir and observation_dir), plus optionally Lucid solo/pair files for\n" +
			"training. Each user contributes at most 3 observations per pair (the newest). The new model is\n" +
			"calibrated as `train` calibrates (leave-families-out and seen-pairs margins). It and the current\n" +
			"model (the one the plugin loads: the configuration's model_path, else the default model) are\n" +
			"scored on the held-out set, the *.csv of the admin-only --holdout-dir, which is never trained on.\n" +
			"The new model is written only if its MAE is lower and no larger share (and no larger number) of\n" +
			"the held-out co-locations its floor tests accept run below their floor. Otherwise nothing is\n" +
			"written and the exit code is 1. On too little data nothing is trained, the message says how\n" +
			"much more is needed, and the exit code is 4. See docs/retrain.md.\n\n" +
			"Exit codes: 0 written, 1 refused or failed, 2 usage error, 3 a missing input, 4 not enough data yet.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", EnvVars: []string{"COSCHEML_CONFIG"}, Usage: "configuration `FILE` (default: " + systemConfig + " if it exists, else built-in defaults): model_path, profile_dir, observation_dir, speed_floor, profiling"},
			&cli.StringFlag{Name: "profiles", Usage: "profile store `DIR` (default: the configuration's profile_dir)"},
			&cli.StringFlag{Name: "obs", Usage: "accumulated observations: a `DIR` of *.csv or one FILE (default: the configuration's observation_dir)"},
			&cli.StringFlag{Name: "solo", Usage: "extra Lucid solo-profile CSV `FILE` (profiles in the store win)"},
			&cli.StringFlag{Name: "pairs", Usage: "extra Lucid co-located pairs CSV `FILE`, training only (rows that are also in the held-out set are not trained on)"},
			&cli.StringFlag{Name: "current", Usage: "the current model `FILE` to beat (default: the one the plugin loads: the configuration's model_path, else the default model)"},
			&cli.StringFlag{Name: "out", Usage: "write the new model to `FILE` (required; may equal --current)"},
			&cli.StringFlag{Name: "holdout-dir", Value: defaultHoldoutDir, Usage: "admin-only `DIR` of observation CSVs held out for the comparison, never trained on (root- or admin-owned, not group/world-writable, not inside --obs)"},
			&cli.BoolFlag{Name: "force", Usage: "when the current model cannot be read, write the new model without a comparison (never a model that scores worse than a readable current one)"},
		}, paramFlags()...),
		Action: func(c *cli.Context) error { return retrain(c, c.App.Writer, c.App.ErrWriter) },
	}
}

// needsDataError is a refusal for too little data: nothing was trained, and
// the message says how much more is needed.
type needsDataError struct{ msg string }

func (e needsDataError) Error() string { return e.msg }

// retrainConfig is the configuration named by --config, else systemConfig when
// it exists, else the built-in defaults.
func retrainConfig(c *cli.Context) (config.Config, error) {
	path := c.String("config")
	if path == "" {
		if _, err := os.Stat(systemConfig); err != nil {
			return config.Default(), nil
		}
		path = systemConfig
	}
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, fmt.Errorf("retrain: %w", err)
	}
	return cfg, nil
}

func retrain(c *cli.Context, stdout, stderr io.Writer) error {
	if c.Args().Present() {
		return usagef("retrain: unexpected argument %q", profile.Sanitize(c.Args().First()))
	}
	if c.String("out") == "" {
		return usagef("retrain: --out is required")
	}
	cfg, err := retrainConfig(c)
	if err != nil {
		return err
	}
	profDir, obsPath := orDefault(c.String("profiles"), cfg.ProfileDir), orDefault(c.String("obs"), cfg.ObservationDir)
	if profDir == "" {
		return usagef("retrain: --profiles is required (the configuration's profile_dir is empty)")
	}
	if obsPath == "" {
		return usagef("retrain: --obs is required (the configuration's observation_dir is empty)")
	}
	params, err := paramsFrom(c)
	if err != nil {
		return err
	}

	// The model to beat is the one the plugin uses, resolved as it resolves it.
	curPath := orDefault(c.String("current"), cfg.ModelPath)
	cur, curName, err := model.Current(curPath)
	if err != nil {
		if !c.Bool("force") {
			return fmt.Errorf("retrain: current model %s: %w (fix the path, or use --force to write the new model without a comparison)", curName, err)
		}
		fmt.Fprintf(stderr, "warning: current model %s: %v; writing the new model without a comparison (--force)\n", curName, err)
		cur = nil
	}

	cat, err := retrainCatalog(profDir, cfg.MaxProfiles, c.String("solo"), stderr)
	if err != nil {
		return err
	}
	site, err := readObservations(obsPath, stderr)
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
	// Nor may one user's word train a pair at all: three reports of a slow
	// pair as fast would loosen its bound. A pair counts once min_users
	// distinct users observed it, as a profile does.
	site, lone, lonePairs := observation.KeepMultiUser(site, cfg.Profiling.MinUsers)
	if lone > 0 {
		fmt.Fprintf(stderr, "warning: left out %d accumulated observations of %d pairs observed by fewer than %d users (profiling.min_users): one user's measurements do not train a pair\n",
			lone, lonePairs, cfg.Profiling.MinUsers)
	}

	// The held-out set comes from where users cannot write: never a part of the
	// accumulated observations, which users' jobs measured.
	holdDir := c.String("holdout-dir")
	hold, holdMissing, err := readHoldout(holdDir, obsPath, stderr)
	if err != nil {
		return err
	}
	hold = keepKnown(cat, hold, "held-out", stderr)
	site, dropSite := withoutHeldOut(site, hold)
	shared, dropShared := withoutHeldOut(shared, hold)
	if dropSite > 0 {
		fmt.Fprintf(stderr, "warning: not training on %d accumulated observations that are also in the held-out set %s (the held-out set is only scored)\n", dropSite, holdDir)
	}
	if dropShared > 0 {
		fmt.Fprintf(stderr, "warning: not training on %d --pairs observations that are also in the held-out set %s (the held-out set is only scored)\n", dropShared, holdDir)
	}
	train := append(append([]observation.Observation(nil), site...), shared...)
	if msg := shortfall(site, train, hold, holdDir, holdMissing, cfg, time.Now()); msg != "" {
		return needsDataError{msg}
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
	// Margins as `train` calibrates the shipped model's: leave-families-out
	// with per-floor coverage, and normalized seen-pairs margins. A model
	// without them would clear every floor on its bare prediction.
	lfo, err := training.LeaveFamiliesOut(trainDS, params)
	if err == nil {
		m.Calibration, _, err = training.Calibrate(lfo.OutOfFold, training.CalibrationOptions{})
	}
	if err == nil {
		m.SeenCalibration, _, err = training.CalibrateSeen(trainDS, params, training.SeenCalibrationOptions())
	}
	if err != nil {
		return needsDataError{fmt.Sprintf("retrain: cannot calibrate the new model's margins on this data (%v); nothing written: collect more accumulated observations of more applications (docs/retrain.md)", err)}
	}
	m.CV = model.CVSummary{LeaveAppsOut: lfo.Metrics, Apps: len(lfo.Folds)}
	fmt.Fprintf(stdout, "calibrated margins from %d leave-families-out residuals (default coverage %.3g) and %d leave-pairs-out residuals (default coverage %.3g)\n",
		m.Calibration.Residuals, m.Calibration.DefaultCoverage, m.SeenCalibration.Residuals, m.SeenCalibration.DefaultCoverage)
	// Only the admin's --pairs measurements answer pairs directly: the users'
	// observations reach decisions through the trees and the pair memory's
	// per-user caps, and the held-out set is never trained on.
	m.Measured, m.MeasuredSD = training.MeasuredPairs(shared)
	m.Source = fmt.Sprintf("retrain: profiles %s (%d), observations %s (%d), pairs %s (%d); held out %s (%d); seed %d",
		profDir, len(cat), obsPath, len(site), orNone(c.String("pairs")), len(shared), holdDir, len(hold), params.Seed)
	if len(m.Source) > profile.MaxTextLen*4 {
		m.Source = m.Source[:profile.MaxTextLen*4]
	}
	m.CreatedAt = time.Now().UTC().Truncate(time.Second)

	floors := []training.FloorWeight{{Floor: cfg.SpeedFloor.HPC, Weight: 0.2}, {Floor: cfg.SpeedFloor.Train, Weight: 0.6}, {Floor: cfg.SpeedFloor.Infer, Weight: 0.2}}
	newM, newF := training.Evaluate(m, holdDS), training.EvaluateFloors(m, holdDS, floors)
	fmt.Fprintf(stdout, "trained on %d observations (%d accumulated + %d shared); %d held out (%s)\n",
		trainDS.Len(), len(site), len(shared), holdDS.Len(), holdDir)
	fmt.Fprintf(stdout, "new model:     MAE %.4f  RMSE %.4f  (mean predictor MAE %.4f); floors: %v\n", newM.MAE, newM.RMSE, newM.MeanPredictorMAE, newF)
	if cur != nil {
		curM, curF := training.Evaluate(cur, holdDS), training.EvaluateFloors(cur, holdDS, floors)
		fmt.Fprintf(stdout, "current model: MAE %.4f  RMSE %.4f; floors: %v (%s)\n", curM.MAE, curM.RMSE, curF, curName)
		if why := notBetter(newM, curM, newF, curF); why != "" {
			return fmt.Errorf("retrain: refusing to write %s: the new model does not beat the current model %s on %d held-out observations: %s; nothing written",
				c.String("out"), curName, holdDS.Len(), why)
		}
	}
	if err := m.Save(c.String("out")); err != nil {
		return err
	}
	info := m.Info()
	fmt.Fprintf(stdout, "wrote %s (format %d, created %s)\n", c.String("out"), info.Format, info.CreatedAt.Format(time.RFC3339))
	if cfg.ModelPath == "" {
		// A file the configuration does not name is never loaded.
		fmt.Fprintln(stdout, "model_path is empty: install the file and set model_path to it (docs/retrain.md#install-the-new-model)")
	}
	return nil
}

// notBetter says why the new model does not beat the current one on the
// held-out set ("" when it does): a lower MAE, and no larger share nor number
// of accepted co-locations below their floor.
func notBetter(newM, curM model.Metrics, newF, curF training.FloorSafety) string {
	var why []string
	if !(newM.MAE < curM.MAE) {
		why = append(why, fmt.Sprintf("MAE %.4f, current %.4f (the new one must be lower)", newM.MAE, curM.MAE))
	}
	const eps = 1e-9
	if newF.BelowShare() > curF.BelowShare()+eps || newF.Below > curF.Below+eps {
		why = append(why, fmt.Sprintf("below floor: %.2f%% of accepted (%.1f), current %.2f%% (%.1f) (the new one must be no higher)",
			100*newF.BelowShare(), newF.Below, 100*curF.BelowShare(), curF.Below))
	}
	return strings.Join(why, "; ")
}

// shortfall says what the data lacks before a model can be trained,
// calibrated and compared ("" when nothing): every shortfall at once, with
// how much more is needed and, from the accumulated observations' times, about
// how long that takes at the rate so far.
func shortfall(site, train, hold []observation.Observation, holdDir string, holdMissing bool, cfg config.Config, now time.Time) string {
	var lines []string
	switch {
	case holdMissing:
		lines = append(lines, fmt.Sprintf("held-out set: %s does not exist: create it (root-owned, mode 0755) and put there at least %d observations you measured yourself (docs/retrain.md#the-held-out-set)", holdDir, minHoldout))
	case len(hold) < minHoldout:
		lines = append(lines, fmt.Sprintf("held-out set %s: %d observations with profiles, needs %d more (observations you measured yourself; docs/retrain.md#the-held-out-set)", holdDir, len(hold), minHoldout-len(hold)))
	}
	users, sitePairs := map[string]bool{}, map[string]bool{}
	for _, o := range site {
		users[o.UID] = true
		sitePairs[observation.PairKey(o)] = true
	}
	pairs, fams := map[string]bool{}, map[string]bool{}
	for _, o := range train {
		pairs[observation.PairKey(o)] = true
		fams[model.Family(o.Tag)] = true
	}
	more := 0
	if len(site) == 0 {
		more = 1
		lines = append(lines, "accumulated observations: none with profiles, needs at least 1 (co-located runs of tagged jobs, recorded by the Epilog)")
	}
	if n := len(train); n < training.DefaultMinResiduals {
		more = max(more, training.DefaultMinResiduals-n)
		lines = append(lines, fmt.Sprintf("training set: %d observations (%d accumulated + %d --pairs), needs %d more (the margins are calibrated on one residual per observation, %d at least)",
			n, len(site), n-len(site), training.DefaultMinResiduals-n, training.DefaultMinResiduals))
	}
	if len(fams) < minFamilies {
		lines = append(lines, fmt.Sprintf("training set: %d application families, needs %d more (the margins are calibrated on families left out one at a time)", len(fams), minFamilies-len(fams)))
	}
	if len(pairs) < training.SeenPairsFolds {
		lines = append(lines, fmt.Sprintf("training set: %d distinct pairs (job and co-runners), needs %d more (the seen-pairs margins leave out pairs in %d folds; n applications make at most n*n pairs of two jobs)",
			len(pairs), training.SeenPairsFolds-len(pairs), training.SeenPairsFolds))
	}
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("retrain: not enough data yet; nothing trained or written:\n")
	for _, l := range lines {
		b.WriteString("  - " + l + "\n")
	}
	p := cfg.Profiling
	fmt.Fprintf(&b, "  The accumulated observations: %d from %d users over %d pairs. Each user counts at most %d per pair and a pair counts once %d users observed it (profiling.min_users), so %d more observations need at least %d more (user, pair) combinations.\n",
		len(site), len(users), len(sitePairs), observation.DefaultMaxPerUser, max(p.MinUsers, 1), more, (more+observation.DefaultMaxPerUser-1)/observation.DefaultMaxPerUser)
	fmt.Fprintf(&b, "  A tagged job's run is observed only once its application has a profile (%d solo runs of at least %.0f s by %d users: profiling.min_runs, min_run_time, min_users) and it shared a GPU.\n",
		p.MinRuns, p.MinRunTime.Seconds(), p.MinUsers)
	if eta := etaAtRate(site, more, now); eta != "" {
		b.WriteString("  " + eta + "\n")
	}
	b.WriteString("  See docs/retrain.md#how-much-data.")
	return b.String()
}

// etaAtRate estimates how long more observations take at the rate the site's
// observations accumulated so far ("" without a rate: fewer than 2, or all
// within an hour).
func etaAtRate(site []observation.Observation, more int, now time.Time) string {
	if more <= 0 {
		return ""
	}
	var first, last time.Time
	n := 0
	for _, o := range site {
		if o.When.IsZero() || o.When.After(now) {
			continue
		}
		n++
		if first.IsZero() || o.When.Before(first) {
			first = o.When
		}
		if o.When.After(last) {
			last = o.When
		}
	}
	span := now.Sub(first)
	if n < 2 || span < time.Hour {
		return ""
	}
	perDay := float64(n) / span.Hours() * 24
	days := float64(more) / perDay
	return fmt.Sprintf("At the rate so far (%.1f counted observations a day over %s), that is about %s more.", perDay, roughDuration(span), roughDuration(time.Duration(days*24*float64(time.Hour))))
}

// roughDuration prints d in hours below two days, else in days.
func roughDuration(d time.Duration) string {
	if h := d.Hours(); h < 48 {
		return fmt.Sprintf("%.0f hours", math.Max(1, math.Ceil(h)))
	}
	return fmt.Sprintf("%.0f days", math.Ceil(d.Hours()/24))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// retrainCatalog is the profile store in dir (at most limit profiles, as the
// plugin loads) plus the profiles of the Lucid solo file solo ("" = none) that
// the store lacks.
func retrainCatalog(dir string, limit int, solo string, stderr io.Writer) (profile.Catalog, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--profiles %s: not a folder", dir)
	}
	st, err := profile.Open(dir)
	if err != nil {
		return nil, err
	}
	cat, problems := st.CatalogMax(limit)
	for _, p := range problems {
		fmt.Fprintf(stderr, "warning: skipped: %v\n", p)
	}
	if cat == nil {
		cat = profile.Catalog{}
	}
	if solo != "" {
		f, err := os.Open(solo)
		if err != nil {
			return nil, fmt.Errorf("--solo: %w", err)
		}
		defer f.Close()
		ps, err := profile.ReadLucidSolo(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", solo, err)
		}
		for _, p := range ps {
			if _, ok := cat[p.Tag]; !ok {
				cat[p.Tag] = p
			}
		}
	}
	if len(cat) == 0 {
		return nil, needsDataError{fmt.Sprintf("retrain: no profiles in %s yet: an application gets one after enough solo runs (docs/retrain.md#how-much-data)", dir)}
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

// readHoldout reads the held-out set, the admin-only folder dir (checked by
// observation.ReadHeldOut against the site folder obsDir). A folder that does
// not exist holds nothing (missing is true): the refusal then says to create it.
func readHoldout(dir, obsDir string, stderr io.Writer) (obs []observation.Observation, missing bool, err error) {
	if dir == "" {
		return nil, false, usagef("retrain: --holdout-dir is empty: the held-out set is an admin-only folder (default %s)", defaultHoldoutDir)
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	obs, problems, err := observation.ReadHeldOut(dir, obsDir)
	if err != nil {
		return nil, false, fmt.Errorf("retrain: --holdout-dir: %w", err)
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "warning: skipped: %v\n", p)
	}
	return obs, false, nil
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
