// SPDX-License-Identifier: Apache-2.0

package emulate

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// fakeSpeeds is a pair table: speed of a next to b.
type fakeSpeeds map[[2]string]float64

func (f fakeSpeeds) Pair(a, b string) (float64, bool) {
	s, ok := f[[2]string{a, b}]
	return s, ok
}

// fakeClock advances only when the emulator sleeps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return nil
}

func TestProgressAdvance(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name  string
		steps []struct {
			dt    float64
			speed float64
		}
		work, wantDone float64
	}{
		{"alone", []struct{ dt, speed float64 }{{10, 1}}, 100, 10},
		{"half speed", []struct{ dt, speed float64 }{{10, 0.5}, {10, 0.5}}, 100, 15},
		{"capped at work", []struct{ dt, speed float64 }{{10, 1}, {500, 1}}, 100, 100},
		{"clock backwards adds nothing", []struct{ dt, speed float64 }{{10, 1}, {-5, 1}}, 100, 10},
		{"speed change applies to the next stretch", []struct{ dt, speed float64 }{{4, 0.25}, {4, 1}}, 100, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Progress{Work: tc.work, At: t0, Speed: 1}
			now := t0
			for _, s := range tc.steps {
				now = now.Add(time.Duration(s.dt * float64(time.Second)))
				p.Advance(now, s.speed)
			}
			if math.Abs(p.Done-tc.wantDone) > 1e-9 {
				t.Errorf("done %v, want %v", p.Done, tc.wantDone)
			}
		})
	}
}

func TestRunTrueSpeeds(t *testing.T) {
	sp := fakeSpeeds{{"a", "b"}: 0.5, {"a", "c"}: 0.8, {"b", "a"}: 0.9}
	cases := []struct {
		name string
		// co-runners seen at each read, the last repeats.
		seen       [][]string
		work       float64
		floor      float64
		wantDur    float64
		wantMin    float64
		wantBelow  bool
		wantShared bool
		wantUnk    bool
	}{
		{"alone runs at speed 1", [][]string{nil}, 3, 0.75, 3, 1, false, false, false},
		{"next to b the whole time", [][]string{{"b"}}, 2, 0.75, 4, 0.5, true, true, false},
		{"b leaves after 1 s", [][]string{{"b"}, {"b"}, {}}, 2, 0.4, 2.5, 0.5, false, true, false},
		{"two co-runners multiply", [][]string{{"b", "c"}}, 1, 0.75, 2.5, 0.4, true, true, false},
		{"unknown co-runner is left out", [][]string{{"zzz"}}, 1, 0.75, 1, 1, false, true, true},
		{"no work ends at once", [][]string{nil}, 0, 0.75, 0, 1, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(5000, 0)}
			i := 0
			corun := func() ([][]string, error) {
				s := tc.seen[min(i, len(tc.seen)-1)]
				i++
				return [][]string{s}, nil
			}
			j := Job{JobID: "7", Node: "n1", GPUs: []int{2}, Tag: "a", Class: profile.ClassTrain, Work: tc.work, Floor: tc.floor}
			r, err := Run(context.Background(), j, sp, corun, Options{Interval: 500 * time.Millisecond, Now: clk.now, Sleep: clk.sleep})
			if err != nil {
				t.Fatal(err)
			}
			if d := r.End - r.Start; math.Abs(d-tc.wantDur) > 1e-6 {
				t.Errorf("ran %v s, want %v", d, tc.wantDur)
			}
			if math.Abs(r.MinSpeed-tc.wantMin) > 1e-9 || r.BelowFloor != tc.wantBelow || r.Shared != tc.wantShared || (r.Unknown > 0) != tc.wantUnk {
				t.Errorf("min %v below %v shared %v unknown %d; want %v %v %v %v", r.MinSpeed, r.BelowFloor, r.Shared, r.Unknown, tc.wantMin, tc.wantBelow, tc.wantShared, tc.wantUnk)
			}
			if len(r.History) == 0 || r.History[0].At != r.Start {
				t.Errorf("history %+v does not start at the start", r.History)
			}
		})
	}
}

