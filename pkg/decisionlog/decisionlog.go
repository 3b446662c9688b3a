// SPDX-License-Identifier: Apache-2.0

// Package decisionlog keeps the placement decisions of libcoscheml so that
// `coscheml explain JOBID` can show them later.
//
// The log is a file of JSON lines, appended by one background goroutine so that the
// submit path only does a non-blocking channel send; when the file reaches its size
// bound it is rotated to <path>.1 (one old file kept), so the log never grows
// without limit; rotation is safe with two controllers (HA) appending to one
// log. A torn last line (crash) is skipped by readers. The file is mode 0640
// (Mode): it names every job's user, application and node.
package decisionlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// DefaultMaxBytes is the rotation size of the log.
const DefaultMaxBytes = 64 << 20

// maxLine bounds one record when reading.
const maxLine = 64 << 10

// Record is one decision of the job_submit plugin.
type Record struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Op     string    `json:"op"`               // submit | modify | guard (OpGuard)
	JobID  string    `json:"job_id,omitempty"` // known on modify only
	UserID uint32    `json:"user_id"`
	Tag    string    `json:"tag,omitempty"`
	Class  string    `json:"class,omitempty"`

	Outcome string `json:"outcome"` // unchanged | rewrite | reject
	Action  string `json:"action"`  // share | exclusive | wait | pass
	Node    string `json:"node,omitempty"`
	GPU     int    `json:"gpu"` // GPU index expected on Node; -1 when none
	Shards  int    `json:"shards,omitempty"`
	// GPUs are the GPU indexes of a several-GPU decision (GPU is the first).
	GPUs []int `json:"gpus,omitempty"`
	// Nodes are every node of a decision over several nodes (Node is the
	// first), with the GPUs at the same indexes on each.
	Nodes []string `json:"nodes,omitempty"`
	// Replaces are the earlier decisions of the job that a job_modify decision
	// superseded: their reservations are not rebuilt after a restart.
	Replaces []string `json:"replaces,omitempty"`

	PredictedSpeed   float64  `json:"predicted_speed,omitempty"`
	MinResidentSpeed float64  `json:"min_resident_speed,omitempty"`
	CoRunners        []string `json:"co_runners,omitempty"` // tags already on the chosen GPU
	Policy           string   `json:"policy,omitempty"`
	Reason           string   `json:"reason"`

	TresIn  string `json:"tres_in,omitempty"`
	TresOut string `json:"tres_out,omitempty"`
}

// OpGuard marks a record of the node's runtime guard (`coscheml-node guard`):
// JobID is the job acted on or observed, Action the guard's action (observe,
// requeue, cancel, suspend, resume; for the slowed job of a floor action on its
// co-runner, requeue-co-runner or suspend-co-runner), Outcome what became of it (observed,
// taken, dry-run, failed), Node and GPU where, Reason why. The guard writes
// them to its own log per node, not to the plugin's.
const OpGuard = "guard"

// Writer appends records from a background goroutine.
type Writer struct {
	path     string
	maxBytes int64
	ch       chan Record
	done     chan struct{}
	close    sync.Once
	dropped  atomic.Int64
	errMu    sync.Mutex
	lastErr  error
	linger   time.Duration // see NewWriterLinger
	quit     chan struct{} // closed by Close: write what is queued now
}

// NewWriter starts a writer of path; queue bounds the records waiting to be
// written (beyond it Log drops records rather than block a submission).
func NewWriter(path string, maxBytes int64, queue int) *Writer {
	return NewWriterLinger(path, maxBytes, queue, 0)
}

