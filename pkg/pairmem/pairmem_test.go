// SPDX-License-Identifier: Apache-2.0

package pairmem

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

func prof(tag string) *profile.Profile { return &profile.Profile{Tag: tag, Class: profile.ClassTrain} }

// constModel predicts a fixed speed with a fixed margin.
type constModel struct{ speed, margin float64 }

func (c constModel) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 {
	if len(co) == 0 {
		return 1
	}
	return c.speed
}

func (c constModel) Bound(job *profile.Profile, co []*profile.Profile, _ model.Query) (float64, float64) {
	s := c.PredictSpeed(job, co)
	if len(co) == 0 {
		return s, s
	}
	return s, s - c.margin
}

func (constModel) Revision() uint64 { return 0 }

type obs struct {
	job, co, uid string
	speed        float64
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name      string
		obs       []obs
		known     bool
		evidence  float64
		speed     float64
		wantErrAt int // index of an observation Add must refuse, -1 none
	}{
		{"empty", nil, false, 0, 0, -1},
		{"one user is not enough", []obs{{"a", "b", "u1", 0.8}, {"a", "b", "u1", 0.8}, {"a", "b", "u1", 0.8}}, false, 1, 0.8, -1},
		{"two users", []obs{{"a", "b", "u1", 0.8}, {"a", "b", "u2", 0.6}}, true, 2, 0.7, -1},
		// u1 floods the pair with 0.1; capped at one observation's weight, its mean counts once.
		{"one user capped", []obs{{"a", "b", "u1", 0.1}, {"a", "b", "u1", 0.1}, {"a", "b", "u1", 0.1}, {"a", "b", "u2", 0.9}, {"a", "b", "u3", 0.9}}, true, 3, (0.1 + 0.9 + 0.9) / 3, -1},
		{"clipped to 1", []obs{{"a", "b", "u1", 1.1}, {"a", "b", "u2", 0.9}}, true, 2, 0.95, -1},
		{"other direction is another pair", []obs{{"b", "a", "u1", 0.5}, {"b", "a", "u2", 0.5}}, false, 0, 0, -1},
		{"bad speed", []obs{{"a", "b", "u1", 0}}, false, 0, 0, 0},
		{"NaN speed", []obs{{"a", "b", "u1", math.NaN()}}, false, 0, 0, 0},
		{"bad tag", []obs{{"../a", "b", "u1", 0.5}}, false, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Options{})
			v0 := m.Version()
			for i, o := range tc.obs {
				err := m.Add(o.job, o.co, o.uid, o.speed)
				if (err != nil) != (i == tc.wantErrAt) {
					t.Fatalf("observation %d: err %v", i, err)
				}
			}
			e, ok := m.Estimate("a", "b", 0.9)
			if ok != tc.known || math.Abs(e.Evidence-tc.evidence) > 1e-12 || (tc.evidence > 0 && math.Abs(e.Speed-tc.speed) > 1e-12) {
				t.Fatalf("estimate %+v known %v; want known %v evidence %v speed %v", e, ok, tc.known, tc.evidence, tc.speed)
			}
			if e.Evidence > 0 && !(e.Lower < e.Speed) {
				t.Fatalf("lower bound %v not below the estimate %v", e.Lower, e.Speed)
			}
			if tc.wantErrAt < 0 && len(tc.obs) > 0 && m.Version() == v0 {
				t.Fatal("version did not change")
			}
		})
	}
	if err := New(Options{}).Add("a", "b", "u", -1); !errors.Is(err, ErrSpeed) {
		t.Fatalf("negative speed: %v, want ErrSpeed", err)
	}
}

