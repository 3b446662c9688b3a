// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

type trackKey struct {
	job string
	gpu int
}

// track is one job's smoothed readings on one GPU.
type track struct {
	sm          float64 // EWMA of its SM utilization, %
	n           int     // readings folded in
	breachSince time.Time
}

type gpuTrack struct {
	sm float64 // EWMA of the device's utilization.gpu
	n  int
}

type suspension struct {
	protects string // the job whose end resumes it
	gpu      int
}

// State is what the guard remembers between rounds: the smoothed readings, the
// breach timers and the actions already taken (for the rate limits).
type State struct {
	cfg        Config
	tracks     map[trackKey]*track
	gpus       map[int]*gpuTrack
	lastAction map[string]time.Time // trigger job -> its last action
	pairActed  map[[2]string]bool   // (trigger, target) already acted on
	suspended  map[string]suspension
	removed    map[string]bool        // jobs requeued or cancelled, until they leave the node
	observed   map[string][]time.Time // user|pair -> times of early observations
}

// NewState returns an empty State for cfg.
func NewState(cfg Config) *State {
	return &State{cfg: cfg, tracks: map[trackKey]*track{}, gpus: map[int]*gpuTrack{},
		lastAction: map[string]time.Time{}, pairActed: map[[2]string]bool{},
		suspended: map[string]suspension{}, removed: map[string]bool{}, observed: map[string][]time.Time{}}
}

func (s *State) alpha() float64 { return 2 / float64(s.cfg.Window+1) }

func ewma(old float64, n int, x, alpha float64) float64 {
	if n == 0 {
		return x
	}
	return old + alpha*(x-old)
}

// SmoothedSM returns a job's smoothed SM utilization on a GPU and whether it has
// a full window of readings.
func (s *State) SmoothedSM(jobID string, gpu int) (float64, bool) {
	t, ok := s.tracks[trackKey{jobID, gpu}]
	if !ok {
		return 0, false
	}
	return t.sm, t.n >= s.cfg.Window
}

// Observe folds one round's readings into the state and returns the round's
// findings: per GPU at most one memory finding (the job most over its own
// budget, only when the GPU nears full) and a speed finding for each job whose
// breach has held SustainFor. An unhealthy GPU resets its jobs' smoothing and
// timers: the guard never acts on data it did not read.
func (s *State) Observe(now time.Time, readings []GPUReading, byGPU map[int][]Job) []Finding {
	seen := map[trackKey]bool{}
	var out []Finding
	a := s.alpha()
	for _, r := range readings {
		resident := byGPU[r.GPU]
		if !r.Healthy {
			delete(s.gpus, r.GPU)
			continue
		}
		gt := s.gpus[r.GPU]
		if gt == nil {
			gt = &gpuTrack{}
			s.gpus[r.GPU] = gt
		}
		gt.sm = ewma(gt.sm, gt.n, r.DeviceSMUtil, a)
		gt.n++

		if f, ok := memoryFinding(s.cfg, r, resident); ok {
			out = append(out, f)
		}
		if !r.HaveProcSM {
			continue
		}
		for _, j := range resident {
			k := trackKey{j.ID, r.GPU}
			seen[k] = true
			t := s.tracks[k]
			if t == nil {
				t = &track{}
				s.tracks[k] = t
			}
			t.sm = ewma(t.sm, t.n, r.Jobs[j.ID].SMUtil, a)
			t.n++
		}
		for _, j := range sortedJobs(resident) {
			if f, ok := s.speedFinding(now, r.GPU, j, resident); ok {
				out = append(out, f)
			}
		}
	}
	for k := range s.tracks {
		if !seen[k] {
			delete(s.tracks, k)
		}
	}
	return out
}

func (s *State) speedFinding(now time.Time, gpu int, j Job, resident []Job) (Finding, bool) {
	t := s.tracks[trackKey{j.ID, gpu}]
	if j.Profile == nil || t.n < s.cfg.Window {
		t.breachSince = time.Time{}
		return Finding{}, false
	}
	in := SpeedInput{Class: j.Class, SoloSM: j.Profile.SMUtil.Mean, OwnSM: t.sm, DeviceSM: s.gpus[gpu].sm}
	for _, c := range resident {
		if c.ID != j.ID {
			in.CoSM = append(in.CoSM, s.tracks[trackKey{c.ID, gpu}].sm)
		}
	}
	v := JudgeSpeed(s.cfg, in)
	if !v.Breach {
		t.breachSince = time.Time{}
		return Finding{}, false
	}
	if t.breachSince.IsZero() {
		t.breachSince = now
	}
	if now.Sub(t.breachSince) < s.cfg.SustainFor {
		return Finding{}, false
	}
	return Finding{Kind: SpeedBelowFloor, GPU: gpu, Job: j, Speed: v.Speed, Floor: v.Floor, Since: t.breachSince,
		Reason: fmt.Sprintf("job %s on gpu %d: %s for %v", j.ID, gpu, v.Why, now.Sub(t.breachSince).Round(time.Second))}, true
}

