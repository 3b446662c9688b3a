// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

// phillyTime is the timestamp layout of the Pollux copy of the Philly trace.
const phillyTime = "2006-01-02 15:04:05"

// ReadPhilly reads the Philly trace as published in the Pollux artifact: columns
// timestamp (submit, "2006-01-02 15:04:05"), duration (s, run exclusively),
// num_gpus, gpu_time, cluster. Rows with a zero duration are left out (counted in
// Skipped); a malformed row is an error naming its line.
func ReadPhilly(r io.Reader) (*Trace, error) {
	cr := newReader(r)
	idx, err := header(cr, "philly", "timestamp", "duration", "num_gpus")
	if err != nil {
		return nil, err
	}
	t := &Trace{Format: "philly"}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("philly trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		ts, err := time.Parse(phillyTime, field(row, idx, "timestamp"))
		if err != nil {
			return nil, fmt.Errorf("philly trace line %d: timestamp %q: want %s", line, profile.Sanitize(field(row, idx, "timestamp")), phillyTime)
		}
		dur, err := positiveOrZero(field(row, idx, "duration"))
		if err != nil {
			return nil, fmt.Errorf("philly trace line %d: duration: %w", line, err)
		}
		gpus, err := gpuCount(field(row, idx, "num_gpus"))
		if err != nil {
			return nil, fmt.Errorf("philly trace line %d: num_gpus: %w", line, err)
		}
		if dur == 0 {
			t.skip("zero duration")
			continue
		}
		if gpus == 0 {
			t.skip("no GPU")
			continue
		}
		t.Jobs = append(t.Jobs, Job{
			ID:       "philly-" + strconv.Itoa(line-1),
			Submit:   float64(ts.Unix()),
			Duration: dur,
			GPUs:     gpus,
		})
	}
	t.finish()
	return t, nil
}

// maxDuration bounds a job's duration (10 years) so that arithmetic stays exact.
const maxDuration = 10 * 365 * 24 * 3600.0

// maxGPUs bounds a job's GPU count.
const maxGPUs = 1 << 16

func positiveOrZero(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", profile.Sanitize(s))
	}
	if math.IsNaN(v) || v < 0 || v > maxDuration {
		return 0, fmt.Errorf("%v out of range 0..%v", v, maxDuration)
	}
	return v, nil
}

func gpuCount(s string) (int, error) {
	v, err := strconv.ParseFloat(s, 64) // some traces write "1.0"
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", profile.Sanitize(s))
	}
	if v < 0 || v > maxGPUs || v != math.Trunc(v) {
		return 0, fmt.Errorf("%v: want a whole number in 0..%d", v, maxGPUs)
	}
	return int(v), nil
}
