// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/internal/docblocks"
)

// loadedInterfaceRE reads the interface number from the plugin's load line, in
// the guide and in slurmctld's log.
var loadedInterfaceRE = regexp.MustCompile(`job_submit/coscheml: loaded \S+ \(interface (\d+),`)

// testDocs runs the shell blocks of the README's quick start and of the install
// guide (docblocks.Guides; markers: CONTRIBUTING.md) against this cluster, with
// the guide's paths replaced by the cluster's, and checks that the load line the
// guide shows names the interface the plugin logged.
func testDocs(t *testing.T, c *cluster) {
	repo := c.a.repo
	goEnv := goEnvironment(t)
	for _, g := range docblocks.Guides {
		text, err := os.ReadFile(filepath.Join(repo, g.File))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docblocks.Extract(string(text), g.Section)
		if err != nil {
			t.Fatalf("%s: %v", g.File, err)
		}
		home := t.TempDir()
		// Every block of a guide runs in one environment: HOME is a folder of
		// the test's (the quick start writes below it), Go keeps its caches.
		env := append(append([]string{}, c.env...), goEnv...)
		env = append(env, "HOME="+home)
		var subst *strings.Replacer
		dir := repo
		switch g.File {
		case "README.md":
			// `make build` would rebuild lib/libcoscheml.so, which this
			// cluster's slurmctld has loaded: the programs are what the quick
			// start uses. An installed coscheml has its programs in PREFIX/bin.
			build := "make programs"
			if c.a.installed {
				build = "true"
			}
			subst = strings.NewReplacer("make build ", build+" ", "bin/coscheml", filepath.Join(c.a.binDir, "coscheml"))
		case "docs/install.md":
			dir = c.path("jobs")
			env = append(env,
				"PATH="+strings.Join([]string{c.a.binDir, c.path("sbin"), c.a.slurm.binDir, os.Getenv("PATH")}, ":"),
				"COSCHEML_CONFIG="+c.cfgPath,
				"COSCHEML_LIB="+filepath.Join(c.a.libDir, "libcoscheml.so"))
			subst = strings.NewReplacer(
				"/etc/coscheml/coscheml.yaml", c.cfgPath,
				"/var/log/slurm/slurmctld.log", c.ctldLog,
				"/usr/share/coscheml/lucid/", filepath.Join(repo, "models", "data", "lucid-train")+"/",
				"/usr/share/coscheml/data/", filepath.Join(repo, "models", "data")+"/")
			checkLoadLine(t, c, g.File, string(text))
		default:
			t.Fatalf("%s: no substitutions for this guide", g.File)
		}
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", g.File, b.Line)
			switch {
			case !b.Shell():
				continue
			case b.Skip != "":
				t.Logf("%s: not run: %s", where, b.Skip)
				continue
			}
			script := subst.Replace(b.Text)
			if why := docblocks.HostChange(script); why != "" {
				t.Errorf("%s: %s: give the path a substitution in testDocs or mark the block skipped with the reason", where, why)
				continue
			}
			out, err := runBlock(script, dir, env, 10*time.Minute)
			switch {
			case err != nil:
				t.Errorf("%s: %v\n--- block as run ---\n%s--- output ---\n%s", where, err, script, tail([]byte(out), 4000))
			case b.Expect != "" && !strings.Contains(out, b.Expect):
				t.Errorf("%s: output lacks %q\n--- block as run ---\n%s--- output ---\n%s", where, b.Expect, script, tail([]byte(out), 4000))
			default:
				t.Logf("%s: ran:\n%s", where, tail([]byte(out), 1500))
			}
		}
	}
	// The guide's jobs are cancelled by the guide itself; later subtests start
	// on an idle cluster.
	c.waitNoJobs(60 * time.Second)
}

// checkLoadLine compares the interface of the load line shown in the guide with
// the one this cluster's plugin logged.
func checkLoadLine(t *testing.T, c *cluster, file, text string) {
	t.Helper()
	doc := loadedInterfaceRE.FindStringSubmatch(text)
	logged := loadedInterfaceRE.FindStringSubmatch(c.lastLogLine("job_submit/coscheml: loaded "))
	switch {
	case doc == nil:
		t.Errorf("%s shows no `job_submit/coscheml: loaded ... (interface N, ...)` line", file)
	case logged == nil:
		t.Errorf("slurmctld logged no load line with an interface: %q", c.lastLogLine("job_submit/coscheml: loaded "))
	case doc[1] != logged[1]:
		t.Errorf("%s shows the plugin loading with interface %s, slurmctld logged interface %s", file, doc[1], logged[1])
	}
}

// runBlock runs one block as a bash script that stops at its first failing
// command (a failing command inside a pipe included).
func runBlock(script, dir string, env []string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("still running after %v", d)
	}
	return out.String(), err
}

// goEnvironment names Go's caches and settings explicitly, so that a block run
// with another HOME still builds from the warm cache.
func goEnvironment(t *testing.T) []string {
	t.Helper()
	keys := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV", "GOTOOLCHAIN", "GOPROXY", "GOFLAGS"}
	out, err := exec.Command("go", append([]string{"env"}, keys...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(vals) != len(keys) {
		t.Fatalf("go env printed %d lines for %d keys: %q", len(vals), len(keys), out)
	}
	var env []string
	for i, k := range keys {
		if vals[i] != "" {
			env = append(env, k+"="+vals[i])
		}
	}
	return env
}
