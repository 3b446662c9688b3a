// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/nvml"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// runProfileRun runs `coscheml profile run ARGS` through a minimal app holding only
// this command (the `profile` parent belongs to another file), with the same
// error-to-exit-code mapping as the real CLI.
func runProfileRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errw bytes.Buffer
	app := &cli.App{
		Name: "coscheml", Writer: &out, ErrWriter: &errw,
		Flags: []cli.Flag{&cli.StringFlag{Name: "config"}, &cli.StringFlag{Name: "model"}},
		Commands: []*cli.Command{{
			Name:        "profile",
			Subcommands: []*cli.Command{profileRunCommand()},
		}},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"coscheml", "profile", "run"}, args...))
	if err != nil {
		errw.WriteString(err.Error())
	}
	return exitCode(err), out.String(), errw.String()
}

func TestProfileRun(t *testing.T) {
	if _, err := os.Stat(systemConfig); err == nil {
		t.Skip("a system configuration exists and would be read")
	}
	store := t.TempDir()
	t.Setenv("CUDA_VISIBLE_DEVICES", "1,3")
	code, out, errOut := runProfileRun(t, "--tag", "sleepy", "--class", "hpc", "--backend", "mock",
		"--interval", "10ms", "--store", store, "--", "sh", "-c", "sleep 0.2; echo done")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "done") || !strings.Contains(out, "profile sleepy (hpc) written") {
		t.Errorf("stdout %q", out)
	}
	st, _ := profile.Open(store)
	p, err := st.Get("sleepy")
	if err != nil {
		t.Fatal(err)
	}
	// Mock GPU i uses 8192 + 1024*i + 512*(n%4) MiB: only GPU 3 reaches 11264, and
	// without GPU 4..7 the max stays <= 8192+3072+1536.
	if p.MemUsedMiB < 11264 || p.MemUsedMiB > 12800 {
		t.Errorf("mem used %v: not GPUs 1 and 3", p.MemUsedMiB)
	}
	if p.Samples < 1 || p.SoloRuntimeS < 0.2 || p.Class != profile.ClassHPC || !strings.Contains(p.Source, "not real GPU data") {
		t.Errorf("profile %+v", p)
	}

	// A failing command: its exit code, no profile.
	code, _, _ = runProfileRun(t, "--tag", "failing", "--class", "train", "--backend", "mock",
		"--interval", "10ms", "--store", store, "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Errorf("exit %d, want the command's 3", code)
	}
	if _, err := st.Get("failing"); !errors.Is(err, profile.ErrNotFound) {
		t.Errorf("profile of a failed command: %v", err)
	}
	// The same through the real CLI (profile run wired under profile).
	t.Setenv("COSCHEML_CONFIG", "")
	var o, e bytes.Buffer
	code = run([]string{"coscheml", "profile", "run", "--tag", "failing", "--class", "train", "--backend", "mock",
		"--interval", "10ms", "--store", store, "--", "sh", "-c", "exit 4"}, &o, &e)
	if code != 4 || !strings.Contains(e.String(), "status 4") {
		t.Errorf("real CLI: exit %d, stderr %q", code, e.String())
	}
	// An existing tag keeps its class without --class.
	code, _, errOut = runProfileRun(t, "--tag", "sleepy", "--backend", "mock", "--interval", "10ms", "--store", store, "--", "true")
	if code != 0 {
		t.Errorf("rerun: exit %d: %s", code, errOut)
	}
}

func TestProfileRunErrors(t *testing.T) {
	store := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"--tag", "a", "--class", "hpc", "--backend", "mock"}, exitUsage, "no command"},
		{"no tag", []string{"--backend", "mock", "--", "true"}, exitUsage, "--tag is required"},
		{"bad tag", []string{"--tag", "../etc", "--class", "hpc", "--backend", "mock", "--", "true"}, exitUsage, "invalid tag"},
		{"new tag needs class", []string{"--tag", "new", "--backend", "mock", "--", "true"}, exitUsage, "--class is required"},
		{"bad backend", []string{"--tag", "a", "--class", "hpc", "--backend", "cuda", "--", "true"}, exitUsage, "unknown NVML backend"},
		{"command not found", []string{"--tag", "a", "--class", "hpc", "--backend", "mock", "--interval", "10ms", "--", "/nonexistent/cmd"}, 127, "profile run"},
	}
	if _, err := os.Stat("/dev/nvidia0"); err != nil {
		cases = append(cases, struct {
			name string
			args []string
			code int
			msg  string
		}{"no NVML on this machine", []string{"--tag", "a", "--class", "hpc", "--backend", "nvml", "--", "touch", marker}, exitFailure, "NVML not available"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// --store goes first: after "--" it would belong to the command.
			code, _, errOut := runProfileRun(t, append([]string{"--store", store}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d (%q), want %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although NVML was not available")
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	code, _, errOut := runProfileRun(t, "--store", store, "--tag", "a", "--class", "hpc", "--backend", "mock", "--", "true")
	if code != exitFailure || !strings.Contains(errOut, "no GPU") {
		t.Errorf("empty CUDA_VISIBLE_DEVICES: exit %d %q", code, errOut)
	}
}

func TestVisibleGPUsByUUID(t *testing.T) {
	b := nvml.NewMock(nvml.MockOptions{GPUs: 4})
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	d, _ := b.Device(2)
	u, _ := d.UUID()
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,"+u)
	got, err := visibleGPUs(b)
	if err != nil || nvml.FormatGPUList(got) != "0,2" {
		t.Errorf("visibleGPUs = %v, %v", got, err)
	}
}
