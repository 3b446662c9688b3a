// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// A profile's metrics say how heavy its application is, and the model places
// every later job of the tag by them, so no single run and no single user may set
// them (docs/profiling.md, "Who sets a profile"). A sampled solo run is only a
// candidate, kept per tag in <store>/.evidence/<tag>.json; the metrics are
// created or changed once the candidates of enough runs by enough users agree,
// and are then the median over the users of each user's median.
const (
	// MaxCandidatesPerUser bounds the candidates kept per uid (that uid's newest).
	MaxCandidatesPerUser = 5
	// MaxCandidateUsers bounds the users kept per tag: those whose newest
	// candidate is the most recent (one user's flood replaces only their own).
	MaxCandidateUsers = 16
	// A user's median agrees with the combined value when its sm_util and
	// membw_util means are within AgreeUtilPoints percentage points of it and its
	// mem_used_mib within AgreeMemFraction of it or AgreeMemMiB, whichever is more.
	AgreeUtilPoints  = 15.0
	AgreeMemFraction = 0.25
	AgreeMemMiB      = 1024.0
)

// ErrQuota is wrapped when a user, or the store as a whole, may not start
// another profile (profiling.max_new_profiles_per_user, max_profiles).
var ErrQuota = errors.New("profile quota reached")

// EvidenceRules are the site's thresholds (profiling.min_runs, min_users,
// min_run_time).
type EvidenceRules struct {
	MinRuns     int
	MinUsers    int
	MinRunTimeS float64
}

// Candidate is one sampled solo run offered as evidence for a tag's metrics.
type Candidate struct {
	UID      string    `json:"uid,omitempty"`
	JobID    string    `json:"job_id,omitempty"`
	RuntimeS float64   `json:"runtime_s"`
	When     time.Time `json:"when"`
	// Class is the class the run named (used only for a tag without a profile).
	Class Class `json:"class,omitempty"`
	// Sample holds the run's metrics; its tag, class and solo fields are unused.
	Sample Profile `json:"sample"`
}

// Evidence is what a tag's candidates say. Ready: Metrics (tag, metric fields,
// Samples, DurationS, Partial, GPUModel) and, for a tag without a profile, Class
// may be written; otherwise Why says what is missing.
type Evidence struct {
	Runs, Users, Agreeing int
	Ready                 bool
	Metrics               *Profile
	Class                 Class
	Why                   string
}

type evidenceLog struct {
	V          int         `json:"v"`
	Tag        string      `json:"tag"`
	Candidates []Candidate `json:"candidates"`
}

func (s *Store) evidenceDir() string { return filepath.Join(s.dir, ".evidence") }

func (s *Store) evidencePath(tag string) (string, error) {
	if err := ValidateTag(tag); err != nil {
		return "", err
	}
	return filepath.Join(s.evidenceDir(), tag+".json"), nil
}

func (c Candidate) validate(tag string) error {
	switch {
	case !finite(c.RuntimeS) || c.RuntimeS < 0 || c.RuntimeS > 1e9:
		return fmt.Errorf("candidate: run time %v", c.RuntimeS)
	case len(c.UID) > 10 || len(c.JobID) > 64:
		return errors.New("candidate: uid or job id too long")
	}
	if err := CheckText(c.UID + c.JobID); err != nil {
		return fmt.Errorf("candidate: %w", err)
	}
	if c.Class != "" {
		if _, err := ParseClass(string(c.Class)); err != nil {
			return fmt.Errorf("candidate: %w", err)
		}
	}
	m := c.Sample
	m.Tag, m.Class = tag, ClassHPC
	if err := m.Validate(); err != nil {
		return fmt.Errorf("candidate: %w", err)
	}
	return nil
}

// Candidates returns the candidates kept for tag, oldest first (none: empty,
// nil error).
func (s *Store) Candidates(tag string) ([]Candidate, error) {
	path, err := s.evidencePath(tag)
	if err != nil {
		return nil, err
	}
	return readEvidence(path, tag)
}

