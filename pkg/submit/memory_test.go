// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// memSite is a site with the default model, the Lucid solo profiles and an
// observation folder.
type memSite struct {
	cfg  config.Config
	src  Sources
	cat  profile.Catalog
	m    *model.Model
	a, b *profile.Profile
}

func newMemSite(t *testing.T) *memSite {
	t.Helper()
	dir := t.TempDir()
	s := &memSite{cfg: config.Default()}
	s.cfg.ProfileDir = filepath.Join(dir, "profiles")
	s.cfg.ResidencyDir = filepath.Join(dir, "residency")
	s.cfg.ObservationDir = filepath.Join(dir, "obs")
	s.cfg.DecisionLog = ""
	s.cfg.DecisionKey = ""
	s.cfg.Cluster = config.ClusterSpec{Nodes: "n1", GPUsPerNode: 2, GPUMemoryMiB: 80000}
	for _, d := range []string{s.cfg.ResidencyDir, s.cfg.ObservationDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	if err != nil {
		t.Fatal(err)
	}
	s.cat = profile.CatalogOf(ps)
	if s.m, err = model.Default(); err != nil {
		t.Fatal(err)
	}
	s.a, s.b = ps[0], ps[1]
	def := DefaultSources("")
	s.src = Sources{
		LoadConfig:  func(string) (config.Config, error) { return s.cfg, nil },
		LoadModel:   func(string) (model.Predictor, error) { return s.m, nil },
		LoadCatalog: func(string, int) (profile.Catalog, []error, error) { return s.cat, nil, nil },
		NewPolicy:   def.NewPolicy,
	}
	return s
}

// observe appends n observations of a next to b at speed, each from its own user.
func (s *memSite) observe(t *testing.T, file string, n int, speed float64) {
	t.Helper()
	obs := make([]observation.Observation, n)
	for i := range obs {
		obs[i] = observation.Observation{Tag: s.a.Tag, CoTags: []string{s.b.Tag}, Speed: speed,
			Source: "epilog", JobID: strconv.Itoa(100 + i), UID: strconv.Itoa(2000 + i), When: time.Date(2026, 11, 30, 1, i, 0, 0, time.UTC)}
	}
	if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, file), obs...); err != nil {
		t.Fatal(err)
	}
}

func (s *memSite) measured() float64 {
	bare := s.m.PredictSpeed(s.a, []*profile.Profile{s.b})
	return math.Max(bare-0.3, 0.1) // far from the model: a pair it gets wrong
}

func noteOf(l *Snapshot, key string) string {
	msg := ""
	for _, n := range l.notes {
		if n.key == key {
			msg = n.msg
		}
	}
	return msg
}