// More evidence and a lower coverage tighten the bound.
func TestLowerBoundTightens(t *testing.T) {
	m := New(Options{})
	var prev float64 = -1
	for i, s := range []float64{0.8, 0.84, 0.82, 0.81, 0.83, 0.8} {
		if err := m.Add("a", "b", string(rune('a'+i)), s); err != nil {
			t.Fatal(err)
		}
		e, ok := m.Estimate("a", "b", 0.9)
		if !ok {
			continue
		}
		if prev >= 0 && e.Lower < prev-0.02 {
			t.Errorf("after %d observations the bound fell from %v to %v", i+1, prev, e.Lower)
		}
		prev = e.Lower
	}
	lo, _ := m.Estimate("a", "b", 0.99)
	hi, _ := m.Estimate("a", "b", 0.6)
	if !(lo.Lower < hi.Lower) {
		t.Fatalf("coverage 0.99 bound %v not below coverage 0.6 bound %v", lo.Lower, hi.Lower)
	}
}

func TestPredictor(t *testing.T) {
	a, b := prof("a"), prof("b")
	co := []*profile.Profile{b}
	tests := []struct {
		name            string
		obs             []obs
		speed, lower    float64
		useLowerAtLeast bool
	}{
		{"no evidence: the model", nil, 0.9, 0.85, false},
		// one user's bad measurement can only lower the bound, not the prediction
		{"partial evidence lowers the bound", []obs{{"a", "b", "u1", 0.5}}, 0.9, math.NaN(), false},
		// one user's good measurement does not raise it
		{"partial good evidence changes nothing", []obs{{"a", "b", "u1", 1}}, 0.9, 0.85, false},
		{"known pair overrides", []obs{{"a", "b", "u1", 0.7}, {"a", "b", "u2", 0.7}}, 0.7, math.NaN(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := New(Options{})
			p, err := NewPredictor(constModel{0.9, 0.05}, mem)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.obs {
				if err := mem.Add(o.job, o.co, o.uid, o.speed); err != nil {
					t.Fatal(err)
				}
			}
			speed, lower := p.Bound(a, co, model.Query{Coverage: 0.9})
			if math.Abs(speed-tc.speed) > 1e-12 {
				t.Fatalf("speed %v, want %v", speed, tc.speed)
			}
			if !math.IsNaN(tc.lower) && math.Abs(lower-tc.lower) > 1e-12 {
				t.Fatalf("lower %v, want %v", lower, tc.lower)
			}
			if lower > speed || lower > 0.85+1e-12 && len(tc.obs) > 0 && tc.obs[0].speed < 0.9 {
				t.Fatalf("lower %v with speed %v", lower, speed)
			}
			if p.PredictSpeed(a, co) != speed {
				t.Fatal("PredictSpeed differs from Bound's speed")
			}
		})
	}
	if _, err := NewPredictor(nil, New(Options{})); err == nil {
		t.Fatal("nil model accepted")
	}
}

// The model's residuals for an application correct it once there are enough,
// from enough users, and Observe feeds both the pair and the residuals.
func TestAppCorrection(t *testing.T) {
	mem := New(Options{})
	p, err := NewPredictor(constModel{0.9, 0.05}, mem)
	if err != nil {
		t.Fatal(err)
	}
	job := prof("x")
	// x measured at 0.7 next to five different co-runners, five users: the model
	// (0.9) is 0.2 too optimistic for x.
	for i := range 5 {
		co := prof("c" + string(rune('a'+i)))
		if err := p.Observe(job, []*profile.Profile{co}, string(rune('a'+i)), 0.7); err != nil {
			t.Fatal(err)
		}
	}
	r, _, n, ok := mem.AppResidual("x")
	if !ok || n != 5 || math.Abs(r-0.2) > 1e-12 {
		t.Fatalf("residual %v over %v, ok %v", r, n, ok)
	}
	speed, lower := p.Bound(job, []*profile.Profile{prof("new")}, model.Query{Coverage: 0.9})
	if math.Abs(speed-0.7) > 1e-12 || !(lower < speed) || lower < speed-0.05-1e-12 {
		t.Fatalf("unseen pair of x: (%v, %v), want the corrected 0.7 and a bound below it by at most the model's margin 0.05", speed, lower)
	}
	// with a wide model margin, the residuals' prediction interval is used
	p3, _ := NewPredictor(constModel{0.9, 0.5}, mem)
	if s3, l3 := p3.Bound(job, []*profile.Profile{prof("new")}, model.Query{Coverage: 0.9}); math.Abs(s3-0.7) > 1e-12 || !(l3 > s3-0.5) || !(l3 < s3) {
		t.Fatalf("wide model margin: (%v, %v), want the residuals' narrower interval", s3, l3)
	}
	// one user alone cannot correct an application: capped at MaxPerUserApp
	mem2 := New(Options{})
	p2, _ := NewPredictor(constModel{0.9, 0.05}, mem2)
	for i := range 10 {
		_ = p2.Observe(job, []*profile.Profile{prof("c" + string(rune('a'+i)))}, "mallory", 1)
	}
	if _, _, n, ok := mem2.AppResidual("x"); ok || n != 3 {
		t.Fatalf("one user's 10 residuals count %v (ok %v), want 3 and not enough", n, ok)
	}
	if err := p.Observe(nil, nil, "u", 0.5); err == nil {
		t.Fatal("observation without a job accepted")
	}
}

