// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/nvml"
)

// runSampler is the detached sampler process the profiling Prolog starts
// (`coscheml-node sampler ARGS...`): flags and signals here, the sampling in
// jobprofile.RunSampler. Exit 0 when done, 1 on failure, 2 on bad usage.
func runSampler(args []string) int { return samplerMain(args, os.Stderr) }

func samplerMain(args []string, stderr io.Writer) int {
	o, err := parseSamplerFlags(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sampler:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if err := jobprofile.RunSampler(ctx, o); err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, jobprofile.ErrSamplerUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// parseSamplerFlags reads the flags the Prolog passes (jobprofile's launcher).
func parseSamplerFlags(args []string, stderr io.Writer) (jobprofile.SamplerOptions, error) {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o jobprofile.SamplerOptions
	fs.StringVar(&o.Dir, "dir", "", "the job's sampler folder (required)")
	fs.StringVar(&o.Backend, "backend", "nvml", "nvml or mock")
	fs.DurationVar(&o.Interval, "interval", 500*time.Millisecond, "sampling interval")
	gpuList := fs.String("gpus", "", "GPU indices, comma-separated (empty: all)")
	fs.IntVar(&o.MaxRounds, "max-rounds", jobprofile.MaxSampleRows, "stop after this many rounds (0: no limit)")
	fs.DurationVar(&o.MaxLife, "max-life", jobprofile.MaxSamplerLife, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, errors.New("no arguments may follow the flags")
	}
	gpus, err := nvml.ParseGPUList(*gpuList)
	if err != nil {
		return o, err
	}
	o.GPUs = gpus
	return o, o.Check()
}
