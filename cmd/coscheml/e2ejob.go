// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/emulate"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/urfave/cli/v2"
)

// e2eJobCommand is the emulated GPU job of the trace replay on real Slurm
// (make e2e, docs/evaluation.md "On real Slurm: trace replay"). Hidden: it is a
// measuring instrument run by the replay's batch scripts, not a user command.
func e2eJobCommand() *cli.Command {
	return &cli.Command{
		Name:   "e2e-job",
		Hidden: true,
		Usage:  "emulated GPU job of the end-to-end replay: advances --work seconds at its true co-located speed",
		Description: "Run inside a Slurm batch job. Reads its GPU from SLURM_JOB_GPUS (or\n" +
			"CUDA_VISIBLE_DEVICES), its co-runners from the residency records the node\n" +
			"Prolog writes (the config's residency_dir), and advances its work at the\n" +
			"true speed of the measured pair table (the simulator's ground truth).\n" +
			"Writes RESULTS/<job id>.json when done.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tag", Required: true, Usage: "the job's application"},
			&cli.StringFlag{Name: "class", Required: true, Usage: "hpc, train or infer (its speed floor)"},
			&cli.Float64Flag{Name: "work", Required: true, Usage: "seconds of work at solo speed"},
			&cli.StringFlag{Name: "results", Required: true, Usage: "folder for the result record"},
			&cli.DurationFlag{Name: "interval", Value: 500 * time.Millisecond, Usage: "how often co-runners are re-read"},
			&cli.StringFlag{Name: "pairs", Usage: "ground-truth pair CSV (default: the embedded Lucid pairs)"},
			&cli.StringFlag{Name: "pairs-format", Value: "lucid", Usage: "format of --pairs: lucid or generic"},
			&cli.StringFlag{Name: "solo", Usage: "solo-profile CSV (Lucid format) for --pairs"},
		},
		Action: runE2EJob,
	}
}

func runE2EJob(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	tt, err := loadTruth(c)
	if err != nil {
		return err
	}
	tag := c.String("tag")
	if err := profile.ValidateTag(tag); err != nil {
		return usageErrorf("--tag: %v", err)
	}
	if _, ok := tt.Index(tag); !ok {
		return usageErrorf("--tag %q: not in the ground-truth table", tag)
	}
	class, err := profile.ParseClass(c.String("class"))
	if err != nil {
		return usageErrorf("--class: %v", err)
	}
	jobID, node := os.Getenv("SLURM_JOB_ID"), os.Getenv("SLURMD_NODENAME")
	if err := residency.ValidJobID(jobID); err != nil {
		return fmt.Errorf("e2e-job: SLURM_JOB_ID: %w (run it inside a Slurm job)", err)
	}
	if node == "" {
		return fmt.Errorf("e2e-job: SLURMD_NODENAME is not set (run it inside a Slurm job)")
	}
	gpu, err := emulate.GPUFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	j := emulate.Job{JobID: jobID, Node: node, GPU: gpu, Tag: tag, Class: class, Work: c.Float64("work"),
		Floor: cfg.SpeedFloor.For(class)}
	res, err := emulate.Run(ctx, j, emulate.TruthSpeeds{T: tt},
		emulate.ResidencyCoRunners(store, node, gpu, jobID, time.Minute), emulate.Options{Interval: c.Duration("interval")})
	if err != nil {
		return err
	}
	return emulate.Write(c.String("results"), res)
}
