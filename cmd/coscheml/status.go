// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coscheml/coscheml/pkg/metrics"
	"github.com/coscheml/coscheml/pkg/sharestatus"
	"github.com/urfave/cli/v2"
)

// nowFunc is the clock of `status`; tests pin it to their state's time.
var nowFunc = time.Now

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the shared GPUs now: their jobs, predicted and measured speeds, reservations",
		Description: "Reads the residency store (which jobs hold which GPUs), the decision log (decisions\n" +
			"whose jobs have not started yet: reservations) and the observations (measured speeds\n" +
			"of earlier runs of the same tags side by side), from the configuration's paths.\n" +
			"Changes nothing. PREDICTED is the model's speed of the job next to the GPU's other\n" +
			"jobs now (1.000 = as fast as alone); MEASURED the newest observation of the same\n" +
			"tags together (a running job has none of its own yet).\n\n" +
			"Examples:\n" +
			"   coscheml status               # shared GPUs\n" +
			"   coscheml status --all         # every GPU with a coscheml-known job\n" +
			"   coscheml status --json        # for scripts\n" +
			"   coscheml status --prom /var/lib/prometheus/node-exporter/coscheml.prom\n\n" +
			"Exit codes: 0 ok, 1 the residency store cannot be read.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "list every GPU with a job, not only shared ones"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (every GPU with a job)"},
			&cli.StringFlag{Name: "prom", Usage: "also write the sharing metrics to `FILE` (Prometheus text format, for node_exporter's textfile collector)"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageErrorf("status: unexpected argument %q", sanitize(c.Args().First()))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	// Predictions are optional: without a catalog or model status still shows
	// who shares what.
	cat, err := loadCatalog(c)
	if err != nil {
		fmt.Fprintln(c.App.ErrWriter, "coscheml: status: no predictions:", err)
		cat = nil
	}
	m, err := loadModel(c)
	if err != nil {
		fmt.Fprintln(c.App.ErrWriter, "coscheml: status: no predictions:", err)
		m = nil
	}
	src := sharestatus.FromConfig(cfg, cat, m)
	if cfg.DecisionLog != "" {
		// A user who may not read the log reads their own view of it (their
		// reservations): no "permission denied" warning, nobody else's decisions.
		var note string
		if src.DecisionLog, note = decisionSource(cfg.DecisionLog); note != "" {
			src.DecisionLog = ""
		}
	}
	snap, err := sharestatus.Take(src, nowFunc())
	if err != nil {
		return err
	}
	if uid := callerUID(); !seesAll(uid, cfg.DecisionLog) {
		hideOthers(&snap, uid)
	}
	for _, p := range snap.Problems {
		fmt.Fprintln(c.App.ErrWriter, "coscheml: status: warning:", sanitize(p))
	}
	if path := c.String("prom"); path != "" {
		if err := writeStatusMetrics(path, &snap); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, snap)
	}
	return printStatus(c.App.Writer, &snap, cfg.ResidencyDir, c.Bool("all"))
}

// hiddenUser is the user of a job hideOthers hid (its class is hidden too).
const hiddenUser = "(other)"

// hideOthers keeps a caller who may not see every user's jobs (seesAll: root and
// SlurmUser see all) to their own, as Slurm's PrivateData=jobs would: other
// users' jobs stay counted on their GPUs (sharing is what status shows) but lose
// their job id, user, application, class and decision; other users'
// reservations are left out. The residency store is readable by everyone, but
// the CLI must not be the easy way around PrivateData.
func hideOthers(s *sharestatus.Snapshot, uid int) {
	own := map[string]bool{strconv.Itoa(uid): true}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		own[u.Username] = true
	}
	hidden := 0
	for gi := range s.GPUs {
		for ji := range s.GPUs[gi].Jobs {
			j := &s.GPUs[gi].Jobs[ji]
			if own[j.User] {
				continue
			}
			hidden++
			*j = sharestatus.Job{JobID: fmt.Sprintf("hidden-%d", hidden), User: hiddenUser, Shards: j.Shards, Start: j.Start,
				PredictedSpeed: j.PredictedSpeed, Floor: j.Floor, BelowFloor: j.BelowFloor}
		}
	}
	kept := s.Reservations[:0]
	for _, r := range s.Reservations {
		if int64(r.UserID) == int64(uid) {
			kept = append(kept, r)
		}
	}
	s.Reservations = kept
}

