// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// profileRunCommand is `coscheml profile run`: profile a command run by hand, the
// way the node Prolog/Epilog profile a Slurm job.
func profileRunCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a command, sample its GPUs with NVML, and store its profile",
		UsageText: "coscheml profile run --tag T [--class hpc|train|infer] [--interval D] [--backend nvml|mock]\n" +
			"                     [--store DIR] [--throughput-file F] [--samples F] -- CMD [ARGS...]",
		Description: "Runs CMD and samples the GPUs in CUDA_VISIBLE_DEVICES (all GPUs when it is unset) every\n" +
			"interval until CMD exits, then writes the profile of tag T: mean, p95 and max of each NVML\n" +
			"metric, the sample count, and CMD's wall time as its solo run time. Run it while no other\n" +
			"job uses those GPUs: NVML's counters are per GPU, not per process.\n\n" +
			"Exit code: CMD's own (128+N if a signal N ended it). The profile is written only when CMD\n" +
			"succeeds. If NVML is not available, CMD is not run and the exit code is 1; a failure to\n" +
			"write the profile after CMD succeeded is also 1. See docs/profiling.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tag", Usage: "application `TAG` to profile (required)"},
			&cli.StringFlag{Name: "class", Usage: "`CLASS` hpc, train or infer (default: the existing profile's; required for a new tag)"},
			&cli.DurationFlag{Name: "interval", Usage: "sampling `INTERVAL` (default: the config's profiling.interval)"},
			&cli.StringFlag{Name: "backend", Usage: "`BACKEND` nvml or mock (default: the config's profiling.backend)"},
			&cli.StringFlag{Name: "store", Usage: "profile store `DIR` (default: the config's profile_dir)"},
			&cli.StringFlag{Name: "throughput-file", Usage: "`FILE` in which CMD writes its throughput (one number); stored as solo throughput"},
			&cli.StringFlag{Name: "samples", Usage: "also write the raw samples to `FILE`"},
		},
		Action: profileRunAction,
	}
}

func profileRunAction(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return usageErrorf("profile run: no command given (put it after --)")
	}
	tag := c.String("tag")
	if tag == "" {
		return usageErrorf("profile run: --tag is required")
	}
	if err := profile.ValidateTag(tag); err != nil {
		return &usageError{msg: "profile run: " + err.Error()}
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	backendName := cfg.Profiling.Backend
	if c.IsSet("backend") {
		backendName = c.String("backend")
	}
	interval := cfg.Profiling.Interval
	if c.IsSet("interval") {
		interval = c.Duration("interval")
	}
	if interval < 10*time.Millisecond || interval > time.Hour {
		return usageErrorf("profile run: --interval %s: want 10ms..1h", interval)
	}
	storeDir := cfg.ProfileDir
	if c.IsSet("store") {
		storeDir = c.String("store")
	}
	store, err := profile.Open(storeDir)
	if err != nil {
		return err
	}
	prev, err := store.Get(tag)
	if err != nil && !errors.Is(err, profile.ErrNotFound) {
		fmt.Fprintf(c.App.ErrWriter, "coscheml: warning: the existing profile will be replaced: %v\n", err)
		prev = nil
	}
	var class profile.Class
	switch {
	case c.IsSet("class"):
		if class, err = profile.ParseClass(c.String("class")); err != nil {
			return &usageError{msg: "profile run: " + err.Error()}
		}
	case prev != nil:
		class = prev.Class
	default:
		return usageErrorf("profile run: --class is required: %s has no profile yet", tag)
	}

	b, err := nvml.Open(backendName)
	if err != nil {
		return &usageError{msg: "profile run: " + err.Error()}
	}
	if err := b.Init(); err != nil {
		return fmt.Errorf("profile run: %w; the command was not run", err)
	}
	defer b.Shutdown()
	gpus, err := visibleGPUs(b)
	if err != nil {
		return fmt.Errorf("profile run: %w", err)
	}

	var sum nvml.Summary
	sink := nvml.Sink(&sum)
	if path := c.String("samples"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("profile run: --samples: %w", err)
		}
		defer f.Close()
		sink = nvml.Tee(&sum, nvml.NewWriter(f))
	}
	sampler, err := nvml.NewSampler(b, gpus, sink)
	if err != nil {
		return fmt.Errorf("profile run: %w", err)
	}

	code, elapsed, sampleErr, err := runSampled(c, argv, sampler, interval)
	if err != nil {
		return err
	}
	if code != 0 {
		return cli.Exit(fmt.Sprintf("profile run: command exited with status %d; no profile written", code), code)
	}
	if sampleErr != nil && !errors.Is(sampleErr, nvml.ErrNoGPUs) {
		fmt.Fprintf(c.App.ErrWriter, "coscheml: warning: sampling stopped early: %v\n", sampleErr)
	}
	if sum.Rounds() == 0 {
		return fmt.Errorf("profile run: no samples taken: %s", strings.Join(sum.Notes(), "; "))
	}

	p := &profile.Profile{Tag: tag, Class: class}
	sum.Fill(p)
	p.SoloRuntimeS = elapsed.Seconds()
	if tp, err := jobprofile.ReadThroughputFile(c.String("throughput-file")); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "coscheml: warning: %v\n", err)
	} else if tp > 0 {
		p.SoloThroughput = tp
	} else if prev != nil {
		p.SoloThroughput = prev.SoloThroughput
	}
	p.CollectedAt = time.Now().UTC()
	if h, err := os.Hostname(); err == nil && profile.CheckText(h) == nil {
		p.CollectedOn = h
	}
	p.Source = "coscheml profile run (nvml)"
	if b.Kind() == "mock" {
		p.Source = "coscheml profile run (nvml mock backend: simulated DGX H200, not real GPU data)"
	}
	if err := store.Put(p); err != nil {
		return fmt.Errorf("profile run: %w", err)
	}
	printRunSummary(c.App.Writer, p, store.Dir())
	return nil
}