func TestAddObservations(t *testing.T) {
	mem := New(Options{})
	obs := []observation.Observation{
		{Tag: "a", CoTags: []string{"b"}, Speed: 0.8, JobID: "1"},
		{Tag: "a", CoTags: []string{"b"}, Speed: 0.6, JobID: "2"},
		{Tag: "a", CoTags: []string{"b", "c"}, Speed: 0.5}, // not a pair
		{Tag: "a", CoTags: []string{"b"}, Speed: 7e9},      // refused
	}
	used, err := mem.AddObservations(obs, func(o *observation.Observation) string { return o.JobID })
	if used != 2 || err == nil {
		t.Fatalf("used %d, err %v", used, err)
	}
	if e, ok := mem.Estimate("a", "b", 0.9); !ok || math.Abs(e.Speed-0.7) > 1e-12 {
		t.Fatalf("estimate %+v %v", e, ok)
	}
}

func TestPredictNoAlloc(t *testing.T) {
	mem := New(Options{})
	p, _ := NewPredictor(constModel{0.9, 0.05}, mem)
	a, co := prof("a"), []*profile.Profile{prof("b")}
	_ = mem.Add("a", "b", "u1", 0.8)
	_ = mem.Add("a", "b", "u2", 0.8)
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Bound(a, co, model.Query{Coverage: 0.9}) }); n != 0 {
		t.Fatalf("Bound allocates %v times", n)
	}
	// the shipped model at its default coverage (per co-location)
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := NewPredictor(m, mem)
	if len(m.Tags) < 2 {
		t.Fatal("the shipped model lists no trained applications")
	}
	j, c := &profile.Profile{Tag: m.Tags[0], SMUtil: profile.Stat{Mean: 50}}, []*profile.Profile{{Tag: m.Tags[1], SMUtil: profile.Stat{Mean: 40}}}
	if n := testing.AllocsPerRun(100, func() { _, _ = pm.Bound(j, c, model.Query{}) }); n != 0 {
		t.Fatalf("Bound with the shipped model allocates %v times", n)
	}
}

// FuzzAdd: whatever a user's observation holds, Add either refuses it or keeps
// the memory's estimates finite, within (0, 1], with bounds below estimates.
func FuzzAdd(f *testing.F) {
	f.Add("a", "b", "u1", 0.8)
	f.Add("a", "a", "", 1e9)
	f.Add("../x", "b\n", "u", math.NaN())
	f.Fuzz(func(t *testing.T, job, co, uid string, speed float64) {
		m := New(Options{})
		for i := range 3 {
			if err := m.Add(job, co, uid+string(rune('0'+i)), speed); err != nil {
				return
			}
		}
		e, ok := m.Estimate(job, co, 0.9)
		if !ok || !(e.Speed > 0 && e.Speed <= 1) || !(e.Lower <= e.Speed) || math.IsNaN(e.Lower) {
			t.Fatalf("after 3 accepted observations of %v: %+v (known %v)", speed, e, ok)
		}
	})
}

