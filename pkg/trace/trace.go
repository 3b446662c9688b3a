// SPDX-License-Identifier: Apache-2.0

// Package trace reads GPU cluster job traces (Philly, Alibaba GPU v2023 pod list, a
// generic CSV) into one job list for the simulator, gives jobs that lack one an
// application and a class by a seeded rule, and subsamples or compresses a trace so
// that a run is short.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// Job is one job of a trace, in seconds relative to the trace's first submission.
type Job struct {
	ID       string
	Submit   float64 // seconds since the first submission of the trace
	Duration float64 // seconds the job runs alone (exclusively)
	GPUs     int
	// GPUFrac is the fraction of one GPU an Alibaba pod asked for (gpu_milli/1000)
	// when it asked for less than a whole GPU; 0 otherwise. The simulator still
	// places such a job as a 1-GPU job (see docs/evaluation.md).
	GPUFrac float64
	// GPUModels, when not empty, are the GPU models the job may run on, any
	// of them (an Alibaba pod's gpu_spec): a simulated cluster whose nodes name
	// models places it only on those.
	GPUModels []string
	Tag       string        // application; "" until Assign gives one
	Class     profile.Class // "" until Assign gives one
}

// Trace is a parsed trace plus what was left out of it and why.
type Trace struct {
	Format  string
	Jobs    []Job
	Skipped map[string]int // reason -> rows left out
}

func (t *Trace) skip(reason string) {
	if t.Skipped == nil {
		t.Skipped = map[string]int{}
	}
	t.Skipped[reason]++
}

// SkippedTotal is the number of rows left out for any reason.
func (t *Trace) SkippedTotal() int {
	n := 0
	for _, v := range t.Skipped {
		n += v
	}
	return n
}

// maxFields bounds a row so that a hostile file cannot make one row huge.
const maxFields = 64

// header reads the header row and maps each wanted column to its index.
func header(r *csv.Reader, format string, want ...string) (map[string]int, error) {
	row, err := r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s trace: empty file, want a header row", format)
		}
		return nil, fmt.Errorf("%s trace: reading header: %w", format, err)
	}
	if len(row) > maxFields {
		return nil, fmt.Errorf("%s trace: header has %d columns, at most %d allowed", format, len(row), maxFields)
	}
	idx := map[string]int{}
	for i, h := range row {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := idx[h]; !dup {
			idx[h] = i
		}
	}
	var missing []string
	for _, w := range want {
		if _, ok := idx[w]; !ok {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s trace: header lacks column(s) %s", format, profile.Sanitize(strings.Join(missing, ",")))
	}
	return idx, nil
}

func newReader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	return cr
}

// field returns column name of row, or "" when the row is short.
func field(row []string, idx map[string]int, name string) string {
	i := idx[name]
	if i >= len(row) {
		return ""
	}
	return strings.TrimSpace(row[i])
}

// finish makes submit times relative to the earliest one and orders jobs by
// submission (ties keep file order), the order a FIFO queue sees them in.
func (t *Trace) finish() {
	if len(t.Jobs) == 0 {
		return
	}
	min := t.Jobs[0].Submit
	for _, j := range t.Jobs {
		if j.Submit < min {
			min = j.Submit
		}
	}
	for i := range t.Jobs {
		t.Jobs[i].Submit -= min
	}
	sort.SliceStable(t.Jobs, func(a, b int) bool { return t.Jobs[a].Submit < t.Jobs[b].Submit })
}
