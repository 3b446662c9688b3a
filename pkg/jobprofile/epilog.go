// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Completed is the only end state whose run may become a profile or an
// observation (docs/profiling.md, "Only normal runs count").
const Completed = "COMPLETED"

// Report says what an Epilog did, for the node helper's log line.
type Report struct {
	Sampled        bool                     // a sampler ran for the job
	ProfileWritten bool                     // the profile store was updated
	SoloRun        bool                     // the run was recorded as a solo run
	Observation    *observation.Observation // recorded observation, if any
	Notes          []string                 // why something was skipped
}

func (r *Report) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

// Run is what the Epilog collected about one job's run, before anything is
// kept: it can wait (as a file) until the job's end state is known.
type Run struct {
	Env        JobEnv           `json:"env"`
	Start      time.Time        `json:"start"`
	End        time.Time        `json:"end"`
	Throughput float64          `json:"throughput,omitempty"` // the job's own report, 0 = none
	Sampled    bool             `json:"sampled,omitempty"`
	Sample     *profile.Profile `json:"sample,omitempty"`       // metrics from the sampler, nil = none
	PrologTag  string           `json:"prolog_tag,omitempty"`   // tag and class the Prolog saw
	PrologCls  profile.Class    `json:"prolog_class,omitempty"` //
	Shared     float64          `json:"shared"`                 // fraction of the run with co-runners
	CoTags     []string         `json:"co_tags,omitempty"`      // the co-runner set that covered most of the run
	CoFrac     float64          `json:"co_frac"`                // the fraction it covered
	Notes      []string         `json:"notes,omitempty"`
}

// RuntimeS is the run's length in seconds.
func (r *Run) RuntimeS() float64 { return r.End.Sub(r.Start).Seconds() }

// Collect stops the job's sampler (always, so none is left behind), summarizes
// what it wrote and measures the run against its co-runners. It keeps nothing:
// a nil Run means there is nothing to keep (untagged, failed, no times).
func Collect(cfg config.Config, env JobEnv, start, end time.Time, coRuns []CoRunInterval) (*Run, error) {
	if env.Tag == "" {
		return nil, nil
	}
	if err := profile.ValidateTag(env.Tag); err != nil {
		return nil, fmt.Errorf("epilog: %w", err)
	}
	dir, err := jobDir(cfg, env.JobID)
	if err != nil {
		return nil, fmt.Errorf("epilog: %w", err)
	}
	var errs []error
	run := &Run{Env: env, Start: start, End: end}
	run.Env.ThroughputFile = ""
	if _, err := os.Stat(dir); err == nil {
		run.Sampled = true
		if err := stopSampler(dir); err != nil {
			errs = append(errs, fmt.Errorf("epilog: stopping sampler: %w", err))
		}
		sum, st, err := readJobDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("epilog: job %s: %w", env.JobID, err))
		}
		run.PrologTag, run.PrologCls = st.Tag, st.Class
		if sum != nil && sum.Rounds() > 0 {
			run.Sample = &profile.Profile{}
			sum.Fill(run.Sample)
		} else if sum != nil {
			errs = append(errs, fmt.Errorf("epilog: job %s: no samples taken: %s", env.JobID, strings.Join(sum.Notes(), "; ")))
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("epilog: %w", err))
		}
	}
	if env.ExitCode != 0 {
		return nil, errors.Join(errs...)
	}
	if start.IsZero() || end.IsZero() {
		errs = append(errs, errors.New("epilog: job start or end time unknown: no profile, no observation"))
		return nil, errors.Join(errs...)
	}
	if !(run.RuntimeS() > 0) {
		errs = append(errs, fmt.Errorf("epilog: run time %v: end is not after start", end.Sub(start)))
		return nil, errors.Join(errs...)
	}
	if run.Throughput, err = ReadThroughputFile(env.ThroughputFile); err != nil {
		errs = append(errs, fmt.Errorf("epilog: %w", err))
	}
	sets := coverage(start, end, coRuns)
	run.Shared = 1 - sets.fraction("")
	run.CoTags, run.CoFrac = sets[0].tags, sets[0].frac
	return run, errors.Join(errs...)
}

