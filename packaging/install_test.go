// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// make install-data (part of make install) creates the folders the plugin and
// the node hooks need under DESTDIR, with the documented modes; as root, the
// folders slurmctld writes belong to SLURM_USER. Before, install created none of
// them and the plugin started degraded (no residency folder).
func TestInstallData(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	dest := t.TempDir()
	slurmUser := "nobody" // exists on every Linux system, unlike slurm
	run := func() {
		cmd := exec.Command("make", "-s", "-C", "..", "install-data", "DESTDIR="+dest, "SLURM_USER="+slurmUser)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install-data: %v\n%s", err, out)
		}
	}
	run()
	// A second run (an upgrade) keeps what is there.
	keep := filepath.Join(dest, "var/lib/coscheml/profiles/app.prof")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run()
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("second install lost a profile: %v", err)
	}
	// The decision key: 32 bytes, 0600, kept by the second run.
	key := filepath.Join(dest, "var/lib/coscheml/decision.key")
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("decision key: %v (%v)", fi, err)
	}
	slurmUID := -1
	if u, err := user.Lookup(slurmUser); err == nil {
		slurmUID, _ = strconv.Atoi(u.Uid)
	}
	asRoot := os.Geteuid() == 0
	for _, tc := range []struct {
		dir       string
		slurmOwns bool // slurmctld creates/rotates or removes files there
	}{
		{"var/lib/coscheml", true},
		{"var/lib/coscheml/profiles", false},
		{"var/lib/coscheml/residency", false},
		{"var/lib/coscheml/residency/active", false},
		{"var/lib/coscheml/residency/done", true},
		{"var/lib/coscheml/observations", false},
		{"var/lib/coscheml/run/profiling", false},
	} {
		fi, err := os.Lstat(filepath.Join(dest, tc.dir))
		if err != nil {
			t.Errorf("%s: %v", tc.dir, err)
			continue
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want a folder 0755", tc.dir, fi.Mode())
		}
		uid := int(fi.Sys().(*syscall.Stat_t).Uid)
		switch {
		case !asRoot:
			if uid != os.Geteuid() {
				t.Errorf("%s: owner %d changed without root", tc.dir, uid)
			}
		case tc.slurmOwns && uid != slurmUID:
			t.Errorf("%s: owner %d, want %s (%d)", tc.dir, uid, slurmUser, slurmUID)
		case !tc.slurmOwns && uid != 0:
			t.Errorf("%s: owner %d, want root", tc.dir, uid)
		}
	}
}
