// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/jobprofile"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

const defaultConfig = "/etc/coscheml/coscheml.yaml"

// defaultMaxRuntime is the expiry of a residency entry when the job's time limit is
// unknown to the prolog; reconcile with Slurm's live jobs removes entries sooner.
const defaultMaxRuntime = 7 * 24 * time.Hour

// logger writes to stderr and, when available, syslog (slurmd discards a prolog's
// output, so syslog is where an admin finds it).
type logger struct {
	w  io.Writer
	sl *syslog.Writer
}

func newLogger(stderr io.Writer, useSyslog bool) *logger {
	l := &logger{w: stderr}
	if useSyslog {
		if sl, err := syslog.New(syslog.LOG_WARNING|syslog.LOG_DAEMON, "coscheml-node"); err == nil {
			l.sl = sl
		}
	}
	return l
}

func (l *logger) printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(l.w, "coscheml-node: "+msg)
	if l.sl != nil {
		_ = l.sl.Warning(msg)
	}
}

func (l *logger) close() {
	if l.sl != nil {
		l.sl.Close()
	}
}

// loadConfig reads path; without --config a missing default file means defaults.
// configFlagSet says whether the command line of fs named --config: only a
// file the admin named must exist.
func configFlagSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "config" })
	return set
}

func loadConfig(path string, explicit bool) (config.Config, error) {
	if _, err := os.Stat(path); err != nil && !explicit && errors.Is(err, os.ErrNotExist) {
		return config.Default(), nil
	}
	return config.Load(path)
}

// runHook is the body of prolog and epilog. It always returns 0.
func runHook(kind string, args []string, environ []string, now func() time.Time) int {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	cfgPath := fs.String("config", defaultConfig, "configuration file")
	timeout := fs.Duration("timeout", 30*time.Second, "give up (and exit 0) after this long")
	noSyslog := fs.Bool("no-syslog", false, "log to stderr only")
	log := newLogger(os.Stderr, true)
	defer log.close()
	if err := fs.Parse(args); err != nil {
		// --help has printed the usage already; it is not a problem to log.
		if !errors.Is(err, flag.ErrHelp) {
			log.printf("%s: %v", kind, err)
		}
		return 0
	}
	if *noSyslog {
		log.close()
		log.sl = nil
	}
	explicit := configFlagSet(fs)

	// A hung shared file system must not hold a job: give up after the timeout.
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				log.printf("%s: internal error: %v", kind, r)
			}
		}()
		cfg, err := loadConfig(*cfgPath, explicit)
		if err != nil {
			log.printf("%s: %v; nothing recorded", kind, err)
			return
		}
		if err := checkSharedFolders(cfg); err != nil {
			log.printf("%s: %v; nothing recorded", kind, err)
			return
		}
		env := envMap(environ)
		if kind == "prolog" {
			err = prolog(cfg, env, now(), log)
		} else {
			var cfgArgs []string
			if explicit {
				if abs, aerr := filepath.Abs(*cfgPath); aerr == nil {
					cfgArgs = []string{"--config", abs}
				}
			}
			err = epilog(cfg, env, now(), log, deferToFinisher(cfg, cfgArgs))
		}
		if err != nil {
			log.printf("%s: %v", kind, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(*timeout):
		log.printf("%s: gave up after %v (shared storage slow?)", kind, *timeout)
	}
	return 0
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// jobEnv reads what Slurm tells a Prolog/Epilog about the job.
func jobEnv(env map[string]string) (jobprofile.JobEnv, comment.Directive, error) {
	je := jobprofile.JobEnv{
		JobID:   env["SLURM_JOB_ID"],
		Node:    env["SLURMD_NODENAME"],
		User:    env["SLURM_JOB_USER"],
		Comment: env["SLURM_JOB_COMMENT"],
	}
	if je.User == "" {
		je.User = env["SLURM_JOB_UID"]
	}
	// The uid attributes observations to a user (the per-user cap); a value that is
	// not a uid is left out rather than trusted.
	if observation.ValidateUID(env["SLURM_JOB_UID"]) == nil {
		je.UID = env["SLURM_JOB_UID"]
	}
	if err := residency.ValidJobID(je.JobID); err != nil {
		return je, comment.Directive{}, fmt.Errorf("SLURM_JOB_ID: %w", err)
	}
	if je.Node == "" {
		je.Node, _ = os.Hostname()
		if i := strings.IndexByte(je.Node, '.'); i > 0 {
			je.Node = je.Node[:i]
		}
	}
	d := comment.ParseComment(je.Comment)
	if d.Present && d.Err == nil {
		je.Tag, je.Class = d.Tag, d.Class
	}
	gpus, err := parseGPUs(env["SLURM_JOB_GPUS"])
	if err != nil || len(gpus) == 0 {
		// CUDA_VISIBLE_DEVICES may hold UUIDs; only plain indices are usable.
		if g2, err2 := parseGPUs(env["CUDA_VISIBLE_DEVICES"]); err2 == nil {
			gpus, err = g2, nil
		}
	}
	if err != nil {
		return je, d, fmt.Errorf("job %s: GPU list: %w", je.JobID, err)
	}
	je.GPUs = gpus
	// slurmd names the job's nodes (not the user): a job of several nodes
	// holds the same GPUs on each, and slowing it here slows all of them.
	if hosts, err := hostlist.Expand(env["SLURM_JOB_NODELIST"]); err == nil {
		je.Nodes = len(hosts)
	}
	if code, err := strconv.Atoi(env["SLURM_JOB_EXIT_CODE"]); err == nil {
		je.ExitCode = code
	}
	je.Restarts, _ = restartCount(env)
	return je, d, nil
}

// nodeCount is an entry's Nodes: the job's node count when it has several, else
// 0 (omitted, as entries of one node were written before the field).
func nodeCount(n int) int {
	if n > 1 {
		return n
	}
	return 0
}

// restartCount reads SLURM_JOB_RESTART_COUNT, which slurmd gives the Prolog and
// the Epilog (from the job's credential; 22.05 and later): how often the job has
// been requeued. ok is false when it is missing or not a count.
func restartCount(env map[string]string) (n int, ok bool) {
	s := env["SLURM_JOB_RESTART_COUNT"]
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > residency.MaxRestarts {
		return 0, false
	}
	return n, true
}

// parseGPUs reads "0,2" or "0-3" style index lists.
func parseGPUs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad GPU index %q", profile.Sanitize(part))
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad GPU range %q", profile.Sanitize(part))
			}
		}
		for g := a; g <= b; g++ {
			if g < 0 || g >= residency.MaxGPUsPerNode {
				return nil, fmt.Errorf("GPU index %d out of range", g)
			}
			out = append(out, g)
		}
	}
	return out, nil
}

