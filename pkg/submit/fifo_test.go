// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/nohang"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/profile"
)

// Every file the library reads inside slurmctld, replaced by a FIFO (a hung
// shared file system's stand-in): the first load and the background refresh
// complete anyway, with the file refused and the rest working (fail open).
func TestReadersNeverBlockOnAFIFO(t *testing.T) {
	tests := []struct {
		name  string
		where func(cfg *config.Config, dir string) string // the path to turn into a FIFO
		// want is in the first job's log (the refused file named); "": the job is
		// placed as if the file were absent.
		want string
	}{
		{"configuration", func(c *config.Config, dir string) string { return filepath.Join(dir, "coscheml.yaml") }, "coscheml.yaml: not a regular file (a FIFO)"},
		{"model", func(c *config.Config, dir string) string {
			c.ModelPath = filepath.Join(dir, "x.model")
			return c.ModelPath
		}, "x.model: not a regular file (a FIFO)"},
		{"profile folder", func(c *config.Config, dir string) string { return c.ProfileDir }, "profiles: not a folder"},
		{"a profile", func(c *config.Config, dir string) string { return filepath.Join(c.ProfileDir, "x.prof") }, "x.prof: not a regular file"},
		{"observation folder", func(c *config.Config, dir string) string { return c.ObservationDir }, "observations: not a folder"},
		{"an observation file", func(c *config.Config, dir string) string { return filepath.Join(c.ObservationDir, "n1.csv") }, ""},
		{"residency folder", func(c *config.Config, dir string) string { return c.ResidencyDir }, "residency: not a folder"},
		{"a residency entry", func(c *config.Config, dir string) string {
			return filepath.Join(c.ResidencyDir, "active", "5@n1.json")
		}, "5@n1.json: not a regular file (a FIFO)"},
		{"done markers folder", func(c *config.Config, dir string) string { return filepath.Join(c.ResidencyDir, "done") }, ""},
		{"decision log", func(c *config.Config, dir string) string { return c.DecisionLog }, "decisions.log: not a regular file (a FIFO)"},
		{"decision key", func(c *config.Config, dir string) string { return c.DecisionKey }, "decision.key: not a regular file (a FIFO)"},
		{"slurm.conf", func(c *config.Config, dir string) string { return filepath.Join(dir, "slurm.conf") }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config.Default()
			cfg.ProfileDir = filepath.Join(dir, "profiles")
			cfg.ResidencyDir = filepath.Join(dir, "residency")
			cfg.ObservationDir = filepath.Join(dir, "observations")
			cfg.DecisionLog = filepath.Join(dir, "decisions.log")
			cfg.DecisionKey = filepath.Join(dir, "decision.key")
			cfg.Cluster = config.ClusterSpec{Nodes: "n[1-2]", GPUsPerNode: 2, GPUMemoryMiB: 80000}
			fifo := tc.where(&cfg, dir)
			for _, d := range []string{cfg.ProfileDir, filepath.Join(cfg.ResidencyDir, "active"), cfg.ObservationDir} {
				if d != fifo {
					os.MkdirAll(d, 0o755)
				}
			}
			if fifo != cfg.ProfileDir {
				st, err := profile.Open(cfg.ProfileDir)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Put(prof("light-a", profile.ClassTrain, 20)); err != nil {
					t.Fatal(err)
				}
			}
			cfgPath := filepath.Join(dir, "coscheml.yaml")
			if fifo != cfgPath {
				b, err := os.ReadFile(filepath.Join("..", "..", "etc", "coscheml.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				extra := "\nprofile_dir: " + cfg.ProfileDir + "\nresidency_dir: " + cfg.ResidencyDir +
					"\nobservation_dir: " + cfg.ObservationDir + "\ndecision_log: " + cfg.DecisionLog +
					"\ndecision_key: " + cfg.DecisionKey + "\nmodel_path: \"" + cfg.ModelPath + "\"" +
					"\ncluster:\n  nodes: n[1-2]\n  gpus_per_node: 2\n  gpu_memory_mib: 80000\n"
				if err := os.WriteFile(cfgPath, append(stripKeys(b), extra...), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.RemoveAll(fifo)
			os.MkdirAll(filepath.Dir(fifo), 0o755)
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			slurmConf := filepath.Join(dir, "slurm.conf")
			var e *Engine
			nohang.Call(t, "the first load with a FIFO as "+tc.name, func() error {
				src, _ := GuardPinning(DefaultSources(cfgPath), slurmConf)
				e = New(src, Options{CloseWait: time.Second})
				return nil
			})
			defer e.Close()
			var r Result
			nohang.Call(t, "a decision", func() error { r = e.Decide(job("coscheml:app=light-a")); return nil })
			nohang.Call(t, "a refresh", func() error { e.Reload(); return nil })
			if tc.want == "" && r.Code != Rewrite || !strings.Contains(logOf(r), tc.want) {
				t.Fatalf("want %q in the log (or a placed job): %+v", tc.want, r)
			}
		})
	}
}

// stripKeys drops the path and cluster keys of the shipped configuration, which
// the test sets itself.
func stripKeys(b []byte) []byte {
	var out []byte
	skip := false
	for _, line := range splitLines(b) {
		s := string(line)
		switch {
		case len(s) > 0 && s[0] != ' ' && s[0] != '#':
			skip = false
			for _, k := range []string{"profile_dir:", "residency_dir:", "observation_dir:", "decision_log:", "decision_key:", "model_path:", "cluster:"} {
				if len(s) >= len(k) && s[:len(k)] == k {
					skip = true
				}
			}
		}
		if !skip {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

func splitLines(b []byte) [][]byte {
	var lines [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			lines = append(lines, b[start:i])
			start = i + 1
		}
	}
	return append(lines, b[start:])
}
