// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

func TestJudgeSpeed(t *testing.T) {
	cfg := Default()
	cases := []struct {
		name   string
		in     SpeedInput
		judged bool
		breach bool
		speed  float64
		why    string
	}{
		{"no profile share", SpeedInput{Class: profile.ClassTrain, OwnSM: 10, DeviceSM: 100}, false, false, 0, "no solo"},
		{"at solo", SpeedInput{Class: profile.ClassTrain, SoloSM: 80, OwnSM: 80, CoSM: []float64{20}, DeviceSM: 100}, true, false, 1, "at or above"},
		{"above solo clamps", SpeedInput{Class: profile.ClassTrain, SoloSM: 40, OwnSM: 60, DeviceSM: 100}, true, false, 1, "at or above"},
		{"time-sliced against a busy co-runner", SpeedInput{Class: profile.ClassTrain, SoloSM: 90, OwnSM: 48, CoSM: []float64{50}, DeviceSM: 98}, true, true, 50.0 / 90, "below floor"},
		// Trust: a job that idles itself while the GPU has spare capacity is idle, not slowed.
		{"idle with spare capacity", SpeedInput{Class: profile.ClassTrain, SoloSM: 90, OwnSM: 28, CoSM: []float64{25}, DeviceSM: 53}, true, false, 28.0 / 90, "spare capacity"},
		// Trust: the co-runner fills the GPU a self-idled job leaves; its share is
		// below its fair time slice, so it is not asking for the GPU.
		{"idle below fair slice on a busy GPU", SpeedInput{Class: profile.ClassTrain, SoloSM: 90, OwnSM: 15, CoSM: []float64{85}, DeviceSM: 99}, true, false, 15.0 / 90, "own demand dropped"},
		{"fair slice with two co-runners", SpeedInput{Class: profile.ClassHPC, SoloSM: 90, OwnSM: 30, CoSM: []float64{35, 33}, DeviceSM: 99}, true, true, 31.0 / 90, "below floor"},
		// Trust: a job cannot claim a slowdown that the GPU's idle time could
		// have absorbed. Throttled to 48% next to a co-runner using 12%, the
		// GPU is 40% idle: time-slicing would leave it at least 88% (0.92 of
		// its solo 96%), so it is not slowed, whatever its own share.
		{"idle capacity absorbs the claimed slowdown", SpeedInput{Class: profile.ClassTrain, SoloSM: 96, OwnSM: 48, CoSM: []float64{12}, DeviceSM: 60}, true, false, 48.0 / 96, "idle"},
		// The shares can overlap the device's busy time (NVML samples them
		// apart): the idle time is what neither the device nor the shares use.
		{"idle time is what neither the device nor the shares use", SpeedInput{Class: profile.ClassTrain, SoloSM: 80, OwnSM: 40, CoSM: []float64{55}, DeviceSM: 70}, true, true, 45.0 / 80, "below floor"},
		// An idle co-runner does not count towards the active jobs: the fair slice
		// stays 50%, so 20% is a job not asking for more (with it counted, a
		// third: 20% would be past half of it).
		{"idle co-runner does not shrink the fair slice", SpeedInput{Class: profile.ClassHPC, SoloSM: 90, OwnSM: 20, CoSM: []float64{78, 2}, DeviceSM: 99}, true, false, 20.0 / 90, "fair slice 50%"},
		// Measured contention: on the shipped Lucid pairs a job below its floor
		// keeps at least 0.53 of its fair slice; half is enough to count.
		{"contention at 0.6 of the fair slice counts", SpeedInput{Class: profile.ClassTrain, SoloSM: 66, OwnSM: 30, CoSM: []float64{70}, DeviceSM: 98}, true, true, 30.0 / 66, "below floor"},
		{"infer: busy co-runner breaches latency floor", SpeedInput{Class: profile.ClassInfer, SoloSM: 30, OwnSM: 28, CoSM: []float64{60}, DeviceSM: 90}, true, true, 1 / 1.6, "latency speed"},
		{"infer: light co-runner", SpeedInput{Class: profile.ClassInfer, SoloSM: 30, OwnSM: 28, CoSM: []float64{5}, DeviceSM: 35}, true, false, 1 / 1.05, "at or above"},
		// Trust: an inference job that stops serving cannot blame a co-runner.
		{"infer: idle server", SpeedInput{Class: profile.ClassInfer, SoloSM: 30, OwnSM: 5, CoSM: []float64{90}, DeviceSM: 95}, true, false, 1 / 1.9, "idle, not slowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := JudgeSpeed(cfg, c.in)
			if v.Judged != c.judged || v.Breach != c.breach || math.Abs(v.Speed-c.speed) > 1e-9 || !strings.Contains(v.Why, c.why) {
				t.Errorf("got %+v; want judged %v breach %v speed %.4f why ~%q", v, c.judged, c.breach, c.speed, c.why)
			}
			if v.Floor != cfg.Floors.For(c.in.Class) {
				t.Errorf("floor %v, want the class's %v", v.Floor, cfg.Floors.For(c.in.Class))
			}
		})
	}
}

func reading(gpu int, usedMiB, totalMiB uint64, deviceSM float64, jobs map[string]JobUsage) GPUReading {
	return GPUReading{GPU: gpu, Healthy: true, MemUsed: usedMiB * mib, MemTotal: totalMiB * mib, DeviceSMUtil: deviceSM, HaveProcSM: true, Jobs: jobs}
}

