// SPDX-License-Identifier: Apache-2.0

package emulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/residency"
)

// MaxRecordSize bounds one result record (MaxHistory phases of a few co-runners).
const MaxRecordSize = 256 << 10

// Encode writes r as one JSON line.
func Encode(r Result) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("emulate: encode result of job %s: %w", r.JobID, err)
	}
	return append(b, '\n'), nil
}

// Decode reads one result record and checks it: the file is written by a job
// (a user program in a real cluster), so every field is validated.
func Decode(b []byte) (Result, error) {
	var r Result
	if len(b) > MaxRecordSize {
		return r, fmt.Errorf("emulate: result record of %d bytes, at most %d", len(b), MaxRecordSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("emulate: decode result: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Result{}, errors.New("emulate: decode result: trailing data")
	}
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	return r, nil
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Validate checks a decoded result.
func (r *Result) Validate() error {
	if err := residency.ValidJobID(r.JobID); err != nil {
		return fmt.Errorf("emulate: result: %w", err)
	}
	if r.Node == "" || len(r.Node) > 64 || strings.ContainsAny(r.Node, "/ \t\n") {
		return fmt.Errorf("emulate: result of job %s: invalid node %q", r.JobID, profile.Sanitize(r.Node))
	}
	if r.GPU < 0 || r.GPU > MaxGPUIndex {
		return fmt.Errorf("emulate: result of job %s: GPU %d out of range", r.JobID, r.GPU)
	}
	if err := profile.ValidateTag(r.Tag); err != nil {
		return fmt.Errorf("emulate: result of job %s: %w", r.JobID, err)
	}
	if _, err := profile.ParseClass(string(r.Class)); err != nil {
		return fmt.Errorf("emulate: result of job %s: %w", r.JobID, err)
	}
	if !finite(r.Work, r.Start, r.End, r.MinSpeed, r.Floor) || r.Work < 0 || r.Start <= 0 || r.End < r.Start ||
		r.MinSpeed < 0 || r.MinSpeed > 1e3 || r.Floor < 0 || r.Floor > 1 || r.Unknown < 0 {
		return fmt.Errorf("emulate: result of job %s: times or speeds out of range", r.JobID)
	}
	if len(r.History) > MaxHistory {
		return fmt.Errorf("emulate: result of job %s: %d phases, at most %d", r.JobID, len(r.History), MaxHistory)
	}
	for _, p := range r.History {
		if !finite(p.At, p.Speed) || p.Speed < 0 || len(p.CoRunners) > residency.MaxGPUsPerNode*64 {
			return fmt.Errorf("emulate: result of job %s: bad phase", r.JobID)
		}
		for _, c := range p.CoRunners {
			if c != "" {
				if err := profile.ValidateTag(c); err != nil {
					return fmt.Errorf("emulate: result of job %s: co-runner: %w", r.JobID, err)
				}
			}
		}
	}
	return nil
}

// FileName is the result file of a job in a results folder.
func FileName(jobID string) string { return jobID + ".json" }

// Write puts r into dir as its own file, atomically (a reader never sees half).
func Write(dir string, r Result) error {
	if err := residency.ValidJobID(r.JobID); err != nil {
		return fmt.Errorf("emulate: write result: %w", err)
	}
	b, err := Encode(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, FileName(r.JobID)), b, 0o644); err != nil {
		return fmt.Errorf("emulate: write result: %w", err)
	}
	return nil
}

// ReadDir reads every result file of dir, sorted by job ID (numerically when the
// IDs are numbers); files that fail to decode are returned as errors beside the
// good ones.
func ReadDir(dir string) ([]Result, []error, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("emulate: results: %w", err)
	}
	var out []Result
	var bad []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := readLimited(filepath.Join(dir, e.Name()))
		if err == nil {
			var r Result
			if r, err = Decode(b); err == nil {
				out = append(out, r)
				continue
			}
		}
		bad = append(bad, fmt.Errorf("%s: %w", e.Name(), err))
	}
	sort.Slice(out, func(a, b int) bool {
		if len(out[a].JobID) != len(out[b].JobID) {
			return len(out[a].JobID) < len(out[b].JobID)
		}
		return out[a].JobID < out[b].JobID
	})
	return out, bad, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(f), MaxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxRecordSize)
	}
	return b, nil
}
