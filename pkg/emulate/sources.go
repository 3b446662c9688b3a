// SPDX-License-Identifier: Apache-2.0

package emulate

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/residency"
	"github.com/coscheml/coscheml/pkg/truth"
)

// TruthSpeeds adapts the ground-truth table to Speeds.
type TruthSpeeds struct{ T *truth.Table }

// Pair is a's true speed next to b.
func (s TruthSpeeds) Pair(a, b string) (float64, bool) {
	i, ok := s.T.Index(a)
	if !ok {
		return 0, false
	}
	j, ok := s.T.Index(b)
	if !ok {
		return 0, false
	}
	return s.T.Speed(i, j), true
}

// SoloSM is an application's solo SM utilization (%).
func (s TruthSpeeds) SoloSM(tag string) (float64, bool) {
	i, ok := s.T.Index(tag)
	if !ok {
		return 0, false
	}
	return s.T.SoloUtil(i), true
}

// ResidencyCoRunners lists, from the residency records the node Prolog writes,
// the tags of the jobs other than self that hold each of GPUs gpus of node.
// Records past their expiry (+ grace) are ignored, as the plugin ignores them.
func ResidencyCoRunners(store *residency.Store, node string, gpus []int, self string, grace time.Duration) CoRunnerFunc {
	return ResidencyCoRunnersExcept(store, node, gpus, self, grace, nil)
}

// ResidencyCoRunnersExcept is ResidencyCoRunners leaving out the jobs skip
// names (nil: none), e.g. co-runners that are stopped and use no GPU time.
func ResidencyCoRunnersExcept(store *residency.Store, node string, gpus []int, self string, grace time.Duration, skip func(jobID string) bool) CoRunnerFunc {
	r := store.NewReader()
	return func() ([][]string, error) {
		res, err := r.Read(time.Now(), grace)
		if err != nil {
			return nil, fmt.Errorf("co-runners: %w", err)
		}
		out := make([][]string, len(gpus))
		for _, e := range res.Entries {
			if e.Node != node || e.JobID == self || (skip != nil && skip(e.JobID)) {
				continue
			}
			for i, g := range gpus {
				if slices.Contains(e.GPUs, g) {
					out[i] = append(out[i], e.Tag)
				}
			}
		}
		for _, tags := range out {
			slices.Sort(tags)
		}
		return out, nil
	}
}

// MaxGPUIndex bounds a GPU index read from the environment.
const MaxGPUIndex = residency.MaxGPUsPerNode - 1

// GPUsFromEnv reads the GPU indices Slurm gave the job: SLURM_JOB_GPUS, else
// CUDA_VISIBLE_DEVICES (slurmd sets both from the allocation's indices; for
// shard jobs the indices of the GPUs the shards belong to): "2", "0,3", "0-1".
func GPUsFromEnv(getenv func(string) string) ([]int, error) {
	for _, name := range []string{"SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		return ParseGPUIndices(v)
	}
	return nil, fmt.Errorf("emulate: neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES is set: the job holds no GPU")
}

// ParseGPUIndices reads a list of GPU indices and ranges ("0,3", "0-2"), each
// index once, at most residency.MaxGPUsPerNode of them.
func ParseGPUIndices(v string) ([]int, error) {
	if len(v) > 4*residency.MaxGPUsPerNode {
		return nil, fmt.Errorf("emulate: GPU list %s too long", clip(v))
	}
	var out []int
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := ParseGPUIndex(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = ParseGPUIndex(hi); err != nil || b < a {
				return nil, fmt.Errorf("emulate: GPU range %s", clip(part))
			}
		}
		for g := a; g <= b; g++ {
			if slices.Contains(out, g) {
				return nil, fmt.Errorf("emulate: GPU %d listed twice in %s", g, clip(v))
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// ParseGPUIndex reads one GPU index ("2"); lists and ranges are refused.
func ParseGPUIndex(v string) (int, error) {
	if len(v) > 3 {
		return 0, fmt.Errorf("emulate: GPU index %q: want one index 0..%d", clip(v), MaxGPUIndex)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > MaxGPUIndex || strconv.Itoa(n) != v {
		return 0, fmt.Errorf("emulate: GPU index %q: want one index 0..%d", clip(v), MaxGPUIndex)
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return strconv.Quote(s)
}

// StoppedInDir reports whether a job on one of GPUs gpus of node is stopped
// (Slurm's scontrol suspend stops its processes): its reading in the emulated
// metrics folder dir names a process in state T. A job without a reading (not
// started yet, no folder) counts as running.
func StoppedInDir(dir, node string, gpus []int) func(jobID string) bool {
	return func(jobID string) bool {
		for _, gpu := range gpus {
			r, err := nvml.ReadDirReading(dir, node, gpu, jobID)
			if err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.PID))
			if err != nil {
				return false
			}
			return ProcStopped(b)
		}
		return false
	}
}

// ProcStopped reads the state field of a /proc/PID/stat line: T (stopped by a
// signal) or t (stopped by a tracer).
func ProcStopped(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	st := stat[i+2]
	return st == 'T' || st == 't'
}
