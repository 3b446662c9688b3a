// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/model/training"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// loadModel loads --model, or the default model when it is empty.
func loadModel(c *cli.Context) (*model.Model, string, error) {
	return model.Current(c.String("model"))
}

func modelFlag() cli.Flag {
	return &cli.StringFlag{Name: "model", Usage: "model `FILE` (default: the built-in default model)"}
}

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "score a model on a pair file (its applications may be unseen in training)",
		UsageText: "coscheml-train eval [--model M] [--solo S.csv --pairs P.csv] [--generic-profiles F.csv] [--obs OBS.csv] [--json]",
		Description: "Predicts every observation's speed and prints MAE and RMSE, the mean predictor's MAE\n" +
			"(predicting the model's training mean), and ROC AUC for picking out samples with speed\n" +
			"< 0.85, scored by the model and by the sum of the solo GPU utilizations.",
		Flags: append(dataFlags(), modelFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the metrics as JSON"}),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("eval: unexpected argument %q", c.Args().First())
			}
			m, name, err := loadModel(c)
			if err != nil {
				return err
			}
			td, err := loadData(c)
			if err != nil {
				return err
			}
			td.warnDropped(c.App.ErrWriter)
			met := training.Evaluate(m, td.ds)
			w := c.App.Writer
			if c.Bool("json") {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(met)
			}
			fmt.Fprintf(w, "model %s on %s (%d samples, %d slow < %.2f)\n", name, names(td.obsIn), met.Samples, met.SlowSamples, model.SlowSpeed)
			fmt.Fprintf(w, "%-28s %8s %8s %8s\n", "predictor", "MAE", "RMSE", "AUC")
			fmt.Fprintf(w, "%-28s %8.4f %8.4f %8s\n", "model", met.MAE, met.RMSE, met.ModelAUC)
			fmt.Fprintf(w, "%-28s %8.4f %8.4f %8s\n", "mean predictor (train mean)", met.MeanPredictorMAE, met.MeanPredictorRMSE, "0.500")
			fmt.Fprintf(w, "%-28s %8s %8s %8s\n", "util-sum heuristic", "-", "-", met.UtilSumAUC)
			if m.TrainDigest == td.ds.Digest() {
				fmt.Fprintln(w, "note: this is the model's own training set, so these figures are in-sample;\n"+
					"      `coscheml-train train` reports cross-validated ones.")
			}
			return nil
		},
	}
}

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:        "info",
		Usage:       "print a model file's summary (format, params, training digest, CV metrics)",
		UsageText:   "coscheml-train info [FILE | --model FILE] [--json]",
		Description: "FILE (or --model FILE) is a model file; without either, the default model.",
		Flags:       []cli.Flag{modelFlag(), &cli.BoolFlag{Name: "json", Usage: "print as JSON"}},
		Action: func(c *cli.Context) error {
			path := c.String("model")
			switch {
			case c.NArg() > 1:
				return usagef("info: unexpected argument %q", profile.Sanitize(c.Args().Get(1)))
			case c.NArg() == 1 && path != "":
				return usagef("info: give the model file once: %q or --model %q", profile.Sanitize(c.Args().First()), profile.Sanitize(path))
			case c.NArg() == 1:
				path = c.Args().First()
			}
			m, name, err := model.Current(path)
			if err != nil {
				return err
			}
			in := m.Info()
			in.Path = name
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			}
			fmt.Fprint(c.App.Writer, in)
			return nil
		},
	}
}
