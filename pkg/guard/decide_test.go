// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coscheml/coscheml/pkg/profile"
)

func speedFinding(victim Job) Finding {
	return Finding{Kind: SpeedBelowFloor, GPU: 0, Job: victim, Speed: 0.5, Floor: 0.75, Reason: "job " + victim.ID + " slowed"}
}

func TestDecideFloorTarget(t *testing.T) {
	cfg := suspending(Default())
	early := job("10", profile.ClassTrain, "alice", 0, 90, 1000, 0)
	late := job("11", profile.ClassTrain, "bob", time.Hour, 90, 1000, 0)
	later := job("12", profile.ClassTrain, "carol", 2*time.Hour, 90, 1000, 0)
	inferEarly := job("20", profile.ClassInfer, "dave", 0, 30, 1000, 0)
	inferLate := job("21", profile.ClassInfer, "erin", time.Hour, 30, 1000, 0)
	hpcEarly := job("30", profile.ClassHPC, "frank", -time.Hour, 90, 1000, 0)
	hpcLater := job("31", profile.ClassHPC, "grace", 3*time.Hour, 90, 1000, 0)
	noClassLate := job("40", "", "mallory", time.Hour, 90, 1000, 0)
	sameStart := job("13", profile.ClassTrain, "heidi", time.Hour, 90, 1000, 0)
	busy := func(ids ...string) map[string]float64 {
		m := map[string]float64{}
		for _, id := range ids {
			m[id] = 50
		}
		return m
	}
	cases := []struct {
		name     string
		victim   Job
		resident []Job
		sm       map[string]float64
		kind     ActionKind
		target   string
	}{
		{"later-placed co-runner is suspended", early, []Job{early, late}, busy("10", "11"), Suspend, "11"},
		{"the latest of two later-placed", early, []Job{early, late, later}, busy("10", "11", "12"), Suspend, "12"},
		// An earlier-placed, equally protected co-runner is never acted on: the
		// job placed into the conflict is requeued itself.
		{"earlier-placed co-runner is left alone, the latecomer requeued", late, []Job{early, late}, busy("10", "11"), Requeue, "11"},
		// The class is the user's own word: a later job with a stricter floor
		// (infer) that runs below it next to an earlier train job is the one
		// placed into the conflict; the earlier job is never acted on.
		{"earlier less protected co-runner is left alone, the later infer job requeued", inferLate, []Job{early, inferLate}, busy("10", "21"), Requeue, "21"},
		{"later infer co-runner of a train job is requeued", early, []Job{early, inferLate}, busy("10", "21"), Requeue, "21"},
		{"infer co-runner of infer is requeued", inferEarly, []Job{inferEarly, inferLate}, busy("20", "21"), Requeue, "21"},
		{"least protected of several later-placed", inferEarly, []Job{inferEarly, hpcEarly, later, hpcLater, inferLate}, busy("20", "30", "12", "31", "21"), Suspend, "31"},
		// A job with no class at all (nor in its profile: Round takes the
		// profile's) still cannot reach an earlier job; its own class-less
		// actions only observe.
		{"a class-less later job cannot get the earlier one acted on", noClassLate, []Job{early, noClassLate}, busy("10", "40"), Observe, "40"},
		// Placed in the same instant: the higher job id was submitted later.
		{"same start: the higher job id is the later", early, []Job{sameStart, late}, busy("13", "11"), Suspend, "13"},
		// Trust: an idle co-runner cannot be what slows the victim.
		{"idle co-runner is not the cause", early, []Job{early, late}, map[string]float64{"10": 50, "11": 3}, Observe, "10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Decide(cfg, speedFinding(c.victim), c.resident, c.sm, NewState(cfg), t0)
			if a.Kind != c.kind || a.JobID != c.target || a.Trigger != c.victim.ID {
				t.Fatalf("action %+v; want %s on %s triggered by %s", a, c.kind, c.target, c.victim.ID)
			}
			if a.Reason == "" {
				t.Error("no reason")
			}
			if a.JobID == c.victim.ID && a.Kind != Observe && !strings.Contains(a.Reason, "placed into the conflict") {
				t.Errorf("self-requeue %+v does not say why", a)
			}
			if (a.Kind == Requeue) != a.Elsewhere {
				t.Errorf("%+v: a floor requeue, and only it, starts the job elsewhere", a)
			}
			if a.Kind == Suspend && (a.Protects != c.victim.ID || !strings.Contains(a.Reason, "until job "+c.victim.ID+" ends")) {
				t.Errorf("suspend %+v does not name the protected job", a)
			}
		})
	}
}

