// SPDX-License-Identifier: Apache-2.0

// Package emulate is the emulated GPU job of the end-to-end replay (make e2e):
// a process that Slurm starts like any batch job, that finds out which GPU it was
// given and which jobs share that GPU, and that advances a fixed amount of work
// (seconds at solo speed) at its true speed next to those co-runners, taken from
// the measured pair table (package truth, the simulator's ground truth, never the
// model). It ends when its work is done and writes one result record.
//
// The speed next to several co-runners is the product of the pairwise speeds, as
// in the simulator (pkg/sim), so that a real run and a simulated run of the same
// jobs differ only in what Slurm and the plugin do.
package emulate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/coscheml/coscheml/pkg/inferlatency"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Speeds gives true pairwise speeds: the speed of job a next to co-runner b.
// *truth.Table satisfies it through SpeedOf (see TruthSpeeds).
type Speeds interface {
	// Pair is a's speed next to b; ok is false when either tag is unknown.
	Pair(a, b string) (speed float64, ok bool)
}

// Progress integrates work done at a piecewise-constant speed.
type Progress struct {
	Work  float64   // seconds of work at speed 1
	Done  float64   // seconds of work done so far
	Speed float64   // current speed
	At    time.Time // when Done was last brought up to date
}

// Advance brings Done up to now at the current speed, then sets the new speed.
// Time going backwards (a clock step) adds nothing.
func (p *Progress) Advance(now time.Time, speed float64) {
	if dt := now.Sub(p.At).Seconds(); dt > 0 {
		p.Done = min(p.Work, p.Done+dt*p.Speed)
	}
	p.At = now
	p.Speed = speed
}

// Finished reports whether the work is done.
func (p *Progress) Finished() bool { return p.Done >= p.Work-1e-9 }

// Left is how long the remaining work takes at the current speed (+Inf at speed 0).
func (p *Progress) Left() time.Duration {
	rem := p.Work - p.Done
	if rem <= 0 {
		return 0
	}
	if p.Speed <= 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(rem / p.Speed * float64(time.Second))
}

// Phase is one stretch of a run with the same co-runners.
type Phase struct {
	At        float64  `json:"at"`         // unix seconds when it began
	CoRunners []string `json:"co_runners"` // tags of the other jobs on the GPU
	Speed     float64  `json:"speed"`      // true speed during it
}

// Result is what one emulated job reports (one JSON line, see Encode).
type Result struct {
	JobID string `json:"job_id"`
	Node  string `json:"node"`
	GPU   int    `json:"gpu"` // the first of its GPUs
	// GPUs are every GPU of a job of several ("" for one).
	GPUs       []int         `json:"gpus,omitempty"`
	Tag        string        `json:"tag"`
	Class      profile.Class `json:"class"`
	Work       float64       `json:"work"`  // seconds of work at speed 1
	Start      float64       `json:"start"` // unix seconds
	End        float64       `json:"end"`   // unix seconds
	MinSpeed   float64       `json:"min_speed"`
	Floor      float64       `json:"floor"`       // the class's speed floor
	BelowFloor bool          `json:"below_floor"` // true speed under Floor at some time
	// BelowFloorS is the time (s) the job ran below Floor; StoppedS the time it
	// was stopped (suspended), doing no work.
	BelowFloorS float64 `json:"below_floor_s"`
	StoppedS    float64 `json:"stopped_s,omitempty"`
	Shared      bool    `json:"shared"`  // had a co-runner at some time
	Unknown     int     `json:"unknown"` // co-runner sightings without a known tag (ignored)
	History     []Phase `json:"history"`
}

// Job describes the run.
type Job struct {
	JobID string
	Node  string
	// GPUs are the job's GPUs on the node: a job of several runs at its
	// slowest GPU's speed, as a synchronous data-parallel step waits for its
	// slowest worker.
	GPUs  []int
	Tag   string
	Class profile.Class
	Work  float64 // seconds at speed 1
	Floor float64 // the class's speed floor
}

// CoRunnerFunc lists, for each of the job's GPUs in Job.GPUs' order, the tags
// of the other jobs on it now ("" for a job whose application is not known).
type CoRunnerFunc func() ([][]string, error)

// Options tune Run.
type Options struct {
	Interval time.Duration    // how often co-runners are re-read (default 500 ms)
	Now      func() time.Time // clock (default time.Now)
	// Sleep waits d or until ctx ends (default: a timer); tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Stopped reports, and forgets, whether the process was stopped since the
	// last call (SIGCONT seen: Slurm's scontrol suspend stops a job's
	// processes): the stretch since the previous tick then does no work.
	Stopped func() bool
	// Report, when set, gets the job's state every tick (its speed and its
	// co-runners on each GPU), e.g. to write the readings the guard reads.
	Report func(now time.Time, speed float64, coRunners [][]string)
}

// MaxHistory bounds the phases kept in a result (a job that sees its co-runners
// change every interval for hours would otherwise write megabytes).
const MaxHistory = 256

