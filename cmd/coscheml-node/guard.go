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
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/decisionlog"
	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/metrics"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/version"
)

// runGuard is `coscheml-node guard`: the runtime guard of this node, a
// long-running service (coscheml-guard.service). It exits 0 on SIGTERM or
// SIGINT, 1 when the configuration cannot be used, 2 on bad usage; a missing or
// broken NVML is not a reason to exit (it retries every period).
func runGuard(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("guard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfig, "configuration file")
	node := fs.String("node", "", "this node's Slurm NodeName (default: the short host name)")
	noSyslog := fs.Bool("no-syslog", false, "log to stderr only")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := newLogger(stderr, !*noSyslog)
	defer log.close()
	explicit := configFlagSet(fs)
	cfg, err := loadConfig(*cfgPath, explicit)
	if err != nil {
		log.printf("guard: %v", err)
		return 1
	}
	if *node == "" {
		h, err := os.Hostname()
		if err != nil {
			log.printf("guard: no --node and no host name: %v", err)
			return 1
		}
		*node, _, _ = strings.Cut(h, ".")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	svc, err := newGuardService(cfg, *node, log.printf)
	if err != nil {
		log.printf("guard: %v", err)
		return 1
	}
	defer svc.close()
	svc.run(ctx)
	log.printf("guard: stopped (%v)", context.Cause(ctx))
	return 0
}

// guardService is the guard's loop and everything it writes.
type guardService struct {
	cfg  config.Config
	gcfg guard.Config
	node string
	logf func(string, ...any)
	now  func() time.Time
	// nvml is the bounded backend, made once: a hung init then parks one
	// goroutine, and later inits fail at once until it returns, rather than one
	// parked goroutine per retry.
	nvml     nvml.Backend
	procRoot string
	mapper   guard.ProcessMapper // nil: the cgroups under procRoot
	emulated *nvml.DirBackend    // set with guard.emulated_metrics_dir
	jobs     guard.JobSource
	act      *trackingActuator // nil: dry run
	events   *decisionlog.Writer
	counts   *guardCounters
	uids     uidCache
	seen     map[string]time.Time // observe events written recently
	seq      uint64

	g     *guard.Guard
	noted map[string]time.Time // lines logged by note, when
	// savedSuspended is the record of suspended jobs last written (or read).
	savedSuspended string
}

// guardConfig is the site's guard configuration (guard.FromConfig, shared with
// the simulator).
func guardConfig(cfg config.Config) (guard.Config, error) { return guard.FromConfig(cfg) }

func newGuardService(cfg config.Config, node string, logf func(string, ...any)) (*guardService, error) {
	// The node name selects residency entries and names the event log file.
	if !hostlist.ValidName(node) {
		return nil, fmt.Errorf("invalid node name %q", profile.Sanitize(node))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gcfg, err := guardConfig(cfg)
	if err != nil {
		return nil, err
	}
	store, err := residency.Open(cfg.ResidencyDir)
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	profiles, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	s := &guardService{cfg: cfg, gcfg: gcfg, node: node, logf: logf, now: time.Now, procRoot: "/proc",
		jobs:   newResidencyJobs(store, profiles, node, time.Now, logf),
		counts: newGuardCounters(time.Now()), uids: uidCache{m: map[string]uint32{}}, seen: map[string]time.Time{}, noted: map[string]time.Time{}}
	s.nvml = nvml.WithTimeout(nvml.NewReal(), cfg.Guard.NVMLTimeout)
	if d := cfg.Guard.EmulatedMetricsDir; d != "" {
		// Evaluation only (make e2e): the emulated jobs' readings stand in for
		// NVML, and they name their own jobs. DirBackend.Init refuses a folder
		// an ordinary user could write.
		dir := nvml.NewDirBackend(d, node)
		s.emulated = dir
		s.nvml = nvml.WithTimeout(dir, cfg.Guard.NVMLTimeout)
		s.mapper = dirMapper{dir}
	}
	if !cfg.Guard.DryRun {
		s.act = &trackingActuator{inner: &slurmActuator{timeout: cfg.Guard.CommandTimeout, logf: logf, node: node},
			retryAfter: defaultRetryAfter, now: func() time.Time { return s.now() }}
	}
	if cfg.Guard.EventDir != "" {
		// The writer creates the folder; a failed write is logged (once per 10
		// minutes), never a reason to stop guarding.
		s.events = decisionlog.NewWriter(guardEventPath(cfg.Guard.EventDir, node), 0, 0)
	}
	return s, nil
}

// guardEventPath is this node's event log in dir.
func guardEventPath(dir, node string) string { return filepath.Join(dir, node+".log") }

func (s *guardService) close() {
	if s.events != nil {
		s.events.Close()
	}
	if s.g != nil {
		_ = s.nvml.Shutdown()
	}
}

// run starts the guard and runs a round every period until ctx ends.
func (s *guardService) run(ctx context.Context) {
	c := s.cfg.Guard
	s.logf("guard: start %s on node %s: enabled=%t dry_run=%t period=%v nvml_timeout=%v command_timeout=%v event_log=%q state_dir=%q metrics_file=%q actions hpc=%s/%s train=%s/%s infer=%s/%s (memory/floor) floors hpc=%v train=%v infer=%v",
		version.String(), s.node, c.Enabled, c.DryRun, c.Period, c.NVMLTimeout, c.CommandTimeout, s.eventPath(), c.StateDir, c.MetricsFile,
		c.Actions.HPC.Memory, c.Actions.HPC.Floor, c.Actions.Train.Memory, c.Actions.Train.Floor, c.Actions.Infer.Memory, c.Actions.Infer.Floor,
		s.gcfg.Floors.HPC, s.gcfg.Floors.Train, s.gcfg.Floors.Infer)
	if c.EmulatedMetricsDir != "" {
		s.logf("guard: EVALUATION ONLY: reading emulated GPUs from %s instead of NVML (guard.emulated_metrics_dir); never on a production node", c.EmulatedMetricsDir)
	}
	if !c.Enabled {
		// Waiting, not exiting: a unit that exits would be restarted or reported failed.
		s.logf("guard: disabled (guard.enabled: false); idle until stopped")
		<-ctx.Done()
		return
	}
	t := time.NewTicker(c.Period)
	defer t.Stop()
	lastMetrics := time.Time{}
	for {
		acted := s.step(s.now())
		if c.MetricsFile != "" && (acted || s.now().Sub(lastMetrics) >= time.Minute) {
			if err := metrics.WriteFile(c.MetricsFile, s.counts.families(s.now())); err != nil {
				s.note(s.now(), "guard: %v", err)
			}
			lastMetrics = s.now()
		}
		select {
		case <-ctx.Done():
			if c.MetricsFile != "" {
				_ = metrics.WriteFile(c.MetricsFile, s.counts.families(s.now()))
			}
			return
		case <-t.C:
		}
	}
}

func (s *guardService) eventPath() string {
	if s.cfg.Guard.EventDir == "" {
		return ""
	}
	return guardEventPath(s.cfg.Guard.EventDir, s.node)
}

// note logs a line at most once per 10 minutes while it repeats: a stuck
// condition (no driver, an unwritable file) is said, not said every period.
func (s *guardService) note(now time.Time, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if last, ok := s.noted[line]; ok && now.Sub(last) < noteEvery {
		return
	}
	if len(s.noted) >= 256 {
		for k, t := range s.noted {
			if now.Sub(t) >= noteEvery {
				delete(s.noted, k)
			}
		}
	}
	s.noted[line] = now
	s.logf("%s", line)
}

const noteEvery = 10 * time.Minute

// step runs one round (opening NVML first if it is not open); it reports whether
// an action other than observe was taken.
func (s *guardService) step(now time.Time) bool {
	if s.g == nil {
		b := s.nvml
		if err := b.Init(); err != nil {
			s.counts.round(true)
			s.note(now, "guard: NVML unavailable: %v; retrying every %v", err, s.cfg.Guard.Period)
			return false
		}
		var act guard.Actuator
		if s.act != nil {
			act = s.act
		}
		// The guard's own lines go through note: an action retried every period
		// after a failure says so once per 10 minutes, not every period.
		glog := func(format string, args ...any) { s.note(s.now(), format, args...) }
		var mapper guard.ProcessMapper = guard.CgroupMapper{Root: s.procRoot}
		if s.mapper != nil {
			mapper = s.mapper
		}
		mon := guard.NewMonitor(b, mapper, s.logf)
		g, err := guard.New(s.gcfg, mon, s.jobs, act, glog)
		if err != nil {
			s.note(now, "guard: %v", err)
			return false
		}
		s.g = g
		s.logf("guard: NVML open (%s)", b.Kind())
		s.restoreSuspensions()
	}
	if s.act != nil {
		s.act.reset()
	}
	res, err := s.g.Round(now)
	s.saveSuspensions(now)
	if s.emulated != nil {
		for _, p := range s.emulated.Problems() {
			s.logf("guard: %s", p)
		}
	}
	s.counts.round(false)
	s.counts.gpuReads(res.GPUs, res.Unhealthy)
	if err != nil {
		s.note(now, "guard: %v", err)
		return false
	}
	s.writeObservations(res.Observations)
	jobs := map[string]guard.Job{}
	if len(res.Actions) > 0 {
		if js, err := s.jobs.Jobs(); err == nil {
			for _, j := range js {
				jobs[j.ID] = j
			}
		}
	}
	acted := false
	for _, a := range res.Actions {
		outcome := s.outcome(a)
		if a.Kind != guard.Observe && outcome != "failed" {
			acted = true
		}
		s.counts.action(string(jobs[a.JobID].Class), string(a.Kind), outcome)
		s.event(now, a, jobs, outcome)
	}
	return acted
}

// writeObservations keeps the round's early observations of pairs as rows in
// observation_dir, where the pair memory reads them at its next refresh: the
// same co-location is stopped while the job still runs, not after it ends.
// Only speed findings next to exactly one co-runner are rows (a measurement
// next to several is not evidence about any one pair); the round has already
// applied the per-user cap. A row that cannot be written is logged.
func (s *guardService) writeObservations(obs []guard.Observation) {
	if s.cfg.ObservationDir == "" || len(obs) == 0 {
		return
	}
	var rows []observation.Observation
	for _, o := range obs {
		if o.Kind != guard.SpeedBelowFloor || len(o.CoTags) != 1 || o.Tag == "" || o.CoTags[0] == "" {
			continue
		}
		row := observation.Observation{Tag: o.Tag, Class: o.Class, CoTags: o.CoTags, Speed: o.Speed,
			Source: "guard", JobID: o.JobID, Node: s.node, When: o.When.UTC().Truncate(time.Second),
			UID: s.uids.observationUID(o.User)}
		if err := observation.Sane(row); err != nil {
			s.note(o.When, "guard: no observation of job %s: %v", o.JobID, err)
			continue
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return
	}
	if err := os.MkdirAll(s.cfg.ObservationDir, 0o755); err != nil {
		s.note(rows[0].When, "guard: observations: %v", err)
		return
	}
	if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, s.node+".csv"), rows...); err != nil {
		s.note(rows[0].When, "guard: observations: %v", err)
	}
}

// outcome says what became of an action: observed, taken, dry-run or failed.
func (s *guardService) outcome(a guard.Action) string {
	switch {
	case a.Kind == guard.Observe:
		return "observed"
	case s.act == nil:
		return "dry-run"
	case s.act.failed(a.Kind, a.JobID):
		return "failed"
	}
	return "taken"
}

// observeEvery bounds the events of a finding that is only observed: it holds
// for many rounds, and one line per 10 minutes says it.
const observeEvery = 10 * time.Minute

// event writes a to the node's event log as a decision-log record (op "guard")
// of the job acted on. When that job is a co-runner of the job whose floor was
// breached, the slowed job gets a record too, so that its owner's `coscheml
// explain` shows what was done for it; that record names neither the co-runner
// nor its owner.
func (s *guardService) event(now time.Time, a guard.Action, jobs map[string]guard.Job, outcome string) {
	if s.events == nil {
		return
	}
	if a.Kind == guard.Observe {
		key := a.JobID + "|" + a.Trigger + "|" + strconv.Itoa(a.GPU)
		if last, ok := s.seen[key]; ok && now.Sub(last) < observeEvery {
			return
		}
		s.seen[key] = now
		if len(s.seen) > 4096 {
			for k, t := range s.seen {
				if now.Sub(t) >= observeEvery {
					delete(s.seen, k)
				}
			}
		}
	}
	s.logEvent(now, a.JobID, jobs[a.JobID], string(a.Kind), outcome, a.GPU, a.Reason)
	if a.Trigger != "" && a.Trigger != a.JobID && a.Kind != guard.Resume {
		s.logEvent(now, a.Trigger, jobs[a.Trigger], string(a.Kind)+"-co-runner", outcome, a.GPU,
			fmt.Sprintf("coscheml guard: this job was held below its speed floor on gpu %d; the guard's answer was to %s a co-runner placed later or less protected (outcome: %s)",
				a.GPU, a.Kind, outcome))
	}
}

func (s *guardService) logEvent(now time.Time, jobID string, j guard.Job, action, outcome string, gpu int, reason string) {
	s.seq++
	rec := decisionlog.Record{
		ID: "g" + strconv.FormatInt(now.UnixMilli(), 36) + "-" + strconv.FormatUint(s.seq, 36), Time: now, Op: decisionlog.OpGuard,
		JobID: jobID, UserID: s.uids.lookup(j.User), Tag: j.Tag, Class: string(j.Class),
		Outcome: outcome, Action: action, Node: s.node, GPU: gpu, Reason: reason,
	}
	if !s.events.Log(rec) {
		s.note(now, "guard: event log queue full; events dropped")
	}
	if err := s.events.Err(); err != nil {
		s.note(now, "guard: event log: %v", err)
	}
}

// uidCache maps user names to uids for the event log (explain and the per-user
// views show a user only their own jobs' records); a name that does not
// resolve maps to decisionlog.NoUser, whose records are in no user's view.
type uidCache struct {
	mu sync.Mutex
	m  map[string]uint32
}

// nobodyUID attributes the early observations of a user that does not resolve:
// they share one per-user cap.
const nobodyUID = 65534

func (c *uidCache) lookup(name string) uint32 {
	if name == "" {
		return decisionlog.NoUser
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if uid, ok := c.m[name]; ok {
		return uid
	}
	uid := decisionlog.NoUser
	if u, err := user.Lookup(name); err == nil {
		if n, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			uid = uint32(n)
		}
	} else if n, err := strconv.ParseUint(name, 10, 32); err == nil && observation.ValidateUID(name) == nil {
		uid = uint32(n) // the Prolog records the uid when Slurm gave no user name
	}
	if len(c.m) < 4096 {
		c.m[name] = uid
	}
	return uid
}

// observationUID is the uid an early observation of user's job is attributed
// to (the per-user cap): a user that does not resolve counts as nobody.
func (c *uidCache) observationUID(name string) string {
	uid := c.lookup(name)
	if uid == decisionlog.NoUser {
		uid = nobodyUID
	}
	return strconv.FormatUint(uint64(uid), 10)
}

// residencyJobs is the guard's JobSource: the residency entries of this node,
// each with its tag's solo profile.
type residencyJobs struct {
	reader   *residency.Reader
	profiles *profile.Store
	node     string
	now      func() time.Time
	logf     func(string, ...any)
	cache    map[string]cachedProfile
}

type cachedProfile struct {
	p  *profile.Profile
	at time.Time
}

// profileTTL: profiles change rarely (evidence from several runs), so a minute-old
// copy is as good as the file, and the shared folder is read once a minute per tag.
const profileTTL = time.Minute

// residencyGrace: an entry past its expiry is still listed this long (the
// reconciler's default), as slurmctld's reader does.
const residencyGrace = 10 * time.Minute

func newResidencyJobs(store *residency.Store, profiles *profile.Store, node string, now func() time.Time, logf func(string, ...any)) *residencyJobs {
	return &residencyJobs{reader: store.NewReader(), profiles: profiles, node: node, now: now, logf: logf, cache: map[string]cachedProfile{}}
}

func (r *residencyJobs) Jobs() ([]guard.Job, error) {
	now := r.now()
	res, err := r.reader.Read(now, residencyGrace)
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	var jobs []guard.Job
	for _, e := range res.Entries {
		if e.Node != r.node {
			continue
		}
		jobs = append(jobs, guard.Job{ID: e.JobID, Tag: e.Tag, Class: e.Class, User: e.User, Start: e.Start,
			GPUs: append([]int(nil), e.GPUs...), Profile: r.profile(e.Tag, now)})
	}
	for k, c := range r.cache {
		if now.Sub(c.at) >= profileTTL {
			delete(r.cache, k)
		}
	}
	return jobs, nil
}

func (r *residencyJobs) profile(tag string, now time.Time) *profile.Profile {
	if tag == "" {
		return nil
	}
	if c, ok := r.cache[tag]; ok && now.Sub(c.at) < profileTTL {
		return c.p
	}
	p, err := r.profiles.Get(tag)
	if err != nil {
		if !errors.Is(err, profile.ErrNotFound) {
			r.logf("guard: profile of %s: %v", tag, err)
		}
		p = nil
	}
	r.cache[tag] = cachedProfile{p: p, at: now}
	return p
}

// dirMapper maps the processes of emulated GPUs to the jobs their readings name.
type dirMapper struct{ b *nvml.DirBackend }

func (m dirMapper) JobOf(pid uint32) (string, error) {
	if id, ok := m.b.JobOf(pid); ok {
		return id, nil
	}
	return "", fmt.Errorf("pid %d: no emulated reading names it: %w", pid, guard.ErrUnmapped)
}