// A job placed into a conflict is requeued only when its class acts on floors.
func TestDecideSelfRequeueFollowsClassActions(t *testing.T) {
	cfg := Default()
	cfg.Actions[profile.ClassTrain] = ClassActions{Memory: Requeue, Floor: Observe}
	early := job("10", profile.ClassTrain, "alice", 0, 90, 1000, 0)
	late := job("11", profile.ClassTrain, "bob", time.Hour, 90, 1000, 0)
	a := Decide(cfg, speedFinding(late), []Job{early, late}, map[string]float64{"10": 50, "11": 50}, NewState(cfg), t0)
	if a.Kind != Observe || !strings.Contains(a.Reason, "observe only") {
		t.Fatalf("action %+v, want observe (class train only observes)", a)
	}
}

func TestDecideMemoryActsOnOwnJob(t *testing.T) {
	cfg := Default()
	cfg.Actions[profile.ClassHPC] = ClassActions{Memory: Cancel, Floor: Suspend}
	cfg.Actions[profile.ClassInfer] = ClassActions{Memory: Observe, Floor: Observe}
	neighbour := job("1", profile.ClassTrain, "alice", 0, 50, 1000, 0)
	cases := []struct {
		name string
		hog  Job
		kind ActionKind
	}{
		{"train requeued", job("2", profile.ClassTrain, "mallory", time.Hour, 50, 1000, 0), Requeue},
		{"hpc cancelled by configuration", job("2", profile.ClassHPC, "mallory", time.Hour, 50, 1000, 0), Cancel},
		{"infer observed by configuration", job("2", profile.ClassInfer, "mallory", time.Hour, 50, 1000, 0), Observe},
		{"earlier-placed hog is still the one", job("2", profile.ClassTrain, "mallory", -time.Hour, 50, 1000, 0), Requeue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Finding{Kind: MemoryOverBudget, GPU: 0, Job: c.hog, MemMiB: 90000, BudgetMiB: 2100, Reason: "over"}
			a := Decide(cfg, f, []Job{neighbour, c.hog}, map[string]float64{"1": 50, "2": 50}, NewState(cfg), t0)
			if a.Kind != c.kind || a.JobID != c.hog.ID {
				t.Fatalf("action %+v; want %s on the hog %s", a, c.kind, c.hog.ID)
			}
		})
	}
}

