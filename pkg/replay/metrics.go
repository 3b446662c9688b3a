// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/emulate"
	"github.com/coscheml/coscheml/pkg/sim"
)

// Submitted is what the replay driver knows of one job it submitted.
type Submitted struct {
	JobID  string  `json:"job_id"` // Slurm's
	Trace  string  `json:"trace"`  // the trace job's ID
	Submit float64 `json:"submit"` // unix seconds when sbatch returned
	// Intended is the "node/gpu" the policy chose, "node/g0,g1" for several
	// ("" when it chose no GPU: plugin off, or a placement not pinned to a GPU).
	Intended string `json:"intended,omitempty"`
	Decided  bool   `json:"decided"` // the plugin made a decision for it
	// Redecided: its last decision came from the re-decide loop (job_modify),
	// whose untyped shard count a job ending in between can redirect on
	// releases that refuse typed updates (22.05).
	Redecided bool `json:"redecided,omitempty"`
}

// Run is one setup on one seed: what was submitted and what the jobs reported.
type Run struct {
	Setup     string
	Seed      int64
	GPUs      int
	Submitted []Submitted
	Results   []emulate.Result
}

// Placement counts how placements compare with what the policy intended.
type Placement struct {
	Decided  int `json:"decided"`  // jobs the plugin decided
	Pinned   int `json:"pinned"`   // ... with a GPU chosen
	Landed   int `json:"landed"`   // ... that ran on that GPU
	Unpinned int `json:"unpinned"` // decided without a GPU of its own
	// RedecidedPinned and RedecidedLanded: the pinned placements made by the
	// re-decide loop, and those of them that ran where intended (included above).
	RedecidedPinned int `json:"redecided_pinned,omitempty"`
	RedecidedLanded int `json:"redecided_landed,omitempty"`
}

func (p *Placement) add(q Placement) {
	p.Decided += q.Decided
	p.Pinned += q.Pinned
	p.Landed += q.Landed
	p.Unpinned += q.Unpinned
	p.RedecidedPinned += q.RedecidedPinned
	p.RedecidedLanded += q.RedecidedLanded
}

// AsIntended is the share (%) of pinned placements that ran where intended; NaN
// without any.
func (p Placement) AsIntended() float64 {
	if p.Pinned == 0 {
		return nan
	}
	return 100 * float64(p.Landed) / float64(p.Pinned)
}

// Measured is a real run turned into the simulator's result shape, so that the
// same code (sim.Summarize) computes the real and the simulated metrics.
type Measured struct {
	Result    *sim.Result
	Placement Placement
	Missing   []string // submitted jobs without a result record
	// Elsewhere words each pinned placement that ran elsewhere: "job 12:
	// intended n1/0,1, ran on n1/2,3".
	Elsewhere []string
}

// Measure turns a real run into a sim.Result: times relative to the first
// submission, the GPU-time allocated as the union over each GPU of its jobs'
// [start, end] spans, the work done as the sum of the jobs' work (every job that
// reported ran to its end).
func Measure(r Run) (Measured, error) {
	if len(r.Submitted) == 0 {
		return Measured{}, fmt.Errorf("replay: setup %s seed %d: nothing submitted", r.Setup, r.Seed)
	}
	t0 := r.Submitted[0].Submit
	for _, s := range r.Submitted {
		t0 = min(t0, s.Submit)
	}
	byID := map[string]emulate.Result{}
	for _, res := range r.Results {
		byID[res.JobID] = res
	}
	m := Measured{Result: &sim.Result{Policy: r.Setup, GPUs: r.GPUs}}
	spans := map[string][][2]float64{}
	for _, s := range r.Submitted {
		if s.Decided {
			m.Placement.Decided++
			if s.Intended == "" {
				m.Placement.Unpinned++
			} else {
				m.Placement.Pinned++
				if s.Redecided {
					m.Placement.RedecidedPinned++
				}
			}
		}
		res, ok := byID[s.JobID]
		if !ok {
			m.Missing = append(m.Missing, s.JobID)
			continue
		}
		gpus := res.GPUs
		if len(gpus) == 0 {
			gpus = []int{res.GPU}
		}
		where := res.Node + "/" + joinInts(gpus)
		switch {
		case s.Intended != "" && sameGPUs(s.Intended, where):
			m.Placement.Landed++
			if s.Redecided {
				m.Placement.RedecidedLanded++
			}
		case s.Intended != "":
			m.Elsewhere = append(m.Elsewhere, fmt.Sprintf("job %s: intended %s, ran on %s", s.JobID, s.Intended, where))
		}
		jr := sim.JobResult{ID: s.Trace, Tag: res.Tag, Class: res.Class, GPUs: len(gpus),
			Submit: s.Submit - t0, Start: res.Start - t0, End: res.End - t0, Duration: res.Work,
			MinSpeed: res.MinSpeed, Shared: res.Shared, BelowFloor: res.BelowFloor}
		// A job cannot start before it was submitted; clocks are one host's,
		// so this only absorbs rounding.
		jr.Start = max(jr.Start, jr.Submit)
		jr.End = max(jr.End, jr.Start)
		m.Result.Jobs = append(m.Result.Jobs, jr)
		m.Result.Makespan = max(m.Result.Makespan, jr.End)
		m.Result.Useful += res.Work * float64(len(gpus))
		for _, g := range gpus {
			at := fmt.Sprintf("%s/%d", res.Node, g)
			spans[at] = append(spans[at], [2]float64{jr.Start, jr.End})
		}
	}
	for _, sp := range spans {
		m.Result.AllocGPUS += unionLength(sp)
	}
	return m, nil
}

// sameGPUs says whether two "node/g0,g1" name the same GPUs (the decision
// lists them in its order, the job's record in index order).
func sameGPUs(a, b string) bool {
	canon := func(w string) string {
		node, list, _ := strings.Cut(w, "/")
		gs := strings.Split(list, ",")
		slices.Sort(gs)
		return node + "/" + strings.Join(gs, ",")
	}
	return canon(a) == canon(b)
}

// joinInts is "0,3".
func joinInts(xs []int) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, ",")
}

// unionLength is the total length covered by the spans.
func unionLength(sp [][2]float64) float64 {
	sort.Slice(sp, func(a, b int) bool { return sp[a][0] < sp[b][0] })
	total, lo, hi := 0.0, 0.0, 0.0
	open := false
	for _, s := range sp {
		switch {
		case !open:
			lo, hi, open = s[0], s[1], true
		case s[0] <= hi:
			hi = max(hi, s[1])
		default:
			total += hi - lo
			lo, hi = s[0], s[1]
		}
	}
	if open {
		total += hi - lo
	}
	return total
}