// Run advances j's work at its true speed next to the co-runners corun reports,
// re-reading them every Interval, and returns when the work is done or ctx ends.
// A failed read keeps the previous co-runners (the store may be briefly
// unreadable); it is not an error.
func Run(ctx context.Context, j Job, sp Speeds, corun CoRunnerFunc, o Options) (Result, error) {
	if !(j.Work >= 0) || math.IsInf(j.Work, 0) {
		return Result{}, fmt.Errorf("emulate: work %v: want a finite number >= 0", j.Work)
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if len(j.GPUs) == 0 {
		return Result{}, fmt.Errorf("emulate: job %s holds no GPU", j.JobID)
	}
	start := o.Now()
	res := Result{JobID: j.JobID, Node: j.Node, GPU: j.GPUs[0], Tag: j.Tag, Class: j.Class, Work: j.Work,
		Floor: j.Floor, Start: unixSeconds(start), MinSpeed: 1}
	if len(j.GPUs) > 1 {
		res.GPUs = slices.Clone(j.GPUs)
	}
	p := Progress{Work: j.Work, At: start, Speed: 1}
	perGPU := make([][]string, len(j.GPUs))
	var cur []string // the co-runners of every GPU, for the history
	first, pendingStop := true, false
	floorSpeed := 1.0 // the speed the floor judges since the last tick
	for {
		now := o.Now()
		if tags, err := corun(); err == nil && len(tags) == len(perGPU) {
			perGPU = tags
		}
		speed, unknown := 1.0, 0
		for _, co := range perGPU {
			s, u := SpeedNext(sp, j.Tag, co)
			speed, unknown = min(speed, s), unknown+u
		}
		cur = union(perGPU)
		res.Unknown += unknown
		stopped := pendingStop || (o.Stopped != nil && o.Stopped())
		pendingStop = false
		if stopped {
			// Stopped: the stretch since the last tick did no work and does
			// not count as time below the floor.
			if dt := now.Sub(p.At).Seconds(); dt > 0 {
				res.StoppedS += dt
			}
			p.At = now
		} else if dt := now.Sub(p.At).Seconds(); dt > 0 && floorSpeed < j.Floor-1e-9 {
			res.BelowFloorS += dt
		}
		p.Advance(now, speed)
		floorSpeed = speed
		for _, co := range perGPU {
			floorSpeed = min(floorSpeed, FloorSpeed(sp, j.Class, j.Tag, co, speed))
		}
		if o.Report != nil {
			o.Report(now, speed, perGPU)
		}
		if first || !slices.Equal(cur, res.lastCoRunners()) || speed != res.lastSpeed() {
			res.addPhase(now, cur, speed)
			first = false
		}
		if len(cur) > 0 {
			res.Shared = true
		}
		res.MinSpeed = min(res.MinSpeed, speed)
		if floorSpeed < j.Floor-1e-9 {
			res.BelowFloor = true
		}
		if p.Finished() {
			break
		}
		wait := min(o.Interval, p.Left())
		if err := o.Sleep(ctx, wait); err != nil {
			return res, fmt.Errorf("emulate: job %s stopped with %.1f of %.1f s of work done: %w", j.JobID, p.Done, p.Work, err)
		}
		// The last stretch: done exactly when the remaining work is (unless the
		// process was stopped meanwhile: the next tick accounts for that).
		if o.Stopped != nil && o.Stopped() {
			pendingStop = true
		} else if now2 := o.Now(); p.Done+now2.Sub(p.At).Seconds()*p.Speed >= p.Work-1e-9 {
			if floorSpeed < j.Floor-1e-9 {
				res.BelowFloorS += now2.Sub(p.At).Seconds()
			}
			p.Advance(now2, p.Speed)
			break
		}
	}
	res.End = unixSeconds(o.Now())
	return res, nil
}

// union is the co-runners of every GPU, each tag once, in order.
func union(perGPU [][]string) []string {
	if len(perGPU) == 1 {
		return perGPU[0]
	}
	var out []string
	for _, co := range perGPU {
		out = append(out, co...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (r *Result) lastCoRunners() []string {
	if len(r.History) == 0 {
		return nil
	}
	return r.History[len(r.History)-1].CoRunners
}

func (r *Result) lastSpeed() float64 {
	if len(r.History) == 0 {
		return math.NaN()
	}
	return r.History[len(r.History)-1].Speed
}

func (r *Result) addPhase(now time.Time, co []string, speed float64) {
	if len(r.History) >= MaxHistory {
		return
	}
	r.History = append(r.History, Phase{At: unixSeconds(now), CoRunners: append([]string{}, co...), Speed: speed})
}

// SoloShares is a Speeds that also knows each application's solo SM
// utilization (%), for an inference job's latency speed.
type SoloShares interface {
	SoloSM(tag string) (float64, bool)
}

// FloorSpeed is the speed a job's floor judges: its true speed, or for
// inference its latency speed (package inferlatency) from its co-runners' true
// GPU shares (each one's solo SM utilization times its speed next to the
// others), as the simulator judges it. A co-runner whose share is unknown
// counts as always busy.
func FloorSpeed(sp Speeds, class profile.Class, tag string, co []string, speed float64) float64 {
	if class != profile.ClassInfer || len(co) == 0 {
		return speed
	}
	ss, _ := sp.(SoloShares)
	shares := make([]float64, 0, len(co))
	for i, c := range co {
		solo, ok := 0.0, false
		if ss != nil && c != "" {
			solo, ok = ss.SoloSM(c)
		}
		if !ok {
			shares = append(shares, inferlatency.Unmeasured)
			continue
		}
		others := append(slices.Clone(co[:i]), co[i+1:]...)
		cs, _ := SpeedNext(sp, c, append(others, tag))
		shares = append(shares, solo*cs)
	}
	return inferlatency.SpeedFromSMUtil(shares)
}

// SpeedNext is the true speed of an application next to co-runners: the product
// of its pairwise speeds (1 alone). Co-runners with an unknown or empty tag are
// left out and counted.
func SpeedNext(sp Speeds, tag string, co []string) (speed float64, unknown int) {
	speed = 1
	for _, c := range co {
		s, ok := sp.Pair(tag, c)
		if !ok || c == "" {
			unknown++
			continue
		}
		speed *= s
	}
	return speed, unknown
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
