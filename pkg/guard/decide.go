// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"slices"
	"time"
)

// Decide turns a finding into an Action: which job, what action, and why. It is
// pure: everything it knows comes in as arguments. Its rules:
//
//   - memory: the job over its own budget is the one acted on (its class's
//     Memory action), never a neighbour.
//   - speed: the job acted on is a co-runner placed after the slowed job that
//     uses at least MinCauseSMUtil of the GPU; among several, the least
//     protected (lowest floor), then the latest placed. A co-runner placed
//     earlier is never acted on, whatever the classes: a class is its owner's
//     own word, so submitting next to someone else's job, however protected,
//     must not get theirs suspended or requeued. When every co-runner that
//     slows the job was there first, the job itself was placed into the
//     conflict and is requeued (unless its class only observes) to start again
//     where its floor holds. With no co-runner using the GPU the finding is
//     only observed.
//   - rate limits: a job triggers at most one action per Cooldown and at most one
//     action on each co-runner; a job the guard holds suspended, or has requeued
//     or cancelled, is not acted on again.
//
// sm gives each resident job's smoothed SM utilization (%) on the GPU.
func Decide(cfg Config, f Finding, resident []Job, sm map[string]float64, h History, now time.Time) Action {
	observe := func(reason string) Action {
		return Action{Kind: Observe, JobID: f.Job.ID, Trigger: f.Job.ID, GPU: f.GPU, Reason: reason}
	}
	var target Job
	var kind ActionKind
	self := false
	switch f.Kind {
	case MemoryOverBudget:
		target, kind = f.Job, cfg.actionsFor(f.Job.Class).Memory
	case SpeedBelowFloor:
		t, ok := floorTarget(cfg, f.Job, resident, sm)
		switch {
		case ok:
			target, kind = t, cfg.actionsFor(t.Class).Floor
		case !causedBy(cfg, f.Job, resident, sm):
			return observe(f.Reason + "; no co-runner is using the GPU enough to be the cause, so none is acted on")
		default:
			// Every co-runner that slows it was there first and is as protected:
			// the job was placed into the conflict. Requeued, it starts again
			// where its floor holds; only its own owner's job is touched.
			if cfg.actionsFor(f.Job.Class).Floor == Observe {
				return observe(f.Reason + fmt.Sprintf("; it was placed into the conflict and class %q is configured to observe only", classOrNone(f.Job)))
			}
			target, kind, self = f.Job, Requeue, true
		}
	default:
		return observe(fmt.Sprintf("unknown finding %q", f.Kind))
	}
	if kind == Observe {
		return observe(f.Reason + fmt.Sprintf("; class %q is configured to observe only", target.Class))
	}
	if last, ok := h.LastAction(f.Job.ID); ok && now.Sub(last) < cfg.Cooldown {
		return observe(f.Reason + fmt.Sprintf("; rate limited: job %s triggered an action %v ago (at most one per %v)",
			f.Job.ID, now.Sub(last).Round(time.Second), cfg.Cooldown))
	}
	if f.Kind == SpeedBelowFloor && h.ActedOn(f.Job.ID, target.ID) {
		return observe(f.Reason + fmt.Sprintf("; job %s already caused one action on job %s", f.Job.ID, target.ID))
	}
	if h.Suspended(target.ID) {
		return observe(f.Reason + fmt.Sprintf("; job %s is already suspended by the guard", target.ID))
	}
	if h.Removed(target.ID) {
		return observe(f.Reason + fmt.Sprintf("; job %s is already requeued or cancelled by the guard", target.ID))
	}
	a := Action{Kind: kind, JobID: target.ID, Trigger: f.Job.ID, GPU: f.GPU, Elsewhere: f.Kind == SpeedBelowFloor && kind == Requeue}
	switch f.Kind {
	case MemoryOverBudget:
		a.Reason = fmt.Sprintf("coscheml guard: %s; %s it", f.Reason, kind)
	case SpeedBelowFloor:
		if self {
			a.Reason = fmt.Sprintf("coscheml guard: %s; every co-runner slowing it was placed earlier, so it was placed into the conflict: requeue it to start again elsewhere", f.Reason)
			break
		}
		a.Reason = fmt.Sprintf("coscheml guard: %s; job %s (%s, placed %s) shares the GPU with it", f.Reason,
			target.ID, classOrNone(target), target.Start.UTC().Format(time.RFC3339))
		if kind == Suspend {
			a.Protects = f.Job.ID
			a.Reason += fmt.Sprintf(": suspend it until job %s ends", f.Job.ID)
		} else {
			a.Reason += fmt.Sprintf(": %s it", kind)
		}
	}
	return a
}

func classOrNone(j Job) string {
	if j.Class == "" {
		return "no class"
	}
	return string(j.Class)
}

// causedBy reports whether a co-runner of victim uses enough of the GPU to be
// the cause of its slowdown.
func causedBy(cfg Config, victim Job, resident []Job, sm map[string]float64) bool {
	for _, c := range resident {
		if c.ID != victim.ID && sm[c.ID] >= cfg.MinCauseSMUtil {
			return true
		}
	}
	return false
}

// floorTarget picks the co-runner a speed breach of victim acts on.
func floorTarget(cfg Config, victim Job, resident []Job, sm map[string]float64) (Job, bool) {
	var cands []Job
	for _, c := range resident {
		if c.ID == victim.ID || sm[c.ID] < cfg.MinCauseSMUtil {
			continue
		}
		if placedAfter(c, victim) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return Job{}, false
	}
	slices.SortFunc(cands, func(a, b Job) int {
		fa, fb := cfg.Floors.For(a.Class), cfg.Floors.For(b.Class)
		switch {
		case fa != fb:
			if fa < fb {
				return -1
			}
			return 1
		case placedAfter(a, b):
			return -1 // later placed first
		case placedAfter(b, a):
			return 1
		}
		return 0
	})
	return cands[0], true
}

// placedAfter says whether job a was placed after job b: a later start, or the
// same start and a higher job id (Slurm numbers jobs in submission order).
func placedAfter(a, b Job) bool {
	if !a.Start.Equal(b.Start) {
		return a.Start.After(b.Start)
	}
	return CompareIDs(a.ID, b.ID) > 0
}