// visibleGPUs returns the GPUs CUDA would give the command: CUDA_VISIBLE_DEVICES,
// or every GPU (nil) when it is unset.
func visibleGPUs(b nvml.Backend) ([]int, error) {
	v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if !set {
		return nil, nil
	}
	idx, uuids, err := nvml.VisibleDevices(v)
	if err != nil {
		return nil, err
	}
	byUUID, err := nvml.ResolveUUIDs(b, uuids)
	if err != nil {
		return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: %w", err)
	}
	gpus := append(idx, byUUID...)
	if len(gpus) == 0 {
		return nil, errors.New("CUDA_VISIBLE_DEVICES is empty: no GPU to profile")
	}
	return gpus, nil
}

// runSampled runs argv with the sampler going until it exits, forwarding SIGINT and
// SIGTERM to it. It returns the command's exit code (128+N for signal N), its wall
// time and the sampler's error; err is set only if the command could not start.
func runSampled(c *cli.Context, argv []string, s *nvml.Sampler, interval time.Duration) (code int, elapsed time.Duration, sampleErr, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = c.App.Writer
	cmd.Stderr = c.App.ErrWriter
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	start := time.Now()
	if err := cmd.Start(); err != nil {
		code := exitFailure
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127 // the shell's "command not found"
		}
		return 0, 0, nil, cli.Exit(fmt.Sprintf("profile run: %v", err), code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, interval, jobprofile.MaxSampleRows) }()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	for loop := true; loop; {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case werr = <-waited:
			loop = false
		}
	}
	elapsed = time.Since(start)
	cancel()
	sampleErr = <-done

	code = 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return 0, elapsed, sampleErr, fmt.Errorf("profile run: %w", werr)
		}
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return code, elapsed, sampleErr, nil
}

func printRunSummary(w io.Writer, p *profile.Profile, dir string) {
	fmt.Fprintf(w, "profile %s (%s) written to %s: %d samples over %.1f s on %s\n",
		p.Tag, p.Class, dir, p.Samples, p.DurationS, p.GPUModel)
	fmt.Fprintf(w, "  sm util %.1f%% mean, %.1f%% p95; mem bw util %.1f%% mean, %.1f%% p95; mem used %.0f MiB max\n",
		p.SMUtil.Mean, p.SMUtil.P95, p.MemBWUtil.Mean, p.MemBWUtil.P95, p.MemUsedMiB)
	fmt.Fprintf(w, "  pcie tx %.1f / rx %.1f MB/s mean; power %.1f W mean; sm clock %.0f MHz mean; solo run time %.2f s\n",
		p.PCIeTxMBps.Mean, p.PCIeRxMBps.Mean, p.PowerW.Mean, p.SMClockMHz.Mean, p.SoloRuntimeS)
	if p.Partial {
		fmt.Fprintf(w, "  PARTIAL: %s\n", p.PartialNote)
	} else if p.PartialNote != "" {
		fmt.Fprintf(w, "  notes: %s\n", p.PartialNote)
	}
}
