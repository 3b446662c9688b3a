// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"testing"

	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/model"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/trace"
)

// TestGuardInSimulator: two jobs of application a (0.6 next to each other,
// below the train floor 0.75) on two single-GPU nodes, placed together by the
// optimistic predictor. Without the guard both run below their floor for the
// whole co-run; with it the later one is acted on after the detection delay
// (30 s window + 60 s sustain): requeued onto the other node, or suspended
// until the earlier one ends.
func TestGuardInSimulator(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "1", Submit: 0, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "2", Submit: 10, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
	}
	const delay = 90.0
	suspendCfg := guard.Default()
	suspendCfg.Actions[profile.ClassTrain] = guard.ClassActions{Memory: guard.Requeue, Floor: guard.Suspend}
	requeueCfg := guard.Default()
	cases := []struct {
		name     string
		guard    *guard.Config
		requeues int
		suspends int
		below    [2]float64 // seconds below floor of jobs 1 and 2
		end2     float64
	}{
		// Shared from 10 s: job 1 at 0.6 until job 2 ends.
		{name: "off", guard: nil, below: [2]float64{-1, -1}},
		// Job 2 is requeued at 100 s, progress lost, and starts at once on node 1.
		{name: "requeue", guard: &requeueCfg, requeues: 1, below: [2]float64{delay, delay}, end2: 10 + delay + 1000},
		// Job 2 is suspended at 100 s with 54 s of work done, resumed when job 1
		// ends (10 s at 1, 90 s at 0.6, then alone: 1000 - 64 = 936 s more: ends
		// at 1036), then needs 946 s.
		{name: "suspend", guard: &suspendCfg, suspends: 1, below: [2]float64{delay, delay}, end2: 1036 + 1000 - 0.6*delay},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(Config{Nodes: 2, GPUsPerNode: 1, Guard: c.guard}, jobs, tb, mustPolicy(t, "coscheml", model.Optimistic{}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Guard.Requeues != c.requeues || res.Guard.Suspends != c.suspends {
				t.Fatalf("guard %+v, want %d requeues %d suspends", res.Guard, c.requeues, c.suspends)
			}
			for i, j := range res.Jobs {
				if !j.BelowFloor {
					t.Errorf("job %s never below floor: it shared at 0.6", j.ID)
				}
				if c.below[i] < 0 {
					if j.BelowFloorSec < 900 {
						t.Errorf("no guard: job %s below floor %.0f s, want most of its run", j.ID, j.BelowFloorSec)
					}
					continue
				}
				if math.Abs(j.BelowFloorSec-c.below[i]) > 1e-6 {
					t.Errorf("job %s below floor %.1f s, want %.1f", j.ID, j.BelowFloorSec, c.below[i])
				}
			}
			if c.end2 > 0 && math.Abs(res.Jobs[1].End-c.end2) > 1e-6 {
				t.Errorf("job 2 ended at %.1f, want %.1f", res.Jobs[1].End, c.end2)
			}
			if c.requeues > 0 && (res.Jobs[1].Requeued != 1 || res.Jobs[0].End != 1036) {
				t.Errorf("requeue: job 2 requeued %d times, job 1 ended at %v", res.Jobs[1].Requeued, res.Jobs[0].End)
			}
		})
	}
}

// The experiment never gives the guard to the policies that stand for Slurm
// alone, and below_floor_hours sums the jobs' time below floor.
func TestExperimentGuardOnlyForPlugin(t *testing.T) {
	tt := shipped(t)
	g := guard.Default()
	exp := Experiment{
		Config: Config{Nodes: 2, GPUsPerNode: 4, Guard: &g}, Truth: tt, Model: model.Optimistic{},
		Policies: []string{"coscheml", "blind"}, Seeds: []int64{1}, PairMemory: true,
		Jobs: func(seed int64) ([]trace.Job, error) { return phillySample(t, 300, 8, 1.5, seed, tt), nil },
	}
	runs, err := exp.Execute()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		sum := 0.0
		for _, j := range r.Result.Jobs {
			sum += j.BelowFloorSec / 3600
		}
		if math.Abs(sum-r.Overall.BelowFloorHours) > 1e-9 {
			t.Errorf("%s: below_floor_hours %v, jobs sum to %v", r.Policy, r.Overall.BelowFloorHours, sum)
		}
		acted := r.Result.Guard.Checks > 0
		if r.Policy == "blind" && acted {
			t.Errorf("blind (Slurm alone) got the guard: %+v", r.Result.Guard)
		}
		if r.Policy == "coscheml" && !acted {
			t.Errorf("coscheml with the optimistic predictor: the guard never judged a breach")
		}
	}
}

// A job the guard requeued is judged afresh where it starts next: placed into a
// second conflict, it is requeued again (not merely observed because the guard
// once acted on it), and only then runs alone.
func TestGuardRequeuedJobJudgedAfresh(t *testing.T) {
	tb := handTruth(t)
	jobs := []trace.Job{
		{ID: "1", Submit: 0, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "2", Submit: 10, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
		{ID: "3", Submit: 20, Duration: 1000, GPUs: 1, Tag: "a", Class: profile.ClassTrain},
	}
	cfg := guard.Default()
	res, err := Run(Config{Nodes: 3, GPUsPerNode: 1, Guard: &cfg}, jobs, tb, mustPolicy(t, "coscheml", model.Optimistic{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		t.Logf("job %s: start %.0f end %.0f requeued %d below floor %.0f s", j.ID, j.Start, j.End, j.Requeued, j.BelowFloorSec)
	}
	if res.Guard.Requeues != 2 || res.Jobs[1].Requeued != 2 {
		t.Fatalf("guard %+v, job 2 requeued %d times; want job 2 requeued twice", res.Guard, res.Jobs[1].Requeued)
	}
	for _, j := range res.Jobs {
		if j.BelowFloorSec > 2*90+1e-6 {
			t.Errorf("job %s below floor %.0f s: more than two detection delays", j.ID, j.BelowFloorSec)
		}
	}
}