// Keep writes the profile and records the observation of a collected run, only if
// the job ended COMPLETED with exit code 0 (fail closed: an unknown state keeps
// nothing). Both are measured against the profile as it was before this run.
func Keep(cfg config.Config, run *Run) (Report, error) {
	var rep Report
	if run == nil {
		return rep, nil
	}
	rep.Sampled = run.Sampled
	if run.Env.EndState != Completed || run.Env.ExitCode != 0 {
		state := run.Env.EndState
		if state == "" {
			state = "unknown"
		}
		rep.note("job ended %s (exit code %d): no profile, no observation", state, run.Env.ExitCode)
		return rep, nil
	}
	store, err := profile.Open(cfg.ProfileDir)
	if err != nil {
		return rep, fmt.Errorf("epilog: %w", err)
	}
	var errs []error
	prev, err := store.Get(run.Env.Tag)
	if err != nil {
		if !errors.Is(err, profile.ErrNotFound) {
			errs = append(errs, fmt.Errorf("epilog: %w", err))
		}
		prev = nil
	}
	written, err := WriteProfile(cfg, store, run, prev, &rep)
	if err != nil {
		errs = append(errs, err)
	}
	rep.ProfileWritten = written
	o, err := RecordObservation(cfg, run, prev, written, &rep)
	if err != nil {
		errs = append(errs, err)
	}
	rep.Observation = o
	return rep, errors.Join(errs...)
}

// WriteProfile keeps what a completed run says about its application alone: the
// sampled metrics as a candidate for the profile (a new or stale profile changes
// only once the candidates of enough runs by enough users agree:
// profile.CombineEvidence) and the run as a solo run, which updates the solo
// reference once it is robust (profile.SoloReference). A stored profile's class
// never changes here: class= in a job's comment only sets that job's floor, and
// names the class of a profile that does not exist yet.
func WriteProfile(cfg config.Config, store *profile.Store, run *Run, prev *profile.Profile, rep *Report) (bool, error) {
	env := run.Env
	alone := run.Shared <= MaxSharedWhileProfiling
	var ref profile.SoloRef
	switch {
	case !alone:
	case run.RuntimeS() < profile.MinSoloRuntimeS:
		rep.note("not a solo reference: run of %.0fs is shorter than %.0fs", run.RuntimeS(), profile.MinSoloRuntimeS)
	default:
		r, err := store.AddSoloRun(env.Tag, profile.SoloRun{RuntimeS: run.RuntimeS(), Throughput: run.Throughput,
			UID: env.UID, JobID: env.JobID, When: run.End.UTC()})
		if err != nil {
			return false, fmt.Errorf("epilog: %w", err)
		}
		rep.SoloRun, ref = true, r
	}

	var p *profile.Profile
	switch {
	case run.Sample != nil && !alone:
		rep.note("profile discarded: co-runners shared the GPU for %.0f%% of the run", 100*run.Shared)
	case run.Sample != nil:
		var err error
		if p, err = offerSample(cfg, store, run, prev, rep); err != nil {
			return false, err
		}
	case prev != nil && ref.Ready && (prev.SoloRuntimeS != ref.RuntimeS || (ref.Throughput > 0 && prev.SoloThroughput != ref.Throughput)):
		cp := *prev
		p = &cp
	}
	if p == nil {
		return false, nil
	}
	if ref.Ready {
		p.SoloRuntimeS = ref.RuntimeS
		if ref.Throughput > 0 {
			p.SoloThroughput = ref.Throughput
		}
	}
	if err := store.Put(p); err != nil {
		return false, fmt.Errorf("epilog: %w", err)
	}
	return true, nil
}

// EvidenceRules are the configured thresholds a profile's evidence must meet.
func EvidenceRules(cfg config.Config) profile.EvidenceRules {
	return profile.EvidenceRules{MinRuns: cfg.Profiling.MinRuns, MinUsers: cfg.Profiling.MinUsers,
		MinRunTimeS: cfg.Profiling.MinRunTime.Seconds()}
}

// offerSample keeps a solo run's sample as a candidate for tag's profile and
// returns the profile to write once the candidates suffice (nil: not yet). A
// run shorter than profiling.min_run_time is never a candidate; a tag without a
// profile counts against the user's and the store's bounds on new profiles.
func offerSample(cfg config.Config, store *profile.Store, run *Run, prev *profile.Profile, rep *Report) (*profile.Profile, error) {
	env := run.Env
	class := env.Class
	if class == "" {
		class = run.PrologCls
	}
	if prev != nil {
		class = prev.Class
	}
	if class == "" {
		return nil, fmt.Errorf("epilog: profile of %s not written: class unknown (give class= in the job comment)", env.Tag)
	}
	rules := EvidenceRules(cfg)
	if run.RuntimeS() < rules.MinRunTimeS {
		rep.note("sample not kept: run of %.0fs is shorter than profiling.min_run_time (%s)", run.RuntimeS(), cfg.Profiling.MinRunTime)
		return nil, nil
	}
	if prev == nil {
		if err := store.ClaimNewTag(env.UID, env.Tag, cfg.Profiling.MaxNewProfilesPerUser, cfg.MaxProfiles); err != nil {
			if errors.Is(err, profile.ErrQuota) {
				rep.note("sample not kept: %v", err)
				return nil, nil
			}
			return nil, fmt.Errorf("epilog: %w", err)
		}
	}
	sample := *run.Sample
	ev, err := store.AddCandidate(env.Tag, profile.Candidate{UID: env.UID, JobID: env.JobID, RuntimeS: run.RuntimeS(),
		When: run.End.UTC(), Class: class, Sample: sample}, rules)
	if err != nil {
		return nil, fmt.Errorf("epilog: %w", err)
	}
	if !ev.Ready {
		rep.note("profile of %s not changed yet: %s", env.Tag, ev.Why)
		return nil, nil
	}
	p := ev.Metrics
	p.Class = ev.Class
	if prev != nil {
		p.Class = prev.Class
		p.SoloRuntimeS, p.SoloThroughput = prev.SoloRuntimeS, prev.SoloThroughput
	} else if p.Class == "" {
		p.Class = class
	}
	p.CollectedAt = run.End.UTC()
	p.CollectedOn = nodeName(env.Node)
	p.Source = fmt.Sprintf("%s, %d runs by %d users", sourceOf(cfg.Profiling.Backend), ev.Runs, ev.Users)
	return p, nil
}