// Action is what the guard does about a finding: Kind on JobID, with the job
// whose budget was breached (Trigger) and a human reason.
type Action struct {
	Kind    ActionKind
	JobID   string // the job acted on
	Trigger string // the job whose budget was breached
	GPU     int
	Reason  string
	// Protects: for Suspend, the job whose end resumes JobID.
	Protects string
	// Elsewhere: for a Requeue of a speed breach, the job should start again on
	// another node, away from the co-runner (ElsewhereRequeuer).
	Elsewhere bool
}

// History is what Decide may know of earlier actions.
type History interface {
	LastAction(trigger string) (time.Time, bool)
	ActedOn(trigger, target string) bool
	Suspended(jobID string) bool
	// Removed: the guard requeued or cancelled the job and it has not left the
	// node yet (two findings of one round must not act on it twice).
	Removed(jobID string) bool
}

// LastAction returns when trigger last caused an action.
func (s *State) LastAction(trigger string) (time.Time, bool) {
	t, ok := s.lastAction[trigger]
	return t, ok
}

// ActedOn reports whether trigger already caused an action on target.
func (s *State) ActedOn(trigger, target string) bool { return s.pairActed[[2]string{trigger, target}] }

// Suspended reports whether the guard holds jobID suspended.
func (s *State) Suspended(jobID string) bool { _, ok := s.suspended[jobID]; return ok }

// Removed reports whether the guard requeued or cancelled jobID and the job is
// still listed on the node.
func (s *State) Removed(jobID string) bool { return s.removed[jobID] }

// Record notes an action taken (anything but Observe) for the rate limits and,
// for Suspend, the resume.
func (s *State) Record(a Action, now time.Time) {
	if a.Kind == Observe {
		return
	}
	if a.Kind == Resume {
		delete(s.suspended, a.JobID)
		return
	}
	s.lastAction[a.Trigger] = now
	s.pairActed[[2]string{a.Trigger, a.JobID}] = true
	switch a.Kind {
	case Suspend:
		s.suspended[a.JobID] = suspension{protects: a.Protects, gpu: a.GPU}
	case Requeue, Cancel:
		s.removed[a.JobID] = true
	}
}

// Resumes returns a Resume for each job the guard suspended whose protected job
// is no longer on the node, and forgets what it knew of jobs that left.
func (s *State) Resumes(jobs []Job) []Action {
	present := map[string]bool{}
	for _, j := range jobs {
		present[j.ID] = true
	}
	var out []Action
	for id, sp := range s.suspended {
		switch {
		case !present[id]:
			delete(s.suspended, id) // ended or cancelled while suspended
		case !present[sp.protects]:
			out = append(out, Action{Kind: Resume, JobID: id, Trigger: sp.protects, GPU: sp.gpu,
				Reason: fmt.Sprintf("job %s, which job %s was suspended to protect, has ended", sp.protects, id)})
		}
	}
	slices.SortFunc(out, func(a, b Action) int { return CompareIDs(a.JobID, b.JobID) })
	for id := range s.lastAction {
		if !present[id] {
			delete(s.lastAction, id)
		}
	}
	for id := range s.removed {
		if !present[id] {
			delete(s.removed, id)
		}
	}
	for p := range s.pairActed {
		if !present[p[0]] && !present[p[1]] {
			delete(s.pairActed, p)
		}
	}
	return out
}

// AllowObservation applies the per-user cap to an early observation of job j
// with co-runner tags coTags, recording it when allowed.
func (s *State) AllowObservation(j Job, coTags []string, now time.Time) bool {
	co := slices.Clone(coTags)
	slices.Sort(co)
	key := j.User + "\x00" + j.Tag + "|" + strings.Join(co, "+")
	kept := s.observed[key][:0]
	for _, t := range s.observed[key] {
		if now.Sub(t) < s.cfg.ObservationWindow {
			kept = append(kept, t)
		}
	}
	if len(kept) >= s.cfg.ObservationsPerUser {
		s.observed[key] = kept
		return false
	}
	s.observed[key] = append(kept, now)
	return true
}

// Suspension is a job the guard holds suspended and the job whose end resumes
// it: what the node's guard keeps on disk so that a restart never leaves a job
// suspended for good.
type Suspension struct {
	JobID    string `json:"job"`
	Protects string `json:"protects"`
	GPU      int    `json:"gpu"`
}

// Suspensions lists the jobs the guard holds suspended, by job id.
func (s *State) Suspensions() []Suspension {
	out := make([]Suspension, 0, len(s.suspended))
	for id, sp := range s.suspended {
		out = append(out, Suspension{JobID: id, Protects: sp.protects, GPU: sp.gpu})
	}
	slices.SortFunc(out, func(a, b Suspension) int { return CompareIDs(a.JobID, b.JobID) })
	return out
}

// RestoreSuspensions takes over suspensions an earlier guard recorded: the next
// round resumes each whose protected job has left the node, as if this guard
// had suspended it.
func (s *State) RestoreSuspensions(sus []Suspension) {
	for _, sp := range sus {
		s.suspended[sp.JobID] = suspension{protects: sp.Protects, gpu: sp.GPU}
	}
}
