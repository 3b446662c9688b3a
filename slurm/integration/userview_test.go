// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// userCoscheml runs the project's CLI as the ordinary user, with the cluster's
// configuration.
func (c *cluster) userCoscheml(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.a.binDir, "coscheml"), args...)
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.path("coscheml.yaml"))
	cmd.Dir = "/tmp"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: userUID, Gid: userGID}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// testUserExplain: an ordinary user's `coscheml explain JOBID` shows their own
// job's decision, read from the per-user view the re-decide loop (root) writes,
// while the decision log itself stays unreadable to them; another user's job
// shows nothing of its decision.
func testUserExplain(t *testing.T, c *cluster) {
	c.openForUser()
	own, stderr, err := c.userSbatch("--gres=gpu:1", "--comment=coscheml:app="+lightA)
	if err != nil {
		t.Fatalf("user sbatch: %v: %s", err, stderr)
	}
	other := c.mustSbatch("--hold", "-o", "/dev/null", "--gres=gpu:1", "--comment=coscheml:app="+lightB, "--wrap=true")
	defer c.run("scancel", strconv.Itoa(own), strconv.Itoa(other))

	// The loop (as coscheml-redecide.service runs it) publishes the views
	// within one of its passes.
	stop := c.startRedecide(time.Second)
	defer stop()
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = c.userCoscheml("explain", strconv.Itoa(own))
		if err == nil && strings.Contains(out, lightA) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user's explain of their own job %d: %v\n%s", own, err, out)
		}
		time.Sleep(time.Second)
	}
	t.Logf("user explain %d:\n%s", own, out)
	out, err = c.userCoscheml("explain", strconv.Itoa(other))
	if strings.Contains(out, lightB) || strings.Contains(out, "share on") || strings.Contains(out, "exclusive on") {
		t.Errorf("the user's explain of another user's job %d shows its decision (err %v):\n%s", other, err, out)
	}
	t.Logf("user explain of another's job %d (err %v):\n%s", other, err, out)
}
