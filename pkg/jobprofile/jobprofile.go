// Package jobprofile turns a job's run on a node into a profile (NVML sampling
// between Prolog and Epilog) and into an observation for retraining.
//
// The Prolog starts a detached sampler process (`coscheml-node sampler ...`, a
// new session so that slurmd's cleanup of the prolog does not take it along) that
// appends its readings to a per-job folder under RunDir. The Epilog stops it,
// summarizes the readings into the profile store and appends an observation of
// the job's speed relative to its solo run to <ObservationDir>/<node>.csv.
// docs/profiling.md describes the rules; the ones that matter for safety: every
// wait is bounded, and every failure is returned for logging, never allowed to
// fail or hang the job.
package jobprofile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// JobEnv is what the node Prolog/Epilog know about a job.
type JobEnv struct {
	JobID    string
	Node     string
	User     string
	Comment  string
	Tag      string // validated tag from the comment ("" if untagged)
	Class    profile.Class
	GPUs     []int // GPU indices on this node (SLURM_JOB_GPUS)
	ExitCode int   // Epilog only
	// ThroughputFile, if set, names a file in which the job reported its own
	// throughput (one number, e.g. samples/s); the Epilog then measures speed by
	// throughput instead of run time. Optional.
	ThroughputFile string
}

// CoRunInterval says which other tagged jobs shared the job's GPUs from Start to End.
type CoRunInterval struct {
	Start, End time.Time
	CoTags     []string
}

// Tunables of the rules in docs/profiling.md.
const (
	// MinCoverage: an observation is recorded only when one co-runner set (the
	// empty set = alone) covered at least this fraction of the run.
	MinCoverage = 0.8
	// MaxSharedWhileProfiling: a profile is discarded when co-runners shared the
	// GPU for more than this fraction of the sampled run (their load would be in
	// the GPU-wide counters).
	MaxSharedWhileProfiling = 0.05
	// StopWait bounds how long the Epilog waits for the sampler after SIGTERM
	// (and again after SIGKILL).
	StopWait = 3 * time.Second
	// MaxSampleRows bounds the rows one sampler writes (all GPUs together):
	// 500,000 rows are about 70 hours of one GPU at 0.5 s, ~35 MB.
	MaxSampleRows = 500_000
	// MaxSamplerLife stops a sampler whose Epilog never came.
	MaxSamplerLife = 14 * 24 * time.Hour
)

// RunDir is where per-job sampler state lives: <parent of ObservationDir>/run/profiling
// (by default /var/lib/coscheml/run/profiling); with observation_dir "" the parent
// of ProfileDir is used instead. There is no config key of its own.
func RunDir(cfg config.Config) string {
	base := cfg.ObservationDir
	if base == "" {
		base = cfg.ProfileDir
	}
	if base == "" || !filepath.IsAbs(base) {
		return "/var/lib/coscheml/run/profiling"
	}
	return filepath.Join(filepath.Dir(filepath.Clean(base)), "run", "profiling")
}

// Files in a job's folder.
const (
	pidFile     = "sampler.pid"
	stateFile   = "state.json"
	samplesFile = "samples.csv"
	logFile     = "sampler.log"
)

// jobState is what the Prolog leaves for the Epilog next to the samples.
type jobState struct {
	Tag      string        `json:"tag"`
	Class    profile.Class `json:"class,omitempty"`
	GPUs     []int         `json:"gpus"`
	Backend  string        `json:"backend"`
	Interval string        `json:"interval"`
	Started  time.Time     `json:"started"`
}

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// jobDir returns the job's folder; the job ID becomes a path element, so it is
// checked like a tag.
func jobDir(cfg config.Config, jobID string) (string, error) {
	if !jobIDRE.MatchString(jobID) || strings.Contains(jobID, "..") || jobID == "." {
		return "", fmt.Errorf("invalid job id %q", profile.Sanitize(jobID))
	}
	return filepath.Join(RunDir(cfg), jobID), nil
}

// launcher starts the sampler process; tests substitute nothing but the
// executable, so the real code path runs.
type launcher struct {
	exe string // "" = os.Executable()
	now func() time.Time
}

// Prolog starts the sampler for a tagged job whose profile is missing or stale, only
// when the job runs alone on its GPU(s). It never fails the job: errors are returned
// for logging only.
func Prolog(cfg config.Config, env JobEnv, alone bool) error {
	_, err := launcher{now: time.Now}.prolog(cfg, env, alone)
	return err
}

