// SPDX-License-Identifier: Apache-2.0

// Command coscheml is the admin and user CLI of coscheml.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/coscheml/coscheml/pkg/cliextra"
	"github.com/urfave/cli/v2"
)

// Exit codes scripts can rely on.
const (
	exitOK       = 0
	exitFailure  = 1 // the operation failed (I/O, corrupt file, ...)
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // unknown tag, job or file
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI with args (args[0] is the program name) and returns the exit
// code; tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	if err := app.Run(args); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "coscheml:", msg)
		}
		return exitCode(err)
	}
	return exitOK
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "coscheml",
		Usage: "interference-aware GPU co-location for Slurm",
		Description: "Co-scheML profiles GPU applications, predicts how much co-located jobs slow\n" +
			"each other down, and shares GPUs only where the prediction is safe.\n\n" +
			"Global flags go before the command:\n" +
			"   coscheml --config ./coscheml.yaml predict resnet18-bs32 pointnet-bs32-amp\n\n" +
			"Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found (tag, job, file).",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "config",
				Usage:   "configuration `FILE` (default: /etc/coscheml/coscheml.yaml if it exists, else built-in defaults)",
				EnvVars: []string{"COSCHEML_CONFIG"},
			},
			&cli.StringFlag{
				Name:    "model",
				Usage:   "interference model `FILE` (default: the config's model_path, else the embedded default model)",
				EnvVars: []string{"COSCHEML_MODEL"},
			},
		},
		Commands: []*cli.Command{
			profileCommand(),
			predictCommand(),
			placeCommand(),
			modelCommand(),
			explainCommand(),
			simulateCommand(),
			statusCommand(),
			preflightCommand(),
			redecideCommand(),
			e2eJobCommand(), // hidden: the emulated job of make e2e
		},
		// A bare "coscheml" or an unknown command is a usage error, not a silent
		// success.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("unknown command %q (see coscheml --help)", sanitize(c.Args().First()))
			}
			_ = cli.ShowAppHelp(c)
			return usageErrorf("no command given")
		},
		// Errors are printed and mapped to exit codes by run, not by urfave/cli
		// calling os.Exit behind our back.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	cliextra.Extend(app) // --version, completion, man page
	wireProfileRun(app)
	app.OnUsageError = onUsageError
	for _, cmd := range app.Commands {
		markUsageErrors(cmd)
	}
	return app
}

// wireProfileRun makes `profile run` (profile_run.go) a subcommand of `profile`
// (profile.go) unless profile.go already lists it: the two files have different
// owners, and the CLI must have it exactly once.
func wireProfileRun(app *cli.App) {
	run := profileRunCommand()
	for _, cmd := range app.Commands {
		if cmd.Name != "profile" {
			continue
		}
		for _, sub := range cmd.Subcommands {
			if sub.Name == run.Name {
				return
			}
		}
		cmd.Subcommands = append(cmd.Subcommands, run)
	}
}

// markUsageErrors makes flag-parsing errors of cmd and its subcommands usage
// errors (exit 2).
func markUsageErrors(cmd *cli.Command) {
	if cmd.OnUsageError == nil {
		cmd.OnUsageError = onUsageError
	}
	for _, sub := range cmd.Subcommands {
		markUsageErrors(sub)
	}
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	return &usageError{msg: err.Error() + " (see --help)"}
}
