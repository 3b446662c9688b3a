// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Reader lists the active entries of a store, decoding each file only once: active
// files are immutable (a job's entry is created once and removed at its end), so the
// file name is a sufficient cache key. A Reader is not safe for concurrent use;
// libcoscheml uses one from a single background goroutine.
type Reader struct {
	store *Store
	cache map[string]cacheEntry
	seen  map[string]bool      // scratch for one Read
	done  map[string]time.Time // done markers by decision id, when first seen
}

type cacheEntry struct {
	e   Entry
	err error
}

// NewReader returns a reader of the store.
func (s *Store) NewReader() *Reader {
	return &Reader{store: s, cache: map[string]cacheEntry{}, seen: map[string]bool{}, done: map[string]time.Time{}}
}

// ReadResult is one listing of the store.
type ReadResult struct {
	Entries []Entry // valid, not stale, sorted by node then job id
	Stale   int     // entries ignored because past expiry + grace
	Changed bool    // the set of files differs from the previous Read
	// NewProblems are files that failed to decode, reported on the Read that first
	// saw them only (so a caller can log them once).
	NewProblems []error
	// Done are the decision ids of jobs that have ended (markers younger than
	// DoneTTL), including jobs too short to appear in Entries at all.
	Done []string
}

// Read lists the store. The store's folder must exist and be readable (an
// unreadable store is an error, so the caller can fail open); a missing "active"
// folder below it means no job has started yet.
func (r *Reader) Read(now time.Time, grace time.Duration) (ReadResult, error) {
	var res ReadResult
	if fi, err := os.Stat(r.store.dir); err != nil {
		return res, fmt.Errorf("residency store: %w", err)
	} else if !fi.IsDir() {
		return res, fmt.Errorf("residency store %s: not a folder", r.store.dir)
	}
	names, err := listNames(r.store.activeDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("residency store: %w", err)
	}
	clear(r.seen)
	for _, name := range names {
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		r.seen[name] = true
		c, ok := r.cache[name]
		if !ok {
			res.Changed = true
			b, err := readLimited(filepath.Join(r.store.activeDir(), name))
			if errors.Is(err, os.ErrNotExist) {
				delete(r.seen, name) // removed between listing and reading
				continue
			}
			if err == nil {
				c.e, err = Decode(b)
				if err == nil && fileName(c.e.JobID, c.e.Node) != name {
					err = fmt.Errorf("entry of job %s on %s in a file named %s", c.e.JobID, c.e.Node, name)
				}
			}
			if err != nil {
				c.err = err
				res.NewProblems = append(res.NewProblems, fmt.Errorf("residency %s: %w", name, err))
			}
			r.cache[name] = c
		}
		if c.err != nil {
			continue
		}
		if c.e.Stale(now, grace) {
			res.Stale++
			continue
		}
		res.Entries = append(res.Entries, c.e)
	}
	for name := range r.cache {
		if !r.seen[name] {
			delete(r.cache, name)
			res.Changed = true
		}
	}
	sortEntries(res.Entries)
	r.readDone(now, &res)
	return res, nil
}

// readDone lists the done markers; a new one marks the result Changed, and markers
// first seen more than DoneTTL ago are removed (best effort: the plugin may lack the
// right to, and then a node's reconcile prunes them).
func (r *Reader) readDone(now time.Time, res *ReadResult) {
	names, err := listNames(r.store.doneDir())
	if err != nil {
		return // no job has ended yet, or unreadable: reservations then age out
	}
	live := make(map[string]bool, len(names))
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		live[name] = true
		first, ok := r.done[name]
		if !ok {
			first = now
			r.done[name] = now
			res.Changed = true
		}
		if now.Sub(first) > DoneTTL {
			_ = os.Remove(filepath.Join(r.store.doneDir(), name))
			continue
		}
		res.Done = append(res.Done, name)
	}
	for name := range r.done {
		if !live[name] {
			delete(r.done, name)
		}
	}
}

// List reads the store once (a fresh Reader); for CLIs and tests.
func (s *Store) List(now time.Time, grace time.Duration) (ReadResult, error) {
	return s.NewReader().Read(now, grace)
}

// listNames lists a folder's names unsorted (cheaper than os.ReadDir, which sorts
// and builds a DirEntry per file).
func listNames(dir string) ([]string, error) {
	f, err := safeopen.Dir(dir) // a FIFO here must not block slurmctld's refresh
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