// NeedsProfile reports whether tag's profile is missing, unreadable or older than
// cfg.Profiling.StaleAfter (0 = never stale), with the reason.
func NeedsProfile(cfg config.Config, tag string, now time.Time) (bool, string) {
	st, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		return false, fmt.Sprintf("profile store: %v", err)
	}
	p, err := st.Get(tag)
	switch {
	case errors.Is(err, profile.ErrNotFound):
		return true, "no profile"
	case err != nil:
		return true, fmt.Sprintf("profile unreadable (%v)", err)
	case cfg.Profiling.StaleAfter > 0 && now.Sub(p.CollectedAt) > cfg.Profiling.StaleAfter:
		return true, fmt.Sprintf("profile older than %s", cfg.Profiling.StaleAfter)
	}
	return false, "profile fresh"
}

// prolog returns whether a sampler was started.
func (l launcher) prolog(cfg config.Config, env JobEnv, alone bool) (bool, error) {
	if !cfg.Profiling.Enabled || env.Tag == "" || len(env.GPUs) == 0 || !alone {
		return false, nil
	}
	if err := profile.ValidateTag(env.Tag); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	dir, err := jobDir(cfg, env.JobID)
	if err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	if need, _ := NeedsProfile(cfg, env.Tag, l.now()); !need {
		return false, nil
	}
	if _, err := nvml.Open(cfg.Profiling.Backend); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	if err := os.MkdirAll(RunDir(cfg), 0o755); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	// A leftover folder of the same job ID (a requeued job) is replaced.
	if err := stopSampler(dir); err != nil {
		return false, fmt.Errorf("prolog: old sampler of job %s: %w", env.JobID, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	st := jobState{Tag: env.Tag, Class: env.Class, GPUs: env.GPUs, Backend: cfg.Profiling.Backend,
		Interval: cfg.Profiling.Interval.String(), Started: l.now()}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o600); err != nil {
		return false, fmt.Errorf("prolog: %w", err)
	}
	exe := l.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return false, fmt.Errorf("prolog: finding the sampler program: %w", err)
		}
	}
	maxRounds := MaxSampleRows / len(env.GPUs)
	args := []string{"sampler",
		"--dir", dir,
		"--backend", cfg.Profiling.Backend,
		"--interval", cfg.Profiling.Interval.String(),
		"--gpus", nvml.FormatGPUList(env.GPUs),
		"--max-rounds", fmt.Sprint(maxRounds),
		"--max-life", MaxSamplerLife.String(),
	}
	pid, err := startDetached(exe, args, filepath.Join(dir, logFile))
	if err != nil {
		return false, fmt.Errorf("prolog: starting sampler: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(fmt.Sprintf("%d\n", pid)), 0o600); err != nil {
		return true, fmt.Errorf("prolog: %w", err)
	}
	return true, nil
}

// Report says what an Epilog did, for the node helper's log line.
type Report struct {
	Sampled        bool                     // a sampler ran for the job
	ProfileWritten bool                     // the profile store was updated
	Observation    *observation.Observation // recorded observation, if any
	Notes          []string                 // why something was skipped
}

// Epilog stops the sampler (if any) and writes the profile; then records an
// observation of the job's run time against its co-runners.
func Epilog(cfg config.Config, env JobEnv, start, end time.Time, coRuns []CoRunInterval) error {
	_, err := RunEpilog(cfg, env, start, end, coRuns)
	return err
}

