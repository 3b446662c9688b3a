// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxGPUs bounds the entries of a GPU list (the input is an environment variable).
const maxGPUs = 1024

// VisibleDevices parses CUDA_VISIBLE_DEVICES as CUDA reads it: comma-separated
// GPU indices or UUIDs ("GPU-..." or a unique prefix of one). MIG instances are
// refused: NVML's device counters describe the whole parent GPU. An empty value
// means no GPU. The caller treats an unset variable as "all GPUs".
func VisibleDevices(s string) (indices []int, uuids []string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxGPUs {
		return nil, nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: more than %d entries", maxGPUs)
	}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: empty entry")
		case strings.HasPrefix(p, "MIG-"):
			return nil, nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: MIG instance %q: profiling needs whole GPUs", oneLine(p))
		case strings.HasPrefix(p, "GPU-"):
			if len(p) > 64 || strings.ContainsFunc(p[4:], func(r rune) bool {
				return !(r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F'))
			}) {
				return nil, nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: bad GPU UUID %q", oneLine(p))
			}
			uuids = append(uuids, p)
		default:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= maxGPUs {
				return nil, nil, fmt.Errorf("CUDA_VISIBLE_DEVICES: bad entry %q: want a GPU index or GPU-<uuid>", oneLine(p))
			}
			indices = append(indices, i)
		}
	}
	return indices, uuids, nil
}

// ParseGPUList parses a comma-separated list of GPU indices such as SLURM_JOB_GPUS
// ("0,2"); duplicates are dropped.
func ParseGPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxGPUs {
		return nil, fmt.Errorf("GPU list: more than %d entries", maxGPUs)
	}
	seen := map[int]bool{}
	var out []int
	for _, p := range parts {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 || i >= maxGPUs {
			return nil, fmt.Errorf("GPU list: bad index %q", oneLine(p))
		}
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

// FormatGPUList is the inverse of ParseGPUList.
func FormatGPUList(gpus []int) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}

// ResolveUUIDs maps GPU UUIDs (or unique prefixes, as CUDA accepts them) to
// indices on an initialized backend.
func ResolveUUIDs(b Backend, uuids []string) ([]int, error) {
	if len(uuids) == 0 {
		return nil, nil
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, err
	}
	all := make([]string, n)
	for i := 0; i < n; i++ {
		d, err := b.Device(i)
		if err != nil {
			continue
		}
		if u, err := d.UUID(); err == nil {
			all[i] = u
		}
	}
	var out []int
	for _, want := range uuids {
		match := -1
		for i, u := range all {
			if u != "" && strings.HasPrefix(strings.ToLower(u), strings.ToLower(want)) {
				if match >= 0 {
					return nil, fmt.Errorf("GPU UUID prefix %q is ambiguous", oneLine(want))
				}
				match = i
			}
		}
		if match < 0 {
			return nil, fmt.Errorf("no GPU with UUID %q", oneLine(want))
		}
		out = append(out, match)
	}
	return out, nil
}

// Tee returns a Sink that hands everything to each of sinks in turn; the first
// error stops it.
func Tee(sinks ...Sink) Sink { return tee(sinks) }

type tee []Sink

func (t tee) Device(gpu int, name string) error {
	for _, s := range t {
		if err := s.Device(gpu, name); err != nil {
			return err
		}
	}
	return nil
}

func (t tee) Round(at time.Time, samples []Sample) error {
	for _, s := range t {
		if err := s.Round(at, samples); err != nil {
			return err
		}
	}
	return nil
}

func (t tee) Note(text string, partial bool) error {
	for _, s := range t {
		if err := s.Note(text, partial); err != nil {
			return err
		}
	}
	return nil
}
