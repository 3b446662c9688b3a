// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// slurmInstall is the Slurm installation under test, chosen by
// COSCHEML_SLURM_PREFIX: Debian's packages (prefix /usr, the default: daemons
// named *-wlm, plugins in /usr/lib/x86_64-linux-gnu/slurm-wlm) or a release
// built from source with `.ci/build-slurm VERSION` (PREFIX/sbin/slurmctld,
// PREFIX/lib/slurm, PREFIX/include).
type slurmInstall struct {
	prefix    string
	debian    bool
	daemons   map[string]string // slurmctld, slurmd, slurmstepd -> binary
	binDir    string            // sbatch, scontrol, squeue, sinfo, scancel, sdiag
	pluginDir string
	include   string // holds slurm/slurm.h
	version   string // "26.05.3", from `slurmctld -V`
	major     int    // 26
	minor     int    // 5
}

// slurmPrefix is the prefix under test.
func slurmPrefix() string {
	if p := os.Getenv("COSCHEML_SLURM_PREFIX"); p != "" {
		return filepath.Clean(p)
	}
	return "/usr"
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// findSlurm describes the installation at slurmPrefix(); on Debian's prefix it
// installs the packages first when they are missing.
func findSlurm(t *testing.T) *slurmInstall {
	t.Helper()
	prefix := slurmPrefix()
	s := &slurmInstall{prefix: prefix, binDir: filepath.Join(prefix, "bin"), daemons: map[string]string{}}
	if prefix == "/usr" {
		s.debian = true
		ensurePackages(t)
		for _, d := range []string{"slurmctld", "slurmd", "slurmstepd"} {
			s.daemons[d] = filepath.Join(debianSbin, d+"-wlm")
		}
		s.pluginDir = debianPluginDir
		s.include = "/usr/include"
	} else {
		for _, d := range []string{"slurmctld", "slurmd", "slurmstepd"} {
			s.daemons[d] = filepath.Join(prefix, "sbin", d)
		}
		s.pluginDir = filepath.Join(prefix, "lib", "slurm")
		s.include = filepath.Join(prefix, "include")
	}
	need := []string{filepath.Join(s.include, "slurm", "slurm.h"), s.pluginDir}
	for _, d := range s.daemons {
		need = append(need, d)
	}
	for _, c := range []string{"sbatch", "scontrol", "squeue", "sinfo", "scancel", "sdiag"} {
		need = append(need, filepath.Join(s.binDir, c))
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("Slurm installation %s is incomplete: %v (a source prefix comes from .ci/build-slurm VERSION)", prefix, err)
		}
	}
	out, err := exec.Command(s.daemons["slurmctld"], "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -V: %v\n%s", s.daemons["slurmctld"], err, out)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s -V printed no version: %q", s.daemons["slurmctld"], out)
	}
	s.version = m[0]
	s.major, _ = strconv.Atoi(m[1])
	s.minor, _ = strconv.Atoi(m[2])
	t.Logf("Slurm under test: %s at %s (plugins %s, headers %s)", s.version, prefix, s.pluginDir, s.include)
	return s
}

// atLeast reports whether the release is major.minor or newer.
func (s *slurmInstall) atLeast(major, minor int) bool {
	return s.major > major || s.major == major && s.minor >= minor
}

// hasPlugin reports whether the installation ships plugin type/name ("task/none").
func (s *slurmInstall) hasPlugin(name string) bool {
	_, err := os.Stat(filepath.Join(s.pluginDir, strings.ReplaceAll(name, "/", "_")+".so"))
	return err == nil
}

// bin is the path of a client command.
func (s *slurmInstall) bin(name string) string {
	return filepath.Join(s.binDir, name)
}

// pluginOutDir is where the suite builds the job_submit plugin for this release:
// lib/slurm-<version>/ in the clone, so builds for several releases never mix
// (slurmctld refuses a plugin built for another release, and stops).
func (s *slurmInstall) pluginOutDir(repo string) string {
	return filepath.Join(repo, "lib", "slurm-"+s.version)
}

func (s *slurmInstall) String() string {
	return fmt.Sprintf("Slurm %s (%s)", s.version, s.prefix)
}
