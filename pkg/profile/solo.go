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
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/atomicfile"
)

// Rules of the robust solo reference (docs/profiling.md). A profile's
// solo_runtime_s and solo_throughput are what every co-located run is measured
// against, so no single run, and no single user, may set them: each user's runs
// of at least MinSoloRuntimeS are reduced to that user's median, and the
// reference is the median of those per-user medians once MinSoloUsers users have
// one. Runs are kept per user, so one user's flood of runs replaces only that
// user's own runs.
const (
	// MinSoloRuntimeS: a shorter run (a `sleep 5`, a crash at start-up, a test
	// run) is not a solo reference. One minute is also Slurm's time-limit unit.
	MinSoloRuntimeS = 60.0
	// MinSoloUsers is how many distinct users a reference needs: with 3 the
	// median of the per-user medians lies between two users' own values, so one
	// user alone can move it no further than the other users' runs.
	MinSoloUsers = 3
	// MaxSoloRunsPerUser bounds the runs kept per uid (that uid's newest).
	MaxSoloRunsPerUser = 5
	// MaxSoloUsers bounds the users kept per tag: those whose newest run is the
	// most recent.
	MaxSoloUsers = 32
)

// SoloRun is one completed run of a tag alone on its GPU(s).
type SoloRun struct {
	RuntimeS   float64   `json:"runtime_s"`
	Throughput float64   `json:"throughput,omitempty"` // 0: not reported
	UID        string    `json:"uid,omitempty"`
	JobID      string    `json:"job_id,omitempty"`
	When       time.Time `json:"when"`
}

// SoloRef is the solo reference computed from a tag's runs. Ready is false while
// fewer than MinSoloUsers users have a qualifying run; the values are then 0.
type SoloRef struct {
	RuntimeS   float64
	Throughput float64 // 0 unless MinSoloUsers of the users reported one
	Runs       int     // runs the per-user medians were taken over
	Users      int     // users the median was taken over
	Ready      bool
}

// ErrShortRun marks a run too short to be a solo reference.
var ErrShortRun = errors.New("shorter than the minimum solo run")

// soloLog is the file form: <store>/.solo/<tag>.json (a dot folder, so List and
// every profile reader skip it). Version 1 throughout: the kept runs changed
// (per user instead of the newest 15 of anyone), not the file's shape, so a file
// written under the older rule loads and is trimmed at the next write.
type soloLog struct {
	V    int       `json:"v"`
	Tag  string    `json:"tag"`
	Runs []SoloRun `json:"runs"`
}

func (s *Store) soloPath(tag string) (string, error) {
	if err := ValidateTag(tag); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, ".solo", tag+".json"), nil
}

// SoloRuns returns the runs kept for tag, oldest first (none: empty, nil error).
func (s *Store) SoloRuns(tag string) ([]SoloRun, error) {
	path, err := s.soloPath(tag)
	if err != nil {
		return nil, err
	}
	return readSoloLog(path, tag)
}

func readSoloLog(path, tag string) ([]SoloRun, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("solo runs of %s: %w", tag, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("solo runs of %s: %w", tag, err)
	}
	var l soloLog
	if err := json.Unmarshal(b, &l); err != nil || l.V != 1 || l.Tag != tag {
		return nil, fmt.Errorf("solo runs %s: %w: not the solo log of %s", path, ErrFormat, tag)
	}
	for _, r := range l.Runs {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("solo runs %s: %w", path, err)
		}
	}
	return l.Runs, nil
}

func (r SoloRun) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(r.RuntimeS) || r.RuntimeS > 1e9:
		return fmt.Errorf("solo run: run time %v", r.RuntimeS)
	case r.RuntimeS < MinSoloRuntimeS:
		return fmt.Errorf("solo run of %.1fs: %w (%.0fs)", r.RuntimeS, ErrShortRun, MinSoloRuntimeS)
	case !finite(r.Throughput) || r.Throughput < 0:
		return fmt.Errorf("solo run: throughput %v", r.Throughput)
	case len(r.UID) > 10 || len(r.JobID) > 64:
		return errors.New("solo run: uid or job id too long")
	}
	if err := CheckText(r.UID + r.JobID); err != nil {
		return fmt.Errorf("solo run: %w", err)
	}
	return nil
}

