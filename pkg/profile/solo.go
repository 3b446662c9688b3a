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
// against, so no single run, and no single user, may set them: they are the
// median of several recent solo runs that lasted at least MinSoloRuntimeS, with at
// most MaxSoloRunsPerUser runs of any one uid among them.
const (
	// MinSoloRuntimeS: a shorter run (a `sleep 5`, a crash at start-up, a test
	// run) is not a solo reference. One minute is also Slurm's time-limit unit.
	MinSoloRuntimeS = 60.0
	// MinSoloRuns is how many qualifying runs a reference needs; with 3 the median
	// ignores one outlier.
	MinSoloRuns = 3
	// MaxSoloRunsKept bounds the runs kept per tag (the newest).
	MaxSoloRunsKept = 15
	// MaxSoloRunsPerUser bounds one uid's runs among those the median uses.
	MaxSoloRunsPerUser = 2
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
// fewer than MinSoloRuns runs qualify; the values are then 0.
type SoloRef struct {
	RuntimeS   float64
	Throughput float64 // 0 unless MinSoloRuns of the runs used reported one
	Runs       int     // runs the median was taken over
	Ready      bool
}

// ErrShortRun marks a run too short to be a solo reference.
var ErrShortRun = errors.New("shorter than the minimum solo run")

// soloLog is the file form: <store>/.solo/<tag>.json (a dot folder, so List and
// every profile reader skip it).
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
	runs = append(runs, r)
	slices.SortStableFunc(runs, func(a, b SoloRun) int { return a.When.Compare(b.When) })
	if len(runs) > MaxSoloRunsKept {
		runs = runs[len(runs)-MaxSoloRunsKept:]
	}
	b, err := json.Marshal(soloLog{V: 1, Tag: tag, Runs: runs})
	if err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return SoloRef{}, fmt.Errorf("solo runs: %w", err)
	}
	return SoloReference(runs), err
}

// SoloReference is the robust reference of runs: newest first, at most
// MaxSoloRunsPerUser per uid (unknown uid counts as one user), runs shorter than
// MinSoloRuntimeS ignored; Ready with at least MinSoloRuns of them, and then the
// median run time and, if at least MinSoloRuns of those runs reported one, the
// median throughput.
func SoloReference(runs []SoloRun) SoloRef {
	used := make([]SoloRun, 0, len(runs))
	perUser := map[string]int{}
	byNewest := slices.Clone(runs)
	slices.SortStableFunc(byNewest, func(a, b SoloRun) int { return b.When.Compare(a.When) })
	for _, r := range byNewest {
		if r.validate() != nil || perUser[r.UID] >= MaxSoloRunsPerUser {
			continue
		}
		perUser[r.UID]++
		used = append(used, r)
	}
	if len(used) < MinSoloRuns {
		return SoloRef{Runs: len(used)}
	}
	var rt, tp []float64
	for _, r := range used {
		rt = append(rt, r.RuntimeS)
		if r.Throughput > 0 {
			tp = append(tp, r.Throughput)
		}
	}
	ref := SoloRef{RuntimeS: median(rt), Runs: len(used), Ready: true}
	if len(tp) >= MinSoloRuns {
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