func TestMemoryFinding(t *testing.T) {
	cfg := Default()                                                    // budget = peak * 1.1 + 1024
	a := job("1", profile.ClassTrain, "alice", 0, 50, 20000, 0)         // budget 23024
	b := job("2", profile.ClassTrain, "bob", time.Minute, 50, 40000, 0) // budget 45024
	noProfile := Job{ID: "3", User: "carol", GPUs: []int{0}}
	cases := []struct {
		name     string
		r        GPUReading
		resident []Job
		want     string // job id, "" for none
	}{
		{"near full, one over its own budget", reading(0, 140000, 143000, 90, map[string]JobUsage{"1": {MemBytes: 90000 * mib}, "2": {MemBytes: 44000 * mib}}), []Job{a, b}, "1"},
		// Trust: job 1 inflating its memory fills the GPU, but job 2 is within
		// its budget: only job 1 is named, never its neighbour.
		{"inflating job is the one named", reading(0, 140000, 143000, 90, map[string]JobUsage{"1": {MemBytes: 100000 * mib}, "2": {MemBytes: 40000 * mib}}), []Job{a, b}, "1"},
		{"both over: the one most over", reading(0, 140000, 143000, 90, map[string]JobUsage{"1": {MemBytes: 24000 * mib}, "2": {MemBytes: 90000 * mib}}), []Job{a, b}, "2"},
		{"over budget but GPU not near full", reading(0, 100000, 143000, 90, map[string]JobUsage{"1": {MemBytes: 90000 * mib}}), []Job{a, b}, ""},
		{"near full, all within budget (unknown processes fill it)", reading(0, 140000, 143000, 90, map[string]JobUsage{"1": {MemBytes: 20000 * mib}, "2": {MemBytes: 40000 * mib}}), []Job{a, b}, ""},
		{"job without a profile has no budget", reading(0, 140000, 143000, 90, map[string]JobUsage{"3": {MemBytes: 120000 * mib}, "2": {MemBytes: 20000 * mib}}), []Job{noProfile, b}, ""},
		{"zero total", reading(0, 0, 0, 90, map[string]JobUsage{"1": {MemBytes: 90000 * mib}}), []Job{a, b}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := memoryFinding(cfg, c.r, c.resident)
			if c.want == "" {
				if ok {
					t.Fatalf("finding %+v, want none", f)
				}
				return
			}
			if !ok || f.Job.ID != c.want || f.Kind != MemoryOverBudget {
				t.Fatalf("finding %+v %v, want job %s", f, ok, c.want)
			}
			budget, _ := MemBudgetMiB(cfg, f.Job)
			if f.BudgetMiB != budget || f.MemMiB <= budget || !strings.Contains(f.Reason, "over its budget") {
				t.Errorf("finding %+v", f)
			}
		})
	}
}

func TestMemBudget(t *testing.T) {
	cfg := Default()
	cases := []struct {
		j    Job
		want float64
		ok   bool
	}{
		{job("1", profile.ClassTrain, "a", 0, 50, 10000, 0), 10000*1.1 + 1024, true},
		{Job{ID: "2"}, 0, false},
		{Job{ID: "3", Profile: &profile.Profile{MemUsedMiB: math.NaN()}}, 0, false},
		{Job{ID: "4", Profile: &profile.Profile{}}, 0, false},
	}
	for _, c := range cases {
		got, ok := MemBudgetMiB(cfg, c.j)
		if got != c.want || ok != c.ok {
			t.Errorf("job %s: %v %v, want %v %v", c.j.ID, got, ok, c.want, c.ok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"zero period", func(c *Config) { c.Period = 0 }},
		{"zero window", func(c *Config) { c.Window = 0 }},
		{"near full above 1", func(c *Config) { c.NearFullFrac = 1.5 }},
		{"negative margin", func(c *Config) { c.MemMarginMiB = -1 }},
		{"busy above 100", func(c *Config) { c.BusySMUtil = 101 }},
		{"fair share above 1", func(c *Config) { c.FairShareFrac = 2 }},
		{"floor breach cancels", func(c *Config) { c.Actions[profile.ClassTrain] = ClassActions{Memory: Requeue, Floor: Cancel} }},
		{"memory suspends", func(c *Config) { c.Actions[profile.ClassTrain] = ClassActions{Memory: Suspend, Floor: Suspend} }},
		{"no observations", func(c *Config) { c.ObservationsPerUser = 0 }},
		{"zero observation window", func(c *Config) { c.ObservationWindow = 0 }},
	}
	for _, c := range cases {
		cfg := Default()
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestApply(t *testing.T) {
	cases := []struct {
		kind ActionKind
		call string
	}{
		{Observe, ""}, {Requeue, "requeue 7"}, {Cancel, "cancel 7"}, {Suspend, "suspend 7"}, {Resume, "resume 7"},
	}
	for _, c := range cases {
		act := &recordingActuator{}
		if err := Apply(act, Action{Kind: c.kind, JobID: "7", Reason: "r"}); err != nil {
			t.Errorf("%s: %v", c.kind, err)
		}
		if strings.Join(act.calls, ",") != c.call {
			t.Errorf("%s: calls %v, want %q", c.kind, act.calls, c.call)
		}
	}
	if err := Apply(&recordingActuator{}, Action{Kind: "reboot", JobID: "7"}); err == nil {
		t.Error("unknown action applied")
	}
	if err := Apply(&recordingActuator{fail: errFake}, Action{Kind: Requeue, JobID: "7"}); err == nil || !strings.Contains(err.Error(), "requeue job 7") {
		t.Errorf("failed action: %v", err)
	}
}
