// SPDX-License-Identifier: Apache-2.0

//go:build unix

package jobprofile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startDetached starts exe in a new session (no controlling terminal, its own
// process group, so that slurmd's kill of the prolog's group does not reach it),
// with stdin from /dev/null and stdout/stderr appended to logPath.
func startDetached(exe string, args []string, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Reap it if this process lives on (tests, a long-running helper); a prolog
	// exits first and the sampler is adopted by init.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// stopSampler ends the sampler of a job folder, if one runs: SIGTERM, a bounded
// wait, then SIGKILL and another bounded wait. A pid that no longer belongs to
// this folder's sampler (it exited and the pid was reused) is left alone.
func stopSampler(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("bad pid file %s", filepath.Join(dir, pidFile))
	}
	if !isSampler(pid, dir) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM to sampler %d: %w", pid, err)
	}
	if waitGone(pid, dir, StopWait) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL to sampler %d: %w", pid, err)
	}
	if waitGone(pid, dir, StopWait) {
		return fmt.Errorf("sampler %d ignored SIGTERM for %s and was killed", pid, StopWait)
	}
	return fmt.Errorf("sampler %d still running after SIGKILL", pid)
}

// waitGone polls until the sampler is gone or d has passed.
func waitGone(pid int, dir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !isSampler(pid, dir) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isSampler reports whether pid is a live (not zombie) sampler of dir, by its
// command line in /proc.
func isSampler(pid int, dir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may contain spaces.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	hasSampler := false
	for i, a := range args {
		if a == "sampler" {
			hasSampler = true
		}
		if hasSampler && a == "--dir" && i+1 < len(args) && args[i+1] == dir {
			return true
		}
	}
	return false
}