func TestRunKeepsCoRunnersOnReadError(t *testing.T) {
	sp := fakeSpeeds{{"a", "b"}: 0.5}
	clk := &fakeClock{t: time.Unix(5000, 0)}
	i := 0
	corun := func() ([][]string, error) {
		i++
		if i == 1 {
			return [][]string{{"b"}}, nil
		}
		return nil, errors.New("store unreadable")
	}
	r, err := Run(context.Background(), Job{JobID: "1", Node: "n1", GPUs: []int{0}, Tag: "a", Class: profile.ClassHPC, Work: 1, Floor: 0.1},
		sp, corun, Options{Now: clk.now, Sleep: clk.sleep})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.End - r.Start; math.Abs(d-2) > 1e-6 {
		t.Errorf("ran %v s, want 2 (b kept as co-runner)", d)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Job{JobID: "1", Node: "n1", GPUs: []int{0}, Tag: "a", Class: profile.ClassHPC, Work: 10}, fakeSpeeds{},
		func() ([][]string, error) { return [][]string{nil}, nil }, Options{Interval: time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := []Result{
		{JobID: "12", Node: "n1", GPU: 3, Tag: "bert-bs32", Class: profile.ClassTrain, Work: 4, Start: 100, End: 108,
			MinSpeed: 0.5, Floor: 0.75, BelowFloor: true, Shared: true,
			History: []Phase{{At: 100, CoRunners: []string{"resnet50-bs32"}, Speed: 0.5}}},
		{JobID: "9", Node: "n2", GPU: 0, Tag: "neumf-bs64", Class: profile.ClassInfer, Work: 1, Start: 50, End: 51, MinSpeed: 1, Floor: 0.9},
	}
	for _, r := range in {
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "13.json"), []byte(`{"job_id":"13","node":"../x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].JobID != "9" || got[1].JobID != "12" {
		t.Fatalf("read %+v, want jobs 9 and 12 in order", got)
	}
	if got[1].History[0].CoRunners[0] != "resnet50-bs32" || !got[1].BelowFloor || got[1].End != 108 {
		t.Errorf("job 12 read back as %+v", got[1])
	}
	if len(bad) != 1 {
		t.Errorf("bad files %v, want the one hostile record", bad)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := `{"job_id":"1","node":"n1","gpu":0,"tag":"bert-bs32","class":"train","work":1,"start":10,"end":11,"min_speed":1,"floor":0.75,"below_floor":false,"shared":false,"unknown":0,"history":[]}`
	if _, err := Decode([]byte(good)); err != nil {
		t.Fatalf("good record refused: %v", err)
	}
	for name, rec := range map[string]string{
		"unknown field": `{"job_id":"1","x":1}`,
		"bad job id":    `{"job_id":"1/2","node":"n1","tag":"bert-bs32","class":"train","start":1,"end":2}`,
		"end before":    `{"job_id":"1","node":"n1","tag":"bert-bs32","class":"train","start":5,"end":2}`,
		"gpu range":     `{"job_id":"1","node":"n1","gpu":99,"tag":"bert-bs32","class":"train","start":1,"end":2}`,
		"bad class":     `{"job_id":"1","node":"n1","tag":"bert-bs32","class":"gold","start":1,"end":2}`,
		"trailing":      good + `{}`,
		"bad co-runner": `{"job_id":"1","node":"n1","tag":"bert-bs32","class":"train","start":1,"end":2,"history":[{"at":1,"co_runners":["../etc"],"speed":1}]}`,
	} {
		if _, err := Decode([]byte(rec)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestGPUsFromEnv(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want []int
		ok   bool
	}{
		{map[string]string{"SLURM_JOB_GPUS": "2", "CUDA_VISIBLE_DEVICES": "0"}, []int{2}, true},
		{map[string]string{"CUDA_VISIBLE_DEVICES": "3"}, []int{3}, true},
		{map[string]string{"SLURM_JOB_GPUS": "0,3"}, []int{0, 3}, true},
		{map[string]string{"SLURM_JOB_GPUS": "1-3"}, []int{1, 2, 3}, true},
		{map[string]string{"SLURM_JOB_GPUS": "0,0"}, nil, false},
		{map[string]string{"SLURM_JOB_GPUS": "3-1"}, nil, false},
		{map[string]string{"SLURM_JOB_GPUS": "-1"}, nil, false},
		{map[string]string{"SLURM_JOB_GPUS": "01"}, nil, false},
		{map[string]string{}, nil, false},
	}
	for _, tc := range cases {
		got, err := GPUsFromEnv(func(k string) string { return tc.env[k] })
		if (err == nil) != tc.ok || (tc.ok && !slices.Equal(got, tc.want)) {
			t.Errorf("%v: got %v, %v; want %v ok=%v", tc.env, got, err, tc.want, tc.ok)
		}
	}
}

// A job of several GPUs runs at its slowest GPU's speed: next to b on GPU 1
// (0.5) and alone on GPU 0, its 2 s of work take 4 s.
func TestRunSeveralGPUs(t *testing.T) {
	sp := fakeSpeeds{{"a", "b"}: 0.5}
	clk := &fakeClock{t: time.Unix(5000, 0)}
	var reported [][]string
	r, err := Run(context.Background(), Job{JobID: "8", Node: "n1", GPUs: []int{0, 1}, Tag: "a", Class: profile.ClassTrain, Work: 2, Floor: 0.75}, sp,
		func() ([][]string, error) { return [][]string{nil, {"b"}}, nil },
		Options{Interval: 500 * time.Millisecond, Now: clk.now, Sleep: clk.sleep, Report: func(_ time.Time, _ float64, co [][]string) { reported = co }})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.End - r.Start; math.Abs(d-4) > 1e-6 || r.MinSpeed != 0.5 || !r.BelowFloor || !r.Shared || !slices.Equal(r.GPUs, []int{0, 1}) {
		t.Errorf("ran %v s (want 4), min %v, below %v, shared %v, gpus %v", d, r.MinSpeed, r.BelowFloor, r.Shared, r.GPUs)
	}
	if len(reported) != 2 || len(reported[1]) != 1 {
		t.Errorf("reported co-runners per GPU %v", reported)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"job_id":"1","node":"n1","gpu":0,"tag":"bert-bs32","class":"train","work":1,"start":10,"end":11,"min_speed":1,"floor":0.75,"history":[{"at":10,"co_runners":["a"],"speed":0.5}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		// What was accepted encodes and decodes to an accepted record again.
		enc, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(enc); err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
	})
}

func FuzzParseGPUIndex(f *testing.F) {
	for _, s := range []string{"0", "63", "64", "0,1", "", "-0", "1e1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseGPUIndex(s)
		if err == nil && (n < 0 || n > MaxGPUIndex) {
			t.Fatalf("%q gave %d", s, n)
		}
	})
}

// A stretch during which the process was stopped (scontrol suspend) does no
// work and is not time below the floor (the whole tick it fell in is lost, at
// most one interval of work); time at a speed under the floor is
// counted.
func TestRunStoppedAndBelowFloorTime(t *testing.T) {
	sp := fakeSpeeds{{"a", "b"}: 0.5}
	for _, tc := range []struct {
		name         string
		seen         []string
		stopAtTick   int     // the tick at which Stopped reports true (0: never)
		stopFor      float64 // seconds the clock jumps while stopped
		wantDur      float64
		wantBelowS   float64
		wantStoppedS float64
		wantReports  bool
	}{
		{name: "alone, never stopped", wantDur: 2, wantReports: true},
		{name: "below floor the whole time", seen: []string{"b"}, wantDur: 4, wantBelowS: 4},
		{name: "stopped 10 s mid-run", stopAtTick: 3, stopFor: 10, wantDur: 12.5, wantStoppedS: 10.5},
		{name: "stopped below the floor", seen: []string{"b"}, stopAtTick: 3, stopFor: 10, wantDur: 14.5, wantBelowS: 4, wantStoppedS: 10.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			ticks, reports := 0, 0
			o := Options{Interval: 500 * time.Millisecond, Now: clk.now,
				Sleep: func(ctx context.Context, d time.Duration) error {
					ticks++
					if tc.stopAtTick != 0 && ticks == tc.stopAtTick {
						d += time.Duration(tc.stopFor * float64(time.Second))
					}
					return clk.sleep(ctx, d)
				},
				Stopped: func() bool { return tc.stopAtTick != 0 && ticks == tc.stopAtTick },
				Report:  func(time.Time, float64, [][]string) { reports++ },
			}
			res, err := Run(context.Background(), Job{JobID: "1", GPUs: []int{0}, Tag: "a", Work: 2, Floor: 0.75}, sp,
				func() ([][]string, error) { return [][]string{tc.seen}, nil }, o)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.End - res.Start; math.Abs(d-tc.wantDur) > 1e-6 {
				t.Errorf("duration %v, want %v", d, tc.wantDur)
			}
			if math.Abs(res.BelowFloorS-tc.wantBelowS) > 1e-6 || math.Abs(res.StoppedS-tc.wantStoppedS) > 1e-6 {
				t.Errorf("below floor %v s, stopped %v s; want %v, %v", res.BelowFloorS, res.StoppedS, tc.wantBelowS, tc.wantStoppedS)
			}
			if reports == 0 {
				t.Error("Report was never called")
			}
		})
	}
}

func TestProcStopped(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want bool
	}{
		{"123 (coscheml) S 1 2 3", false},
		{"123 (coscheml) T 1 2 3", true},
		{"123 (a) b) t 1", true},
		{"123 (x) R 1", false},
		{"garbage", false},
		{"1 (x)", false},
	} {
		if got := ProcStopped([]byte(tc.stat)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.stat, got, tc.want)
		}
	}
}

type soloTable struct {
	pairs map[[2]string]float64
	solo  map[string]float64
}

func (s soloTable) Pair(a, b string) (float64, bool)  { v, ok := s.pairs[[2]string{a, b}]; return v, ok }
func (s soloTable) SoloSM(tag string) (float64, bool) { v, ok := s.solo[tag]; return v, ok }

// An inference job's floor judges its latency speed from its co-runners' true
// shares; every other class's its true speed.
func TestFloorSpeed(t *testing.T) {
	sp := soloTable{pairs: map[[2]string]float64{{"svc", "train"}: 0.95, {"train", "svc"}: 0.8}, solo: map[string]float64{"svc": 30, "train": 50}}
	cases := []struct {
		name  string
		class profile.Class
		co    []string
		speed float64 // the job's true speed
		want  float64
	}{
		{"train: its true speed", profile.ClassTrain, []string{"svc"}, 0.8, 0.8},
		{"infer alone", profile.ClassInfer, nil, 1, 1},
		// The co-runner runs at 0.8 next to it: busy 40% of the time.
		{"infer: latency from the co-runner's share", profile.ClassInfer, []string{"train"}, 0.95, 1 / 1.4},
		{"infer: unknown co-runner counts as busy", profile.ClassInfer, []string{"mystery"}, 1, 0.5},
	}
	for _, c := range cases {
		if got := FloorSpeed(sp, c.class, "svc", c.co, c.speed); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func FuzzParseGPUIndices(f *testing.F) {
	for _, s := range []string{"0", "0,3", "1-3", "0,0", "3-1", "", "63-0", "0-63"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gs, err := ParseGPUIndices(s)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, g := range gs {
			if g < 0 || g > MaxGPUIndex || seen[g] {
				t.Fatalf("%q gave %v", s, gs)
			}
			seen[g] = true
		}
	})
}
