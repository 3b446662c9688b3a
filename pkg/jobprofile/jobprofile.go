// SPDX-License-Identifier: Apache-2.0

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
	"sort"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/nvml"
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
	GPUs     []int  // GPU indices on this node (SLURM_JOB_GPUS)
	Nodes    int    // the job's node count (SLURM_JOB_NODELIST; 0: not given)
	UID      string // numeric uid of the job's owner (SLURM_JOB_UID), "" if unknown
	ExitCode int    // Epilog only
	// Restarts is Slurm's restart count of the job when this run started: the
	// run's number, since a requeued job runs again under the same id. The
	// finisher keeps a run only if the controller's count is still this one.
	Restarts int
	// EndState is the job's final state as Slurm's controller reports it
	// (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...); "" = not known (yet). Only a
	// COMPLETED job with exit code 0 leaves a profile or an observation.
	EndState string
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
