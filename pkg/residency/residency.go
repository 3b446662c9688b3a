// SPDX-License-Identifier: Apache-2.0

// Package residency records which jobs hold which GPUs right now.
//
// Writers are the node Prolog (job start) and Epilog (job end); the reader is
// libcoscheml inside slurmctld. The store is a shared folder (NFS in production):
//
//	<dir>/active/<jobid>@<node>.json   one immutable file per running job per node
//	<dir>/history/<node>/gpu<N>.log    append-only start/end events per GPU
//
// Active files are written atomically (temp file, fsync, rename), so a reader sees a
// whole entry or none, and a file that fails to decode (torn by a crash of the
// file system, or edited by hand) is skipped and reported without hiding the
// others. Because entries never change after creation, a Reader decodes each file
// once and afterwards only lists the folder.
//
// A missed Epilog (node crash) must not leave a GPU busy forever: every entry
// carries an expiry (start + time limit), readers ignore entries past expiry +
// grace, and Reconcile removes those and, given Slurm's list of live jobs, entries
// of jobs Slurm no longer knows.
package residency

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Version is the entry format version.
const Version = 1

// MaxEntrySize bounds an active file; anything larger is not ours.
const MaxEntrySize = 16 << 10

// MaxRestarts bounds a restart count: Slurm keeps it in 16 bits.
const MaxRestarts = 1<<16 - 1

// MaxGPUsPerNode bounds the GPU indices of an entry.
const MaxGPUsPerNode = 64

// MaxNodes bounds an entry's node count (hostlist.MaxHosts: what a node list
// of one job can expand to here).
const MaxNodes = hostlist.MaxHosts

// Entry is one job's hold on GPUs of one node.
type Entry struct {
	V          int           `json:"v"`
	JobID      string        `json:"job_id"`
	Node       string        `json:"node"`
	GPUs       []int         `json:"gpus"`            // GPU indices on the node (SLURM_JOB_GPUS)
	Nodes      int           `json:"nodes,omitempty"` // the job's node count when several (each node writes its entry)
	Shards     int           `json:"shards"`          // shards per GPU; 0 = whole GPUs
	Tag        string        `json:"tag,omitempty"`   // "" = untagged job
	Class      profile.Class `json:"class,omitempty"` // "" when untagged
	DecisionID string        `json:"decision_id,omitempty"`
	User       string        `json:"user,omitempty"`
	// Restarts is Slurm's restart count of the job when this run started
	// (SLURM_JOB_RESTART_COUNT in the Prolog): a requeued job runs again under
	// the same id, and this tells its runs apart. Omitted when 0, so a first
	// run's entry is what readers without the field expect.
	Restarts int       `json:"restarts,omitempty"`
	Start    time.Time `json:"start"`
	Expires  time.Time `json:"expires"` // start + time limit: after this (+ grace) the entry is stale
}

// Validate checks an entry; every field may come from a hostile or broken writer.
func (e *Entry) Validate() error {
	if e.V != Version {
		return fmt.Errorf("entry version %d, want %d", e.V, Version)
	}
	if err := ValidJobID(e.JobID); err != nil {
		return err
	}
	if !hostlist.ValidName(e.Node) {
		return fmt.Errorf("invalid node name %q", profile.Sanitize(e.Node))
	}
	if len(e.GPUs) > MaxGPUsPerNode {
		return fmt.Errorf("job %s: %d GPUs, more than %d", e.JobID, len(e.GPUs), MaxGPUsPerNode)
	}
	for _, g := range e.GPUs {
		if g < 0 || g >= MaxGPUsPerNode {
			return fmt.Errorf("job %s: GPU index %d out of range", e.JobID, g)
		}
	}
	if e.Nodes < 0 || e.Nodes > MaxNodes {
		return fmt.Errorf("job %s: node count %d out of range", e.JobID, e.Nodes)
	}
	if e.Shards < 0 || e.Shards > 1<<16 {
		return fmt.Errorf("job %s: shard count %d out of range", e.JobID, e.Shards)
	}
	if e.Tag != "" {
		if err := profile.ValidateTag(e.Tag); err != nil {
			return fmt.Errorf("job %s: %w", e.JobID, err)
		}
	}
	if e.Class != "" {
		if _, err := profile.ParseClass(string(e.Class)); err != nil {
			return fmt.Errorf("job %s: %w", e.JobID, err)
		}
	}
	if len(e.DecisionID) > 64 || strings.IndexFunc(e.DecisionID, notIDChar) >= 0 {
		return fmt.Errorf("job %s: invalid decision id %q", e.JobID, profile.Sanitize(e.DecisionID))
	}
	if e.Restarts < 0 || e.Restarts > MaxRestarts {
		return fmt.Errorf("job %s: restart count %d out of range", e.JobID, e.Restarts)
	}
	if len(e.User) > 64 {
		return fmt.Errorf("job %s: user name too long", e.JobID)
	}
	if e.Start.IsZero() || e.Expires.Before(e.Start) {
		return fmt.Errorf("job %s: expiry %v before start %v", e.JobID, e.Expires, e.Start)
	}
	return nil
}

func notIDChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
}

// ValidJobID accepts Slurm job ids: digits, with '_' or '+' for array and
// heterogeneous job parts. They become file names.
func ValidJobID(id string) error {
	if id == "" || len(id) > 32 {
		return fmt.Errorf("invalid job id %q", profile.Sanitize(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '+'))) {
			return fmt.Errorf("invalid job id %q", profile.Sanitize(id))
		}
	}
	return nil
}

// Encode returns the file form of a valid entry.
func Encode(e *Entry) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode residency entry: %w", err)
	}
	return append(b, '\n'), nil
}

// Decode parses and validates one active file. Unknown fields are errors: a
// future writer's format must not be half-understood by an old reader.
func Decode(b []byte) (Entry, error) {
	var e Entry
	if len(b) > MaxEntrySize {
		return e, fmt.Errorf("entry larger than %d bytes", MaxEntrySize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Entry{}, errors.New("decode entry: trailing data")
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Store is a residency folder.
type Store struct {
	dir string
}

// Open returns the store in dir. Nothing is created: the reader side must not
// write, and writers create folders when they first need them.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("residency: empty folder name")
	}
	return &Store{dir: filepath.Clean(dir)}, nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

func (s *Store) activeDir() string { return filepath.Join(s.dir, "active") }

// doneDir holds one empty marker per decision id whose job has ended: a job that
// starts and ends between two reads of the plugin never shows up in active/, and
// its marker is what releases the plugin's reservation for it.
func (s *Store) doneDir() string { return filepath.Join(s.dir, "done") }

// DoneTTL is how long a done marker is kept; longer than the plugin's reservation
// lifetime, so every marker is seen before it goes.
const DoneTTL = time.Hour

func (s *Store) markDone(decisionID string) error {
	if err := os.MkdirAll(s.doneDir(), 0o755); err != nil {
		return fmt.Errorf("residency done marker: %w", err)
	}
	// The id was validated with the entry (no separators, at most 64 characters).
	// Root writes here: never through a symlink or into a FIFO someone planted.
	f, err := os.OpenFile(filepath.Join(s.doneDir(), decisionID), os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("residency done marker: %w", err)
	}
	return f.Close()
}

// fileName is <jobid>@<node>.json; both parts are validated before use.
func fileName(jobID, node string) string { return jobID + "@" + node + ".json" }

func (s *Store) activePath(jobID, node string) (string, error) {
	if err := ValidJobID(jobID); err != nil {
		return "", err
	}
	if !hostlist.ValidName(node) {
		return "", fmt.Errorf("invalid node name %q", profile.Sanitize(node))
	}
	return filepath.Join(s.activeDir(), fileName(jobID, node)), nil
}

// Start records that e's job now holds its GPUs: the active file, then one start
// event in each GPU's history.
func (s *Store) Start(e Entry) error {
	e.V = Version
	b, err := Encode(&e)
	if err != nil {
		return fmt.Errorf("residency start: %w", err)
	}
	path, err := s.activePath(e.JobID, e.Node)
	if err != nil {
		return fmt.Errorf("residency start: %w", err)
	}
	if err := os.MkdirAll(s.activeDir(), 0o755); err != nil {
		return fmt.Errorf("residency start: %w", err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("residency start job %s: %w", e.JobID, err)
	}
	for _, g := range e.GPUs {
		if err := s.appendEvent(e.Node, g, Event{At: e.Start, Kind: EventStart, JobID: e.JobID, Tag: e.Tag}); err != nil {
			return fmt.Errorf("residency start job %s: %w", e.JobID, err)
		}
	}
	return nil
}

// Get reads the active entry of a job on a node.
func (s *Store) Get(jobID, node string) (Entry, error) {
	path, err := s.activePath(jobID, node)
	if err != nil {
		return Entry{}, err
	}
	b, err := readLimited(path)
	if err != nil {
		return Entry{}, fmt.Errorf("residency: %w", err)
	}
	e, err := Decode(b)
	if err != nil {
		return Entry{}, fmt.Errorf("residency %s: %w", path, err)
	}
	return e, nil
}

// End records that a job left a node at time end: an end event per GPU, then the
// active file is removed. It returns the entry that was removed. A job without an
// entry (prolog failed, or reconciled already) gives an error wrapping
// os.ErrNotExist.
func (s *Store) End(jobID, node string, end time.Time) (Entry, error) {
	e, err := s.Get(jobID, node)
	if err != nil {
		// A corrupt entry must still go, or it would be skipped forever.
		if path, perr := s.activePath(jobID, node); perr == nil && !errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(path)
		}
		return Entry{}, err
	}
	if err := s.remove(e, end, EventEnd); err != nil {
		return e, err
	}
	return e, nil
}

func (s *Store) remove(e Entry, at time.Time, kind EventKind) error {
	var errs []error
	if e.DecisionID != "" {
		errs = append(errs, s.markDone(e.DecisionID))
	}
	for _, g := range e.GPUs {
		if err := s.appendEvent(e.Node, g, Event{At: at, Kind: kind, JobID: e.JobID, Tag: e.Tag}); err != nil {
			errs = append(errs, err)
		}
	}
	path, err := s.activePath(e.JobID, e.Node)
	if err == nil {
		err = os.Remove(path)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if err == nil {
		err = atomicfile.SyncDir(s.activeDir())
	}
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("residency end job %s: %w", e.JobID, err)
	}
	return nil
}

// Stale reports whether e is past its expiry plus grace at now.
func (e *Entry) Stale(now time.Time, grace time.Duration) bool {
	return now.After(e.Expires.Add(grace))
}

// ReconcileResult lists what Reconcile removed and what it could not read.
type ReconcileResult struct {
	Expired    []Entry // past expiry + grace
	Gone       []Entry // job not in the live list
	Corrupt    []string
	TmpRemoved []string // leftover temp files of writers that died in active/
	DonePruned int      // done markers older than DoneTTL + grace removed
	Problems   []error  // the first maxProblems; the rest are counted in MoreProblems
	// MoreProblems counts the problems beyond maxProblems (a folder of junk must
	// not make one error message per file).
	MoreProblems int
}

// maxProblems bounds ReconcileResult.Problems.
const maxProblems = 100

func (r *ReconcileResult) problem(err error) {
	if len(r.Problems) >= maxProblems {
		r.MoreProblems++
		return
	}
	r.Problems = append(r.Problems, err)
}

// Reconcile removes entries past expiry+grace and, when live is non-nil, entries
// whose job id is not in live and that started before liveAt (a job that started
// after the list was taken is not in it yet). Removed entries get a "lost" event in
// their GPUs' history, so co-run intervals end there. Undecodable files older than
// grace are removed too, and so are, by age, what nobody else removes: temp files
// of writers that died in active/ (older than grace) and done markers older than
// DoneTTL + grace (the Epilog creates them as root, so slurmctld, running as
// SlurmUser, cannot remove them; by then every reader has seen them).
func (s *Store) Reconcile(now time.Time, grace time.Duration, live map[string]bool, liveAt time.Time) (ReconcileResult, error) {
	var res ReconcileResult
	err := s.reconcileActive(now, grace, live, liveAt, &res)
	if err == nil {
		s.pruneDone(now, grace, &res)
	}
	return res, err
}

func (s *Store) reconcileActive(now time.Time, grace time.Duration, live map[string]bool, liveAt time.Time, res *ReconcileResult) error {
	d, err := safeopen.Dir(s.activeDir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("residency reconcile: %w", err)
	}
	defer d.Close()
	// In batches, unsorted: a folder full of leftovers (a writer gone wild, a
	// crashed file system) is never held in memory at once, and each file costs
	// one bounded read (readLimited) at most.
	for {
		names, rerr := d.Readdirnames(4096)
		for _, name := range names {
			s.reconcileOne(name, now, grace, live, liveAt, res)
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return fmt.Errorf("residency reconcile: %w", rerr)
			}
			return nil
		}
	}
}

// reconcileOne handles one name of active/: a leftover temp file, an entry to
// keep or remove, or an unreadable file.
func (s *Store) reconcileOne(name string, now time.Time, grace time.Duration, live map[string]bool, liveAt time.Time, res *ReconcileResult) {
	if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
		s.pruneTmp(name, now, grace, res)
		return
	}
	if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
		return
	}
	path := filepath.Join(s.activeDir(), name)
	b, err := readLimited(path)
	if errors.Is(err, os.ErrNotExist) {
		return // ended meanwhile
	}
	var e Entry
	if err == nil {
		e, err = Decode(b)
	}
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && now.Sub(fi.ModTime()) > grace {
			res.Corrupt = append(res.Corrupt, name)
			_ = os.Remove(path)
		}
		res.problem(fmt.Errorf("%s: %w", path, err))
		return
	}
	switch {
	case e.Stale(now, grace):
		res.Expired = append(res.Expired, e)
	case live != nil && !live[e.JobID] && !live[baseJobID(e.JobID)] && e.Start.Before(liveAt):
		res.Gone = append(res.Gone, e)
	default:
		return
	}
	if err := s.remove(e, now, EventLost); err != nil {
		res.problem(err)
	}
}