// RecordObservation appends the run's speed next to its co-runners to
// <observation_dir>/<node>.csv, measured against prev's solo reference. It refuses
// runs whose co-runners changed too often, untagged co-runners, and speeds outside
// observation's sane bounds.
func RecordObservation(cfg config.Config, run *Run, prev *profile.Profile, profileWritten bool, rep *Report) (*observation.Observation, error) {
	env := run.Env
	if run.CoFrac < MinCoverage {
		rep.note("no observation: co-runners changed too often (largest set covered %.0f%% of the run, need %.0f%%)", 100*run.CoFrac, 100*MinCoverage)
		return nil, nil
	}
	if slices.Contains(run.CoTags, untaggedCoRunner) {
		rep.note("no observation: an untagged job shared the GPU (its interference is unknown)")
		return nil, nil
	}
	alone := len(run.CoTags) == 0
	speed, how := 0.0, ""
	switch {
	case prev != nil && run.Throughput > 0 && prev.SoloThroughput > 0:
		speed, how = run.Throughput/prev.SoloThroughput, "throughput"
	case prev != nil && prev.SoloRuntimeS > 0:
		speed, how = prev.SoloRuntimeS/run.RuntimeS(), "run time"
	case alone && (prev != nil || profileWritten):
		// Without a reference yet, a solo run is its own: speed 1 by definition.
		speed, how = 1, "solo reference"
	case prev == nil:
		rep.note("no observation: %s had no profile before this run (no solo reference)", env.Tag)
	default:
		rep.note("no observation: the profile of %s has no solo reference yet (needs solo runs of at least %.0fs by %d users)", env.Tag, profile.MinSoloRuntimeS, profile.MinSoloUsers)
	}
	if speed == 0 {
		return nil, nil
	}
	if cfg.ObservationDir == "" {
		rep.note("no observation kept: observation_dir is empty")
		return nil, nil
	}
	if len(run.CoTags) > observation.MaxCoTags {
		rep.note("no observation: %d co-runners", len(run.CoTags))
		return nil, nil
	}
	class := env.Class
	if prev != nil {
		class = prev.Class
	}
	o := observation.Observation{
		Tag: env.Tag, Class: class, CoTags: run.CoTags, Speed: speed, UID: env.UID,
		Source: "epilog " + how, JobID: env.JobID, Node: nodeName(env.Node), When: run.End.UTC().Truncate(time.Second),
	}
	if err := observation.Sane(o); err != nil {
		rep.note("no observation: %v by %s (the run did different work than its solo reference)", err, how)
		return nil, nil
	}
	if err := os.MkdirAll(cfg.ObservationDir, 0o755); err != nil {
		return nil, fmt.Errorf("epilog: %w", err)
	}
	if err := observation.AppendFile(filepath.Join(cfg.ObservationDir, nodeName(env.Node)+".csv"), o); err != nil {
		return nil, fmt.Errorf("epilog: %w", err)
	}
	return &o, nil
}

// Epilog stops the sampler (if any) and, for a run that ended normally, writes
// the profile and records an observation.
func Epilog(cfg config.Config, env JobEnv, start, end time.Time, coRuns []CoRunInterval) error {
	_, err := RunEpilog(cfg, env, start, end, coRuns)
	return err
}

// RunEpilog is Collect then Keep, with a report of what it did; env.EndState
// must already be known (else nothing is kept).
func RunEpilog(cfg config.Config, env JobEnv, start, end time.Time, coRuns []CoRunInterval) (Report, error) {
	run, cerr := Collect(cfg, env, start, end, coRuns)
	if run == nil {
		rep := Report{}
		if env.Tag != "" && env.ExitCode != 0 {
			rep.note("job failed (exit code %d): no profile, no observation", env.ExitCode)
		}
		return rep, cerr
	}
	rep, err := Keep(cfg, run)
	return rep, errors.Join(cerr, err)
}
