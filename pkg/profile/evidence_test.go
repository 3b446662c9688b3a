// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func cand(uid string, h int, secs, sm, mib float64, class Class) Candidate {
	st := func(v float64) Stat { return Stat{Mean: v, P95: v + 1, Max: v + 2} }
	return Candidate{UID: uid, JobID: fmt.Sprint(h), RuntimeS: secs, Class: class,
		When:   time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(h) * time.Hour),
		Sample: Profile{SMUtil: st(sm), MemBWUtil: st(sm / 2), MemUsedMiB: mib, Samples: 10, DurationS: secs}}
}

func TestCombineEvidence(t *testing.T) {
	rules := EvidenceRules{MinRuns: 3, MinUsers: 2, MinRunTimeS: 60}
	tests := []struct {
		name   string
		cands  []Candidate
		ready  bool
		sm     float64
		mib    float64
		class  Class
		why    string
		agreed int
	}{
		{"none", nil, false, 0, 0, "", "0 runs by 0 users", 0},
		{"one user's runs", []Candidate{cand("1", 1, 100, 50, 1000, ""), cand("1", 2, 100, 50, 1000, ""), cand("1", 3, 100, 50, 1000, "")}, false, 0, 0, "", "3 runs by 1 users", 0},
		{"short runs ignored", []Candidate{cand("1", 1, 30, 50, 1000, ""), cand("2", 2, 100, 50, 1000, ""), cand("3", 3, 59, 50, 1000, "")}, false, 0, 0, "", "1 runs by 1 users", 0},
		{"two users agree", []Candidate{cand("1", 1, 100, 50, 1000, "hpc"), cand("2", 2, 100, 54, 1100, "hpc"), cand("1", 3, 100, 52, 1000, "hpc")}, true, 52.5, 1050, ClassHPC, "", 2},
		{"two users disagree", []Candidate{cand("1", 1, 100, 1, 10, ""), cand("1", 2, 100, 1, 10, ""), cand("2", 3, 100, 95, 70000, "")}, false, 0, 0, "", "disagree", 0},
		{"memory alone disagrees", []Candidate{cand("1", 1, 100, 50, 10, ""), cand("1", 2, 100, 50, 10, ""), cand("2", 3, 100, 50, 70000, "")}, false, 0, 0, "", "disagree", 0},
		{"one outlier among three users", []Candidate{cand("1", 1, 100, 1, 10, ""), cand("2", 2, 100, 90, 60000, ""), cand("3", 3, 100, 94, 64000, "")}, true, 90, 60000, "", "", 2},
		{"classes split", []Candidate{cand("1", 1, 100, 50, 1000, "hpc"), cand("2", 2, 100, 50, 1000, "infer"), cand("1", 3, 100, 50, 1000, "hpc")}, false, 0, 0, "", "different classes", 2},
		{"class by majority", []Candidate{cand("1", 1, 100, 50, 1000, "infer"), cand("2", 2, 100, 50, 1000, "infer"), cand("3", 3, 100, 50, 1000, "hpc")}, true, 50, 1000, ClassInfer, "", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := CombineEvidence("app", tc.cands, rules)
			if ev.Ready != tc.ready || ev.Agreeing != tc.agreed || !strings.Contains(ev.Why, tc.why) {
				t.Fatalf("evidence %+v, want ready %v, %d agreeing, why %q", ev, tc.ready, tc.agreed, tc.why)
			}
			if !tc.ready {
				return
			}
			m := ev.Metrics
			if m.SMUtil.Mean != tc.sm || m.MemUsedMiB != tc.mib || ev.Class != tc.class || m.Tag != "app" {
				t.Errorf("metrics SM %v mem %v class %q, want %v %v %q", m.SMUtil.Mean, m.MemUsedMiB, ev.Class, tc.sm, tc.mib, tc.class)
			}
			m.Class = ClassHPC
			if err := m.Validate(); err != nil {
				t.Errorf("combined metrics do not validate: %v", err)
			}
		})
	}
}

