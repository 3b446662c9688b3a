// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/emulate"
	"github.com/coscheml/coscheml/pkg/nvml"
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
			&cli.Float64Flag{Name: "grow-mem-mib", Usage: "after --grow-after, report this much GPU memory (MiB) instead of the profile's: a job that grows past its budget"},
			&cli.DurationFlag{Name: "grow-after", Usage: "when --grow-mem-mib takes effect, from the job's start"},
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
	gpus, err := emulate.GPUsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		return err
	}
	grow := c.Float64("grow-mem-mib")
	if !(grow >= 0 && grow <= 1<<24) {
		return usageErrorf("--grow-mem-mib %v: want 0..16777216", grow)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	j := emulate.Job{JobID: jobID, Node: node, GPUs: gpus, Tag: tag, Class: class, Work: c.Float64("work"),
		Floor: cfg.SpeedFloor.For(class)}
	interval := c.Duration("interval")
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	opts := emulate.Options{Interval: interval, Stopped: stoppedSignal(interval)}
	var skip func(string) bool
	if dir := cfg.Guard.EmulatedMetricsDir; dir != "" {
		// The guard reads what this job reports as NVML would report its
		// process; a co-runner the guard suspended is stopped and slows no one.
		skip = emulate.StoppedInDir(dir, node, gpus)
		rep, err := newReadingWriter(cfg, dir, node, gpus, jobID, tag, grow, c.Duration("grow-after"))
		if err != nil {
			return err
		}
		defer rep.remove()
		opts.Report = rep.report
	}
	res, err := emulate.Run(ctx, j, emulate.TruthSpeeds{T: tt},
		emulate.ResidencyCoRunnersExcept(store, node, gpus, jobID, time.Minute, skip), opts)
	if err != nil {
		return err
	}
	return emulate.Write(c.String("results"), res)
}

// stoppedSignal is emulate.Options.Stopped for a process Slurm may suspend
// (SIGSTOP, later SIGCONT): it reports a SIGCONT seen, or a gap between two
// calls far longer than the interval (the SIGCONT not delivered yet).
func stoppedSignal(interval time.Duration) func() bool {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	maxGap := 4*interval + 2*time.Second
	last := time.Now()
	return func() bool {
		now := time.Now()
		gap := now.Sub(last) > maxGap
		last = now
		select {
		case <-cont:
			return true
		default:
			return gap
		}
	}
}

// readingWriter writes the job's reading on each of its GPUs for the guard
// (nvml.DirReading): its SM share as the ground truth says it runs (speed x its
// profile's solo SM utilization: a job of several GPUs runs at its slowest
// GPU's pace on all of them) and its memory (the profile's, or --grow-mem-mib
// once grown).
type readingWriter struct {
	dir, node, jobID string
	gpus             []int
	soloSM, memMiB   float64
	totalMiB         float64
	grow             float64
	growAt           time.Time
	failed           bool
}

func newReadingWriter(cfg config.Config, dir, node string, gpus []int, jobID, tag string, grow float64, growAfter time.Duration) (*readingWriter, error) {
	ps, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		return nil, fmt.Errorf("e2e-job: profiles: %w", err)
	}
	p, err := ps.Get(tag)
	if err != nil {
		return nil, fmt.Errorf("e2e-job: profile of %s: %w", tag, err)
	}
	return &readingWriter{dir: dir, node: node, gpus: gpus, jobID: jobID, soloSM: p.SMUtil.Mean, memMiB: p.MemUsedMiB,
		totalMiB: cfg.Cluster.GPUMemoryMiB, grow: grow, growAt: time.Now().Add(growAfter)}, nil
}

func (w *readingWriter) report(now time.Time, speed float64, co [][]string) {
	mem := w.memMiB
	if w.grow > 0 && !now.Before(w.growAt) {
		mem = w.grow
	}
	const mib = 1 << 20
	for i, gpu := range w.gpus {
		r := nvml.DirReading{JobID: w.jobID, PID: uint32(os.Getpid()), MemBytes: uint64(min(mem, w.totalMiB) * mib),
			MemTotal: uint64(w.totalMiB * mib), SMUtil: min(100, max(0, speed*w.soloSM)),
			Busy: i < len(co) && len(co[i]) > 0 && speed < 1, At: nvml.ReadingNow(now)}
		if err := nvml.WriteDirReading(w.dir, w.node, gpu, r); err != nil && !w.failed {
			// Said once: the run itself goes on (its result is still measured).
			w.failed = true
			fmt.Fprintf(os.Stderr, "e2e-job: %v\n", err)
		}
	}
}

func (w *readingWriter) remove() {
	for _, gpu := range w.gpus {
		_ = nvml.RemoveDirReading(w.dir, w.node, gpu, w.jobID)
	}
}
