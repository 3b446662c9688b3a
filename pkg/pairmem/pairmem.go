// SPDX-License-Identifier: Apache-2.0

// Package pairmem is the pair memory: measured co-located speeds (the Epilog's
// observations) aggregated per ordered application pair, with evidence counts
// and a confidence of their own, and a model.Bounder that lets them override
// the model for a pair once there is enough evidence (docs/model.md).
//
// Rules:
//   - A pair is ordered: "A next to B" (A's speed while sharing with B). Only
//     observations with exactly one co-runner are pair evidence.
//   - Speeds outside (0, MaxSpeed] are refused; values above 1 are clipped to 1
//     (measurement noise), as the ground truth does.
//   - One user's evidence on a pair is capped: each user counts for at most
//     MaxPerUser observations (their mean speed is used, weighted by the capped
//     count), so one user cannot outvote the others or make a pair "known" alone.
//   - Per application, the memory also keeps the model's residuals (prediction
//   - measured) over every observation of the application as the job, with
//     the same per-user cap. For a pair the memory does not know, once an
//     application has AppMinEvidence of them, the prediction is corrected by
//     their mean and its lower bound is the corrected prediction less a
//     prediction interval of their spread: z'(c) x s x sqrt(1 + 1/n), z' a
//     Student-t-like widening of the normal quantile for small n. So the model
//     learns an unseen application's bias from a few co-runs, instead of
//     carrying the training-time margin for every application forever.
//   - The memory overrides the model for a pair once the capped evidence reaches
//     MinEvidence. Before that, any evidence can only make the decision more
//     cautious: the lower bound is the smaller of the model's and the memory's,
//     so a bad pair is not repeated, and one user alone can at worst stop a
//     pair from sharing, never make a pair share. Its estimate is the weighted mean; its lower bound at
//     coverage c is mean - z(c) x s / sqrt(n), s = max(the observations' spread,
//     NoiseSD), n = the capped evidence: a bound on the pair's mean speed that
//     tightens as evidence accumulates.
package pairmem

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Options configure a Memory; zero fields take the defaults.
type Options struct {
	// MinEvidence is the capped evidence (observations) a pair needs before it
	// overrides the model (default 2).
	MinEvidence float64
	// MaxPerUser is the most observations one user counts for on one pair
	// (default 1: a pair becomes known only from MinEvidence distinct users).
	MaxPerUser float64
	// NoiseSD is the least spread assumed for one measurement (default 0.03:
	// repeated Lucid measurements of one pair differ by about that much).
	NoiseSD float64
	// AppMinEvidence is the capped evidence (observations) an application needs
	// before its residuals correct the model (default 5).
	AppMinEvidence float64
	// MaxPerUserApp is the most observations one user counts for on one
	// application's residuals (default 3).
	MaxPerUserApp float64
	// MaxUsersPerPair bounds the users tracked per pair (default 64); later users
	// are ignored for that pair, so memory stays bounded.
	MaxUsersPerPair int
	// MaxPairs bounds the pairs tracked (default 1<<20); later pairs are ignored.
	MaxPairs int
}

func (o Options) withDefaults() Options {
	if o.MinEvidence <= 0 {
		o.MinEvidence = 2
	}
	if o.MaxPerUser <= 0 {
		o.MaxPerUser = 1
	}
	if o.AppMinEvidence <= 0 {
		o.AppMinEvidence = 5
	}
	if o.MaxPerUserApp <= 0 {
		o.MaxPerUserApp = 3
	}
	if o.NoiseSD <= 0 {
		o.NoiseSD = 0.03
	}
	if o.MaxUsersPerPair <= 0 {
		o.MaxUsersPerPair = 64
	}
	if o.MaxPairs <= 0 {
		o.MaxPairs = 1 << 20
	}
	return o
}

type key struct{ job, co string }

// userStats is one user's observations of one pair.
type userStats struct {
	uid      string
	n, s, ss float64
}

// pairStats is what is known of one pair, kept summarized for lock-free-ish
// reads: the estimate is recomputed when an observation is added.
type pairStats struct {
	users    []userStats
	raw      int     // observations accepted, before capping
	evidence float64 // sum over users of min(n, MaxPerUser)
	mean     float64
	sd       float64 // spread of the capped-weighted observations
}

// Memory aggregates observations per ordered pair. It is safe for concurrent
// use; Estimate does not allocate.
type Memory struct {
	opts    Options
	mu      sync.RWMutex
	pairs   map[key]*pairStats
	resid   map[rkey]*pairStats // residuals (prediction - measured) per job application, per level
	version atomic.Uint64
}

