// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
)

// ReadAlibaba reads the pod list of the Alibaba GPU cluster trace v2023
// (openb_pod_list_*.csv): columns name, cpu_milli, memory_mib, num_gpu, gpu_milli,
// gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time, times in
// seconds. A pod becomes a job submitted at creation_time that runs for
// deletion_time - scheduled_time. Left out (counted in Skipped): pods never
// scheduled (empty or zero scheduled_time, or deleted before being scheduled), pods
// without a deletion time, CPU-only pods (num_gpu 0).
//
// Fractional GPUs: a pod with num_gpu 1 and gpu_milli below 1000 asked for part of
// one GPU. It becomes a 1-GPU job with GPUFrac = gpu_milli/1000: whether it shares
// its GPU is the placement policy's decision, as in a Slurm cluster where the job
// would ask for one GPU (or shards of one) and coscheml decides the sharing.
//
// GPU models: gpu_spec, when the column is there and the pod's is not empty,
// names the GPU models the pod may run on ("V100M32", several joined by '|');
// they become Job.GPUModels, which a simulated cluster naming models honours.
func ReadAlibaba(r io.Reader) (*Trace, error) {
	cr := newReader(r)
	idx, err := header(cr, "alibaba", "name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")
	if err != nil {
		return nil, err
	}
	t := &Trace{Format: "alibaba"}
	_, hasSpec := idx["gpu_spec"]
	specs := map[string][]string{} // one slice per distinct spec: pods share them
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("alibaba trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		name := field(row, idx, "name")
		gpus, err := gpuCount(field(row, idx, "num_gpu"))
		if err != nil {
			return nil, fmt.Errorf("alibaba trace line %d: num_gpu: %w", line, err)
		}
		milli, err := optNumber(field(row, idx, "gpu_milli"))
		if err != nil || milli < 0 || milli > 1000 {
			return nil, fmt.Errorf("alibaba trace line %d: gpu_milli %q: want 0..1000", line, profile.Sanitize(field(row, idx, "gpu_milli")))
		}
		created, err := optNumber(field(row, idx, "creation_time"))
		if err != nil {
			return nil, fmt.Errorf("alibaba trace line %d: creation_time: %w", line, err)
		}
		sched, err := optNumber(field(row, idx, "scheduled_time"))
		if err != nil {
			return nil, fmt.Errorf("alibaba trace line %d: scheduled_time: %w", line, err)
		}
		deleted, err := optNumber(field(row, idx, "deletion_time"))
		if err != nil {
			return nil, fmt.Errorf("alibaba trace line %d: deletion_time: %w", line, err)
		}
		switch {
		case gpus == 0:
			t.skip("no GPU")
			continue
		case sched <= 0:
			t.skip("never scheduled")
			continue
		case deleted <= 0:
			t.skip("no deletion time")
			continue
		case deleted <= sched:
			t.skip("deleted before scheduled")
			continue
		}
		j := Job{Submit: created, Duration: deleted - sched, GPUs: gpus}
		if j.Duration > maxDuration {
			return nil, fmt.Errorf("alibaba trace line %d: duration %v s out of range", line, j.Duration)
		}
		if gpus == 1 && milli > 0 && milli < 1000 {
			j.GPUFrac = milli / 1000
		}
		if hasSpec {
			if spec := field(row, idx, "gpu_spec"); spec != "" {
				models, ok := specs[spec]
				if !ok {
					if models, err = gpuSpec(spec); err != nil {
						return nil, fmt.Errorf("alibaba trace line %d: gpu_spec: %w", line, err)
					}
					specs[spec] = models
				}
				j.GPUModels = models
			}
		}
		if profile.ValidateTag(name) == nil {
			j.ID = "alibaba-" + name
		} else {
			j.ID = "alibaba-" + strconv.Itoa(line-1)
		}
		t.Jobs = append(t.Jobs, j)
	}
	t.finish()
	return t, nil
}

// optNumber parses a number; an empty field is 0 (the trace leaves unset times empty).
func optNumber(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", profile.Sanitize(s))
	}
	if math.Abs(v) > 1e12 {
		return 0, fmt.Errorf("%v out of range", v)
	}
	return v, nil
}

// maxSpecModels bounds the models one gpu_spec lists.
const maxSpecModels = 16

// specModelRE is one GPU model name of a gpu_spec ("V100M16", "A10", "G2").
var specModelRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// gpuSpec splits a gpu_spec into its model names ('|'-separated).
func gpuSpec(spec string) ([]string, error) {
	parts := strings.Split(spec, "|")
	if len(parts) > maxSpecModels {
		return nil, fmt.Errorf("%d models, at most %d", len(parts), maxSpecModels)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if !specModelRE.MatchString(p) {
			return nil, fmt.Errorf("%q is not a GPU model name", profile.Sanitize(p))
		}
		out = append(out, p)
	}
	return out, nil
}
