// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/redecide"
	"github.com/coscheml/coscheml/pkg/safetext"
	"github.com/coscheml/coscheml/pkg/version"
	"github.com/urfave/cli/v2"
)

func redecideCommand() *cli.Command {
	return &cli.Command{
		Name:  "redecide",
		Usage: "re-decide deferred \"wait\" jobs through scontrol update (run as SlurmUser or root next to slurmctld)",
		Description: "With wait_defer > 0 the plugin defers a tagged job that nothing fits (its begin time\n" +
			"becomes now + wait_defer; it keeps a whole-GPU request as the fail-safe). This command\n" +
			"lists such jobs (squeue) and sends each, in submit order, an `scontrol update` of its\n" +
			"own comment and GPU request: job_modify hands it to the plugin, which decides again\n" +
			"on a fresh view: placed (shared, or on an idle GPU that others may join later; the\n" +
			"job becomes eligible now) or deferred again. Only updates by SlurmUser or root may\n" +
			"change other users' jobs, so run it as one of them (coscheml-redecide.service).\n" +
			"With --loop it runs every --interval: all deferred jobs when the set of running jobs\n" +
			"changed, each at least every wait_defer/2 otherwise; at most --max-per-pass updates a\n" +
			"pass, the jobs re-decided least recently first.\n\n" +
			"Examples:\n" +
			"   coscheml redecide               # one pass\n" +
			"   coscheml redecide --loop        # the service\n\n" +
			"With --loop it also renews a heartbeat file (redecide_heartbeat; default redecide.alive\n" +
			"beside the decision log) after every pass that listed the queue, and removes it when\n" +
			"stopped: the plugin defers waits only while that heartbeat is fresh.\n\n" +
			"With a backup controller (SlurmctldHost listed more than once) the service runs on\n" +
			"every controller host; the loop asks `scontrol ping` every 10 s which one is in control\n" +
			"(the first that answers) and a standby host's loop re-decides nothing and writes no\n" +
			"heartbeat until its controller takes over (--standby-check=false turns this off).\n\n" +
			"Exit codes: 0 ok (also --loop with wait_defer 0: nothing to do), 1 the queue cannot be\n" +
			"listed, 2 usage (wait_defer is 0 without --loop).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "loop", Usage: "run until stopped (SIGTERM), a pass every --interval"},
			&cli.DurationFlag{Name: "interval", Value: 2 * time.Second, Usage: "time between passes with --loop"},
			&cli.IntFlag{Name: "max-per-pass", Value: 20, Usage: "most updates per pass (0: no bound); the jobs re-decided least recently go first"},
			&cli.StringFlag{Name: "squeue", Value: "squeue", Usage: "squeue `PROGRAM`"},
			&cli.StringFlag{Name: "scontrol", Value: "scontrol", Usage: "scontrol `PROGRAM`"},
			&cli.BoolFlag{Name: "standby-check", Value: true, Usage: "on a standby controller host (scontrol ping names another in control) re-decide nothing"},
			&cli.BoolFlag{Name: "user-views", Value: true, Usage: "with --loop, as root: copy each user's decisions into a file only that user may read (<decision_log folder>/by-user/UID.log), for `coscheml explain` and `status`"},
		},
		Action: runRedecide,
	}
}