// AddSoloRun records one completed solo run of tag and returns the reference
// computed from the runs kept afterwards. A run shorter than MinSoloRuntimeS is
// refused with an error wrapping ErrShortRun. Writers on one node are serialized by
// a lock file; the log is replaced atomically.
func (s *Store) AddSoloRun(tag string, r SoloRun) (SoloRef, error) {
	if err := r.validate(); err != nil {
		return SoloRef{}, err
	}
	path, err := s.soloPath(tag)
	if err != nil {
		return SoloRef{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: lock: %w", err)
	}
	runs, err := readSoloLog(path, tag)
	if err != nil {
		runs = nil // a damaged log starts over rather than blocking every run
	}
	runs = keepSoloRuns(append(runs, r))
	b, err := json.Marshal(soloLog{V: 1, Tag: tag, Runs: runs})
	if err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	return SoloReference(runs), err
}

// byUser groups valid runs by uid (unknown uid is one user), each user's newest
// MaxSoloRunsPerUser runs, newest first, and keeps the MaxSoloUsers users whose
// newest run is the most recent. Users come out most recent first.
func byUser(runs []SoloRun) [][]SoloRun {
	return groupByUser(runs, func(r SoloRun) (string, time.Time, bool) { return r.UID, r.When, r.validate() == nil },
		MaxSoloUsers, MaxSoloRunsPerUser)
}

// groupByUser groups the items that info says are valid by uid, each user's
// newest perUser items, newest first, and keeps the maxUsers users whose newest
// item is the most recent, most recent first: one user's flood of items never
// pushes another user's out.
func groupByUser[T any](items []T, info func(T) (uid string, when time.Time, valid bool), maxUsers, perUser int) [][]T {
	byNewest := slices.Clone(items)
	slices.SortStableFunc(byNewest, func(a, b T) int {
		_, wa, _ := info(a)
		_, wb, _ := info(b)
		return wb.Compare(wa)
	})
	idx := map[string]int{}
	var users [][]T
	for _, it := range byNewest {
		uid, _, valid := info(it)
		if !valid {
			continue
		}
		i, ok := idx[uid]
		if !ok {
			if len(users) == maxUsers {
				continue
			}
			i = len(users)
			idx[uid] = i
			users = append(users, nil)
		}
		if len(users[i]) < perUser {
			users[i] = append(users[i], it)
		}
	}
	return users
}

// keepSoloRuns is what the log keeps of runs: byUser's runs, oldest first.
func keepSoloRuns(runs []SoloRun) []SoloRun {
	var kept []SoloRun
	for _, u := range byUser(runs) {
		kept = append(kept, u...)
	}
	slices.SortStableFunc(kept, func(a, b SoloRun) int { return a.When.Compare(b.When) })
	return kept
}

// SoloReference is the robust reference of runs: runs shorter than
// MinSoloRuntimeS are ignored; each user's newest MaxSoloRunsPerUser runs are
// reduced to their median run time (and median throughput, over those that
// reported one); Ready once MinSoloUsers users have one, and then the median of
// the users' run times and, if MinSoloUsers users reported a throughput, the
// median of their throughputs.
func SoloReference(runs []SoloRun) SoloRef {
	users := byUser(runs)
	ref := SoloRef{Users: len(users)}
	var rt, tp []float64
	for _, u := range users {
		var urt, utp []float64
		for _, r := range u {
			urt = append(urt, r.RuntimeS)
			if r.Throughput > 0 {
				utp = append(utp, r.Throughput)
			}
		}
		ref.Runs += len(u)
		rt = append(rt, median(urt))
		if len(utp) > 0 {
			tp = append(tp, median(utp))
		}
	}
	if len(users) < MinSoloUsers {
		return ref
	}
	ref.RuntimeS, ref.Ready = median(rt), true
	if len(tp) >= MinSoloUsers {
		ref.Throughput = median(tp)
	}
	return ref
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
