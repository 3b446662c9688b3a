// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
)

// sampled is a completed solo run of tag by uid, secs long, whose sampler saw
// sm % kernel time and mib MiB of device memory.
func sampled(tag, uid string, n int, secs, sm, mib float64) *Run {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Hour)
	stat := func(v float64) profile.Stat { return profile.Stat{Mean: v, P95: v, Max: v} }
	return &Run{
		Env:   JobEnv{JobID: fmt.Sprint(1000 + n), Node: "n1", Tag: tag, UID: uid, EndState: Completed},
		Start: end.Add(-time.Duration(secs * float64(time.Second))), End: end, Sampled: true, CoFrac: 1,
		Sample: &profile.Profile{SMUtil: stat(sm), MemBWUtil: stat(sm / 2), MemUsedMiB: mib, PowerW: stat(300),
			Samples: int(secs * 2), DurationS: secs, GPUModel: "NVIDIA H200"},
	}
}

// evidenceConfig is the default evidence rules in a temporary store.
func evidenceConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	d := config.Default().Profiling
	cfg.Profiling.MinRuns, cfg.Profiling.MinUsers, cfg.Profiling.MinRunTime = d.MinRuns, d.MinUsers, d.MinRunTime
	cfg.Profiling.StaleAfter = time.Minute
	return cfg
}

// A profile's metrics change only from enough runs of enough users that agree:
// one short idle run used to turn SM 95 % / 70,000 MiB into SM 1 % / 10 MiB.
func TestProfileEvidence(t *testing.T) {
	const honestSM, honestMiB = 95.0, 70000.0
	idle := func(uid string, n int, secs float64) *Run { return sampled("heavy", uid, n, secs, 1, 10) }
	honest := func(uid string, n int, sm float64) *Run {
		return sampled("heavy", uid, n, 600, sm, honestMiB-500+10*sm)
	}
	tests := []struct {
		name   string
		runs   []*Run
		wantSM float64 // 0: the stored profile must not change
		note   string
	}{
		{"a 2-second idle run on a stale profile", []*Run{idle("66", 1, 2)}, 0, "shorter than profiling.min_run_time"},
		{"one user's three idle runs", []*Run{idle("66", 1, 61), idle("66", 2, 61), idle("66", 3, 61)}, 0, "by 1 users, need 3 runs by 2 users"},
		{"an idle user and an honest user disagree", []*Run{idle("66", 1, 61), idle("66", 2, 61), honest("1000", 3, 94)}, 0, "disagree"},
		{"short runs never count toward the evidence", []*Run{idle("66", 1, 5), idle("67", 2, 5), idle("68", 3, 5)}, 0, "shorter than"},
		{"two honest users agree", []*Run{honest("1000", 1, 94), honest("1001", 2, 95), honest("1000", 3, 96)}, 95, ""},
		// The median of the users' medians (1, 93, 97) lies between honest values.
		{"an idle user among three", []*Run{idle("66", 1, 61), honest("1000", 2, 93), idle("66", 3, 61), honest("1001", 4, 97)}, 93, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := evidenceConfig(t)
			store, _ := profile.Open(cfg.ProfileDir)
			old := &profile.Profile{Tag: "heavy", Class: profile.ClassTrain, SMUtil: profile.Stat{Mean: honestSM, P95: 99, Max: 100},
				MemUsedMiB: honestMiB, SoloRuntimeS: 600, CollectedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			if err := store.Put(old); err != nil {
				t.Fatal(err)
			}
			before, _ := encodedProfile(store, "heavy")
			var notes []string
			written := false
			for _, run := range tc.runs {
				prev, _ := store.Get("heavy")
				var rep Report
				w, err := WriteProfile(cfg, store, run, prev, &rep)
				if err != nil {
					t.Fatal(err)
				}
				written = written || w
				notes = append(notes, rep.Notes...)
			}
			p, err := store.Get("heavy")
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantSM == 0 {
				after, _ := encodedProfile(store, "heavy")
				if written || !bytes.Equal(before, after) {
					t.Errorf("profile changed to SM %.0f %% / %.0f MiB", p.SMUtil.Mean, p.MemUsedMiB)
				}
				if !strings.Contains(strings.Join(notes, "; "), tc.note) {
					t.Errorf("notes %q lack %q", notes, tc.note)
				}
				return
			}
			if !written || p.SMUtil.Mean != tc.wantSM || p.MemUsedMiB != honestMiB-500+10*tc.wantSM || p.Class != profile.ClassTrain || p.SoloRuntimeS != 600 {
				t.Errorf("profile %+v (written %v), want SM %v, class and solo kept; notes %q", p, written, tc.wantSM, notes)
			}
			if !strings.Contains(p.Source, "runs by") {
				t.Errorf("source %q does not say what evidence made it", p.Source)
			}
			if c, _ := store.Candidates("heavy"); len(c) != 0 {
				t.Errorf("%d candidates left after the profile was written", len(c))
			}
		})
	}
}

