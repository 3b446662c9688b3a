// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

func paramFlags() []cli.Flag {
	d := training.DefaultParams()
	return []cli.Flag{
		&cli.IntFlag{Name: "forest", Value: d.Trees, Usage: "`N` bagged trees (1 = a single tree)"},
		&cli.IntFlag{Name: "max-depth", Value: d.MaxDepth, Usage: "most splits on a root-to-leaf path (`D`, 1..20)"},
		&cli.IntFlag{Name: "min-leaf", Value: d.MinLeaf, Usage: "fewest training samples in a leaf (`L`)"},
		&cli.IntFlag{Name: "bins", Value: d.Bins, Usage: "split candidates per feature and node (`B`; 0 = every distinct value, slow)"},
		&cli.IntFlag{Name: "max-features", Value: d.MaxFeatures, Usage: "in a forest, offer `K` random features per split (0 = all)"},
		&cli.StringFlag{Name: "features", Value: strings.Join(d.Features, ","), Usage: "comma-separated `NAMES` of the features to split on, or \"all\" (see docs/model.md)"},
		&cli.Int64Flag{Name: "seed", Value: d.Seed, Usage: "`SEED` for bootstrap samples, feature choice and k-fold shuffling"},
	}
}

func paramsFrom(c *cli.Context) (model.Params, error) {
	p := model.Params{
		Trees: c.Int("forest"), MaxDepth: c.Int("max-depth"), MinLeaf: c.Int("min-leaf"),
		Bins: c.Int("bins"), Seed: c.Int64("seed"), MaxFeatures: c.Int("max-features"),
	}
	if f := strings.TrimSpace(c.String("features")); f != "" && f != "all" {
		for _, name := range strings.Split(f, ",") {
			p.Features = append(p.Features, strings.TrimSpace(name))
		}
	}
	if err := training.Validate(p); err != nil {
		return p, usageError{err}
	}
	return p, nil
}

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:  "train",
		Usage: "train a model, report cross-validation, write the model file",
		UsageText: "coscheml-train train --out M [--solo S.csv --pairs P.csv] [--generic-profiles F.csv] [--obs OBS.csv]\n" +
			"                     [--forest N] [--max-depth D] [--min-leaf L] [--max-features K] [--features NAMES|all]\n" +
			"                     [--bins B] [--seed S] [--folds K] [--skip-cv] [--skip-unknown] [--exclude-families F,...] [--class-weighted-coverage]\n" +
			"                     [--plain-seen-margins] [--no-measured-pairs]",
		Description: "Reads solo profiles and co-located observations, runs K-fold and leave-applications-out\n" +
			"cross-validation (an application is a model family: all batch sizes and precisions of\n" +
			"e.g. resnet18 are held out together, and no training sample contains them), prints both\n" +
			"side by side with the mean predictor and the utilization-sum heuristic, then trains on all\n" +
			"samples and writes the model file atomically.",
		Flags: append(append(dataFlags(), paramFlags()...),
			&cli.StringFlag{Name: "out", Usage: "write the model to `FILE` (required)"},
			&cli.IntFlag{Name: "folds", Value: 5, Usage: "`K` for k-fold cross-validation"},
			&cli.BoolFlag{Name: "skip-cv", Usage: "train without cross-validation (the model file then records none)"},
			&cli.BoolFlag{Name: "class-weighted-coverage", Usage: "store no default coverage per floor: every floor (infer's too) is tested at the class-weighted default, as models before per-floor coverage did (less JCT, infer less protected; docs/model.md)"},
			&cli.BoolFlag{Name: "no-measured-pairs", Usage: "answer every pair from the trees, also the pairs the --pairs data measured (by default a measured pair is answered from its measurement; docs/model.md)"},
			&cli.BoolFlag{Name: "plain-seen-margins", Usage: "seen-pairs margins by predicted speed only, the same for every application (as models before format 3); by default they are normalized by the job application's scale (docs/model.md)"},
			&cli.StringFlag{Name: "exclude-families", Usage: "leave out every observation involving these comma-separated `FAMILIES` (e.g. resnet18,mobilenetv3): a model that has never seen them, for the unseen-applications benchmark (docs/evaluation.md)"},
		),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("train: unexpected argument %q", c.Args().First())
			}
			out := c.String("out")
			if out == "" {
				return usagef("train: --out is required")
			}
			p, err := paramsFrom(c)
			if err != nil {
				return err
			}
			k := c.Int("folds")
			if !c.Bool("skip-cv") && k < 2 {
				return usagef("train: --folds %d: want >= 2", k)
			}
			td, err := loadData(c)
			if err != nil {
				return err
			}
			w := c.App.Writer
			td.warnDropped(c.App.ErrWriter)
			if td.excluded > 0 {
				fmt.Fprintf(w, "left out %d observations involving the families %s\n", td.excluded, profile.Sanitize(td.excludedFams))
			}
			fmt.Fprintf(w, "data: %d samples from %s; profiles from %s\n", td.ds.Len(), names(td.obsIn), names(td.profIn))
			var cv model.CVSummary
			var cal, seen model.Calibration
			var sch training.CoverageChoice
			if !c.Bool("skip-cv") {
				t0 := time.Now()
				end := stage(c.App.ErrWriter, fmt.Sprintf("%d-fold cross-validation (%d models)", k, k))
				kf, err := training.KFold(td.ds, k, p, p.Seed)
				end()
				if err != nil {
					return err
				}
				end = stage(c.App.ErrWriter, "leave-families-out cross-validation (one model per application family)")
				lao, err := training.LeaveFamiliesOut(td.ds, p)
				end()
				if err != nil {
					return err
				}
				printReport(w, describe(p), kf, lao)
				var ch training.CoverageChoice
				copts := training.CalibrationOptions{NoFloorCoverage: c.Bool("class-weighted-coverage")}
				if cal, ch, err = training.Calibrate(lao.OutOfFold, copts); err != nil {
					return err
				}
				printCalibration(w, cal, ch)
				end = stage(c.App.ErrWriter, fmt.Sprintf("leave-pairs-out cross-validation (%d models)", training.SeenPairsFolds))
				sopts := copts
				if !c.Bool("plain-seen-margins") {
					sopts = training.SeenCalibrationOptions()
					sopts.NoFloorCoverage = copts.NoFloorCoverage
				}
				seen, sch, err = training.CalibrateSeen(td.ds, p, sopts)
				end()
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "seen-pairs margins (both applications in the training data): default coverage %.3g, margin %.3f at 0.75, %.3f at 0.90%s (nested violation %.2f%%)\n",
					seen.DefaultCoverage, seen.MarginFor(0.75, "", 0), seen.MarginFor(0.9, "", 0), scaledNote(seen), 100*sch.Violation[levelIndex(seen, seen.DefaultCoverage)])
				printFloorCoverage(w, sch)
				fmt.Fprintf(w, "cross-validation took %v\n", time.Since(t0).Round(time.Millisecond))
				cv = model.CVSummary{KFold: kf.Metrics, KFoldK: k, LeaveAppsOut: lao.Metrics, Apps: len(lao.Folds)}
			}
			t0 := time.Now()
			end := stage(c.App.ErrWriter, "training the model on all samples")
			m, err := training.Train(td.ds, p)
			end()
			if err != nil {
				return err
			}
			m.CV = cv
			m.Calibration = cal
			m.SeenCalibration = seen
			if !c.Bool("no-measured-pairs") {
				m.Measured, m.MeasuredSD = td.measured, td.measuredSD
			}
			m.Source = td.source()
			m.CreatedAt = time.Now().UTC().Truncate(time.Second)
			if err := m.Save(out); err != nil {
				return err
			}
			info := m.Info()
			info.Path = out
			fmt.Fprintf(w, "trained in %v\n%s", time.Since(t0).Round(time.Millisecond), info)
			return nil
		},
	}
}