func prolog(cfg config.Config, env map[string]string, now time.Time, log *logger) error {
	je, d, err := jobEnv(env)
	if err != nil {
		return err
	}
	if d.Present && d.Err != nil {
		log.printf("prolog: job %s: comment: %v (recorded as untagged)", je.JobID, d.Err)
	}
	if len(je.GPUs) == 0 {
		return nil // no GPU: nothing to record or profile
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		return err
	}
	if je.Class == "" && je.Tag != "" {
		// No class= in the comment: placement judged the job by its
		// profile's class, and so must the guard and explain.
		je.Class = profileClass(cfg, je.Tag)
	}
	// Shards per GPU: the plugin's decision (its token: the plugin removes
	// every token it did not write for this job), else what slurmd says the
	// job holds on the node (SLURM_SHARDS_ON_NODE, a total, split over its
	// GPUs). Never from the job's own environment.
	shards := d.Shards
	if len(d.GPUs) > 1 {
		// K shards on each of several GPUs: slurmd names only the last of them
		// here (measured on 22.05.8 and 26.05.3), the token names them all.
		if slices.Contains(d.GPUs, je.GPUs[len(je.GPUs)-1]) {
			je.GPUs = slices.Clone(d.GPUs)
		} else {
			log.printf("prolog: job %s: its decision names GPUs %v, slurmd gives it %v: recorded as slurmd says", je.JobID, d.GPUs, je.GPUs)
		}
	}
	if shards == 0 {
		if n, err := strconv.Atoi(env["SLURM_SHARDS_ON_NODE"]); err == nil && n > 0 {
			shards = max(n/len(je.GPUs), 1)
		}
	}
	expires := now.Add(defaultMaxRuntime)
	if end, err := strconv.ParseInt(env["SLURM_JOB_END_TIME"], 10, 64); err == nil && end > now.Unix() {
		expires = time.Unix(end, 0)
	}
	en := residency.Entry{JobID: je.JobID, Node: je.Node, GPUs: je.GPUs, Nodes: nodeCount(je.Nodes), Shards: shards, Tag: je.Tag, Class: je.Class,
		DecisionID: d.DecisionID, User: clip(je.User, 64), Restarts: je.Restarts, Start: now, Expires: expires}
	// Alone: no other job holds any of these GPUs (read before our own entry).
	alone := true
	if res, err := store.List(now, 10*time.Minute); err == nil {
		for _, o := range res.Entries {
			if o.Node == je.Node && o.JobID != je.JobID && overlaps(o.GPUs, je.GPUs) {
				alone = false
			}
		}
	} else {
		alone = false
	}
	if err := store.Start(en); err != nil {
		return err
	}
	if err := jobprofile.Prolog(cfg, je, alone); err != nil {
		return fmt.Errorf("profiling job %s: %w", je.JobID, err)
	}
	return nil
}