func TestDecideRateLimits(t *testing.T) {
	cfg := suspending(Default())
	victim := job("10", profile.ClassTrain, "alice", 0, 90, 1000, 0)
	a1 := job("11", profile.ClassTrain, "bob", time.Hour, 90, 1000, 0)
	a2 := job("12", profile.ClassTrain, "carol", 2*time.Hour, 90, 1000, 0)
	sm := map[string]float64{"10": 45, "11": 45, "12": 45}
	st := NewState(cfg)
	first := Decide(cfg, speedFinding(victim), []Job{victim, a2}, sm, st, t0)
	if first.Kind != Suspend || first.JobID != "12" {
		t.Fatalf("first %+v", first)
	}
	st.Record(first, t0)

	// Trust: one action per Cooldown per triggering job.
	a := Decide(cfg, speedFinding(victim), []Job{victim, a1}, sm, st, t0.Add(time.Minute))
	if a.Kind != Observe || !strings.Contains(a.Reason, "rate limited") {
		t.Errorf("within cooldown: %+v, want rate limited", a)
	}
	// After the cooldown another co-runner may be acted on...
	a = Decide(cfg, speedFinding(victim), []Job{victim, a1}, sm, st, t0.Add(cfg.Cooldown+time.Second))
	if a.Kind != Suspend || a.JobID != "11" {
		t.Errorf("after cooldown: %+v, want suspend 11", a)
	}
	// ...but the same co-runner only once (here: resumed and back).
	st2 := NewState(cfg)
	st2.Record(Action{Kind: Requeue, JobID: "12", Trigger: "10"}, t0)
	a = Decide(cfg, speedFinding(victim), []Job{victim, a2}, sm, st2, t0.Add(time.Hour))
	if a.Kind != Observe || !strings.Contains(a.Reason, "already caused one action on job 12") {
		t.Errorf("same pair again: %+v, want observe", a)
	}
	// A job the guard holds suspended is not acted on again by another trigger.
	other := job("9", profile.ClassTrain, "dave", -time.Hour, 90, 1000, 0)
	a = Decide(cfg, speedFinding(other), []Job{other, a2}, sm, st, t0.Add(time.Hour))
	if a.Kind != Observe || !strings.Contains(a.Reason, "already suspended") {
		t.Errorf("suspended target: %+v, want observe", a)
	}
	// Two findings of one round: a job requeued for the first is not acted on
	// again for the second (Slurm refuses a second requeue of a pending job).
	def := Default()
	st4 := NewState(def)
	r1 := Decide(def, speedFinding(victim), []Job{victim, a2}, sm, st4, t0)
	st4.Record(r1, t0)
	r2 := Decide(def, speedFinding(a2), []Job{victim, a2}, sm, st4, t0)
	if r1.Kind != Requeue || r1.JobID != "12" || r2.Kind != Observe || !strings.Contains(r2.Reason, "already requeued") {
		t.Errorf("one round, two findings on job 12: %+v then %+v, want one requeue then observe", r1, r2)
	}
	// Once it left the node, it is forgotten.
	st4.Resumes([]Job{victim})
	if st4.Removed("12") {
		t.Error("job 12 still counted as removed after it left the node")
	}
	// Observe actions never count towards the limits.
	st3 := NewState(cfg)
	st3.Record(Action{Kind: Observe, JobID: "12", Trigger: "10"}, t0)
	if _, ok := st3.LastAction("10"); ok || st3.ActedOn("10", "12") {
		t.Error("an observation was recorded as an action")
	}
}

func TestObservationCapPerUser(t *testing.T) {
	cfg := Default()
	cfg.ObservationsPerUser = 2
	st := NewState(cfg)
	mal := job("1", profile.ClassTrain, "mallory", 0, 90, 1000, 0)
	mal2 := job("2", profile.ClassTrain, "mallory", 0, 90, 1000, 0)
	mal2.Tag = mal.Tag // another job of the same user and tag
	ok := job("3", profile.ClassTrain, "alice", 0, 90, 1000, 0)
	ok.Tag = mal.Tag
	co := []string{"tag-x"}
	got := []bool{
		st.AllowObservation(mal, co, t0),
		st.AllowObservation(mal2, co, t0.Add(time.Minute)),
		st.AllowObservation(mal, co, t0.Add(2*time.Minute)), // third of the pair by this user
		st.AllowObservation(ok, co, t0.Add(2*time.Minute)),  // another user: own cap
		st.AllowObservation(mal, []string{"tag-y"}, t0.Add(2*time.Minute)),
		st.AllowObservation(mal, co, t0.Add(cfg.ObservationWindow+time.Minute)), // window passed
	}
	want := []bool{true, true, false, true, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("observation %d allowed %v, want %v", i, got[i], want[i])
		}
	}
}

