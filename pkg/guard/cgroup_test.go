// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"v2 task", "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n", "123"},
		{"v2 batch step", "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n", "77"},
		{"v2 multiple slurmd", "0::/system.slice/node07_slurmstepd.scope/job_9/step_extern/user/task_special\n", "9"},
		{"v2 job level", "0::/system.slice/slurmstepd.scope/job_42\n", "42"},
		{"v1 all controllers", "12:memory:/slurm/uid_1000/job_555/step_0/task_0\n11:devices:/slurm/uid_1000/job_555/step_0\n3:cpu,cpuacct:/\n1:name=systemd:/user.slice\n", "555"},
		{"v1 node-named root", "7:devices:/slurm_gpu01/uid_2001/job_31/step_1/task_3\n", "31"},
		{"no trailing newline", "0::/system.slice/slurmstepd.scope/job_5/step_0", "5"},
		// A user may nest cgroups below a delegated step: only Slurm's own job counts.
		{"nested user job", "0::/system.slice/slurmstepd.scope/job_10/step_0/user/job_20/step_0\n", "10"},
		{"outside slurm", "0::/user.slice/user-1000.slice/session-4.scope\n", ""},
		// A user's own systemd slice may be named anything: it names no job.
		{"user slice mimics slurm", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_20/step_0\n", ""},
		{"slurm scope not under system.slice", "0::/user.slice/slurmstepd.scope/job_20/step_0\n", ""},
		{"v1 uid not numeric", "4:memory:/slurm/uid_x/job_3/step_0\n", ""},
		{"v1 job deeper", "4:memory:/slurm/uid_1/other/job_3/step_0\n", ""},
		{"lines disagree", "0::/system.slice/slurmstepd.scope/job_1/step_0\n4:memory:/slurm/uid_1/job_2/step_0\n", ""},
		{"job id not digits", "0::/system.slice/slurmstepd.scope/job_1a/step_0\n", ""},
		{"job id too long", "0::/system.slice/slurmstepd.scope/job_12345678901/step_0\n", ""},
		{"empty job id", "0::/system.slice/slurmstepd.scope/job_/step_0\n", ""},
		{"garbage", "not a cgroup file", ""},
		{"empty", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseCgroup([]byte(c.data))
			if c.want == "" {
				if !errors.Is(err, ErrUnmapped) {
					t.Fatalf("got %q, %v; want ErrUnmapped", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestParseCgroupTooLarge(t *testing.T) {
	data := []byte("0::/system.slice/slurmstepd.scope/job_1/step_0\n" + strings.Repeat("x", maxCgroupFile))
	if _, err := ParseCgroup(data); !errors.Is(err, ErrUnmapped) {
		t.Errorf("oversized file: %v, want ErrUnmapped", err)
	}
}

func TestCgroupMapper(t *testing.T) {
	root := procRoot(t, map[uint32]string{100: "11", 200: ""})
	// A file too large to be a real cgroup file is refused, not read whole.
	big := filepath.Join(root, "300")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(big, "cgroup"), []byte(strings.Repeat("0::/x\n", maxCgroupFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	m := CgroupMapper{Root: root}
	cases := []struct {
		pid  uint32
		want string
	}{{100, "11"}, {200, ""}, {300, ""}, {999, ""}}
	for _, c := range cases {
		got, err := m.JobOf(c.pid)
		if c.want == "" {
			if !errors.Is(err, ErrUnmapped) {
				t.Errorf("pid %d: %q, %v; want ErrUnmapped", c.pid, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("pid %d: %q, %v; want %q", c.pid, got, err, c.want)
		}
	}
}

func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{
		"0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n",
		"12:memory:/slurm/uid_1000/job_555/step_0/task_0\n11:devices:/slurm/uid_1000/job_555/step_0\n",
		"0::/system.slice/slurmstepd.scope/job_1/step_0\n4:memory:/slurm/uid_1/job_2/step_0\n",
		"0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_20/step_0\n",
		"::::\n\n:",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ParseCgroup(data)
		if err != nil {
			if id != "" || !errors.Is(err, ErrUnmapped) {
				t.Fatalf("error %v with id %q", err, id)
			}
			return
		}
		if id == "" || len(id) > maxJobIDDigits || strings.Trim(id, "0123456789") != "" {
			t.Fatalf("job id %q is not 1..%d digits", id, maxJobIDDigits)
		}
		// The id is one some line names in Slurm's place for it.
		if !strings.Contains(string(data), "/job_"+id) {
			t.Fatalf("job id %q not in the input", id)
		}
		// Appending a line that names nothing changes nothing.
		again, err := ParseCgroup(append(append([]byte(nil), data...), "\n1:name=systemd:/user.slice\n"...))
		if len(data)+30 <= maxCgroupFile && (err != nil || again != id) {
			t.Fatalf("after a neutral line: %q, %v; want %q", again, err, id)
		}
	})
}
