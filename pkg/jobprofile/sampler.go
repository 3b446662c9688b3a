package jobprofile

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
)

// SamplerMain is the body of the detached sampler process that Prolog starts
// (`coscheml-node sampler ARGS...`); it returns the process exit code.
//
// It appends readings to <dir>/samples.csv until SIGTERM (the Epilog), the round
// limit, --max-life, or the removal of <dir> (an Epilog that found no pid file),
// whichever comes first. Problems go into the sample file as notes, so that the
// Epilog can put them into the profile or its error.
func SamplerMain(args []string) int {
	return samplerMain(args, os.Stderr)
}

func samplerMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the job's sampler folder (required)")
	backend := fs.String("backend", "nvml", "nvml or mock")
	interval := fs.Duration("interval", 500*time.Millisecond, "sampling interval")
	gpuList := fs.String("gpus", "", "GPU indices, comma-separated (empty: all)")
	maxRounds := fs.Int("max-rounds", MaxSampleRows, "stop after this many rounds (0: no limit)")
	maxLife := fs.Duration("max-life", MaxSamplerLife, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *dir == "" || !filepath.IsAbs(*dir) {
		fmt.Fprintln(stderr, "sampler: --dir must name an absolute folder, and no arguments may follow the flags")
		return 2
	}
	if *interval < 10*time.Millisecond || *maxRounds < 0 || *maxLife <= 0 {
		fmt.Fprintln(stderr, "sampler: --interval must be at least 10ms, --max-rounds >= 0, --max-life > 0")
		return 2
	}
	gpus, err := nvml.ParseGPUList(*gpuList)
	if err != nil {
		fmt.Fprintln(stderr, "sampler:", err)
		return 2
	}
	f, err := os.OpenFile(filepath.Join(*dir, samplesFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(stderr, "sampler:", err)
		return 1
	}
	defer f.Close()
	w := nvml.NewWriter(f)
	fail := func(err error) int {
		fmt.Fprintln(stderr, "sampler:", err)
		_ = w.Note(err.Error(), true)
		return 1
	}

	b, err := nvml.Open(*backend)
	if err != nil {
		return fail(err)
	}
	if err := b.Init(); err != nil {
		return fail(err)
	}
	defer b.Shutdown()
	s, err := nvml.NewSampler(b, gpus, w)
	if err != nil {
		return fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxLife)
	defer cancel()
	go watchDir(ctx, *dir, cancel)

	err = s.Run(ctx, *interval, *maxRounds)
	if errors.Is(err, nvml.ErrNoGPUs) {
		return 0 // noted per GPU already; the samples so far stand
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// watchDir cancels when the job's folder disappears.
func watchDir(ctx context.Context, dir string, cancel func()) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				cancel()
				return
			}
		}
	}
}