// One uid's flood of candidates replaces only its own; the evidence is consumed
// once it made a profile; a short run changes nothing.
func TestAddCandidate(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rules := EvidenceRules{MinRuns: 3, MinUsers: 2, MinRunTimeS: 60}
	if _, err := s.AddCandidate("x", cand("1", 0, 2, 1, 10, ""), rules); !errors.Is(err, ErrShortRun) {
		t.Fatalf("2-second run: %v", err)
	}
	if c, _ := s.Candidates("x"); len(c) != 0 {
		t.Fatalf("a short run was kept: %v", c)
	}
	if ev, err := s.AddCandidate("x", cand("1000", 1, 600, 95, 70000, ""), rules); err != nil || ev.Ready {
		t.Fatalf("first honest run: %+v %v", ev, err)
	}
	for i := 0; i < 40; i++ {
		if ev, err := s.AddCandidate("x", cand("66", 2+i, 61, 1, 10, ""), rules); err != nil || ev.Ready {
			t.Fatalf("flood run %d: %+v %v", i, ev, err)
		}
	}
	c, err := s.Candidates("x")
	if err != nil || len(c) != 1+MaxCandidatesPerUser || c[0].UID != "1000" {
		t.Fatalf("kept %d candidates (%v), want the honest one and %d of the flood", len(c), err, MaxCandidatesPerUser)
	}
	// The evidence files are invisible to profile readers.
	if ps, problems := s.List(); len(ps) != 0 || len(problems) != 0 {
		t.Errorf("List sees %v %v", ps, problems)
	}
	// A second honest user: the median of the users' medians (95, 1, 94) is 94.
	ev, err := s.AddCandidate("x", cand("1001", 50, 600, 94, 69000, ""), rules)
	if err != nil || !ev.Ready || ev.Metrics.SMUtil.Mean != 94 || ev.Metrics.MemUsedMiB != 69000 || ev.Users != 3 || ev.Agreeing != 2 {
		t.Fatalf("two honest users and a flood: %+v %v", ev, err)
	}
	if c, _ := s.Candidates("x"); len(c) != 0 {
		t.Errorf("%d candidates left after the evidence was used", len(c))
	}
	// A damaged file starts over instead of blocking every run.
	os.WriteFile(filepath.Join(s.Dir(), ".evidence", "x.json"), []byte("{"), 0o644)
	if _, err := s.Candidates("x"); !errors.Is(err, ErrFormat) {
		t.Errorf("damaged evidence: %v", err)
	}
	if ev, err := s.AddCandidate("x", cand("1", 60, 100, 50, 100, ""), rules); err != nil || ev.Runs != 1 {
		t.Errorf("after damage: %+v %v", ev, err)
	}
}

func TestClaimNewTag(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := s.ClaimNewTag("66", fmt.Sprint("t", i), 3, 100); err != nil {
			t.Fatal(err)
		}
		// A claim counts while the tag has evidence or a profile.
		s.AddCandidate(fmt.Sprint("t", i), cand("66", i, 100, 50, 100, ""), EvidenceRules{MinRuns: 9, MinUsers: 2, MinRunTimeS: 60})
	}
	if err := s.ClaimNewTag("66", "t1", 3, 100); err != nil {
		t.Errorf("a tag already counted: %v", err)
	}
	if err := s.ClaimNewTag("66", "t9", 3, 100); !errors.Is(err, ErrQuota) {
		t.Errorf("fourth tag: %v", err)
	}
	if err := s.ClaimNewTag("1000", "u0", 3, 4); err != nil {
		t.Errorf("another user: %v", err)
	}
	s.AddCandidate("u0", cand("1000", 9, 100, 50, 100, ""), EvidenceRules{MinRuns: 9, MinUsers: 2, MinRunTimeS: 60})
	if err := s.ClaimNewTag("1001", "u1", 3, 4); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "max_profiles is 4") {
		t.Errorf("beyond the store's bound: %v", err)
	}
	if err := s.ClaimNewTag("66", "t9", 0, 100); !errors.Is(err, ErrQuota) {
		t.Errorf("bound 0: %v", err)
	}
	// Evidence gone (expired, removed): the user's count drops.
	os.Remove(filepath.Join(s.Dir(), ".evidence", "t0.json"))
	if err := s.ClaimNewTag("66", "t9", 3, 100); err != nil {
		t.Errorf("after t0's evidence went: %v", err)
	}
	// A damaged ledger refuses every claim (fail closed) and says how to reset.
	os.WriteFile(filepath.Join(s.Dir(), ".evidence", ".creators.json"), []byte("{"), 0o644)
	if err := s.ClaimNewTag("1002", "v0", 3, 100); err == nil || errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("damaged ledger: %v", err)
	}
}

func FuzzReadEvidence(f *testing.F) {
	f.Add([]byte(`{"v":1,"tag":"x","candidates":[{"uid":"1","runtime_s":100,"when":"2026-12-01T00:00:00Z","sample":{"sm_util":{"mean":50,"p95":60,"max":70}}}]}`))
	f.Add([]byte(`{"v":1,"tag":"x","candidates":[{"runtime_s":-1}]}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cands, err := decodeEvidence(b, "x")
		if err != nil {
			return
		}
		for _, c := range cands {
			if c.validate("x") != nil {
				t.Fatalf("an invalid candidate was read: %+v", c)
			}
		}
		ev := CombineEvidence("x", cands, EvidenceRules{MinRuns: 1, MinUsers: 1})
		if ev.Ready {
			m := *ev.Metrics
			m.Class = ClassHPC
			if err := m.Validate(); err != nil {
				t.Fatalf("combined metrics do not validate: %v", err)
			}
		}
	})
}