// RunEpilog is Epilog with a report of what it did.
func RunEpilog(cfg config.Config, env JobEnv, start, end time.Time, coRuns []CoRunInterval) (Report, error) {
	var rep Report
	var errs []error
	note := func(format string, a ...any) { rep.Notes = append(rep.Notes, fmt.Sprintf(format, a...)) }

	if env.Tag == "" {
		return rep, nil
	}
	if err := profile.ValidateTag(env.Tag); err != nil {
		return rep, fmt.Errorf("epilog: %w", err)
	}
	dir, err := jobDir(cfg, env.JobID)
	if err != nil {
		return rep, fmt.Errorf("epilog: %w", err)
	}

	// 1. Stop the sampler and summarize what it wrote.
	var sum *nvml.Summary
	var st jobState
	if _, err := os.Stat(dir); err == nil {
		rep.Sampled = true
		if err := stopSampler(dir); err != nil {
			errs = append(errs, fmt.Errorf("epilog: stopping sampler: %w", err))
		}
		sum, st, err = readJobDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("epilog: job %s: %w", env.JobID, err))
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("epilog: %w", err))
		}
	}
	if env.ExitCode != 0 {
		note("job failed (exit code %d): no profile, no observation", env.ExitCode)
		return rep, errors.Join(errs...)
	}
	if start.IsZero() || end.IsZero() {
		errs = append(errs, errors.New("epilog: job start or end time unknown: no profile, no observation"))
		return rep, errors.Join(errs...)
	}
	runtime := end.Sub(start).Seconds()
	if !(runtime > 0) {
		errs = append(errs, fmt.Errorf("epilog: run time %v: end is not after start", end.Sub(start)))
		return rep, errors.Join(errs...)
	}
	throughput, err := ReadThroughputFile(env.ThroughputFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("epilog: %w", err))
	}

	store, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("epilog: %w", err))
		return rep, errors.Join(errs...)
	}
	prev, err := store.Get(env.Tag)
	if err != nil {
		if !errors.Is(err, profile.ErrNotFound) {
			errs = append(errs, fmt.Errorf("epilog: %w", err))
		}
		prev = nil
	}
	class := env.Class
	if class == "" {
		class = st.Class
	}
	if class == "" && prev != nil {
		class = prev.Class
	}

	sets := coverage(start, end, coRuns)
	dom := sets[0]

	// 2. The profile, from the samples, if the job stayed (almost) alone.
	if sum != nil && sum.Rounds() > 0 {
		shared := 1 - sets.fraction("")
		switch {
		case shared > MaxSharedWhileProfiling:
			note("profile discarded: co-runners shared the GPU for %.0f%% of the run", 100*shared)
		case class == "":
			errs = append(errs, fmt.Errorf("epilog: profile of %s not written: class unknown (give class= in the job comment)", env.Tag))
		default:
			p := &profile.Profile{Tag: env.Tag, Class: class}
			sum.Fill(p)
			p.SoloRuntimeS = runtime
			p.SoloThroughput = throughput
			if throughput == 0 && prev != nil {
				p.SoloThroughput = prev.SoloThroughput
			}
			p.CollectedAt = end.UTC()
			p.CollectedOn = nodeName(env.Node)
			p.Source = sourceOf(cfg.Profiling.Backend)
			if err := store.Put(p); err != nil {
				errs = append(errs, fmt.Errorf("epilog: %w", err))
			} else {
				rep.ProfileWritten = true
			}
		}
	} else if sum != nil {
		errs = append(errs, fmt.Errorf("epilog: job %s: no samples taken: %s", env.JobID, strings.Join(sum.Notes(), "; ")))
	}

	// 3. The observation, against the profile as it was before this run.
	if dom.frac < MinCoverage {
		note("no observation: co-runners changed too often (largest set covered %.0f%% of the run, need %.0f%%)", 100*dom.frac, 100*MinCoverage)
		return rep, errors.Join(errs...)
	}
	if slices.Contains(dom.tags, untaggedCoRunner) {
		note("no observation: an untagged job shared the GPU (its interference is unknown)")
		return rep, errors.Join(errs...)
	}
	alone := dom.key == ""
	if alone && prev != nil && !rep.ProfileWritten {
		// A solo run refreshes the solo reference even when no sampler ran.
		upd := *prev
		upd.SoloRuntimeS = runtime
		if throughput > 0 {
			upd.SoloThroughput = throughput
		}
		if err := store.Put(&upd); err != nil {
			errs = append(errs, fmt.Errorf("epilog: refreshing solo run time: %w", err))
		}
	}
	speed, how := 0.0, ""
	switch {
	case prev != nil && throughput > 0 && prev.SoloThroughput > 0:
		speed, how = throughput/prev.SoloThroughput, "throughput"
	case prev != nil && prev.SoloRuntimeS > 0:
		speed, how = prev.SoloRuntimeS/runtime, "run time"
	case alone && (prev != nil || rep.ProfileWritten):
		// The first solo run is its own reference: speed 1 by definition.
		speed, how = 1, "solo reference"
	case prev == nil:
		note("no observation: %s had no profile before this run (no solo reference)", env.Tag)
	default:
		note("no observation: the profile of %s has no solo run time or throughput", env.Tag)
	}
	if speed == 0 {
		return rep, errors.Join(errs...)
	}
	if cfg.ObservationDir == "" {
		note("no observation kept: observation_dir is empty")
		return rep, errors.Join(errs...)
	}
	if speed > observation.MaxSpeed {
		note("no observation: speed %.2f by %s is above %.1f (the job did different work than its solo run)", speed, how, observation.MaxSpeed)
		return rep, errors.Join(errs...)
	}
	if len(dom.tags) > observation.MaxCoTags {
		note("no observation: %d co-runners", len(dom.tags))
		return rep, errors.Join(errs...)
	}
	o := observation.Observation{
		Tag: env.Tag, Class: class, CoTags: dom.tags, Speed: speed,
		Source: "epilog " + how, JobID: env.JobID, Node: nodeName(env.Node), When: end.UTC().Truncate(time.Second),
	}
	if err := os.MkdirAll(cfg.ObservationDir, 0o755); err != nil {
		errs = append(errs, fmt.Errorf("epilog: %w", err))
		return rep, errors.Join(errs...)
	}
	if err := observation.AppendFile(filepath.Join(cfg.ObservationDir, nodeName(env.Node)+".csv"), o); err != nil {
		errs = append(errs, fmt.Errorf("epilog: %w", err))
	} else {
		rep.Observation = &o
	}
	return rep, errors.Join(errs...)
}

