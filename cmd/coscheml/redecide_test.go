// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedecideWaitDeferOff: the service starts with slurmctld wherever the plugin
// is installed, so with wait_defer 0 the loop exits 0 with one line (systemd's
// Restart=on-failure leaves it stopped); a one-shot pass is a usage error.
func TestRedecideWaitDeferOff(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("wait_defer: 0s\ndecision_log: "+filepath.Join(e.dir, "d.log")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := e.run("redecide", "--loop", "--squeue", "/nonexistent/squeue")
	if code != 0 || !strings.Contains(errOut, "wait_defer is 0") {
		t.Fatalf("--loop with wait_defer 0: exit %d, stderr %q; want 0 and why", code, errOut)
	}
	if code, _, errOut := e.run("redecide"); code != exitUsage || !strings.Contains(errOut, "wait_defer is 0") {
		t.Fatalf("one pass with wait_defer 0: exit %d, stderr %q; want %d", code, errOut, exitUsage)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "redecide.alive")); !os.IsNotExist(err) {
		t.Fatalf("a loop with nothing to do left a heartbeat: %v", err)
	}
}
