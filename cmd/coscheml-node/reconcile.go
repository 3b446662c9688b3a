// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// runReconcile removes residency entries of jobs that ended without an epilog:
// past their expiry + grace, and, given Slurm's list of live jobs (`squeue -h -o %A`,
// from cron or EpilogSlurmctld, never from inside job_submit), jobs Slurm no longer
// knows. It also prunes, by age, what only root can remove: done markers and
// leftover temp files (run it as root). Exit 0 on success, 1 on failure, 2 on bad
// usage.
func runReconcile(args []string, stdin io.Reader, stdout, stderr io.Writer, now time.Time) int {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfig, "configuration file")
	grace := fs.Duration("grace", 10*time.Minute, "keep entries this long past their expiry")
	live := fs.String("live", "", "file with the live job ids, one per line (`-` = stdin); empty: expiry only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	explicit := configFlagSet(fs)
	cfg, err := loadConfig(*cfgPath, explicit)
	if err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
		return 1
	}
	var liveIDs map[string]bool
	liveAt := now
	if *live != "" {
		var r io.Reader = stdin
		if *live != "-" {
			f, err := os.Open(*live)
			if err != nil {
				fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
				return 1
			}
			defer f.Close()
			if fi, err := f.Stat(); err == nil {
				liveAt = fi.ModTime() // the list is as old as the file
			}
			r = f
		}
		if liveIDs, err = residency.ParseLiveJobs(r); err != nil {
			fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
			return 1
		}
	}
	if err := checkSharedFolders(cfg); err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
		return 1
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
		return 1
	}
	if _, err := os.Stat(cfg.ResidencyDir); err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
		return 1
	}
	res, err := store.Reconcile(now, *grace, liveIDs, liveAt)
	if err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
		return 1
	}
	for _, e := range res.Expired {
		fmt.Fprintf(stdout, "removed job %s on %s: past its expiry %s\n", e.JobID, e.Node, e.Expires.Format(time.RFC3339))
	}
	for _, e := range res.Gone {
		fmt.Fprintf(stdout, "removed job %s on %s: not among Slurm's live jobs\n", e.JobID, e.Node)
	}
	for _, n := range res.Corrupt {
		fmt.Fprintf(stdout, "removed unreadable entry %s\n", n)
	}
	for _, n := range res.TmpRemoved {
		fmt.Fprintf(stdout, "removed leftover temp file %s\n", n)
	}
	fmt.Fprintf(stdout, "reconcile: %d expired, %d gone, %d unreadable removed; %d leftover temp files, %d done markers pruned\n",
		len(res.Expired), len(res.Gone), len(res.Corrupt), len(res.TmpRemoved), res.DonePruned)
	// Runs whose finisher never decided (a node that rebooted meanwhile) go too.
	pruned, perr := prunePending(jobprofile.PendingDir(cfg), now, pendingTTL)
	if perr != nil {
		res.Problems = append(res.Problems, perr)
	}
	if pruned > 0 {
		fmt.Fprintf(stdout, "removed %d pending runs older than %v (their finisher never decided)\n", pruned, pendingTTL)
	}
	if err := errors.Join(res.Problems...); err != nil {
		fmt.Fprintln(stderr, "coscheml-node reconcile:", err)
	}
	if res.MoreProblems > 0 {
		fmt.Fprintf(stderr, "coscheml-node reconcile: and %d more problems not shown\n", res.MoreProblems)
	}
	return 0
}

// pendingTTL is how long a pending run may wait: far past the finisher's own limit.
const pendingTTL = 24 * time.Hour

// prunePending removes pending runs (and their logs) older than ttl.
func prunePending(dir string, now time.Time, ttl time.Duration) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pending runs: %w", err)
	}
	n := 0
	for _, de := range ents {
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) <= ttl {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err == nil && strings.HasSuffix(de.Name(), ".json") {
			n++
		}
	}
	return n, nil
}
