// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUnmapped: the process belongs to no Slurm job the guard can name (it is
// gone, or it runs outside Slurm's job cgroups).
var ErrUnmapped = errors.New("process not in a Slurm job cgroup")

// maxCgroupFile bounds what is read of one /proc/PID/cgroup; a real one is a few
// hundred bytes even with every cgroup v1 controller.
const maxCgroupFile = 16 << 10

// maxJobIDDigits bounds a job id read from a cgroup path (Slurm's are 32-bit).
const maxJobIDDigits = 10

// ParseCgroup returns the Slurm job id named by the contents of a
// /proc/PID/cgroup file, as Slurm's task/cgroup plugin lays the hierarchy out:
//
//	cgroup v2: 0::/system.slice/slurmstepd.scope/job_<id>/step_<s>/user/task_<t>
//	           (or <node>_slurmstepd.scope when several slurmds share a host)
//	cgroup v1: <n>:<controllers>:/slurm/uid_<uid>/job_<id>/step_<s>/task_<t>
//	           (or /slurm_<node>/uid_<uid>/...)
//
// Only the job component in the place Slurm creates it counts: a job cgroup
// nested deeper (a user may create sub-cgroups below a delegated step) or under
// any other parent (a user's own systemd slice) names nothing. Every line that
// names a job must name the same one; lines that disagree map to no job, so a
// process is never attributed to a job by a guess.
func ParseCgroup(data []byte) (string, error) {
	if len(data) > maxCgroupFile {
		return "", fmt.Errorf("cgroup file of %d bytes: %w", len(data), ErrUnmapped)
	}
	job := ""
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		fields := bytes.SplitN(line, []byte{':'}, 3)
		if len(fields) != 3 {
			continue
		}
		id, ok := slurmJobInPath(string(fields[2]))
		if !ok {
			continue
		}
		if job != "" && job != id {
			return "", fmt.Errorf("cgroup lines name jobs %s and %s: %w", job, id, ErrUnmapped)
		}
		job = id
	}
	if job == "" {
		return "", ErrUnmapped
	}
	return job, nil
}

// slurmJobInPath finds job_<id> directly below Slurm's own cgroup: the
// slurmstepd scope under system.slice (v2) or uid_<n> under slurm* at the root of
// a v1 hierarchy.
func slurmJobInPath(path string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "system.slice" && strings.HasSuffix(parts[1], "slurmstepd.scope"):
		rest = parts[2:]
	case len(parts) >= 3 && strings.HasPrefix(parts[0], "slurm") && digitsAfter(parts[1], "uid_", 10):
		rest = parts[2:]
	default:
		return "", false
	}
	if !digitsAfter(rest[0], "job_", maxJobIDDigits) {
		return "", false
	}
	return strings.TrimPrefix(rest[0], "job_"), true
}

// digitsAfter reports whether s is prefix followed by 1..maxDigits ASCII digits.
func digitsAfter(s, prefix string, maxDigits int) bool {
	d, ok := strings.CutPrefix(s, prefix)
	if !ok || d == "" || len(d) > maxDigits {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// CgroupMapper maps host PIDs to Slurm jobs through <Root>/<pid>/cgroup. Root
// is "/proc" on a node; tests point it at a directory of their own.
type CgroupMapper struct {
	Root string
}

// JobOf returns the job id of a process, or an error wrapping ErrUnmapped.
func (m CgroupMapper) JobOf(pid uint32) (string, error) {
	root := m.Root
	if root == "" {
		root = "/proc"
	}
	f, err := os.Open(filepath.Join(root, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("pid %d is gone: %w", pid, ErrUnmapped)
		}
		return "", fmt.Errorf("pid %d: %w", pid, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCgroupFile+1))
	if err != nil {
		return "", fmt.Errorf("pid %d: reading cgroup: %w", pid, err)
	}
	id, err := ParseCgroup(data)
	if err != nil {
		return "", fmt.Errorf("pid %d: %w", pid, err)
	}
	return id, nil
}