func runRedecide(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageErrorf("redecide: unexpected argument %q", sanitize(c.Args().First()))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	views := c.Bool("loop") && c.Bool("user-views") && cfg.DecisionLog != "" && os.Geteuid() == 0
	if cfg.WaitDefer <= 0 && views {
		// Nothing to re-decide, but users still need their decisions.
		ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		fmt.Fprintf(c.App.ErrWriter, "coscheml: redecide: start %s: wait_defer is 0, nothing to re-decide; publishing the per-user decision views in %s only\n",
			version.String(), decisionlog.UserViewDir(cfg.DecisionLog))
		publishViews(ctx, viewPublisher(cfg), c.Duration("interval"), c.App.ErrWriter)
		fmt.Fprintln(c.App.ErrWriter, "coscheml: redecide: stopped")
		return nil
	}
	if cfg.WaitDefer <= 0 {
		if c.Bool("loop") {
			// The service starts with slurmctld wherever the plugin is installed:
			// a site that turned deferral off gets one line, not a restart loop.
			fmt.Fprintln(c.App.ErrWriter, "coscheml: redecide: wait_defer is 0 in the configuration: the plugin defers no job, so the loop has nothing to do and exits")
			return nil
		}
		return usageErrorf("redecide: wait_defer is 0 in the configuration: the plugin defers no job, there is nothing to re-decide")
	}
	interval := c.Duration("interval")
	if interval < 100*time.Millisecond || interval > cfg.WaitDefer/2 {
		return usageErrorf("redecide: --interval %s is out of range: want 100ms..wait_defer/2 (%s), so a deferred job is decided again before its begin time", interval, cfg.WaitDefer/2)
	}
	if c.Int("max-per-pass") < 0 {
		return usageErrorf("redecide: --max-per-pass %d: want >= 0", c.Int("max-per-pass"))
	}
	host := ""
	if c.Bool("standby-check") {
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("redecide: this host's name, for --standby-check: %w", err)
		}
	}
	errw := c.App.ErrWriter
	l := &redecide.Loop{
		Run: runSlurm, Squeue: c.String("squeue"), Scontrol: c.String("scontrol"),
		Refresh: cfg.WaitDefer / 2, MaxPerPass: c.Int("max-per-pass"), Heartbeat: cfg.HeartbeatPath(), Host: host,
		Log: func(format string, a ...any) {
			fmt.Fprintln(errw, "coscheml: redecide:", sanitizeLine(fmt.Sprintf(format, a...)))
		},
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if c.Bool("loop") {
		// The start line says which program and configuration run: its log is
		// otherwise silent while no job is deferred.
		standby := "off"
		if host != "" {
			standby = "on (this host " + host + ")"
		}
		// Its own limit: four paths make it longer than a pass's line may be.
		fmt.Fprintln(errw, "coscheml: redecide:", safetext.Limit(fmt.Sprintf(
			"start %s: config %s: wait_defer=%s interval=%s refresh=%s max_per_pass=%d heartbeat=%s standby_check=%s squeue=%s scontrol=%s",
			version.String(), cmpOr(configPath(c), "(built-in defaults)"), cfg.WaitDefer, interval, l.Refresh, l.MaxPerPass,
			cmpOr(l.Heartbeat, "(none)"), standby, l.Squeue, l.Scontrol), 4096))
		if views {
			done := make(chan struct{})
			go func() {
				defer close(done)
				publishViews(ctx, viewPublisher(cfg), interval, errw)
			}()
			defer func() { <-done }()
		}
		err := l.Forever(ctx, interval)
		l.Log("stopped")
		return err
	}
	n, err := l.Pass(ctx, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "re-decided %d deferred job(s)\n", n)
	return nil
}

// runSlurm runs a Slurm client with a timeout; its stderr goes into the error.
func runSlurm(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), redecide.TimeEnv)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, args[0], err, sanitizeLine(strings.TrimSpace(stderr.String())))
	}
	return string(out), nil
}

// viewPublisher publishes cfg's decision log and the guard's events
// (guard.event_dir) into the per-user views.
func viewPublisher(cfg config.Config) *decisionlog.ViewPublisher {
	return &decisionlog.ViewPublisher{LogPath: cfg.DecisionLog, GuardDir: cfg.Guard.EventDir, MaxPerUser: decisionlog.MaxUserView}
}

// publishViews copies each user's decisions and the guard's events about their
// jobs into their own view (decisionlog.ViewPublisher) whenever a log changed,
// checked every interval, until ctx ends; only the views whose records changed
// are rewritten. A failure is logged once per distinct message; the
// re-decisions go on regardless.
func publishViews(ctx context.Context, pub *decisionlog.ViewPublisher, interval time.Duration, errw io.Writer) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	lastErr := ""
	for {
		now := logStamps(pub)
		if now != last {
			if _, err := pub.Publish(); err != nil {
				if msg := err.Error(); msg != lastErr {
					fmt.Fprintln(errw, "coscheml: redecide:", sanitizeLine(msg))
					lastErr = msg
				}
			} else {
				last, lastErr = now, ""
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logStamps words the size and time of every log the views are made of: the
// decision log, the guard's logs and their rotated files.
func logStamps(pub *decisionlog.ViewPublisher) string {
	paths := []string{pub.LogPath}
	if pub.GuardDir != "" {
		logs, _ := filepath.Glob(filepath.Join(pub.GuardDir, "*.log"))
		paths = append(paths, logs...)
	}
	var b strings.Builder
	for _, p := range paths {
		for _, f := range []string{p + ".1", p} {
			if st, err := os.Stat(f); err == nil {
				fmt.Fprintf(&b, "%s %d %d\n", f, st.ModTime().UnixNano(), st.Size())
			}
		}
	}
	return b.String()
}
