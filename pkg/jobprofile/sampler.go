// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
)

// SamplerOptions is what the detached sampler process needs; the Prolog passes
// them as flags (`coscheml-node sampler`, whose flags and signals live in
// cmd/coscheml-node).
type SamplerOptions struct {
	Dir       string        // the job's sampler folder (absolute)
	Backend   string        // nvml or mock
	Interval  time.Duration // sampling interval, at least 10ms
	GPUs      []int         // GPU indices (empty: all)
	MaxRounds int           // stop after this many rounds (0: no limit)
	MaxLife   time.Duration // stop after this long
}

// ErrSamplerUsage marks options that are not usable (exit code 2 of the program).
var ErrSamplerUsage = errors.New("sampler usage")

// Check validates the options.
func (o SamplerOptions) Check() error {
	if o.Dir == "" || !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("%w: --dir must name an absolute folder", ErrSamplerUsage)
	}
	if o.Interval < 10*time.Millisecond || o.MaxRounds < 0 || o.MaxLife <= 0 {
		return fmt.Errorf("%w: --interval must be at least 10ms, --max-rounds >= 0, --max-life > 0", ErrSamplerUsage)
	}
	return nil
}

// RunSampler appends readings to <dir>/samples.csv until ctx ends (the program
// cancels it on SIGTERM from the Epilog), the round limit, MaxLife, or the
// removal of <dir> (an Epilog that found no pid file), whichever comes first.
// Problems go into the sample file as notes too, so that the Epilog can put them
// into the profile or its error.
func RunSampler(ctx context.Context, o SamplerOptions) error {
	if err := o.Check(); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(o.Dir, samplesFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	defer f.Close()
	w := nvml.NewWriter(f)
	fail := func(err error) error {
		_ = w.Note(err.Error(), true)
		return fmt.Errorf("sampler: %w", err)
	}
	b, err := nvml.Open(o.Backend)
	if err != nil {
		return fail(err)
	}
	if err := b.Init(); err != nil {
		return fail(err)
	}
	defer b.Shutdown()
	s, err := nvml.NewSampler(b, o.GPUs, w)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.MaxLife)
	defer cancel()
	go watchDir(ctx, o.Dir, cancel)

	err = s.Run(ctx, o.Interval, o.MaxRounds)
	if errors.Is(err, nvml.ErrNoGPUs) {
		return nil // noted per GPU already; the samples so far stand
	}
	if err != nil {
		return fail(err)
	}
	return nil
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
