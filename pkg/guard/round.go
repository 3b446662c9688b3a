// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Observation is an early observation: a job seen over its budget next to its
// co-runners, before the Epilog measures the whole run.
type Observation struct {
	When   time.Time
	GPU    int
	Kind   FindingKind
	JobID  string
	User   string
	Tag    string
	Class  profile.Class
	CoTags []string
	Speed  float64 // speed findings
	MemMiB float64 // memory findings
}

// RoundResult is everything one round produced: what the caller turns into
// metrics, decision-log events and observation rows.
type RoundResult struct {
	At           time.Time
	GPUs         int // co-located GPUs read
	Unhealthy    int // of which could not be read
	Unknown      int // processes that map to no resident job
	Findings     []Finding
	Actions      []Action // including Observe, with their reasons
	Observations []Observation
	// DroppedObservations were over the per-user cap.
	DroppedObservations int
	Errors              []error // actions that failed; the guard keeps going
}

// Guard runs rounds: read, smooth, judge, decide, act.
type Guard struct {
	cfg   Config
	mon   *Monitor
	jobs  JobSource
	act   Actuator
	state *State
	logf  func(string, ...any)
}

// New returns a Guard; act may be nil for a guard that only observes.
func New(cfg Config, mon *Monitor, jobs JobSource, act Actuator, logf func(string, ...any)) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("guard configuration: %w", err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Guard{cfg: cfg, mon: mon, jobs: jobs, act: act, state: NewState(cfg), logf: logf}, nil
}

// State exposes the guard's memory of earlier rounds (read-only use).
func (g *Guard) State() *State { return g.state }

// Round runs one round at now. A job source that fails ends the round early
// with the error; every other failure (a GPU, a process, an action) is in the
// result and the guard keeps going.
func (g *Guard) Round(now time.Time) (RoundResult, error) {
	res := RoundResult{At: now}
	jobs, err := g.jobs.Jobs()
	if err != nil {
		return res, fmt.Errorf("listing the node's jobs: %w", err)
	}
	WithProfileClasses(jobs)
	for _, a := range g.state.Resumes(jobs) {
		g.take(&res, a, now)
	}
	byGPU := CoLocated(jobs)
	readings := g.mon.Read(now, byGPU)
	res.GPUs = len(readings)
	for _, r := range readings {
		if !r.Healthy {
			res.Unhealthy++
		}
		res.Unknown += len(r.Unknown)
	}
	res.Findings = g.state.Observe(now, readings, byGPU)
	for _, f := range res.Findings {
		resident := byGPU[f.GPU]
		sm := make(map[string]float64, len(resident))
		var coTags []string
		for _, j := range resident {
			sm[j.ID], _ = g.state.SmoothedSM(j.ID, f.GPU)
			if j.ID != f.Job.ID {
				coTags = append(coTags, j.Tag)
			}
		}
		slices.Sort(coTags)
		if g.state.AllowObservation(f.Job, coTags, now) {
			res.Observations = append(res.Observations, Observation{When: now, GPU: f.GPU, Kind: f.Kind,
				JobID: f.Job.ID, User: f.Job.User, Tag: f.Job.Tag, Class: f.Job.Class, CoTags: coTags, Speed: f.Speed, MemMiB: f.MemMiB})
		} else {
			res.DroppedObservations++
		}
		g.take(&res, Decide(g.cfg, f, resident, sm, g.state, now), now)
	}
	return res, nil
}

func (g *Guard) take(res *RoundResult, a Action, now time.Time) {
	res.Actions = append(res.Actions, a)
	if a.Kind == Observe {
		return
	}
	if g.act == nil {
		// Recorded as if taken, so the rate limits hold a dry run to one line per action.
		g.state.Record(a, now)
		g.logf("guard: would %s job %s (no actuator): %s", a.Kind, a.JobID, a.Reason)
		return
	}
	if err := Apply(g.act, a); err != nil {
		g.logf("guard: %v", err)
		res.Errors = append(res.Errors, err)
		return
	}
	g.state.Record(a, now)
	g.logf("guard: %s job %s: %s", a.Kind, a.JobID, a.Reason)
}

// WithProfileClasses gives each job without a class its profile's, as placement
// judged it (a comment coscheml:app=TAG names no class): its floor and actions
// are that class's, never the observe-only actions of no class.
func WithProfileClasses(jobs []Job) {
	for i := range jobs {
		if jobs[i].Class == "" && jobs[i].Profile != nil && validClass(jobs[i].Profile.Class) {
			jobs[i].Class = jobs[i].Profile.Class
		}
	}
}

func validClass(c profile.Class) bool {
	_, err := profile.ParseClass(string(c))
	return err == nil
}
