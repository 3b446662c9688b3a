// SPDX-License-Identifier: Apache-2.0

// Package promcheck lints a Prometheus text-format file with Prometheus' own
// promtool, for the tests of every package that writes metrics.
package promcheck

import (
	"os"
	"os/exec"
	"testing"
)

// File runs `promtool check metrics` on the file at path, read back from disk. It
// skips the test when promtool is not installed (Debian: apt-get install prometheus).
func File(t testing.TB, path string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus): metrics not linted")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics %s: %v\n%s", path, err, out)
	}
}