// Residuals transfer within families: the most specific level with enough
// evidence corrects a pair the memory has never seen, and one user alone
// cannot make any level count.
func TestFamilyTransfer(t *testing.T) {
	mem := New(Options{})
	p, err := NewPredictor(constModel{0.9, 0.05}, mem)
	if err != nil {
		t.Fatal(err)
	}
	// x-bs32 is 0.2 slower than the model says next to family y, as good as it
	// says next to family z; each measured by five users on five tags.
	for i := range 5 {
		uid := string(rune('a' + i))
		bs := strconv.Itoa(8 << i)
		for _, c := range []struct {
			co    string
			speed float64
		}{{"y-bs" + bs, 0.7}, {"z-bs" + bs, 0.9}} {
			if err := p.Observe(prof("x-bs32"), []*profile.Profile{prof(c.co)}, uid, c.speed); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		job, co string
		want    float64
	}{
		{"x-bs32", "y-bs4", 0.7},       // job next to y's family
		{"x-bs32", "z-bs4", 0.9},       // job next to z's family
		{"x-bs64", "y-bs4", 0.7},       // x's family next to y's family
		{"x-bs32", "w-bs1", 0.8},       // no family level: the application's mean residual
		{"v-bs1", "y-bs4", 0.9},        // nothing known: the model
		{"x-bs32", "y-bs8", 0.9 - 0.2}, // a pair seen once: not known, the family's correction
	} {
		speed, lower := p.Bound(prof(tc.job), []*profile.Profile{prof(tc.co)}, model.Query{Coverage: 0.9})
		if math.Abs(speed-tc.want) > 1e-9 || !(lower < speed) {
			t.Errorf("%s next to %s: (%v, %v), want speed %v and a bound below it", tc.job, tc.co, speed, lower, tc.want)
		}
	}
	// one user's ten co-runs next to family q count as three: no correction
	for i := range 10 {
		_ = p.Observe(prof("x-bs32"), []*profile.Profile{prof("q-bs" + strconv.Itoa(i+1))}, "mallory", 1)
	}
	for _, k := range []rkey{{level: levelTagFam, a: "x-bs32", b: "q"}, {level: levelFamFam, a: "x", b: "q"}} {
		if _, _, n, ok := mem.residual(k); ok || n != 3 {
			t.Errorf("one user's ten residuals at %+v count %v (ok %v), want 3 and not enough", k, n, ok)
		}
	}
}

// The study's NoFamilyLevels brings back the earlier rule: a pair the memory
// does not know is corrected by the job application's residuals alone, never
// by a family level.
func TestStudyNoFamilyLevels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		study   Study
		job, co string
		want    float64
	}{
		{"family levels: job next to y's family", Study{}, "x-bs32", "y-bs4", 0.7},
		{"family levels: x's family next to y's family", Study{}, "x-bs64", "y-bs4", 0.7},
		{"no family levels: the application's mean residual", Study{NoFamilyLevels: true}, "x-bs32", "y-bs4", 0.8},
		{"no family levels: nothing known of x-bs64", Study{NoFamilyLevels: true}, "x-bs64", "y-bs4", 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewStudyPredictor(constModel{0.9, 0.05}, New(Options{}), tc.study)
			if err != nil {
				t.Fatal(err)
			}
			// x-bs32 is 0.2 slower than the model says next to family y, as good
			// as it says next to family z; five users on five tags each
			for i := range 5 {
				uid, bs := string(rune('a'+i)), strconv.Itoa(8<<i)
				if err := p.Observe(prof("x-bs32"), []*profile.Profile{prof("y-bs" + bs)}, uid, 0.7); err != nil {
					t.Fatal(err)
				}
				if err := p.Observe(prof("x-bs32"), []*profile.Profile{prof("z-bs" + bs)}, uid, 0.9); err != nil {
					t.Fatal(err)
				}
			}
			if speed, _ := p.Bound(prof(tc.job), []*profile.Profile{prof(tc.co)}, model.Query{Coverage: 0.9}); math.Abs(speed-tc.want) > 1e-9 {
				t.Fatalf("%s next to %s: %v, want %v", tc.job, tc.co, speed, tc.want)
			}
		})
	}
}