// printCalibration shows the margins at the default floors and how the default
// coverage was chosen.
func printCalibration(w io.Writer, cal model.Calibration, ch training.CoverageChoice) {
	m := model.Model{Calibration: cal}
	fmt.Fprintf(w, "calibration: conformal margins from %d leave-families-out residuals\n", cal.Residuals)
	fmt.Fprintf(w, "%-9s %12s %12s %12s %10s\n", "coverage", "margin@0.75", "margin@0.90", "below floor", "accepted")
	for l, lv := range ch.Levels {
		mark := ""
		if lv == ch.Chosen {
			mark = "  <- default"
		}
		fmt.Fprintf(w, "%-9.3g %12.3f %12.3f %11.2f%% %9.1f%%%s\n", lv, m.Margin(0.75, lv), m.Margin(0.9, lv), 100*ch.Violation[l], 100*ch.Accepted[l], mark)
	}
	fmt.Fprintf(w, "(below floor: share of accepted held-out co-locations measured below their floor, nested leave-families-out; default = lowest coverage with at most %.1f%%)\n", 100*ch.Target)
	printFloorCoverage(w, ch)
	fmt.Fprintln(w)
}

// printFloorCoverage shows, per floor, the nested below-floor share of
// accepted co-locations at each level and the coverage chosen for the floor.
func printFloorCoverage(w io.Writer, ch training.CoverageChoice) {
	if len(ch.FloorChosen) == 0 {
		return
	}
	fmt.Fprintf(w, "%-9s", "per floor")
	for _, f := range ch.Floors {
		fmt.Fprintf(w, " %22s", fmt.Sprintf("floor %.2f: below/acc", f))
	}
	fmt.Fprintln(w)
	for l, lv := range ch.Levels {
		fmt.Fprintf(w, "%-9.3g", lv)
		for f := range ch.Floors {
			mark := " "
			if ch.FloorChosen[f] == lv {
				mark = "*"
			}
			fmt.Fprintf(w, " %12.2f%% %7.1f%%%s", 100*ch.FloorViolation[f][l], 100*ch.FloorAccepted[f][l], mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "(* the default coverage for that floor: a stricter floor gets the lowest coverage at which at most the looser floor's share of its accepted co-locations is below it)\n")
}

// scaledNote says that a normalized calibration's margins are shown at the
// overall scale and how far the applications' scales range.
func scaledNote(c model.Calibration) string {
	if c.Scale <= 0 || len(c.JobScale) == 0 {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range c.JobScale {
		lo, hi = min(lo, v), max(hi, v)
	}
	return fmt.Sprintf(" for an application of the overall scale %.4f (normalized by the job application's scale: %d applications, %.4f-%.4f)", c.Scale, len(c.JobScale), lo, hi)
}

func describe(p model.Params) string {
	if p.Trees > 1 {
		return fmt.Sprintf("forest %dx depth %d leaf %d", p.Trees, p.MaxDepth, p.MinLeaf)
	}
	return fmt.Sprintf("tree depth %d leaf %d", p.MaxDepth, p.MinLeaf)
}

// printReport prints k-fold and leave-apps-out side by side with both baselines,
// then the per-application folds.
func printReport(w io.Writer, label string, kf, lao training.CVReport) {
	fmt.Fprintf(w, "\n%-30s | %-26s | %-26s\n", "", fmt.Sprintf("%d-fold CV (%d samples)", len(kf.Folds), kf.Metrics.Samples),
		fmt.Sprintf("leave-apps-out (%d apps)", len(lao.Folds)))
	fmt.Fprintf(w, "%-30s | %8s %8s %8s | %8s %8s %8s\n", "predictor", "MAE", "RMSE", "AUC", "MAE", "RMSE", "AUC")
	a, b := kf.Metrics, lao.Metrics
	fmt.Fprintf(w, "%-30s | %8.4f %8.4f %8s | %8.4f %8.4f %8s\n", label, a.MAE, a.RMSE, a.ModelAUC, b.MAE, b.RMSE, b.ModelAUC)
	fmt.Fprintf(w, "%-30s | %8.4f %8.4f %8s | %8.4f %8.4f %8s\n", "mean predictor (train mean)", a.MeanPredictorMAE, a.MeanPredictorRMSE, "0.500", b.MeanPredictorMAE, b.MeanPredictorRMSE, "0.500")
	fmt.Fprintf(w, "%-30s | %8s %8s %8s | %8s %8s %8s\n", "util-sum heuristic", "-", "-", a.UtilSumAUC, "-", "-", b.UtilSumAUC)
	fmt.Fprintf(w, "AUC: picking out samples with speed < %.2f (%d of %d)\n\n", model.SlowSpeed, a.SlowSamples, a.Samples)
	fmt.Fprintf(w, "leave-apps-out folds:\n%-16s %6s %6s %8s %8s %8s %8s\n", "held out", "train", "test", "MAE", "meanMAE", "AUC", "utilAUC")
	for _, f := range lao.Folds {
		fmt.Fprintf(w, "%-16s %6d %6d %8.4f %8.4f %8s %8s\n", f.Name, f.Train, f.Test, f.Metrics.MAE, f.Metrics.MeanPredictorMAE, f.Metrics.ModelAUC, f.Metrics.UtilSumAUC)
	}
}

// levelIndex is the index of level lv in cal's levels (the last when absent).
func levelIndex(cal model.Calibration, lv float64) int {
	for i, l := range cal.Levels {
		if l == lv {
			return i
		}
	}
	return len(cal.Levels) - 1
}
