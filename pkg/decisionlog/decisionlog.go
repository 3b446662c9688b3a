// Package decisionlog keeps the placement decisions of libcoscheml so that
// `coscheml explain JOBID` can show them later.
//
// The log is a file of JSON lines, appended by one background goroutine so that the
// submit path only does a non-blocking channel send; when the file reaches its size
// bound it is rotated to <path>.1 (one old file kept), so the log never grows
// without limit. A torn last line (crash) is skipped by readers.
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
	"time"
)

// DefaultMaxBytes is the rotation size of the log.
const DefaultMaxBytes = 64 << 20

// maxLine bounds one record when reading.
const maxLine = 64 << 10

// Record is one decision of the job_submit plugin.
type Record struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Op     string    `json:"op"`               // submit | modify
	JobID  string    `json:"job_id,omitempty"` // known on modify only
	UserID uint32    `json:"user_id"`
	Tag    string    `json:"tag,omitempty"`
	Class  string    `json:"class,omitempty"`

	Outcome string `json:"outcome"` // unchanged | rewrite | reject
	Action  string `json:"action"`  // share | exclusive | wait | pass
	Node    string `json:"node,omitempty"`
	GPU     int    `json:"gpu"` // GPU index expected on Node; -1 when none
	Shards  int    `json:"shards,omitempty"`

	PredictedSpeed   float64  `json:"predicted_speed,omitempty"`
	MinResidentSpeed float64  `json:"min_resident_speed,omitempty"`
	CoRunners        []string `json:"co_runners,omitempty"` // tags already on the chosen GPU
	Policy           string   `json:"policy,omitempty"`
	Reason           string   `json:"reason"`

	TresIn  string `json:"tres_in,omitempty"`
	TresOut string `json:"tres_out,omitempty"`
}

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
}

// NewWriter starts a writer of path; queue bounds the records waiting to be
// written (beyond it Log drops records rather than block a submission).
func NewWriter(path string, maxBytes int64, queue int) *Writer {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if queue <= 0 {
		queue = 4096
	}
	w := &Writer{path: path, maxBytes: maxBytes, ch: make(chan Record, queue), done: make(chan struct{})}
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
	w.close.Do(func() { close(w.ch) })
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
	for r := range w.ch {
		b, err := json.Marshal(r)
		if err != nil {
			w.setErr(fmt.Errorf("decision log: %w", err))
			continue
		}
		b = append(b, '\n')
		if f == nil {
			if f, err = w.open(); err != nil {
				w.setErr(err)
				w.dropped.Add(1)
				continue
			}
		}
		if fi, err := f.Stat(); err == nil && fi.Size()+int64(len(b)) > w.maxBytes && fi.Size() > 0 {
			f.Close()
			f = nil
			if err := os.Rename(w.path, w.path+".1"); err != nil {
				w.setErr(fmt.Errorf("decision log: rotate: %w", err))
			}
			if f, err = w.open(); err != nil {
				w.setErr(err)
				w.dropped.Add(1)
				continue
			}
		}
		if _, err := f.Write(b); err != nil {
			w.setErr(fmt.Errorf("decision log %s: %w", w.path, err))
			f.Close()
			f = nil // reopen next time (the file may have been moved away)
		}
	}
}

func (w *Writer) open() (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
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
		f, err := os.Open(p)
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