func TestSmoothingAndWarmup(t *testing.T) {
	cfg := Default()
	cfg.Window = 3 // alpha 0.5
	st := NewState(cfg)
	a := job("1", profile.ClassTrain, "a", 0, 90, 1000, 0)
	b := job("2", profile.ClassTrain, "b", time.Hour, 90, 1000, 0)
	by := map[int][]Job{0: {a, b}}
	seq := []float64{80, 40, 60, 20}
	want := []float64{80, 60, 60, 40}
	for i, x := range seq {
		st.Observe(t0.Add(time.Duration(i)*cfg.Period), []GPUReading{reading(0, 1, 100, 99, map[string]JobUsage{"1": {SMUtil: x}, "2": {SMUtil: 50}})}, by)
		got, full := st.SmoothedSM("1", 0)
		if got != want[i] || full != (i+1 >= cfg.Window) {
			t.Errorf("round %d: smoothed %v full %v, want %v %v", i, got, full, want[i], i+1 >= cfg.Window)
		}
	}
	// An unhealthy round resets the smoothing: the guard never judges on data it
	// did not read.
	st.Observe(t0.Add(time.Minute), []GPUReading{{GPU: 0, Healthy: false}}, by)
	if _, full := st.SmoothedSM("1", 0); full {
		t.Error("smoothing survived an unhealthy round")
	}
}

func TestSustainedBreach(t *testing.T) {
	cfg := Default()
	cfg.Window = 2
	cfg.SustainFor = 20 * time.Second
	victim := job("1", profile.ClassTrain, "alice", 0, 90, 1000, 0)
	late := job("2", profile.ClassTrain, "bob", time.Hour, 90, 1000, 0)
	by := map[int][]Job{0: {victim, late}}
	slowed := reading(0, 1, 100, 99, map[string]JobUsage{"1": {SMUtil: 45}, "2": {SMUtil: 50}})
	fine := reading(0, 1, 100, 99, map[string]JobUsage{"1": {SMUtil: 88}, "2": {SMUtil: 10}})
	cases := []struct {
		name  string
		seq   []GPUReading
		fires int // round index of the first speed finding, -1 for none
	}{
		// Window 2 warms up at round 1; the breach starts there and holds 20 s at round 5.
		{"sustained", []GPUReading{slowed, slowed, slowed, slowed, slowed, slowed}, 5},
		{"interrupted", []GPUReading{slowed, slowed, slowed, fine, fine, slowed, slowed, slowed}, -1},
		{"unhealthy round resets", []GPUReading{slowed, slowed, slowed, slowed, {GPU: 0}, slowed, slowed, slowed}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := NewState(cfg)
			first := -1
			for i, r := range c.seq {
				for _, f := range st.Observe(t0.Add(time.Duration(i)*cfg.Period), []GPUReading{r}, by) {
					if f.Kind == SpeedBelowFloor && first < 0 {
						first = i
						if f.Job.ID != "1" || !strings.Contains(f.Reason, "below floor") {
							t.Errorf("finding %+v", f)
						}
					}
				}
			}
			if first != c.fires {
				t.Errorf("first speed finding at round %d, want %d", first, c.fires)
			}
		})
	}
}