// New returns an empty memory.
func New(opts Options) *Memory {
	return &Memory{opts: opts.withDefaults(), pairs: map[key]*pairStats{}, resid: map[rkey]*pairStats{}}
}

// Options returns the options in effect.
func (m *Memory) Options() Options { return m.opts }

// ErrSpeed is wrapped by Add's error for a speed outside (0, MaxSpeed].
var ErrSpeed = errors.New("pair memory: speed out of range")

// Add records that job ran at speed next to co, measured for user uid. It
// refuses invalid tags and speeds; an empty uid counts as one anonymous user.
func (m *Memory) Add(job, co, uid string, speed float64) error {
	if err := profile.ValidateTag(job); err != nil {
		return fmt.Errorf("pair memory: job: %w", err)
	}
	if err := profile.ValidateTag(co); err != nil {
		return fmt.Errorf("pair memory: co-runner: %w", err)
	}
	if !(speed > 0 && speed <= observation.MaxSpeed) {
		return fmt.Errorf("%w: %v outside (0, %v]", ErrSpeed, speed, observation.MaxSpeed)
	}
	speed = min(speed, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{job, co}
	p := m.pairs[k]
	if p == nil {
		if len(m.pairs) >= m.opts.MaxPairs {
			return nil
		}
		p = &pairStats{}
		m.pairs[k] = p
	}
	m.record(p, uid, speed, m.opts.MaxPerUser)
	return nil
}

// Residual levels, from the most specific: the model's residuals for the job
// application next to any application of the co-runner's family, for the job's
// family next to the co-runner's family, and for the job application next to
// anything. A pair the memory does not know is corrected from the most
// specific level with enough evidence: the model errs alike for the batch
// sizes and precisions of one family next to another, so a family pair learns
// from every co-run of its members, far sooner than each tag pair from its own.
const (
	levelTagFam uint8 = iota
	levelFamFam
	levelTag
	nLevels
)

// rkey is a residual group: level and its two names (b empty for levelTag).
type rkey struct {
	level uint8
	a, b  string
}

// AddResidual records one residual of the model (prediction - measured speed)
// for job application job (next to any co-runners), measured for user uid.
func (m *Memory) AddResidual(job, uid string, residual float64) error {
	return m.addResidual(job, "", uid, residual)
}

// AddPairResidual records one residual of the model for job next to exactly
// one co-runner co: it counts for the job application, for the job next to
// co's family and for job's family next to co's family.
func (m *Memory) AddPairResidual(job, co, uid string, residual float64) error {
	if err := profile.ValidateTag(co); err != nil {
		return fmt.Errorf("pair memory: co-runner: %w", err)
	}
	return m.addResidual(job, co, uid, residual)
}

func (m *Memory) addResidual(job, co, uid string, residual float64) error {
	if err := profile.ValidateTag(job); err != nil {
		return fmt.Errorf("pair memory: job: %w", err)
	}
	if !(residual >= -2 && residual <= 2) {
		return fmt.Errorf("%w: residual %v outside [-2, 2]", ErrSpeed, residual)
	}
	keys := [nLevels]rkey{{level: levelTag, a: job}}
	n := 1
	if co != "" {
		cf := model.Family(co)
		keys[1] = rkey{level: levelTagFam, a: job, b: cf}
		keys[2] = rkey{level: levelFamFam, a: model.Family(job), b: cf}
		n = 3
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys[:n] {
		p := m.resid[k]
		if p == nil {
			if len(m.resid) >= m.opts.MaxPairs {
				continue
			}
			p = &pairStats{}
			m.resid[k] = p
		}
		m.record(p, uid, residual, m.opts.MaxPerUserApp)
	}
	return nil
}

// record adds value v for user uid to p (under m.mu) and bumps the version.
func (m *Memory) record(p *pairStats, uid string, v, perUser float64) {
	u := -1
	for i := range p.users {
		if p.users[i].uid == uid {
			u = i
			break
		}
	}
	if u < 0 {
		if len(p.users) >= m.opts.MaxUsersPerPair {
			return
		}
		p.users = append(p.users, userStats{uid: uid})
		u = len(p.users) - 1
	}
	us := &p.users[u]
	us.n++
	us.s += v
	us.ss += v * v
	p.raw++
	summarize(p, perUser)
	m.version.Add(1)
}

// summarize recomputes capped evidence, mean and spread: each user's
// observations count with weight min(n, perUser)/n.
func summarize(p *pairStats, perUser float64) {
	var w, s, ss float64
	for _, u := range p.users {
		cw := min(u.n, perUser)
		f := cw / u.n
		w += cw
		s += f * u.s
		ss += f * u.ss
	}
	p.evidence = w
	if w == 0 {
		p.mean, p.sd = 0, 0
		return
	}
	p.mean = s / w
	p.sd = math.Sqrt(max(ss/w-p.mean*p.mean, 0))
}

// AddObservations adds every one-co-runner observation; uid gives an
// observation's user ("" when unknown). It returns how many were used and the
// first error met (the others are still added).
func (m *Memory) AddObservations(obs []observation.Observation, uid func(*observation.Observation) string) (used int, err error) {
	for i := range obs {
		o := &obs[i]
		if len(o.CoTags) != 1 {
			continue
		}
		u := ""
		if uid != nil {
			u = uid(o)
		}
		if e := m.Add(o.Tag, o.CoTags[0], u, o.Speed); e != nil {
			if err == nil {
				err = fmt.Errorf("observation %d: %w", i+1, e)
			}
			continue
		}
		used++
	}
	return used, err
}

// Estimate is what the memory knows of one pair.
type Estimate struct {
	Speed    float64 // weighted mean measured speed
	Lower    float64 // lower bound at the coverage asked
	Evidence float64 // capped evidence
	Raw      int     // observations accepted
}

// Estimate returns the memory's estimate for job next to co at coverage (in
// (0, 1)), and whether the pair has enough evidence to override the model.
// With some evidence but not enough, the estimate is filled in (Evidence > 0)
// and ok is false.
func (m *Memory) Estimate(job, co string, coverage float64) (Estimate, bool) {
	m.mu.RLock()
	p := m.pairs[key{job, co}]
	var e Estimate
	var sd float64
	if p != nil {
		e = Estimate{Speed: p.mean, Evidence: p.evidence, Raw: p.raw}
		sd = p.sd
	}
	m.mu.RUnlock()
	if p == nil || e.Evidence <= 0 {
		return e, false
	}
	s := max(sd, m.opts.NoiseSD)
	e.Lower = e.Speed - z(coverage)*s/math.Sqrt(e.Evidence)
	return e, e.Evidence >= m.opts.MinEvidence
}

// AppResidual returns the capped-weighted mean and spread of the model's
// residuals for job application job, its capped evidence, and whether that is
// enough (AppMinEvidence) to correct the model.
func (m *Memory) AppResidual(job string) (mean, sd, evidence float64, ok bool) {
	return m.residual(rkey{level: levelTag, a: job})
}

// PairResidual is AppResidual for job next to exactly one co-runner co: the
// most specific level (job next to co's family, job's family next to co's
// family, job next to anything) with enough evidence, or the job
// application's level when none has.
func (m *Memory) PairResidual(job, co string) (mean, sd, evidence float64, ok bool) {
	cf := model.Family(co)
	for _, k := range [...]rkey{{level: levelTagFam, a: job, b: cf}, {level: levelFamFam, a: model.Family(job), b: cf}} {
		if mean, sd, evidence, ok = m.residual(k); ok {
			return mean, sd, evidence, ok
		}
	}
	return m.residual(rkey{level: levelTag, a: job})
}

func (m *Memory) residual(k rkey) (mean, sd, evidence float64, ok bool) {
	m.mu.RLock()
	p := m.resid[k]
	if p != nil {
		mean, sd, evidence = p.mean, p.sd, p.evidence
	}
	m.mu.RUnlock()
	return mean, sd, evidence, p != nil && evidence >= m.opts.AppMinEvidence
}

// Len is the number of pairs with any observation.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pairs)
}

// Known is the number of pairs with enough evidence to override the model.
func (m *Memory) Known() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, p := range m.pairs {
		if p.evidence >= m.opts.MinEvidence {
			n++
		}
	}
	return n
}