// covModel records the coverage it was asked for and answers a margin that
// depends on it, like a calibrated model with two calibrations.
type covModel struct{ asked *float64 }

func (c covModel) PredictSpeed(job *profile.Profile, co []*profile.Profile) float64 { return 0.9 }

func (c covModel) Bound(job *profile.Profile, co []*profile.Profile, q model.Query) (float64, float64) {
	*c.asked = q.Coverage
	if q.Coverage == 0 {
		return 0.9, 0.8 // the model's own default, whichever calibration applies
	}
	return 0.9, 0.9 - q.Coverage/10
}

func (covModel) Revision() uint64 { return 0 }

// The model behind the memory gets the coverage as asked: 0 must reach it as
// 0, so that each of its calibrations (seen pairs, unseen families) uses its
// own default instead of the memory's (which would charge seen pairs the
// unseen families' default coverage). The memory's own bounds
// still use the model's default coverage.
func TestPredictorPassesCoverage(t *testing.T) {
	a, b := prof("a"), prof("b")
	tests := []struct {
		name      string
		coverage  float64
		wantAsked float64
		wantLower float64
	}{
		{"default coverage reaches the model as 0", 0, 0, 0.8},
		{"a set coverage reaches the model as set", 0.95, 0.95, 0.805},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked float64 = -1
			p, err := NewPredictor(covModel{&asked}, New(Options{}))
			if err != nil {
				t.Fatal(err)
			}
			_, lower := p.Bound(a, []*profile.Profile{b}, model.Query{Coverage: tc.coverage})
			if asked != tc.wantAsked {
				t.Fatalf("model asked for coverage %v, want %v", asked, tc.wantAsked)
			}
			if math.Abs(lower-tc.wantLower) > 1e-12 {
				t.Fatalf("lower %v, want %v", lower, tc.wantLower)
			}
		})
	}
}