// NewWriterLinger is NewWriter whose goroutine, once records come less than
// linger apart, writes the first of a burst at once and then the rest every
// linger: records that arrive meanwhile wait in the queue without waking it.
// Inside slurmctld every wake-up of the writer (a futex wake, the thread's
// switch, a spinning Go thread, sysmon) cost about 100 us of CPU per tagged
// submission, more than the write (docs/performance-slurm.md). Records reach
// the file at most linger late; Close writes what is queued at once. A record
// that comes more than linger after the previous one is written at once, as
// with NewWriter.
func NewWriterLinger(path string, maxBytes int64, queue int, linger time.Duration) *Writer {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if queue <= 0 {
		queue = 4096
	}
	w := &Writer{path: path, maxBytes: maxBytes, ch: make(chan Record, queue), done: make(chan struct{}),
		linger: max(linger, 0), quit: make(chan struct{})}
	go w.loop()
	return w
}

// Log queues r without blocking; it reports false if the queue was full or the
// writer closed (the record is dropped and counted).
func (w *Writer) Log(r Record) (ok bool) {
	defer func() {
		if recover() != nil { // send on a closed channel after Close
			ok = false
			w.dropped.Add(1)
		}
	}()
	select {
	case w.ch <- r:
		return true
	default:
		w.dropped.Add(1)
		return false
	}
}

// Dropped is the number of records dropped so far.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Err returns the last write error (nil if none), so the caller can log it.
func (w *Writer) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.lastErr
}

// Close writes what is queued and stops the writer.
func (w *Writer) Close() {
	w.close.Do(func() {
		close(w.quit)
		close(w.ch)
	})
	<-w.done
}

func (w *Writer) setErr(err error) {
	w.errMu.Lock()
	w.lastErr = err
	w.errMu.Unlock()
}

func (w *Writer) loop() {
	defer close(w.done)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var (
		timer *time.Timer
		last  time.Time // when the previous record was taken
		batch []byte    // a burst's records, encoded
		n     int       // records in batch
	)
	for r := range w.ch {
		f = w.write(f, r)
		now := time.Now()
		burst := w.linger > 0 && now.Sub(last) < w.linger
		last = now
		if !burst {
			continue
		}
		// A burst: sleep linger, then write what queued meanwhile.
		if timer == nil {
			timer = time.NewTimer(w.linger)
		} else {
			timer.Reset(w.linger)
		}
		select {
		case <-timer.C:
		case <-w.quit:
		}
		// What queued meanwhile goes out in one write (one stat and one
		// write syscall per burst instead of per record: each syscall of an
		// otherwise idle Go runtime wakes its sysmon thread).
		for drained := false; !drained; {
			select {
			case r, ok := <-w.ch:
				if !ok {
					f = w.writeBytes(f, batch, n)
					return
				}
				var encoded bool
				if batch, encoded = w.encode(batch, &r); encoded {
					n++
				}
			default:
				drained = true
			}
		}
		f = w.writeBytes(f, batch, n)
		batch, n = batch[:0], 0
		last = time.Now()
	}
}

// write appends r to the log (f, opened when nil) and returns the file to
// write next (nil after an error: reopened next time).
func (w *Writer) write(f *os.File, r Record) *os.File {
	b, ok := w.encode(nil, &r)
	if !ok {
		return f
	}
	return w.writeBytes(f, b, 1)
}

// encode appends r's line in the log to dst.
func (w *Writer) encode(dst []byte, r *Record) ([]byte, bool) {
	b, err := appendRecord(dst, r)
	if err != nil {
		w.setErr(fmt.Errorf("decision log: %w", err))
		return dst, false
	}
	return append(b, '\n'), true
}

// writeBytes appends b, n records' lines, to the log (f, opened when nil) and
// returns the file to write next (nil after an error: reopened next time). A
// failed write counts its n records as dropped.
func (w *Writer) writeBytes(f *os.File, b []byte, n int) *os.File {
	if n == 0 {
		return f
	}
	var err error
	if f == nil {
		if f, err = w.open(); err != nil {
			w.setErr(err)
			w.dropped.Add(int64(n))
			return nil
		}
	}
	if f, err = w.rotate(f, len(b)); err != nil {
		w.setErr(err)
		w.dropped.Add(int64(n))
		return f
	}
	if _, err := f.Write(b); err != nil {
		w.setErr(fmt.Errorf("decision log %s: %w", w.path, err))
		w.dropped.Add(int64(n))
		f.Close()
		return nil // reopen next time (the file may have been moved away)
	}
	return f
}