func encodedProfile(s *profile.Store, tag string) ([]byte, error) {
	p, err := s.Get(tag)
	if err != nil {
		return nil, err
	}
	return profile.Encode(p)
}

// A missing profile is created by the same rule: never from one run.
func TestNewProfileNeedsEvidence(t *testing.T) {
	cfg := evidenceConfig(t)
	store, _ := profile.Open(cfg.ProfileDir)
	run := sampled("newapp", "66", 1, 2, 1, 10)
	run.Env.Class = profile.ClassInfer
	rep, err := Keep(cfg, run)
	if err != nil || rep.ProfileWritten {
		t.Fatalf("one 2-second run: %+v %v", rep, err)
	}
	if _, err := store.Get("newapp"); err == nil {
		t.Fatal("one 2-second run created a profile")
	}
	for i, uid := range []string{"1000", "1001", "1000"} {
		run := sampled("newapp", uid, 2+i, 120, 40, 8000)
		run.Env.Class = profile.ClassInfer
		if rep, err = Keep(cfg, run); err != nil {
			t.Fatal(err)
		}
	}
	p, err := store.Get("newapp")
	if err != nil || !rep.ProfileWritten || p.Class != profile.ClassInfer || p.SMUtil.Mean != 40 || p.Samples != 3*240 {
		t.Errorf("after 3 runs by 2 users: %+v %v (report %+v)", p, err, rep)
	}
}

// One user may start evidence for, or create, at most
// profiling.max_new_profiles_per_user tags, and no new tag is started once the
// store holds max_profiles (pending new tags included).
func TestNewProfilesBounded(t *testing.T) {
	cfg := testConfig(t) // one run of one user makes a profile: only the bounds stop it
	cfg.Profiling.MaxNewProfilesPerUser = 3
	store, _ := profile.Open(cfg.ProfileDir)
	keep := func(tag, uid string, n int) Report {
		run := sampled(tag, uid, n, 120, 50, 1000)
		run.Env.Class = profile.ClassHPC
		rep, err := Keep(cfg, run)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for i := 0; i < 10; i++ {
		keep(fmt.Sprintf("flood%d", i), "66", i)
	}
	if n, _ := store.Count(); n != 3 {
		t.Errorf("one user created %d profiles, want profiling.max_new_profiles_per_user = 3", n)
	}
	if rep := keep("flood3", "66", 20); rep.ProfileWritten || !strings.Contains(strings.Join(rep.Notes, ";"), "max_new_profiles_per_user allows (3)") {
		t.Errorf("fourth tag: %+v", rep)
	}
	// An existing profile is not a new one: its refresh is not counted.
	if rep := keep("flood0", "66", 21); !rep.ProfileWritten {
		t.Errorf("refresh of an existing profile: %+v", rep)
	}
	// Another user is not bound by the first one's count...
	if rep := keep("other", "1000", 30); !rep.ProfileWritten {
		t.Errorf("another user's new tag: %+v", rep)
	}
	// ...but by the store's: 4 profiles, max_profiles 5.
	cfg.MaxProfiles = 5
	keep("other2", "1001", 31)
	if rep := keep("other3", "1002", 32); rep.ProfileWritten || !strings.Contains(strings.Join(rep.Notes, ";"), "max_profiles is 5") {
		t.Errorf("beyond max_profiles: %+v", rep)
	}
	if n, _ := store.Count(); n != 5 {
		t.Errorf("%d profiles, want max_profiles = 5", n)
	}
	// Removing a profile frees its creator's count.
	store.Remove("flood1")
	cfg.MaxProfiles = 100
	if rep := keep("flood8", "66", 40); !rep.ProfileWritten {
		t.Errorf("after a removal: %+v", rep)
	}
}

// Pending evidence counts toward the user's bound, so a user cannot keep evidence
// files for any number of tags either.
func TestPendingNewTagsBounded(t *testing.T) {
	cfg := evidenceConfig(t)
	cfg.Profiling.MaxNewProfilesPerUser = 4
	store, _ := profile.Open(cfg.ProfileDir)
	refused := 0
	for i := 0; i < 20; i++ {
		run := sampled(fmt.Sprintf("t%d", i), "66", i, 120, 50, 1000)
		run.Env.Class = profile.ClassHPC
		rep, err := Keep(cfg, run)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(rep.Notes, ";"), "max_new_profiles_per_user") {
			refused++
		}
	}
	pending := 0
	for i := 0; i < 20; i++ {
		if c, _ := store.Candidates(fmt.Sprintf("t%d", i)); len(c) > 0 {
			pending++
		}
	}
	if pending != 4 || refused != 16 {
		t.Errorf("%d tags with evidence, %d refused; want 4 and 16", pending, refused)
	}
}