// With the shipped model, a pair of trained applications gets the seen-pairs
// margin at its own default coverage through the memory, as from the model
// alone.
func TestPredictorSeenPairsDefault(t *testing.T) {
	dm, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	m := dm.WithoutMeasured() // the trees' bound (measured pairs: TestPredictorMeasuredPair)
	if len(m.Tags) < 2 || m.SeenCalibration.DefaultCoverage == m.Calibration.DefaultCoverage {
		t.Skip("the shipped model has no distinct seen-pairs default")
	}
	job := &profile.Profile{Tag: m.Tags[0], SMUtil: profile.Stat{Mean: 60}, MemBWUtil: profile.Stat{Mean: 30}, MemUsedMiB: 4000}
	co := &profile.Profile{Tag: m.Tags[1], SMUtil: profile.Stat{Mean: 50}, MemBWUtil: profile.Stat{Mean: 40}, MemUsedMiB: 3000}
	p, err := NewPredictor(m, New(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ws, wl := m.Bound(job, []*profile.Profile{co}, model.Query{})
	gs, gl := p.Bound(job, []*profile.Profile{co}, model.Query{})
	if gs != ws || gl != wl {
		t.Fatalf("through the memory (%v, %v), model alone (%v, %v)", gs, gl, ws, wl)
	}
	if want := ws - m.SeenCalibration.MarginFor(ws, job.Tag, 0); math.Abs(wl-want) > 1e-12 {
		t.Fatalf("lower %v, want the seen-pairs margin at its default: %v", wl, want)
	}
}

// seenTrio is the shipped model without its measured pairs (the trees'
// bounds) and three of its trained applications, or a skip when it has fewer.
func seenTrio(t *testing.T) (*model.Model, [3]*profile.Profile) {
	t.Helper()
	dm, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	m := dm.WithoutMeasured()
	if len(m.Tags) < 3 || len(m.SeenCalibration.Levels) == 0 {
		t.Skip("the shipped model has no seen-pairs margins for three applications")
	}
	var ps [3]*profile.Profile
	for i := range ps {
		ps[i] = &profile.Profile{Tag: m.Tags[i], SMUtil: profile.Stat{Mean: 40 + 10*float64(i)}, MemBWUtil: profile.Stat{Mean: 30}, MemUsedMiB: 3000}
	}
	return m, ps
}

// A known pair's bound stands in for the model's bound on that co-location,
// so at the default coverage it holds at the coverage of the model's
// calibration for it (here the seen-pairs one) at the job's floor (infer's
// stricter floor at its higher coverage). The study's UniformCoverage brings
// back the earlier rule (the model's leave-families-out default for every
// co-location) and KnownPairsClassWeighted the co-location's class-weighted
// default for every floor; a set coverage applies as set. A pair the memory
// does not know gets the model's bound at the job's floor.
func TestKnownPairCoverage(t *testing.T) {
	m, ps := seenTrio(t)
	a, b, c := ps[0], ps[1], ps[2]
	ab := []*profile.Profile{b}
	if m.DefaultCoverageFor(a, ab) == m.Calibration.DefaultCoverage {
		t.Skip("the shipped model's seen-pairs default is its leave-families-out one")
	}
	tests := []struct {
		name            string
		study           Study
		coverage, floor float64
		wantCov         float64
	}{
		{"default: the co-location's coverage", Study{}, 0, 0, m.DefaultCoverageFor(a, ab)},
		{"hpc/train floor: its coverage", Study{}, 0, 0.75, m.DefaultCoverageForFloor(a, ab, 0.75)},
		{"infer floor: its coverage", Study{}, 0, 0.9, m.DefaultCoverageForFloor(a, ab, 0.9)},
		{"infer floor, KnownPairsClassWeighted", Study{KnownPairsClassWeighted: true}, 0, 0.9, m.DefaultCoverageFor(a, ab)},
		{"UniformCoverage: the overall default", Study{UniformCoverage: true}, 0, 0, m.Calibration.DefaultCoverage},
		{"a set coverage is used as set", Study{}, 0.95, 0.9, 0.95},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := New(Options{})
			p, err := NewStudyPredictor(m, mem, tc.study)
			if err != nil {
				t.Fatal(err)
			}
			e := knownPair(t, mem, a.Tag, b.Tag, tc.wantCov)
			speed, lower := p.Bound(a, ab, model.Query{Coverage: tc.coverage, Floor: tc.floor})
			if speed != e.Speed || math.Abs(lower-e.Lower) > 1e-12 {
				t.Fatalf("known pair (%v, %v), want the memory's (%v, %v) at coverage %v", speed, lower, e.Speed, e.Lower, tc.wantCov)
			}
			// a pair the memory does not know: the model, asked at the job's floor
			q := model.Query{Coverage: tc.coverage, Floor: tc.floor}
			ws, wl := m.Bound(a, []*profile.Profile{c}, q)
			if gs, gl := p.Bound(a, []*profile.Profile{c}, q); gs != ws || gl != wl {
				t.Fatalf("unknown pair (%v, %v), the model's at %+v (%v, %v)", gs, gl, q, ws, wl)
			}
		})
	}
}