// TestGuardRoundSuspendResume runs whole rounds on go-nvml mocks: a later-placed
// co-runner holds a training job below its floor, is suspended once, and is
// resumed when the protected job ends; a memory hog on another GPU is requeued.
func TestGuardRoundSuspendResume(t *testing.T) {
	g0 := &fakeGPU{memUsed: 40 << 30, memTotal: 141 << 30, util: 99,
		procs: []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 10 << 30}, {Pid: 200, UsedGpuMemory: 10 << 30}},
		sm:    map[uint32]uint32{100: 45, 200: 50}}
	g1 := &fakeGPU{memUsed: 140 << 30, memTotal: 141 << 30, util: 60,
		procs: []gonvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 120 << 30}, {Pid: 400, UsedGpuMemory: 10 << 30}},
		sm:    map[uint32]uint32{300: 30, 400: 30}}
	root := procRoot(t, map[uint32]string{100: "1", 200: "2", 300: "3", 400: "4"})
	var log logLines
	mon := NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0, g1})), CgroupMapper{Root: root}, log.logf)
	src := &staticJobs{jobs: []Job{
		job("1", profile.ClassTrain, "alice", 0, 90, 12000, 0),
		job("2", profile.ClassTrain, "bob", time.Hour, 90, 12000, 0),
		job("3", profile.ClassTrain, "mallory", 0, 30, 12000, 1),
		job("4", profile.ClassTrain, "carol", time.Hour, 30, 12000, 1),
	}}
	act := &recordingActuator{}
	cfg := suspending(Default())
	g, err := New(cfg, mon, src, act, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	var suspendedAt time.Time
	for i := 0; i < 40; i++ {
		res, err := g.Round(now)
		if err != nil {
			t.Fatal(err)
		}
		if res.GPUs != 2 || res.Unhealthy != 0 || res.Unknown != 0 {
			t.Fatalf("round %d: %+v", i, res)
		}
		for _, a := range res.Actions {
			if a.Kind == Suspend && suspendedAt.IsZero() {
				suspendedAt = now
			}
		}
		now = now.Add(cfg.Period)
	}
	want := []string{"requeue 3", "suspend 2"}
	if strings.Join(act.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("actuator calls %v, want %v", act.calls, want)
	}
	// Warm-up (Window readings) plus SustainFor, at the period's resolution.
	if earliest := t0.Add(time.Duration(cfg.Window-1)*cfg.Period + cfg.SustainFor); suspendedAt.Before(earliest) {
		t.Errorf("suspended at %v, before the breach could have held %v", suspendedAt, cfg.SustainFor)
	}
	// The protected job ends: the suspended one is resumed, once.
	src.remove("1")
	for i := 0; i < 3; i++ {
		if _, err := g.Round(now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(cfg.Period)
	}
	want = append(want, "resume 2")
	if strings.Join(act.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("actuator calls %v, want %v", act.calls, want)
	}
	if !log.has("resume job 2") {
		t.Errorf("log %q lacks the resume", log.lines)
	}
}

func TestGuardRoundKeepsGoing(t *testing.T) {
	g0 := &fakeGPU{memUsed: 140 << 30, memTotal: 141 << 30, util: 60,
		procs: []gonvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 120 << 30}, {Pid: 400, UsedGpuMemory: 10 << 30}}}
	root := procRoot(t, map[uint32]string{300: "3", 400: "4"})
	var log logLines
	src := &staticJobs{jobs: []Job{
		job("3", profile.ClassTrain, "mallory", 0, 30, 12000, 0),
		job("4", profile.ClassTrain, "carol", time.Hour, 30, 12000, 0),
	}}
	act := &recordingActuator{fail: errFake}
	g, err := New(Default(), NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0})), CgroupMapper{Root: root}, log.logf), src, act, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Round(t0)
	if err != nil || len(res.Errors) != 1 || !log.has("requeue job 3") {
		t.Fatalf("failed action: %+v %v, log %q", res, err, log.lines)
	}
	// A failed action is not recorded: the next round tries again.
	res, _ = g.Round(t0.Add(5 * time.Second))
	if len(act.calls) != 2 {
		t.Errorf("calls %v, want the requeue retried", act.calls)
	}
	// A failing job source ends the round with an error, nothing else.
	src.err = errFake
	if _, err := g.Round(t0.Add(10 * time.Second)); err == nil {
		t.Error("job source failure not reported")
	}
	// Without an actuator the guard only logs what it would do, once.
	g2, _ := New(Default(), NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0})), CgroupMapper{Root: root}, log.logf), &staticJobs{jobs: src.jobs}, nil, log.logf)
	g2.Round(t0)
	res, _ = g2.Round(t0.Add(5 * time.Second))
	if !log.has("would requeue job 3") || res.Actions[0].Kind != Observe {
		t.Errorf("dry run: %+v, log %q", res.Actions, log.lines)
	}
}

// suspending makes hpc and train jobs suspended for a floor breach (the
// default requeues them), for the tests of suspension and its resume.
func suspending(cfg Config) Config {
	cfg.Actions[profile.ClassHPC] = ClassActions{Memory: Requeue, Floor: Suspend}
	cfg.Actions[profile.ClassTrain] = ClassActions{Memory: Requeue, Floor: Suspend}
	return cfg
}