// profileClass is tag's profile class, "" when it has no profile (or the
// store cannot be read: the guard then resolves it from the profile itself).
func profileClass(cfg config.Config, tag string) profile.Class {
	ps, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		return ""
	}
	p, err := ps.Get(tag)
	if err != nil {
		return ""
	}
	return p.Class
}

// keeper decides what happens to a collected run; the Epilog's is the detached
// finisher (deferToFinisher), tests substitute their own.
type keeper func(run *jobprofile.Run) error

// deferToFinisher saves the run as pending and starts `coscheml-node finish`,
// which waits for the job's final state (the Epilog cannot know it).
func deferToFinisher(cfg config.Config, cfgArgs []string) keeper {
	return func(run *jobprofile.Run) error {
		_, err := jobprofile.Defer(cfg, run, "", append([]string{"finish"}, cfgArgs...))
		return err
	}
}

// epilog ends the job's residency, then collects its run (stopping any sampler)
// and hands it to keep; a job that exited non-zero is dropped here already.
// The run is the one the Prolog recorded: its tag and class are the Prolog's (a
// running job's comment can be changed with scontrol update, so the comment at
// job end says nothing about what ran), and so is its run number. A run Slurm
// has requeued since it started is not kept.
func epilog(cfg config.Config, env map[string]string, now time.Time, log *logger, keep keeper) error {
	je, _, err := jobEnv(env)
	if err != nil {
		return err
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		return err
	}
	endRestarts, endKnown := restartCount(env)
	start := now
	var coRuns []jobprofile.CoRunInterval
	en, endErr := store.End(je.JobID, je.Node, now)
	switch {
	case endErr == nil:
		start = en.Start
		je.Tag, je.Class, je.Restarts = en.Tag, en.Class, en.Restarts
		// The Prolog's record: slurmd names only the last GPU of a job of
		// several shard Types, the Prolog read them all.
		je.GPUs = en.GPUs
		ivs, err := store.CoRuns(je.Node, en.GPUs, je.JobID, en.Start, now)
		if err != nil {
			log.printf("epilog: job %s: co-runners: %v", je.JobID, err)
		}
		for _, iv := range ivs {
			coRuns = append(coRuns, jobprofile.CoRunInterval{Start: iv.Start, End: iv.End, CoTags: iv.CoTags})
		}
	case errors.Is(endErr, os.ErrNotExist) && len(je.GPUs) == 0:
		// A job without GPUs: the prolog recorded nothing.
	default:
		log.printf("epilog: job %s: residency: %v", je.JobID, endErr)
	}
	// Always called: it stops a sampler the prolog may have started (without the
	// Prolog's record, the comment's tag is the only hint that one runs).
	run, err := jobprofile.Collect(cfg, je, start, now, coRuns)
	if err != nil {
		err = fmt.Errorf("profiling job %s: %w", je.JobID, err)
	}
	if run == nil || keep == nil {
		return err
	}
	// Without the Prolog's record there is no run: Collect had no start time.
	if endKnown && endRestarts != en.Restarts {
		log.printf("epilog: job %s (%s): requeued (this was run %d, Slurm is at run %d); its run is not kept", je.JobID, je.Tag, en.Restarts, endRestarts)
		return err
	}
	if kerr := keep(run); kerr != nil {
		return errors.Join(err, fmt.Errorf("job %s: %w; its run is not kept", je.JobID, kerr))
	}
	return err
}

func overlaps(a, b []int) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// checkSharedFolders refuses to work as root in a shared folder that group or
// other users can write: they could plant symlinks or files for root to follow
// or overwrite. Folders that do not exist yet are created 0755 later.
func checkSharedFolders(cfg config.Config) error {
	for _, f := range []struct{ key, dir string }{
		{"residency_dir", cfg.ResidencyDir}, {"profile_dir", cfg.ProfileDir},
		{"observation_dir", cfg.ObservationDir}, {"profiling run folder", jobprofile.RunDir(cfg)},
	} {
		if f.dir == "" {
			continue
		}
		fi, err := os.Stat(f.dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", f.key, f.dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s %s: not a folder", f.key, f.dir)
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 {
			return fmt.Errorf("%s %s is group- or world-writable (mode %04o): refusing to write there as root; run `chmod go-w %s`", f.key, f.dir, perm, f.dir)
		}
	}
	return nil
}
