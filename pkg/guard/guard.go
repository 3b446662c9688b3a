// SPDX-License-Identifier: Apache-2.0

// Package guard is the core of the node-side runtime guard: it watches the GPUs
// that hold two or more co-located coscheml jobs, compares each job with its
// budget (memory: its profile's peak plus a margin; speed: its share of the GPU
// against its solo profile, or for inference the latency estimate of
// pkg/inferlatency, against its class's floor) and decides which job to act on
// and how. Reading (Monitor), smoothing (State), judging (Evaluate) and choosing
// the action (Decide) are separate, and all but the Monitor are pure, so that the
// rules are testable without a GPU and the simulator can run them on its own
// numbers. Acting goes through the Actuator interface. See docs/guard.md.
package guard

import (
	"fmt"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/floors"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Job is one coscheml job on this node, as the job source (the residency
// records) knows it.
type Job struct {
	ID    string
	Tag   string
	Class profile.Class
	User  string
	Start time.Time
	GPUs  []int
	// Profile is the job's solo profile; nil when the job has none (untagged or
	// not profiled yet): such a job has no budget and is never acted on.
	Profile *profile.Profile
}

// JobSource lists the coscheml jobs on this node.
type JobSource interface {
	Jobs() ([]Job, error)
}

// ProcessMapper names the Slurm job of a host PID; an error wraps ErrUnmapped
// when the process is in no job.
type ProcessMapper interface {
	JobOf(pid uint32) (string, error)
}

// ActionKind is what the guard does to a job.
type ActionKind string

const (
	// Observe: record the finding (observation, metric, decision-log event) only.
	Observe ActionKind = "observe"
	Requeue ActionKind = "requeue"
	Cancel  ActionKind = "cancel"
	// Suspend holds the job until the job it slowed ends, then resumes it.
	Suspend ActionKind = "suspend"
	Resume  ActionKind = "resume"
)

// ClassActions says what the guard does to a job of one class when it acts on it.
type ClassActions struct {
	// Memory: the job is over its own memory budget while its GPU nears full.
	Memory ActionKind
	// Floor: the job, later placed and less protected, holds a co-runner below
	// its floor.
	Floor ActionKind
}

// Config holds the guard's thresholds; Default documents the defaults.
type Config struct {
	Period time.Duration // time between rounds
	// Window is the smoothing window in periods: an EWMA with alpha 2/(Window+1),
	// and a job is judged only after Window readings.
	Window int
	// NearFullFrac: a GPU nears full when used memory is at least this fraction.
	NearFullFrac float64
	// A job's memory budget is its profile's peak * (1 + MemMarginFrac) + MemMarginMiB.
	MemMarginFrac float64
	MemMarginMiB  float64
	// SustainFor: a speed breach must hold this long before it is acted on.
	SustainFor time.Duration
	// BusySMUtil: below this device SM utilization (%) the GPU has spare capacity,
	// and a job with a low share is idle, not slowed.
	BusySMUtil float64
	// FairShareFrac: a job counts as slowed only while its share is at least this
	// fraction of its fair time slice, min(solo share, 100 / active jobs).
	FairShareFrac float64
	// MinCauseSMUtil: a co-runner using less SM (%) than this is not acted on for
	// a slowdown; it cannot be the cause.
	MinCauseSMUtil float64
	// InferMinDemandFrac: an inference job counts as slowed only while its own SM
	// share is at least this fraction of its solo share (it is serving requests).
	InferMinDemandFrac float64
	// Cooldown: a job triggers at most one action per Cooldown.
	Cooldown time.Duration
	// ObservationsPerUser caps the early observations one user's jobs produce per
	// pair (tag and co-runner tags) within ObservationWindow, as the Epilog's are.
	ObservationsPerUser int
	ObservationWindow   time.Duration
	Floors              floors.Floors
	Actions             map[profile.Class]ClassActions
}

// Default returns the documented defaults (docs/guard.md).
func Default() Config {
	return Config{
		Period:              5 * time.Second,
		Window:              6,
		NearFullFrac:        0.95,
		MemMarginFrac:       0.10,
		MemMarginMiB:        1024,
		SustainFor:          60 * time.Second,
		BusySMUtil:          60,
		FairShareFrac:       0.5,
		MinCauseSMUtil:      10,
		InferMinDemandFrac:  0.5,
		Cooldown:            10 * time.Minute,
		ObservationsPerUser: observation.DefaultMaxPerUser,
		ObservationWindow:   24 * time.Hour,
		Floors:              floors.Default(),
		Actions: map[profile.Class]ClassActions{
			profile.ClassHPC:   {Memory: Requeue, Floor: Requeue},
			profile.ClassTrain: {Memory: Requeue, Floor: Requeue},
			profile.ClassInfer: {Memory: Requeue, Floor: Requeue},
		},
	}
}

// Validate rejects thresholds that would make the guard act on noise.
func (c Config) Validate() error {
	switch {
	case c.Period <= 0:
		return fmt.Errorf("guard period %v: must be positive", c.Period)
	case c.Window < 1:
		return fmt.Errorf("guard window %d: must be at least 1", c.Window)
	case c.NearFullFrac <= 0 || c.NearFullFrac > 1:
		return fmt.Errorf("near-full fraction %v: want (0, 1]", c.NearFullFrac)
	case c.MemMarginFrac < 0 || c.MemMarginMiB < 0:
		return fmt.Errorf("memory margins %v, %v MiB: must not be negative", c.MemMarginFrac, c.MemMarginMiB)
	case c.SustainFor < 0 || c.Cooldown < 0:
		return fmt.Errorf("sustain %v, cooldown %v: must not be negative", c.SustainFor, c.Cooldown)
	case c.BusySMUtil < 0 || c.BusySMUtil > 100 || c.MinCauseSMUtil < 0 || c.MinCauseSMUtil > 100:
		return fmt.Errorf("busy %v%%, cause %v%%: want 0..100", c.BusySMUtil, c.MinCauseSMUtil)
	case c.FairShareFrac < 0 || c.FairShareFrac > 1 || c.InferMinDemandFrac < 0 || c.InferMinDemandFrac > 1:
		return fmt.Errorf("fair-share %v, infer demand %v: want 0..1", c.FairShareFrac, c.InferMinDemandFrac)
	case c.ObservationsPerUser < 1 || c.ObservationWindow <= 0:
		return fmt.Errorf("observation cap %d per %v: want at least 1 per positive window", c.ObservationsPerUser, c.ObservationWindow)
	}
	for cl, a := range c.Actions {
		if !memoryActions[a.Memory] || !floorActions[a.Floor] {
			return fmt.Errorf("class %s actions memory=%q floor=%q: memory takes observe, requeue or cancel; floor observe, suspend or requeue", cl, a.Memory, a.Floor)
		}
	}
	return nil
}

var (
	memoryActions = map[ActionKind]bool{Observe: true, Requeue: true, Cancel: true}
	// A floor breach never cancels: the job did nothing wrong, it was placed badly.
	floorActions = map[ActionKind]bool{Observe: true, Suspend: true, Requeue: true}
)

// actionsFor returns the actions of a class; a class the configuration does not
// name (an untagged job) is only observed.
func (c Config) actionsFor(cl profile.Class) ClassActions {
	if a, ok := c.Actions[cl]; ok {
		return a
	}
	return ClassActions{Memory: Observe, Floor: Observe}
}

// Actuator carries out the guard's actions on Slurm jobs (scontrol requeue,
// scancel, scontrol suspend/resume). Reason is a human-readable line for the
// job's record and the decision log.
type Actuator interface {
	Requeue(jobID, reason string) error
	Cancel(jobID, reason string) error
	Suspend(jobID, reason string) error
	Resume(jobID, reason string) error
}

// ElsewhereRequeuer is an Actuator that can also requeue a job away from this
// node (Slurm: the node joins the job's excluded nodes), so that the job does
// not start again next to the co-runner it was acted on for.
type ElsewhereRequeuer interface {
	RequeueElsewhere(jobID, reason string) error
}

// Apply carries out a through an Actuator; Observe does nothing. A requeue for
// a floor breach (Elsewhere) goes through RequeueElsewhere when the actuator
// has it.

func Apply(act Actuator, a Action) error {
	var err error
	switch a.Kind {
	case Observe:
		return nil
	case Requeue:
		if r, ok := act.(ElsewhereRequeuer); ok && a.Elsewhere {
			err = r.RequeueElsewhere(a.JobID, a.Reason)
		} else {
			err = act.Requeue(a.JobID, a.Reason)
		}
	case Cancel:
		err = act.Cancel(a.JobID, a.Reason)
	case Suspend:
		err = act.Suspend(a.JobID, a.Reason)
	case Resume:
		err = act.Resume(a.JobID, a.Reason)
	default:
		return fmt.Errorf("job %s: unknown action %q", a.JobID, a.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s job %s: %w", a.Kind, a.JobID, err)
	}
	return nil
}

// FromConfig turns the configuration's guard section into a Config: the
// thresholds stay Default's, the period, window, sustain time, floors and
// actions are the site's.
// The node's guard and the simulator both take theirs from here.
func FromConfig(cfg config.Config) (Config, error) {
	g := Default()
	g.Period = cfg.Guard.Period
	g.Window = cfg.Guard.Window
	g.SustainFor = cfg.Guard.SustainFor
	g.Floors = cfg.SpeedFloor
	for cl, a := range map[profile.Class]config.GuardClassActions{
		profile.ClassHPC: cfg.Guard.Actions.HPC, profile.ClassTrain: cfg.Guard.Actions.Train, profile.ClassInfer: cfg.Guard.Actions.Infer,
	} {
		g.Actions[cl] = ClassActions{Memory: ActionKind(a.Memory), Floor: ActionKind(a.Floor)}
	}
	if err := g.Validate(); err != nil {
		return g, fmt.Errorf("guard configuration: %w", err)
	}
	return g, nil
}