// Version changes whenever an observation is added, so callers that cache
// predictions (placement's memo) know to drop them.
func (m *Memory) Version() uint64 { return m.version.Load() }

// zt widens z(c) for a spread estimated from n observations (first
// Cornish-Fisher term of Student's t with n-1 degrees of freedom).
func zt(c, n float64) float64 {
	q := z(c)
	if n <= 1 {
		return 3 * q
	}
	return q + (q*q*q+q)/(4*(n-1))
}

// z is the standard normal quantile at coverage c (one-sided), 0 for c <= 0.5.
func z(c float64) float64 { return model.NormalQuantile(c) }

// Predictor puts a Memory in front of a model: for a job with exactly one
// co-runner whose pair the memory knows, the memory's estimate and lower bound;
// for a pair with some evidence but not enough, the model's prediction with the
// smaller of the two lower bounds; otherwise the model's. It implements
// model.Bounder; its revision is the memory's version.
type Predictor struct {
	model model.Bounder // the model's bound (its prediction itself when it has none)
	// calibrated is the model when it is a *model.Model: the coverage its
	// bound holds at for a co-location, and its measured pairs (nil for
	// another predictor: neither applies).
	calibrated  *model.Model
	familiesOut *model.Calibration // calibrated's leave-families-out calibration, when it has one
	mem         *Memory
	def         float64 // coverage the memory's own bounds use when asked for 0
	study       Study
}