// rotate moves a full log to <path>.1 and returns the file to write next.
//
// Two controllers (HA) may append to one shared log. Both can see it full; if the
// second renamed too, it would move the first's fresh file over the full rotated
// one and lose it. So the rename happens under an exclusive flock of the full file
// and only while the path still names that file; otherwise someone else rotated
// it and we just reopen the path. The lock is not waited for (LOCK_NB): a busy
// lock means the other controller is rotating right now, and the next record
// checks again.
func (w *Writer) rotate(f *os.File, n int) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size()+int64(n) <= w.maxBytes || fi.Size() == 0 {
		return f, nil
	}
	locked, err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil && !locked {
		return f, nil // the other writer is rotating right now: check again later
	}
	// A filesystem without flock (err != nil) still gets the same-file check,
	// which alone leaves only a narrow race; never rotating would let the log grow
	// without bound.
	if cur, err := os.Lstat(w.path); err == nil && os.SameFile(fi, cur) {
		if err := os.Rename(w.path, w.path+".1"); err != nil {
			w.setErr(fmt.Errorf("decision log: rotate: %w", err))
		}
	}
	if locked {
		flock(f, syscall.LOCK_UN)
	}
	f.Close()
	return w.open()
}

// flock applies how to f's file; false without error when LOCK_NB found it held.
func flock(f *os.File, how int) (bool, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), how) }); err != nil {
		return false, err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return ferr == nil, ferr
}

// Mode is the decision log's file mode: it lists every job's uid, tag and node,
// so only the owner (SlurmUser) and its group (admins) may read it; Slurm's
// PrivateData must not be sidestepped through it.
const Mode = 0o640

// open opens the log for appending: a regular file only (O_NOFOLLOW, and
// O_NONBLOCK so a FIFO never blocks the writer), created with Mode; an older log
// with wider modes is tightened to at most Mode.
func (w *Writer) open() (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, Mode)
	if err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("decision log %s: %w", w.path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("decision log %s: not a regular file (%v)", w.path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&^Mode != 0 {
		if err := f.Chmod(perm & Mode); err != nil {
			f.Close()
			return nil, fmt.Errorf("decision log %s: tighten mode %v: %w", w.path, perm, err)
		}
	}
	return f, nil
}

// ErrNotFound is returned (wrapped) when no record matches.
var ErrNotFound = errors.New("decision not found")

// Find returns the newest record with the given decision id, or failing that
// (id == ""), the newest with the given job id. It scans the rotated file and the
// current one; unreadable lines are skipped.
func Find(path, id, jobID string) (Record, error) {
	var best Record
	found := false
	for _, p := range []string{path + ".1", path} {
		f, err := safeopen.Regular(p, safeopen.NoFollow)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Record{}, fmt.Errorf("decision log: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 4096), maxLine)
		for sc.Scan() {
			var r Record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			if r.Op == OpGuard {
				continue // a view holds the guard's events too: they are not decisions
			}
			if (id != "" && r.ID == id) || (id == "" && jobID != "" && r.JobID == jobID) {
				best, found = r, true
			}
		}
		f.Close()
	}
	if !found {
		key := "decision " + id
		if id == "" {
			key = "job " + jobID
		}
		return Record{}, fmt.Errorf("%s in %s: %w", key, path, ErrNotFound)
	}
	return best, nil
}

// JobRecords returns the records of op for jobID in path and its rotated
// path.1, oldest first; beyond limit (> 0) only the newest limit. A missing
// file is no records; unreadable lines are skipped.
func JobRecords(path, jobID, op string, limit int) ([]Record, error) {
	out, err := readRotated(path, func(r *Record) bool { return r.JobID == jobID && r.Op == op })
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}