// pruneTmp removes a temp file of atomicfile.Write in active/ older than grace
// (a writer that died between create and rename).
func (s *Store) pruneTmp(name string, now time.Time, grace time.Duration, res *ReconcileResult) {
	path := filepath.Join(s.activeDir(), name)
	fi, err := os.Lstat(path)
	if err != nil || now.Sub(fi.ModTime()) <= grace {
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		res.problem(fmt.Errorf("leftover %s: %w", path, err))
		return
	}
	res.TmpRemoved = append(res.TmpRemoved, name)
}

// pruneDone removes done markers older than DoneTTL + grace.
func (s *Store) pruneDone(now time.Time, grace time.Duration, res *ReconcileResult) {
	d, err := safeopen.Dir(s.doneDir())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			res.problem(fmt.Errorf("done markers: %w", err))
		}
		return
	}
	defer d.Close()
	for {
		// In batches: a folder of 100,000 markers is never held in memory at once.
		batch, err := d.ReadDir(4096)
		for _, de := range batch {
			fi, ierr := de.Info()
			if ierr != nil || now.Sub(fi.ModTime()) <= DoneTTL+grace {
				continue
			}
			if rerr := os.Remove(filepath.Join(s.doneDir(), de.Name())); rerr == nil {
				res.DonePruned++
			} else if !errors.Is(rerr, os.ErrNotExist) {
				res.problem(fmt.Errorf("done marker: %w", rerr))
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.problem(fmt.Errorf("done markers: %w", err))
			}
			return
		}
	}
}

// baseJobID strips an array or het suffix ("12_3" -> "12").
func baseJobID(id string) string {
	if i := strings.IndexAny(id, "_+"); i > 0 {
		return id[:i]
	}
	return id
}

// ParseLiveJobs reads job ids one per line (the output of `squeue -h -o %A`);
// blank lines are skipped, anything else that is not a job id is an error.
func ParseLiveJobs(r io.Reader) (map[string]bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("live job list: %w", err)
	}
	live := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if err := ValidJobID(line); err != nil {
			return nil, fmt.Errorf("live job list line %d: %w", i+1, err)
		}
		live[line] = true
	}
	return live, nil
}

// readLimited reads one active file. active/ is written by the nodes' prologs:
// regular files only, no symlink, never blocking on a FIFO (slurmctld's refresh
// reads these).
func readLimited(path string) ([]byte, error) {
	return safeopen.ReadLimited(path, safeopen.NoFollow, MaxEntrySize)
}

// sortEntries orders entries by node, then job id, for stable output.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		if len(a.JobID) != len(b.JobID) {
			return len(a.JobID) - len(b.JobID)
		}
		return strings.Compare(a.JobID, b.JobID)
	})
}