// Study holds switches that bring back earlier rules, so the tuning studies
// (pkg/sim's TestTuneFloorTarget, TestTuneLevers) can measure what each rule
// is worth. NewPredictor leaves them all off.
type Study struct {
	// NoFamilyLevels turns off the family levels of the residuals (job next to
	// the co-runner's family, family next to family): only the job
	// application's residuals correct the model.
	NoFamilyLevels bool
	// UniformCoverage makes the memory's bounds use the model's
	// leave-families-out default coverage for every co-location when asked for
	// the default, instead of the coverage of the model calibration that
	// applies to it.
	UniformCoverage bool
	// KnownPairsClassWeighted keeps a known pair's bound at the coverage of
	// the model calibration for the co-location at its class-weighted default
	// for every floor, instead of that calibration's coverage for the job's
	// floor (model.Calibration.FloorCoverage).
	KnownPairsClassWeighted bool
}

// NewPredictor wraps m with mem. Coverage 0 is passed to the model as 0 (each
// of its calibrations uses its own default); the memory's own bounds then use
// the model's default coverage (a calibrated *model.Model's), else 0.9.
func NewPredictor(m model.Predictor, mem *Memory) (*Predictor, error) {
	return NewStudyPredictor(m, mem, Study{})
}

// NewStudyPredictor is NewPredictor with study's earlier rules, for the
// tuning studies.
func NewStudyPredictor(m model.Predictor, mem *Memory, study Study) (*Predictor, error) {
	if m == nil || mem == nil {
		return nil, errors.New("pair memory predictor: nil model or memory")
	}
	p := &Predictor{mem: mem, def: 0.9, study: study}
	p.model, _ = model.Bounds(m)
	if mm, ok := m.(*model.Model); ok {
		p.calibrated = mm
		if mm.Calibration.DefaultCoverage > 0 {
			p.def = mm.Calibration.DefaultCoverage
			p.familiesOut = &mm.Calibration
		}
	}
	return p, nil
}

var _ model.Bounder = (*Predictor)(nil)

// PredictSpeed is the memory's estimate for a known pair, else the model's.
func (p *Predictor) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	s, _ := p.Bound(job, co, model.Query{})
	return s
}

