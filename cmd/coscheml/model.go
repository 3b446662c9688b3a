// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"
)

func modelCommand() *cli.Command {
	return &cli.Command{
		Name:  "model",
		Usage: "inspect the interference model",
		Subcommands: []*cli.Command{{
			Name:  "info",
			Usage: "show the model's kind, size, features, training data and cross-validation",
			Description: "The model is --model FILE, else the config's model_path, else the default\n" +
				"model embedded in the binary. Loading also verifies the file (format\n" +
				"version, checksum), so this is the way to check a model before a swap.\n\n" +
				"Examples:\n" +
				"   coscheml model info\n" +
				"   coscheml --model /var/lib/coscheml/new.model model info --json",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"}},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usageErrorf("model info: unexpected argument %q (use the global --model FILE before the command)", sanitize(c.Args().First()))
				}
				cfg, err := loadConfig(c)
				if err != nil {
					return err
				}
				m, err := loadModel(c)
				if err != nil {
					return err
				}
				in := m.Info()
				in.Path = modelName(modelPath(c, cfg))
				if c.Bool("json") {
					enc := json.NewEncoder(c.App.Writer)
					enc.SetIndent("", "  ")
					return enc.Encode(in)
				}
				_, err = fmt.Fprint(c.App.Writer, in.String())
				return err
			},
		}},
	}
}
