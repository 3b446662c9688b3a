// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/guard"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// The jobs the guard holds suspended live in memory while it runs and in
// <guard.state_dir>/<node>.suspended, rewritten whenever they change and read
// when the guard starts: a guard restarted (an upgrade, a crash) while it holds
// a job suspended still resumes it when the job it protects ends.

// suspendedPath is node's record of its suspended jobs in dir.
func suspendedPath(dir, node string) string { return filepath.Join(dir, node+".suspended") }

// suspendedFile is the record's format.
type suspendedFile struct {
	V         int                `json:"v"`
	Suspended []guard.Suspension `json:"suspended"`
}

// maxSuspendedBytes bounds the record (a node holds a few jobs suspended).
const maxSuspendedBytes = 1 << 20

// parseSuspended reads a record; every job id must be a Slurm job id and every
// GPU index in range, or the whole record is refused.
func parseSuspended(b []byte) ([]guard.Suspension, error) {
	var f suspendedFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a record of suspended jobs: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a record of suspended jobs: trailing data")
	}
	if f.V != 1 {
		return nil, fmt.Errorf("record version %d, want 1", f.V)
	}
	for _, s := range f.Suspended {
		if err := residency.ValidJobID(s.JobID); err != nil {
			return nil, fmt.Errorf("suspended job: %w", err)
		}
		if err := residency.ValidJobID(s.Protects); err != nil {
			return nil, fmt.Errorf("job %s protects: %w", s.JobID, err)
		}
		if s.GPU < 0 || s.GPU >= residency.MaxGPUsPerNode {
			return nil, fmt.Errorf("job %s: GPU index %d out of range", s.JobID, s.GPU)
		}
	}
	return f.Suspended, nil
}

// readSuspended reads path; a missing file is no suspension.
func readSuspended(path string) ([]guard.Suspension, error) {
	f, err := safeopen.Regular(path, safeopen.NoFollow)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSuspendedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxSuspendedBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSuspendedBytes)
	}
	sus, err := parseSuspended(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sus, nil
}

// encodeSuspended is the record of sus.
func encodeSuspended(sus []guard.Suspension) []byte {
	if sus == nil {
		sus = []guard.Suspension{}
	}
	b, _ := json.Marshal(suspendedFile{V: 1, Suspended: sus}) // plain strings and ints: cannot fail
	return append(b, '\n')
}

// restoreSuspensions hands the guard what an earlier run recorded. A record
// that cannot be read is moved aside (path.corrupt) and said, so that it is
// neither lost nor read again.
func (s *guardService) restoreSuspensions() {
	if s.cfg.Guard.StateDir == "" {
		return
	}
	path := suspendedPath(s.cfg.Guard.StateDir, s.node)
	sus, err := readSuspended(path)
	if err != nil {
		aside := path + ".corrupt"
		if rerr := os.Rename(path, aside); rerr == nil {
			s.logf("guard: %v; moved to %s: jobs it held suspended must be resumed by hand (scontrol resume)", err, aside)
		} else {
			s.logf("guard: %v; jobs it held suspended must be resumed by hand (scontrol resume)", err)
		}
		return
	}
	s.savedSuspended = string(encodeSuspended(sus))
	if len(sus) == 0 {
		return
	}
	s.g.State().RestoreSuspensions(sus)
	s.logf("guard: took over %d suspended job(s) from %s; each is resumed when the job it protects ends", len(sus), path)
}

// saveSuspensions rewrites the record when the guard's suspensions changed. A
// failed write is said (once per 10 minutes) and tried again next round.
func (s *guardService) saveSuspensions(now time.Time) {
	if s.cfg.Guard.StateDir == "" || s.g == nil {
		return
	}
	b := encodeSuspended(s.g.State().Suspensions())
	if string(b) == s.savedSuspended {
		return
	}
	if err := os.MkdirAll(s.cfg.Guard.StateDir, 0o755); err != nil {
		s.note(now, "guard: suspended jobs not recorded: %v", err)
		return
	}
	if err := atomicfile.Write(suspendedPath(s.cfg.Guard.StateDir, s.node), b, 0o600); err != nil {
		s.note(now, "guard: suspended jobs not recorded: %v", err)
		return
	}
	s.savedSuspended = string(b)
}