// Bound returns the memory's estimate and lower bound for a known pair, else
// the model's (the model's prediction itself when it has no bound). At
// coverage 0 the model bounds at its default coverage for the floor
// (model.Calibration.FloorCoverage: infer's stricter floor is cleared at a
// higher coverage), and so do the memory's own bounds that stand in for the
// model's.
func (p *Predictor) Bound(job *profile.Profile, co []*profile.Profile, q model.Query) (speed, lower float64) {
	coverage, floor := q.Coverage, q.Floor
	// The model gets the coverage as asked: 0 lets each of its calibrations
	// (leave-families-out, seen pairs) use its own default, as documented for
	// floor_confidence 0. Handing it p.def instead would charge seen pairs
	// their margin at the unseen default (0.975, not their own).
	modelCov := coverage
	pairCov := coverage
	if coverage <= 0 {
		coverage = p.def
		if p.familiesOut != nil {
			// residual corrections stand in for the leave-families-out bound
			coverage = max(p.familiesOut.CoverageAt(floor), p.def)
		}
		pairCov = coverage
		// A known pair's bound stands in for the model's bound on this
		// co-location: it holds at the coverage that bound would have (the
		// seen-pairs default for trained applications, for the job's floor).
		if p.calibrated != nil && !p.study.UniformCoverage {
			c := p.calibrated.DefaultCoverageForFloor(job, co, floor)
			if p.study.KnownPairsClassWeighted {
				c = p.calibrated.DefaultCoverageFor(job, co)
			}
			if c > 0 {
				pairCov = c
			}
		}
	}
	var (
		e        Estimate
		measured bool // the model answers this pair from a measurement
	)
	if job != nil && len(co) == 1 && co[0] != nil {
		var (
			ok        bool
			ms, noise float64
			mn        int
		)
		if p.calibrated != nil {
			ms, mn, noise, measured = p.calibrated.Measurement(job, co)
		}
		e, ok = p.mem.Estimate(job.Tag, co[0].Tag, pairCov)
		if measured && e.Evidence > 0 {
			return pooled(e, ok, ms, float64(mn), noise, p.mem.opts.NoiseSD, pairCov)
		}
		if ok {
			return e.Speed, e.Lower
		}
	}
	speed, lower = p.model.Bound(job, co, model.Query{Coverage: modelCov, Floor: floor})
	if job != nil && len(co) > 0 && !measured {
		var r, sd, n float64
		var ok bool
		if len(co) == 1 && co[0] != nil && !p.study.NoFamilyLevels {
			r, sd, n, ok = p.mem.PairResidual(job.Tag, co[0].Tag)
		} else {
			r, sd, n, ok = p.mem.AppResidual(job.Tag)
		}
		if ok {
			// The corrected prediction keeps the narrower of the two margins: the
			// residuals' prediction interval, or the model's calibrated margin
			// (valid for the uncorrected prediction, conservative once a bias is
			// removed). Each holds at the coverage asked, the smaller at worst at
			// twice the miss rate; chosen on the synthetic tuning study
			// (TestTuneFloorTarget, docs/model.md): JCT -4 points, same floors.
			margin := speed - lower
			speed -= r
			lower = speed - min(zt(coverage, n)*max(sd, p.mem.opts.NoiseSD)*math.Sqrt(1+1/n), margin)
		}
	}
	if e.Evidence > 0 {
		lower = min(lower, e.Lower)
	}
	return speed, lower
}

// pooled is a measured pair's estimate once the cluster observed it too: the
// training measurement (mean ms over mn runs, noise) counts as mn more pieces
// of evidence beside the memory's e. Without the memory's MinEvidence (enough
// users) neither the estimate nor the bound is above the measurement's own: one
// user can make a measured pair more cautious, never looser.
func pooled(e Estimate, enough bool, ms, mn, noise, memNoise, coverage float64) (speed, lower float64) {
	n := mn + e.Evidence
	speed = (mn*ms + e.Evidence*e.Speed) / n
	lower = speed - z(coverage)*max(noise, memNoise)/math.Sqrt(n)
	if !enough {
		speed = min(speed, ms)
		lower = min(lower, ms-z(coverage)*noise/math.Sqrt(mn), e.Lower)
	}
	return speed, lower
}

// Observe records one measurement: job ran at speed next to co, for user uid.
// With one co-runner it is pair evidence; with any, a residual of the model
// for the job's application (prediction - measured, the speed clipped to 1).
func (p *Predictor) Observe(job *profile.Profile, co []*profile.Profile, uid string, speed float64) error {
	if job == nil || len(co) == 0 {
		return errors.New("pair memory: observation without a job or co-runners")
	}
	for _, c := range co {
		if c == nil {
			return errors.New("pair memory: nil co-runner")
		}
	}
	if len(co) == 1 {
		if err := p.mem.Add(job.Tag, co[0].Tag, uid, speed); err != nil {
			return err
		}
	} else if !(speed > 0 && speed <= observation.MaxSpeed) {
		return fmt.Errorf("%w: %v outside (0, %v]", ErrSpeed, speed, observation.MaxSpeed)
	}
	if p.calibrated != nil && p.calibrated.IsMeasured(job, co) {
		// the model answered from a measurement: its residual says nothing of
		// the trees' bias, which the corrections learn
		return nil
	}
	res := p.model.PredictSpeed(job, co) - min(speed, 1)
	if len(co) == 1 {
		return p.mem.AddPairResidual(job.Tag, co[0].Tag, uid, res)
	}
	return p.mem.AddResidual(job.Tag, uid, res)
}

// Revision implements model.Bounder: the memory's version, which changes
// with every observation added.
func (p *Predictor) Revision() uint64 { return p.mem.Version() }