func printStatus(w io.Writer, s *sharestatus.Snapshot, dir string, all bool) error {
	jobs := 0
	for _, g := range s.GPUs {
		jobs += len(g.Jobs)
	}
	fmt.Fprintf(w, "%d GPUs in use by %d jobs, %d shared; %d reservations (residency %s, %s)\n",
		len(s.GPUs), jobs, s.SharedGPUs(), len(s.Reservations), dir, s.Time.Format(time.RFC3339))
	if s.StaleEntries > 0 {
		fmt.Fprintf(w, "%d stale residency entries ignored (past their expiry; coscheml-node reconcile removes them)\n", s.StaleEntries)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	shown := 0
	for _, g := range s.GPUs {
		if !g.Shared && !all {
			continue
		}
		if shown == 0 {
			fmt.Fprintln(tw, "\nNODE\tGPU\tJOB\tUSER\tTAG\tCLASS\tSHARDS\tPREDICTED\tFLOOR\tMEASURED\tRUNNING")
		}
		shown++
		for _, j := range g.Jobs {
			shards := "whole"
			if j.Shards > 0 {
				shards = fmt.Sprint(j.Shards)
			}
			pred := speedText(j.PredictedSpeed)
			if j.BelowFloor {
				pred += " BELOW"
			}
			floor := floorText(j.Class, j.Floor, j.User == hiddenUser)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Node, g.Index, j.JobID, orDash(j.User),
				orDash(j.Tag), orDash(j.Class), shards, pred, floor, speedText(j.MeasuredSpeed), ageText(s.Time.Sub(j.Start)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(s.GPUs) == 0:
		fmt.Fprintln(w, "no job holds a GPU in the residency store")
	case shown == 0:
		fmt.Fprintln(w, "no GPU is shared now (coscheml status --all lists every GPU in use)")
	}
	if len(s.Reservations) > 0 {
		fmt.Fprintln(w, "\nreservations: decided by the plugin, job not started yet")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "DECISION\tNODE\tGPU\tACTION\tTAG\tCLASS\tSHARDS\tPREDICTED\tAGE")
		for _, r := range s.Reservations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.DecisionID, r.Node, r.GPU, r.Action, orDash(r.Tag),
				orDash(r.Class), r.Shards, speedText(nonZero(r.PredictedSpeed)), ageText(s.Time.Sub(r.Time)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// ageText words how long ago something started: whole seconds under a minute
// (truncated, so 59.7 s is "59s", not "1m0s"), whole minutes above ("24s", "5m",
// "2h13m"). A start later than now (the node's clock ahead of this host's) is
// said, not shown as a fresh "0s".
func ageText(d time.Duration) string {
	switch {
	case d <= -time.Second:
		return fmt.Sprintf("?(start %s ahead of this clock)", ageText(-d))
	case d < time.Minute:
		return max(d, 0).Truncate(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// floorText words a job's floor; a job without a class (one the plugin never
// classified, e.g. of an untagged or bootstrap run) is held to the strictest
// floor, which is said so the number does not look like its class's. A hidden
// job's class is unknown to the caller, not missing: its floor stays a number.
func floorText(class string, floor float64, hidden bool) string {
	switch {
	case floor <= 0:
		return "-"
	case class == "" && !hidden:
		return fmt.Sprintf("%.2f (no class: strictest)", floor)
	}
	return fmt.Sprintf("%.2f", floor)
}

func speedText(p *float64) string {
	if p == nil {
		return "-"
	}
	return strings.TrimSpace(fmt.Sprintf("%.3f", *p))
}

func nonZero(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}

// writeStatusMetrics writes the snapshot's gauges to path for node_exporter.
func writeStatusMetrics(path string, s *sharestatus.Snapshot) error {
	return metrics.WriteFile(path, s.Metrics())
}
