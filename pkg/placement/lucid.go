// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Lucid re-implements the packing of Lucid (Hu et al., ASPLOS'23) from its
// paper and the public description of its simulator (docs/peers.md):
//
//   - the queue is ordered by priority = estimated duration x GPUs, smallest
//     first (Priority);
//   - packing is on only while a forecast of the submissions says the cluster is
//     busy: more than BusyPerBin GPU-job submissions per 10-minute bin on
//     average over the next 5 bins, re-checked every 100 s (the simulator's
//     actual future submissions stand for Lucid's forecaster);
//   - a queued job of at most 8 GPUs joins the FIRST running job (cluster
//     order) that holds its GPUs alone, has the same number of GPUs, leaves room
//     in GPU memory, has a sharing score sum <= 2 with it, and whose priority is
//     at most twice the queued job's; at most 2 jobs per GPU (the shared rules'
//     MaxCoRunners); otherwise the job runs alone on idle GPUs;
//   - the sharing score is per job (0, 1 or 2), from a small decision-tree
//     classifier on its solo profile (package sharescore), not a prediction per
//     pair.
//
// Lucid is interference-aware only through the score: it never predicts a
// pair, so nothing keeps a job above its floor.
type Lucid struct {
	base
	score ShareScorer
	prio  map[string]float64 // priority of each job placed
	subs  []float64          // the run's submissions, sorted
	now   float64
	check float64 // when busy was last re-checked (<0: never)
	busy  bool
}

// Lucid's thresholds, from its simulator.
const (
	lucidBin        = 600.0 // seconds per forecast bin
	lucidBins       = 5
	lucidBusyPerBin = 2.0
	lucidRecheck    = 100.0
	lucidMaxGPUs    = 8
	lucidMaxScore   = 2
	lucidPrioRatio  = 2.0
)

// NewLucid returns the Lucid peer with score, the per-job sharing score (0, 1 or 2).
func NewLucid(score ShareScorer, opts Options) (*Lucid, error) {
	if score == nil {
		return nil, fmt.Errorf("lucid policy: no sharing score (Options.ShareScore; package sharescore trains one)")
	}
	b, err := newBase("lucid", "Lucid: first running job of as many GPUs with sharing scores summing to at most 2, else alone", opts)
	if err != nil {
		return nil, err
	}
	p := &Lucid{base: b, score: score, prio: map[string]float64{}, check: -1}
	p.bind()
	return p, nil
}

// Plan keeps the run's submissions for the forecast.
func (p *Lucid) Plan(jobs []PlannedJob) { p.subs = sortedSubmits(jobs) }

// SetNow re-checks the forecast every lucidRecheck seconds.
func (p *Lucid) SetNow(t float64) {
	p.now = t
	if p.check >= 0 && t-p.check < lucidRecheck {
		return
	}
	p.check = t
	p.busy = float64(countIn(p.subs, t, t+lucidBins*lucidBin))/lucidBins > lucidBusyPerBin
}

// Priority is estimated duration x GPUs.
func (p *Lucid) Priority(r *Request) float64 { return r.EstDuration * float64(max(r.GPUs, 1)) }

// Place chooses GPUs for r without changing c.
func (p *Lucid) Place(c *Cluster, r *Request) Decision {
	if d, bad := badRequest(p.name, c, r); bad {
		return d
	}
	d := p.pack(c, r)
	if d.Action == ActionWait {
		d = p.place(c, r, alone{&p.base, lucidMaxGPUs})
	}
	if d.Action != ActionWait {
		p.prio[r.JobID] = p.Priority(r)
	}
	return d
}

// pack is Lucid's packing rule: the first running job r may join, or a wait.
func (p *Lucid) pack(c *Cluster, r *Request) Decision {
	none := Decision{Action: ActionWait}
	if !p.busy || r.Profile == nil || r.GPUs > lucidMaxGPUs {
		return none
	}
	mine := p.score.Score(r.Profile)
	for _, j := range residentJobs(c) {
		if j.shared || len(j.at) != r.GPUs || j.prof.Profile == nil {
			continue
		}
		prio, ok := p.prio[j.id]
		if !ok || prio > lucidPrioRatio*p.Priority(r) || mine+p.score.Score(j.prof.Profile) > lucidMaxScore {
			continue
		}
		if r.Nodes != nil && !allowsAll(r, j.at) || !joinable(c, &p.opts, j.at, r) {
			continue
		}
		d := joinDecision(c, &p.opts, j.at)
		var b strings.Builder
		fmt.Fprintf(&b, "lucid: share: job %s (%s, score %d) packed with job %s (%s, score %d) on %d GPU(s)",
			profile.Sanitize(r.JobID), tagOf(r), mine, profile.Sanitize(j.id), profile.Sanitize(j.prof.Profile.Tag), p.score.Score(j.prof.Profile), len(j.at))
		d.Reason = b.String()
		return d
	}
	return none
}

// allowsAll says whether r may use the nodes of every slot.
func allowsAll(r *Request, at []Slot) bool {
	for _, s := range at {
		if !r.allows(int32(s.Node)) {
			return false
		}
	}
	return true
}