// sourceOf names where a sampled profile came from; mock data says so plainly.
func sourceOf(backend string) string {
	if backend == "mock" {
		return "nvml mock backend (simulated DGX H200, not real GPU data)"
	}
	return "nvml sampler"
}

var nodeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// nodeName is the node name as a file name; a name that is not one becomes "node".
func nodeName(n string) string {
	if !nodeRE.MatchString(n) || strings.Contains(n, "..") {
		return "node"
	}
	return n
}

// readJobDir summarizes the samples the sampler wrote and reads the Prolog's state.
func readJobDir(dir string) (*nvml.Summary, jobState, error) {
	var st jobState
	if b, err := os.ReadFile(filepath.Join(dir, stateFile)); err == nil {
		_ = json.Unmarshal(b, &st) // the state is a convenience; samples are what count
	}
	f, err := os.Open(filepath.Join(dir, samplesFile))
	if err != nil {
		return nil, st, fmt.Errorf("no samples: %w%s", err, samplerLogTail(dir))
	}
	defer f.Close()
	var sum nvml.Summary
	if err := nvml.ReadSamples(f, &sum); err != nil {
		return nil, st, fmt.Errorf("samples: %w", err)
	}
	return &sum, st, nil
}

// samplerLogTail returns the end of the sampler's log, for an error message.
func samplerLogTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 200 {
		b = b[len(b)-200:]
	}
	return " (sampler log: " + profile.Sanitize(strings.TrimSpace(string(b))) + ")"
}

// untaggedCoRunner stands for a co-runner without a profile tag in a co-runner set;
// it is not a valid tag, so it can never be confused with one.
const untaggedCoRunner = "?untagged"

// coSet is one co-runner set and the fraction of the run it covered.
type coSet struct {
	key  string // sorted tags joined by ","; "" = alone
	tags []string
	frac float64
}

type coSets []coSet

func (s coSets) fraction(key string) float64 {
	for _, c := range s {
		if c.key == key {
			return c.frac
		}
	}
	return 0
}

// coverage splits [start, end] at every interval boundary; in each piece the
// co-runner set is the union of the CoTags of the intervals covering it (so both
// "one interval per co-runner" and "one interval per set" inputs work), and time
// not covered by any interval counts as alone. It returns the sets by covered
// fraction, largest first (ties: alone first, then by key), never empty.
func coverage(start, end time.Time, runs []CoRunInterval) coSets {
	total := end.Sub(start)
	if total <= 0 {
		return coSets{{frac: 1}}
	}
	cuts := []time.Time{start, end}
	for _, r := range runs {
		for _, t := range []time.Time{r.Start, r.End} {
			if t.After(start) && t.Before(end) {
				cuts = append(cuts, t)
			}
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].Before(cuts[j]) })
	acc := map[string]time.Duration{}
	tagsOf := map[string][]string{}
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if !b.After(a) {
			continue
		}
		set := map[string]bool{}
		for _, r := range runs {
			if !r.Start.After(a) && !r.End.Before(b) {
				for _, t := range r.CoTags {
					// An untagged co-runner ("") still interferes: keep it in the set
					// (as untaggedCoRunner) so the run is neither profiled as solo nor
					// observed.
					if t == "" {
						t = untaggedCoRunner
					}
					set[t] = true
				}
			}
		}
		tags := make([]string, 0, len(set))
		for t := range set {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		k := strings.Join(tags, ",")
		acc[k] += b.Sub(a)
		tagsOf[k] = tags
	}
	out := make(coSets, 0, len(acc))
	for k, d := range acc {
		out = append(out, coSet{key: k, tags: tagsOf[k], frac: float64(d) / float64(total)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].frac != out[j].frac {
			return out[i].frac > out[j].frac
		}
		return out[i].key < out[j].key
	})
	return out
}
