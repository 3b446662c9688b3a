// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/decisionlog"
)

// runCLIEnv makes the test binary run the CLI itself (with its arguments) when
// set: the real-uid tests run it as an ordinary user.
const runCLIEnv = "COSCHEML_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(runCLIEnv) == "1" {
		os.Exit(run(append([]string{"coscheml"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// asRealUser runs the CLI as uid (gid nobody) from a copy of the test binary
// the user may execute, and returns what it printed.
func asRealUser(t *testing.T, uid uint32, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "coscheml")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), runCLIEnv+"=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// An ordinary user (a real unprivileged uid, not a faked one) sees the
// runtime guard's events about their own job in `coscheml explain`: the
// guard's logs are root's, so the events reach them through their per-user
// view, without naming the other job. Another user sees none of them.
func TestExplainGuardEventsAsRealUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs explain as another uid: needs root")
	}
	cfg := explainEnv(t)
	dir := filepath.Dir(cfg)
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // let the test users reach the configuration and the views
		if d == os.TempDir() {
			break
		}
	}
	os.Chmod(filepath.Join(dir, "squeue"), 0o755)
	writeGuardEvents(t, cfg)
	guardDir := filepath.Join(dir, "guard")
	at := time.Date(2026, 12, 1, 10, 2, 0, 0, time.UTC)
	w := decisionlog.NewWriter(filepath.Join(guardDir, "n1.log"), 0, 0)
	w.Log(decisionlog.Record{ID: "g1-4", Time: at, Op: decisionlog.OpGuard, JobID: "4242", UserID: 61001, Tag: "light-b", Class: "train",
		Outcome: "taken", Action: "suspend", Node: "n1", GPU: 0,
		Reason: "coscheml guard: job 4545 on gpu 0: speed 0.40 below floor 0.75 for 60s; job 4242 (train, placed 2026-12-01T09:00:00Z) shares the GPU with it: suspend it until job 4545 ends"})
	w.Close()
	for _, p := range []string{filepath.Join(dir, "decisions.log"), filepath.Join(guardDir, "n1.log")} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o004 != 0 {
			t.Fatalf("%s: %v; want a log others cannot read", p, err)
		}
	}
	pub := &decisionlog.ViewPublisher{LogPath: filepath.Join(dir, "decisions.log"), GuardDir: guardDir, MaxPerUser: decisionlog.MaxUserView}
	if _, err := pub.Publish(); err != nil {
		t.Fatal(err)
	}
	out, err := asRealUser(t, 61001, "--config", cfg, "explain", "4242")
	t.Logf("uid 61001: explain 4242 (err %v):\n%s", err, out)
	if !strings.Contains(out, "runtime guard:") || !strings.Contains(out, "suspend (taken)") || !strings.Contains(out, "until another job ends") {
		t.Errorf("the owner's explain lacks the guard's event about their job:\n%s", out)
	}
	if strings.Contains(out, "4545") {
		t.Errorf("the owner's explain names the other job:\n%s", out)
	}
	out, _ = asRealUser(t, 61002, "--config", cfg, "explain", "4242")
	if strings.Contains(out, "runtime guard:") || strings.Contains(out, "suspend") {
		t.Errorf("another user's explain shows the guard's events:\n%s", out)
	}
}
