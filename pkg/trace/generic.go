// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/coscheml/coscheml/pkg/profile"
)

// ReadGeneric reads the generic trace CSV. Header (column order free, names exact):
//
//	submit,duration,gpus,tag,class
//
// submit: seconds (any origin; made relative to the earliest), duration: seconds
// the job runs alone (> 0), gpus: whole GPUs (>= 1), tag: an application tag
// (profile.ValidateTag grammar) or empty, class: hpc, train, infer or empty. Empty
// tag/class are filled by Assign. Every bad value is an error naming its line.
func ReadGeneric(r io.Reader) (*Trace, error) {
	cr := newReader(r)
	idx, err := header(cr, "generic", "submit", "duration", "gpus")
	if err != nil {
		return nil, err
	}
	_, hasTag := idx["tag"]
	_, hasClass := idx["class"]
	t := &Trace{Format: "generic"}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("generic trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		sub, err := optNumber(field(row, idx, "submit"))
		if err != nil || field(row, idx, "submit") == "" {
			return nil, fmt.Errorf("generic trace line %d: submit %q: want seconds", line, profile.Sanitize(field(row, idx, "submit")))
		}
		dur, err := positiveOrZero(field(row, idx, "duration"))
		if err != nil || dur == 0 {
			return nil, fmt.Errorf("generic trace line %d: duration %q: want seconds > 0", line, profile.Sanitize(field(row, idx, "duration")))
		}
		gpus, err := gpuCount(field(row, idx, "gpus"))
		if err != nil || gpus == 0 {
			return nil, fmt.Errorf("generic trace line %d: gpus %q: want a whole number >= 1", line, profile.Sanitize(field(row, idx, "gpus")))
		}
		j := Job{ID: "job-" + strconv.Itoa(line-1), Submit: sub, Duration: dur, GPUs: gpus}
		if hasTag {
			if tag := field(row, idx, "tag"); tag != "" {
				if err := profile.ValidateTag(tag); err != nil {
					return nil, fmt.Errorf("generic trace line %d: %w", line, err)
				}
				j.Tag = tag
			}
		}
		if hasClass {
			if c := field(row, idx, "class"); c != "" {
				cl, err := profile.ParseClass(c)
				if err != nil {
					return nil, fmt.Errorf("generic trace line %d: %w", line, err)
				}
				j.Class = cl
			}
		}
		t.Jobs = append(t.Jobs, j)
	}
	t.finish()
	return t, nil
}