// readBytes reads a whole file of at most limit bytes: regular files only, no
// symlink; found is false when there is none.
func readBytes(path string, limit int64) (b []byte, found bool, err error) {
	f, err := safeopen.Regular(path, safeopen.NoFollow)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, false, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrFormat, limit)
	}
	return b, true, nil
}

func readEvidence(path, tag string) ([]Candidate, error) {
	b, found, err := readBytes(path, MaxFileSize)
	if err != nil || !found {
		return nil, err
	}
	cands, err := decodeEvidence(b, tag)
	if err != nil {
		return nil, fmt.Errorf("evidence %s: %w", path, err)
	}
	return cands, nil
}

// decodeEvidence parses an evidence file of tag and validates every candidate.
func decodeEvidence(b []byte, tag string) ([]Candidate, error) {
	var l evidenceLog
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if l.V != 1 || l.Tag != tag {
		return nil, fmt.Errorf("%w: not the evidence of %s", ErrFormat, tag)
	}
	for _, c := range l.Candidates {
		if err := c.validate(tag); err != nil {
			return nil, err
		}
	}
	return l.Candidates, nil
}

// withLock runs fn holding an exclusive lock file (writers on one node, and on
// nodes sharing the store where flock is shared, take turns).
func withLock(path string, fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return fn()
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

// AddCandidate keeps c as evidence for tag and returns what the kept candidates
// say under rules. A run shorter than rules.MinRunTimeS is refused with an error
// wrapping ErrShortRun and changes nothing. When the evidence is Ready it is
// consumed (the kept candidates are removed), so it makes one profile once; the
// caller writes that profile.
func (s *Store) AddCandidate(tag string, c Candidate, rules EvidenceRules) (Evidence, error) {
	if err := c.validate(tag); err != nil {
		return Evidence{}, err
	}
	if c.RuntimeS < rules.MinRunTimeS {
		return Evidence{}, fmt.Errorf("candidate run of %.1fs: %w (%.0fs)", c.RuntimeS, ErrShortRun, rules.MinRunTimeS)
	}
	path, err := s.evidencePath(tag)
	if err != nil {
		return Evidence{}, err
	}
	var ev Evidence
	err = withLock(path+".lock", func() error {
		cands, err := readEvidence(path, tag)
		if err != nil {
			cands = nil // a damaged file starts over rather than blocking every run
		}
		cands = keepCandidates(tag, append(cands, c))
		ev = CombineEvidence(tag, cands, rules)
		if ev.Ready {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return atomicfile.SyncDir(filepath.Dir(path))
		}
		return writeJSON(path, evidenceLog{V: 1, Tag: tag, Candidates: cands})
	})
	if err != nil {
		return Evidence{}, fmt.Errorf("evidence of %s: %w", tag, err)
	}
	return ev, nil
}

// candidatesByUser groups valid candidates of at least minRunTimeS by uid
// (unknown uid is one user), each user's newest MaxCandidatesPerUser, newest
// first, and keeps the MaxCandidateUsers users whose newest candidate is the
// most recent.
func candidatesByUser(tag string, cands []Candidate, minRunTimeS float64) [][]Candidate {
	return groupByUser(cands, func(c Candidate) (string, time.Time, bool) {
		return c.UID, c.When, c.RuntimeS >= minRunTimeS && c.validate(tag) == nil
	}, MaxCandidateUsers, MaxCandidatesPerUser)
}

func keepCandidates(tag string, cands []Candidate) []Candidate {
	var kept []Candidate
	for _, u := range candidatesByUser(tag, cands, 0) {
		kept = append(kept, u...)
	}
	slices.SortStableFunc(kept, func(a, b Candidate) int { return a.When.Compare(b.When) })
	return kept
}

// metricFields are the profile's measured numbers, which evidence combines
// field by field.
func metricFields(p *Profile) []*float64 {
	var out []*float64
	for _, s := range []*Stat{&p.SMUtil, &p.MemBWUtil, &p.PCIeTxMBps, &p.PCIeRxMBps, &p.PowerW, &p.SMClockMHz} {
		out = append(out, &s.Mean, &s.P95, &s.Max)
	}
	return append(out, &p.MemUsedMiB)
}

// medianProfile is the field-by-field median of ps' metrics.
func medianProfile(ps []*Profile) *Profile {
	out := &Profile{}
	dst := metricFields(out)
	for i := range dst {
		v := make([]float64, len(ps))
		for j, p := range ps {
			v[j] = *metricFields(p)[i]
		}
		*dst[i] = median(v)
	}
	// Medians of different fields may come from different runs: a maximum below
	// its mean or p95 would describe no run at all.
	for _, s := range []*Stat{&out.SMUtil, &out.MemBWUtil, &out.PCIeTxMBps, &out.PCIeRxMBps, &out.PowerW, &out.SMClockMHz} {
		s.Max = math.Max(s.Max, math.Max(s.Mean, s.P95))
	}
	return out
}

func agrees(u, c *Profile) bool {
	return math.Abs(u.SMUtil.Mean-c.SMUtil.Mean) <= AgreeUtilPoints &&
		math.Abs(u.MemBWUtil.Mean-c.MemBWUtil.Mean) <= AgreeUtilPoints &&
		math.Abs(u.MemUsedMiB-c.MemUsedMiB) <= math.Max(AgreeMemFraction*c.MemUsedMiB, AgreeMemMiB)
}

// CombineEvidence says what cands prove about tag under rules: Ready when at
// least rules.MinRuns candidates of at least rules.MinRunTimeS by at least
// rules.MinUsers users are kept, and more than half of the users, and at least
// rules.MinUsers of them, have a median that agrees with the combined value (the
// median over the users of each user's median); for the class, more than half
// of the users that named one must name the same.
func CombineEvidence(tag string, cands []Candidate, rules EvidenceRules) Evidence {
	users := candidatesByUser(tag, cands, rules.MinRunTimeS)
	ev := Evidence{Users: len(users)}
	for _, u := range users {
		ev.Runs += len(u)
	}
	if ev.Runs < rules.MinRuns || ev.Users < rules.MinUsers {
		ev.Why = fmt.Sprintf("evidence of %d runs by %d users, need %d runs by %d users", ev.Runs, ev.Users, rules.MinRuns, rules.MinUsers)
		return ev
	}
	perUser := make([]*Profile, len(users))
	classVotes := map[Class]int{}
	voters := 0
	for i, u := range users {
		ps := make([]*Profile, len(u))
		for j := range u {
			ps[j] = &u[j].Sample
		}
		perUser[i] = medianProfile(ps)
		for _, c := range u { // the user's newest named class
			if c.Class != "" {
				classVotes[c.Class]++
				voters++
				break
			}
		}
	}
	combined := medianProfile(perUser)
	for _, p := range perUser {
		if agrees(p, combined) {
			ev.Agreeing++
		}
	}
	if ev.Agreeing < rules.MinUsers || 2*ev.Agreeing <= ev.Users {
		ev.Why = fmt.Sprintf("the samples of %d users disagree (%d agree with the combined value, need more than half and at least %d)", ev.Users, ev.Agreeing, rules.MinUsers)
		return ev
	}
	for c, n := range classVotes {
		if 2*n > voters {
			ev.Class = c
		}
	}
	if voters > 0 && ev.Class == "" {
		ev.Why = fmt.Sprintf("the %d users name different classes", voters)
		return ev
	}
	combined.Tag = tag
	var notes []string
	newest := users[0][0].Sample
	combined.GPUModel = newest.GPUModel
	for _, u := range users {
		for _, c := range u {
			combined.Samples += c.Sample.Samples
			combined.DurationS += c.Sample.DurationS
			if c.Sample.Partial {
				combined.Partial = true
				if c.Sample.PartialNote != "" && !slices.Contains(notes, c.Sample.PartialNote) {
					notes = append(notes, c.Sample.PartialNote)
				}
			}
		}
	}
	if note := strings.Join(notes, "; "); len(note) <= MaxTextLen {
		combined.PartialNote = note
	} else {
		combined.PartialNote = note[:MaxTextLen]
	}
	ev.Metrics, ev.Ready = combined, true
	return ev
}

// newTagLedger is <store>/.evidence/.creators.json: per uid, the tags without
// a profile that the uid's runs started evidence for. (A dot name: no tag's
// evidence file can be called that.)
type newTagLedger struct {
	V     int                 `json:"v"`
	Users map[string][]string `json:"users"`
}

// maxLedgerSize bounds the ledger: about 70 bytes per user and tag.
const maxLedgerSize = 16 << 20

// ClaimNewTag records that uid's runs offer evidence for tag, which has no
// profile yet. It refuses, with an error wrapping ErrQuota, when uid already
// counts perUser such tags (a tag counts while its profile or its evidence
// exists) or when the store's profiles and pending new tags reach total. A tag
// uid already counts is accepted again. A damaged ledger refuses every claim
// (fail closed) until an admin removes it.
func (s *Store) ClaimNewTag(uid, tag string, perUser, total int) error {
	if _, err := s.evidencePath(tag); err != nil {
		return err
	}
	if err := CheckText(uid); err != nil || len(uid) > 10 {
		return fmt.Errorf("new profile %s: bad uid", tag)
	}
	ledger := filepath.Join(s.evidenceDir(), ".creators.json")
	err := withLock(ledger+".lock", func() error {
		l := newTagLedger{V: 1}
		b, found, err := readBytes(ledger, maxLedgerSize)
		if err == nil && found {
			if err = json.Unmarshal(b, &l); err != nil || l.V != 1 {
				err = fmt.Errorf("%s: %w: not a ledger of version 1", ledger, ErrFormat)
			}
		}
		if err != nil {
			return fmt.Errorf("%w (remove it to reset every user's count)", err)
		}
		if l.Users == nil {
			l.Users = map[string][]string{}
		}
		mine := slices.DeleteFunc(slices.Clone(l.Users[uid]), func(t string) bool { return t != tag && !s.tagInUse(t) })
		if slices.Contains(mine, tag) {
			return nil
		}
		if len(mine) >= perUser {
			return fmt.Errorf("uid %s already started %d profiles, the most profiling.max_new_profiles_per_user allows (%d): %w", uid, len(mine), perUser, ErrQuota)
		}
		n, err := s.countWithPending()
		if err != nil {
			return err
		}
		if n >= total {
			return fmt.Errorf("the store holds %d profiles and pending new ones, max_profiles is %d: %w", n, total, ErrQuota)
		}
		l.Users[uid] = append(mine, tag)
		for u, tags := range l.Users {
			if len(tags) == 0 {
				delete(l.Users, u)
			}
		}
		return writeJSON(ledger, l)
	})
	if err != nil {
		return fmt.Errorf("new profile %s: %w", tag, err)
	}
	return nil
}

// tagInUse: tag has a profile file or an evidence file.
func (s *Store) tagInUse(tag string) bool {
	if ValidateTag(tag) != nil {
		return false
	}
	for _, p := range []string{filepath.Join(s.dir, tag+Ext), filepath.Join(s.evidenceDir(), tag+".json")} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

// countWithPending is the number of profiles plus the tags with evidence but no
// profile.
func (s *Store) countWithPending() (int, error) {
	n, err := s.Count()
	if err != nil {
		return 0, err
	}
	d, err := safeopen.Dir(s.evidenceDir())
	if errors.Is(err, os.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		tag, ok := strings.CutSuffix(name, ".json")
		if !ok || strings.HasPrefix(name, ".") || ValidateTag(tag) != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.dir, tag+Ext)); errors.Is(err, os.ErrNotExist) {
			n++
		}
	}
	return n, nil
}
