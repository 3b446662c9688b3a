// SPDX-License-Identifier: Apache-2.0

// Command coscheml-train trains, cross-validates and evaluates coscheml's
// interference model (pkg/model) from application profiles and observations of
// co-located runs. With no data flags it uses the Lucid data built into the binary.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/coscheml/coscheml/pkg/cliextra"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// Exit codes scripts can rely on.
const (
	exitOK      = 0
	exitFailure = 1 // the operation failed (bad or unreadable file, training error, ...)
	exitUsage   = 2 // bad flags or arguments
	// A missing input file, as `coscheml` says for an unknown tag, job or file.
	exitNotFound = 3
	// retrain: not enough data yet to train, calibrate and compare a model.
	exitNeedsData = 4
)

// usageError marks an error in how the program was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run is main without the process exit, so tests can drive the whole CLI.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.Run(args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "coscheml-train:", err)
	var ue usageError
	var nd needsDataError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &nd):
		return exitNeedsData
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, profile.ErrNotFound):
		return exitNotFound
	}
	return exitFailure
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "coscheml-train",
		Usage: "train and evaluate coscheml's GPU interference model",
		Description: "The model predicts the normalized speed (1.0 = as fast as alone) of a job sharing a GPU\n" +
			"with co-runners, from their solo profiles. `train` fits a golearn CART tree (or a bagged\n" +
			"forest), reports k-fold and leave-applications-out cross-validation against the mean\n" +
			"predictor and the utilization-sum heuristic, and writes a model file. `eval` scores a model\n" +
			"file on any pair file. Without --solo/--pairs both use the Lucid data built into the binary.\n\n" +
			"Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found (a missing file or profile), 4 not enough\n" +
			"data yet (retrain).",
		Commands: []*cli.Command{
			trainCommand(),
			evalCommand(),
			infoCommand(),
			retrainCommand(),
		},
		Writer:         stdout,
		ErrWriter:      stderr,
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the exit code
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q (see --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	cliextra.Extend(app) // --version, completion, man page
	for _, cmd := range app.Commands {
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = onUsageError
		}
	}
	return app
}