// With the shipped model (per-floor coverage), a co-location the memory
// knows nothing about gets the model's bound for the job's floor through the
// memory, as from the model alone, and infer's floor is cleared with a margin
// at least as wide as hpc/train's.
func TestPredictorFloorCoverageShipped(t *testing.T) {
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tags) < 2 {
		t.Skip("the shipped model has no trained applications")
	}
	job := &profile.Profile{Tag: m.Tags[0], SMUtil: profile.Stat{Mean: 60}, MemBWUtil: profile.Stat{Mean: 30}, MemUsedMiB: 4000}
	co := []*profile.Profile{{Tag: m.Tags[1], SMUtil: profile.Stat{Mean: 50}, MemBWUtil: profile.Stat{Mean: 40}, MemUsedMiB: 3000}}
	p, err := NewPredictor(m, New(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var lows []float64
	for _, floor := range []float64{0.75, 0.9} {
		ws, wl := m.Bound(job, co, model.Query{Floor: floor})
		gs, gl := p.Bound(job, co, model.Query{Floor: floor})
		if gs != ws || gl != wl {
			t.Fatalf("floor %v: through the memory (%v, %v), model alone (%v, %v)", floor, gs, gl, ws, wl)
		}
		lows = append(lows, gl)
	}
	if !(lows[1] <= lows[0]) {
		t.Fatalf("infer's floor bound %v above hpc/train's %v", lows[1], lows[0])
	}
}

// knownPair makes the pair (job, co) known to mem through two users' 0.95
// and returns the memory's estimate at coverage.
func knownPair(t *testing.T, mem *Memory, job, co string, coverage float64) Estimate {
	t.Helper()
	for _, u := range []string{"u1", "u2"} {
		if err := mem.Add(job, co, u, 0.95); err != nil {
			t.Fatal(err)
		}
	}
	e, ok := mem.Estimate(job, co, coverage)
	if !ok {
		t.Fatal("pair not known after two users")
	}
	return e
}

// A pair the model answers from the training data's measurement: the cluster's
// observations pool with it (the measurement counts as its runs), one user can
// only make it more cautious, and no residual correction moves it.
func TestPredictorMeasuredPair(t *testing.T) {
	m, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	mp := m.Measured[0]
	job, co := &profile.Profile{Tag: mp.Job}, []*profile.Profile{{Tag: mp.Co}}
	ms, ml := m.Bound(job, co, model.Query{Floor: 0.9})
	cov := m.DefaultCoverageForFloor(job, co, 0.9)
	noise := max(m.MeasuredSD, model.MeasuredNoiseFloor)
	tests := []struct {
		name                 string
		obs                  []obs
		wantSpeed, wantLower float64
	}{
		{"no evidence: the measurement", nil, ms, ml},
		{"one user, better: no looser", []obs{{mp.Job, mp.Co, "u1", 1}}, ms, ml},
		{"one user, worse: more cautious", []obs{{mp.Job, mp.Co, "u1", ms - 0.3}}, ms - 0.15,
			min(ms-0.15-z(cov)*noise/math.Sqrt(2), ms-0.3-z(cov)*noise)},
		{"two users agree: tighter", []obs{{mp.Job, mp.Co, "u1", ms}, {mp.Job, mp.Co, "u2", ms}}, ms,
			ms - z(cov)*noise/math.Sqrt(float64(mp.N)+2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := New(Options{})
			p, err := NewPredictor(m, mem)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.obs {
				if err := mem.Add(o.job, o.co, o.uid, o.speed); err != nil {
					t.Fatal(err)
				}
			}
			// a large residual of the job's application elsewhere moves nothing here
			for _, u := range []string{"r1", "r2", "r3"} {
				for range 3 {
					if err := mem.AddResidual(mp.Job, u, 0.3); err != nil {
						t.Fatal(err)
					}
				}
			}
			s, l := p.Bound(job, co, model.Query{Floor: 0.9})
			if math.Abs(s-tc.wantSpeed) > 1e-9 || math.Abs(l-tc.wantLower) > 1e-9 {
				t.Fatalf("(%v, %v), want (%v, %v)", s, l, tc.wantSpeed, tc.wantLower)
			}
			if l > ml+1e-12 && len(tc.obs) < 2 {
				t.Fatalf("one user loosened the bound: %v > %v", l, ml)
			}
		})
	}
	// Observations of a measured pair are not residuals of the trees.
	mem := New(Options{})
	p, _ := NewPredictor(m, mem)
	if err := p.Observe(job, co, "u1", 0.5); err != nil {
		t.Fatal(err)
	}
	if _, _, n, ok := mem.PairResidual(mp.Job, mp.Co); ok || n != 0 {
		t.Fatalf("a measured pair's observation became a residual (evidence %v)", n)
	}
}