func TestSnapshotPairMemory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		users   int  // observations of the pair, one per user
		oneUser bool // all from one user
		off     bool // pair_memory: false
		corrupt bool // plus a file that is not an observation CSV
		learned bool // the prediction is the measured speed
	}{
		{name: "enough users", users: 6, learned: true},
		{name: "enough users and a corrupt file", users: 6, corrupt: true, learned: true},
		{name: "one user alone", users: 6, oneUser: true},
		{name: "turned off", users: 6, off: true},
		{name: "no observations", users: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMemSite(t)
			s.cfg.PairMemory = !tc.off
			want := s.measured()
			if tc.users > 0 {
				s.observe(t, "n1.csv", tc.users, want)
			}
			if tc.oneUser {
				b, _ := os.ReadFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"))
				// Rewrite every uid to one: CapPerUser keeps 3, pairmem counts the user once.
				out := b
				for i := 0; i < tc.users; i++ {
					out = bytes.ReplaceAll(out, []byte(","+strconv.Itoa(2000+i)), []byte(",2000"))
				}
				if err := os.WriteFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"), out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.corrupt {
				if err := os.WriteFile(filepath.Join(s.cfg.ObservationDir, "bad.csv"), []byte("\x00garbage,not,a,header\n1,2\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l := loadSnapshot(&s.src, nil, time.Now(), time.Time{})
			if l.degraded() != "" || l.policy == nil {
				t.Fatalf("snapshot degraded: %q", l.degraded())
			}
			bare := s.m.PredictSpeed(s.a, []*profile.Profile{s.b})
			got := l.pred.PredictSpeed(s.a, []*profile.Profile{s.b})
			t.Logf("%s next to %s: model %.4f, measured %.4f, snapshot predicts %.4f (pairs %d, known %d, used %d)",
				s.a.Tag, s.b.Tag, bare, want, got, l.mem.pairs, l.mem.known, l.mem.used)
			if tc.learned {
				if math.Abs(got-want) > 1e-9 || math.Abs(got-bare) < 0.1 {
					t.Errorf("prediction %.4f, want the measured %.4f (model %.4f)", got, want, bare)
				}
			} else if tc.off || tc.users == 0 {
				if got != bare {
					t.Errorf("prediction %.4f, want the model's %.4f", got, bare)
				}
			} else if math.Abs(got-want) < 1e-9 {
				t.Errorf("one user made the pair known: %.4f", got)
			}
			msg := noteOf(l, "info-pairmemory")
			if tc.corrupt != strings.Contains(msg, "bad.csv") {
				t.Errorf("pair memory note %q (corrupt file: %v)", msg, tc.corrupt)
			}
		})
	}
}

// An unreadable observation folder is a note, and the plain model decides.
func TestSnapshotPairMemoryFailsOpen(t *testing.T) {
	s := newMemSite(t)
	file := filepath.Join(t.TempDir(), "not-a-folder")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.cfg.ObservationDir = file
	l := loadSnapshot(&s.src, nil, time.Now(), time.Time{})
	if l.degraded() != "" || l.pred != model.Predictor(s.m) {
		t.Fatalf("degraded %q, pred %T", l.degraded(), l.pred)
	}
	if msg := noteOf(l, "info-pairmemory"); !strings.Contains(msg, "pair memory off") {
		t.Errorf("note %q", msg)
	}
}

// The background loop rebuilds the memory when observations are added.
func TestEnginePairMemoryReload(t *testing.T) {
	s := newMemSite(t)
	e := New(s.src, Options{ReloadEvery: 5 * time.Millisecond, ResidencyEvery: 5 * time.Millisecond, MemoryEvery: 5 * time.Millisecond})
	defer e.Close()
	pred := func() float64 { return e.snap.Load().pred.PredictSpeed(s.a, []*profile.Profile{s.b}) }
	bare := s.m.PredictSpeed(s.a, []*profile.Profile{s.b})
	if got := pred(); got != bare {
		t.Fatalf("before: %.4f, want the model's %.4f", got, bare)
	}
	e.Start()
	want := s.measured()
	s.observe(t, "n1.csv", 4, want)
	deadline := time.Now().Add(10 * time.Second)
	for math.Abs(pred()-want) > 1e-9 {
		if time.Now().After(deadline) {
			t.Fatalf("no reload: %.4f, want %.4f", pred(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The metrics count each co-located run the Epilog measured since the counters
// started once, against the stored profile's floor, with the model's error;
// the file is read back from disk.
func TestEngineCountsFinishedRuns(t *testing.T) {
	s := newMemSite(t)
	s.cfg.MetricsFile = filepath.Join(t.TempDir(), "ctld.prom")
	s.observe(t, "old.csv", 3, 0.1) // before the counters started: not counted
	e := New(s.src, Options{})
	defer e.Close()
	floor := s.cfg.SpeedFloor.For(s.a.Class)
	pred := s.m.PredictSpeed(s.a, []*profile.Profile{s.b})
	speeds := []float64{floor - 0.2, floor - 0.05, min(floor+0.05, 1)}
	var obs []observation.Observation
	for i, sp := range speeds {
		obs = append(obs, observation.Observation{Tag: s.a.Tag, CoTags: []string{s.b.Tag}, Speed: sp, Source: "epilog",
			JobID: strconv.Itoa(500 + i), UID: strconv.Itoa(3000 + i), When: time.Now().Add(time.Duration(i) * time.Second)})
	}
	if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"), obs...); err != nil {
		t.Fatal(err)
	}
	// Solo runs and unknown tags are not co-located runs of known profiles.
	if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"),
		observation.Observation{Tag: s.a.Tag, Speed: 0.1, Source: "epilog", JobID: "600", UID: "3100", When: time.Now()},
		observation.Observation{Tag: "no-such-app", CoTags: []string{s.b.Tag}, Speed: 0.1, Source: "epilog", JobID: "601", UID: "3101", When: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // read again: still counted once
		e.Reload()
	}
	e.Close() // writes the file
	b, err := os.ReadFile(s.cfg.MetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var sum float64
	for _, sp := range speeds {
		sum += math.Abs(pred - sp)
	}
	for _, want := range []string{
		`coscheml_jobs_below_floor_total{class="` + string(s.a.Class) + `"} 2`,
		`coscheml_prediction_abs_error_ratio_count 3`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics file lacks %q:\n%s", want, text)
		}
	}
	if got := sampleWith(text, "coscheml_prediction_abs_error_ratio_sum"); math.Abs(got-sum) > 1e-6 {
		t.Errorf("error sum %.6f, want %.6f", got, sum)
	}
}

// A load that leaves files unread (here the file bound) keeps the runs it
// counted before: read again later, they are not counted twice.
func TestEngineCountsRunsOnceAcrossPartialLoads(t *testing.T) {
	s := newMemSite(t)
	e := New(s.src, Options{})
	defer e.Close()
	countOf := func() float64 {
		for _, f := range e.metrics.counters.Families(time.Now()) {
			if f.Name == "coscheml_prediction_abs_error_ratio" {
				for _, smp := range f.Samples {
					if smp.Suffix == "_count" {
						return smp.Value
					}
				}
			}
		}
		t.Fatal("no error histogram")
		return 0
	}
	obs := []observation.Observation{{Tag: s.a.Tag, CoTags: []string{s.b.Tag}, Speed: 0.8, Source: "epilog",
		JobID: "700", UID: "4000", When: time.Now()}}
	if err := observation.AppendFile(filepath.Join(s.cfg.ObservationDir, "n1.csv"), obs...); err != nil {
		t.Fatal(err)
	}
	e.Reload()
	if got := countOf(); got != 1 {
		t.Fatalf("after the first load: %v runs counted, want 1", got)
	}
	// memMaxFiles files sorted before n1.csv: n1.csv is not read.
	var extra []string
	for i := range memMaxFiles {
		p := filepath.Join(s.cfg.ObservationDir, fmt.Sprintf("a%05d.csv", i))
		o := observation.Observation{Tag: s.a.Tag, Speed: 1, Source: "epilog", JobID: strconv.Itoa(800 + i), UID: "4001", When: time.Now()}
		if i == 0 { // a co-located run from before the counters: the memory is in use
			o.CoTags, o.Speed, o.When = []string{s.b.Tag}, 0.9, time.Now().Add(-time.Hour)
		}
		if err := observation.AppendFile(p, o); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, p)
	}
	e.Reload()
	if l := e.snap.Load(); !l.mem.partial || !strings.Contains(l.mem.problem, "not read") || l.mem.pred == nil {
		t.Fatalf("the load was not bounded or left no memory: partial %v, memory %v, note %q", l.mem.partial, l.mem.pred != nil, l.mem.problem)
	}
	for _, p := range extra {
		os.Remove(p)
	}
	e.Reload()
	if got := countOf(); got != 1 {
		t.Errorf("after a partial load and a complete one: %v runs counted, want 1", got)
	}
}

// predictor: optimistic replaces the model in placement (every pair at full
// speed), still under the pair memory, and says so as a problem note.
func TestSnapshotOptimisticPredictor(t *testing.T) {
	for _, tc := range []struct {
		predictor  string
		optimistic bool
	}{{config.PredictorModel, false}, {config.PredictorOptimistic, true}} {
		t.Run(tc.predictor, func(t *testing.T) {
			s := newMemSite(t)
			s.cfg.Predictor = tc.predictor
			l := loadSnapshot(&s.src, nil, time.Now(), time.Time{})
			if l.degraded() != "" || l.policy == nil {
				t.Fatalf("snapshot degraded: %q", l.degraded())
			}
			got := l.pred.PredictSpeed(s.a, []*profile.Profile{s.b})
			bare := s.m.PredictSpeed(s.a, []*profile.Profile{s.b})
			if tc.optimistic && got != 1 {
				t.Errorf("optimistic predictor predicts %.4f, want 1", got)
			}
			if !tc.optimistic && got != bare {
				t.Errorf("model predictor predicts %.4f, want the model's %.4f", got, bare)
			}
			msg := noteOf(l, "predictor")
			if tc.optimistic != strings.Contains(msg, "EVALUATION ONLY") {
				t.Errorf("predictor note %q (optimistic: %v)", msg, tc.optimistic)
			}
		})
	}
}