// A job submitted without class= (the documented common form) is judged and
// acted on by its profile's class, as placement judged it: over its memory
// budget it is requeued, not only observed, and its floor is its profile
// class's, not the strictest.
func TestGuardRoundClassFromProfile(t *testing.T) {
	g0 := &fakeGPU{memUsed: 140 << 30, memTotal: 141 << 30, util: 99,
		procs: []gonvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 120 << 30}, {Pid: 400, UsedGpuMemory: 10 << 30}},
		sm:    map[uint32]uint32{300: 30, 400: 30}}
	root := procRoot(t, map[uint32]string{300: "3", 400: "4"})
	hog := job("3", profile.ClassTrain, "mallory", time.Hour, 30, 12000, 0)
	hog.Class = "" // comment coscheml:app=TAG, no class=; the profile says train
	src := &staticJobs{jobs: []Job{job("4", profile.ClassTrain, "carol", 0, 30, 12000, 0), hog}}
	act := &recordingActuator{}
	var log logLines
	g, err := New(Default(), NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0})), CgroupMapper{Root: root}, log.logf), src, act, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Round(t0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(act.calls, ",") != "requeue 3" {
		t.Fatalf("actuator calls %v (actions %+v), want the class-less hog requeued by its profile's class", act.calls, res.Actions)
	}
	if len(res.Findings) != 1 || res.Findings[0].Job.Class != profile.ClassTrain {
		t.Errorf("findings %+v: the job's class should be its profile's (train)", res.Findings)
	}
}

// A several-GPU job is judged on each of its GPUs and acted on as one job: held
// below its floor on any GPU by a later co-runner, the co-runner is acted on;
// placed into conflicts on two GPUs at once, it is requeued once.
func TestGuardRoundSeveralGPUJob(t *testing.T) {
	busy := func(pids map[uint32]uint32) *fakeGPU {
		g := &fakeGPU{memUsed: 20 << 30, memTotal: 141 << 30, util: 99, sm: pids}
		for pid := range pids {
			g.procs = append(g.procs, gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: 5 << 30})
		}
		return g
	}
	cfg := Default()
	cfg.SustainFor, cfg.Window = 0, 1
	t.Run("a later co-runner on one GPU of the gang", func(t *testing.T) {
		// Gang 20 (GPUs 0, 1) alone on GPU 0, next to later job 21 on GPU 1,
		// where it gets 30% of its solo 90%.
		g0, g1 := busy(map[uint32]uint32{500: 88}), busy(map[uint32]uint32{501: 30, 600: 69})
		root := procRoot(t, map[uint32]string{500: "20", 501: "20", 600: "21"})
		src := &staticJobs{jobs: []Job{job("20", profile.ClassTrain, "alice", 0, 90, 12000, 0, 1), job("21", profile.ClassTrain, "bob", time.Hour, 90, 12000, 1)}}
		act := &recordingActuator{}
		g, _ := New(cfg, NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0, g1})), CgroupMapper{Root: root}, t.Logf), src, act, t.Logf)
		if _, err := g.Round(t0); err != nil {
			t.Fatal(err)
		}
		if strings.Join(act.calls, ",") != "requeue 21" {
			t.Errorf("calls %v, want the later co-runner requeued", act.calls)
		}
	})
	t.Run("placed into conflicts on both its GPUs", func(t *testing.T) {
		g0, g1 := busy(map[uint32]uint32{500: 30, 700: 69}), busy(map[uint32]uint32{501: 30, 701: 69})
		root := procRoot(t, map[uint32]string{500: "20", 501: "20", 700: "10", 701: "11"})
		src := &staticJobs{jobs: []Job{job("10", profile.ClassTrain, "carol", 0, 90, 12000, 0), job("11", profile.ClassTrain, "dave", 0, 90, 12000, 1),
			job("20", profile.ClassTrain, "alice", time.Hour, 90, 12000, 0, 1)}}
		act := &recordingActuator{}
		g, _ := New(cfg, NewMonitor(initBackend(t, fakeNode([]*fakeGPU{g0, g1})), CgroupMapper{Root: root}, t.Logf), src, act, t.Logf)
		if _, err := g.Round(t0); err != nil {
			t.Fatal(err)
		}
		if strings.Join(act.calls, ",") != "requeue 20" {
			t.Errorf("calls %v, want the gang requeued once, its earlier co-runners left alone", act.calls)
		}
	})
}
