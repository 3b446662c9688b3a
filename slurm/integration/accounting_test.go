// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	cases := []struct {
		name string
		j    jobEnd
		want verdict
	}{
		{"ran and completed", jobEnd{Ran: true, State: "COMPLETED", Launched: true}, verdictDone},
		{"held and pending", jobEnd{State: "PENDING"}, verdictHeld},
		{"held but ran", jobEnd{State: "COMPLETED"}, verdictLost},
		{"held but gone", jobEnd{}, verdictLost},
		{"ran but gone", jobEnd{Ran: true}, verdictLost},
		// 22.05.8 run 1 of 3 (issue 14): launch failed on slurmd, Slurm requeued it.
		{"requeued by Slurm, pending again", jobEnd{Ran: true, State: "PENDING", Restarts: 1, Launched: true}, verdictRetry},
		{"pending, never requeued", jobEnd{Ran: true, State: "PENDING"}, verdictLost},
		// 22.05.8 repeat run 6: jobs 840 and 841, allocated 1 ms after
		// slurmctld got SIGTERM, never launched, recovered as RUNNING.
		{"allocated before the stop, never launched", jobEnd{Ran: true, State: "RUNNING", StartedBeforeStop: true}, verdictLostLaunch},
		{"launched and still running", jobEnd{Ran: true, State: "RUNNING", Launched: true, StartedBeforeStop: true}, verdictLost},
		{"never launched, started after the stop", jobEnd{Ran: true, State: "RUNNING"}, verdictLost},
		{"failed", jobEnd{Ran: true, State: "FAILED", Launched: true}, verdictLost},
		{"cancelled", jobEnd{Ran: true, State: "CANCELLED", Launched: true}, verdictLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(tc.j); got != tc.want {
				t.Errorf("judge(%+v) = %v, want %v", tc.j, got, tc.want)
			}
		})
	}
}

// TestLaunchedJobs reads slurmd logs recorded on real daemons: n2 of the
// 22.05.8 run whose jobs 840 and 841 were allocated across slurmctld's stop
// and never launched, and n1 of a 26.05.3 run (its own line format).
func TestLaunchedJobs(t *testing.T) {
	cases := []struct {
		file       string
		launched   []int
		not        []int
		releaseFmt string // the release's launch line, counted independently
	}{
		{"slurmd-n2-22.05.8.log", []int{48, 825, 848, 849, 1042}, []int{840, 841, 2}, "Launching batch job "},
		{"slurmd-n1-26.05.3.log", []int{1, 2, 3, 4, 5, 18}, []int{6, 17}, "Launching batch JobId="},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "lostlaunch", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]bool{}
			launchedJobs(b, got)
			if want := strings.Count(string(b), tc.releaseFmt); len(got) != want {
				t.Errorf("%d jobs launched, want %d (the log's launch lines)", len(got), want)
			}
			for _, id := range tc.launched {
				if !got[id] {
					t.Errorf("job %d: launch not found", id)
				}
			}
			for _, id := range tc.not {
				if got[id] {
					t.Errorf("job %d: launch found, but the log has none", id)
				}
			}
		})
	}
}

func FuzzLaunchedJobs(f *testing.F) {
	for _, name := range []string{"slurmd-n2-22.05.8.log", "slurmd-n1-26.05.3.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", "lostlaunch", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Launching batch job 99999999999999999999999 for UID 0\nLaunching batch JobId=0 x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[int]bool{}
		launchedJobs(b, got)
		if len(got) > strings.Count(string(b), "Launching batch ") {
			t.Errorf("%d jobs from %d launch lines", len(got), strings.Count(string(b), "Launching batch "))
		}
		for id := range got {
			if id <= 0 {
				t.Errorf("job id %d", id)
			}
		}
	})
}
