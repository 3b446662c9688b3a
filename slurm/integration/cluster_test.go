// SPDX-License-Identifier: Apache-2.0

//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"gopkg.in/yaml.v3"
)

// lucidSolo is the solo-profile CSV the cluster's profile store is imported from.
const lucidSolo = "models/data/lucid-train/solo_profiles.csv"

// Where Debian's slurm-wlm puts its daemons and plugins.
const (
	debianSbin      = "/usr/sbin"
	debianPluginDir = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
)

// The emulated cluster: nodes n1..n4, each with 4 fake H200s split into 4 shards.
const (
	numNodes     = 4
	gpusPerNode  = 4
	shardsPerGPU = 4
)

// needRoot skips loudly when the suite cannot run: it installs packages, creates
// device nodes and runs Slurm's daemons as SlurmUser=root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING the Slurm integration suite: it must run as root " +
			"(installs slurm-wlm/munge/libslurm-dev when missing, mknod, runs slurmctld/slurmd)")
	}
}

// ensurePackages installs Debian's Slurm and munge when any needed file is missing.
// Never slurm-wlm-emulator: it swaps the daemons for a front-end build.
func ensurePackages(t *testing.T) {
	t.Helper()
	if slurmPrefix() != "/usr" {
		return // a source build under test: nothing to install
	}
	need := []string{
		debianSbin + "/slurmctld-wlm", debianSbin + "/slurmd-wlm", debianSbin + "/slurmstepd-wlm",
		"/usr/bin/sbatch", "/usr/bin/scontrol", "/usr/bin/squeue", "/usr/bin/sdiag",
		"/usr/sbin/munged", "/usr/bin/munge", "/usr/include/slurm/slurm.h",
	}
	var missing []string
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return
	}
	t.Logf("missing %v: installing slurm-wlm munge libslurm-dev", missing)
	install := func() ([]byte, error) {
		cmd := exec.Command("apt-get", "install", "-y", "slurm-wlm", "munge", "libslurm-dev")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if out, err := install(); err != nil {
		t.Logf("apt-get install failed (%v), running apt-get update first:\n%s", err, tail(out, 2000))
		if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
			t.Fatalf("apt-get update: %v\n%s", err, tail(out, 2000))
		}
		if out, err := install(); err != nil {
			t.Fatalf("apt-get install -y slurm-wlm munge libslurm-dev: %v\n%s", err, tail(out, 2000))
		}
	}
}

// repoRoot finds the module root (the folder holding go.mod) above the test's folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test folder")
		}
		dir = parent
	}
}

// artifacts are the built (or installed) programs and libraries the cluster uses.
type artifacts struct {
	repo      string // test data (Lucid CSV, model) always comes from the clone
	binDir    string // coscheml, coscheml-node
	libDir    string // libcoscheml.so
	pluginDir string // job_submit_coscheml.so built for the Slurm under test
	hookDir   string // prolog.sh, epilog.sh
	installed bool   // from COSCHEML_INSTALLED: the plugin finds the library by itself
	slurm     *slurmInstall
}

// Where the .deb puts its files below COSCHEML_INSTALLED (packaging/nfpm-*.yaml).
const (
	installedLibDir  = "lib/coscheml"
	installedHookDir = "libexec/coscheml"
)

// build compiles what the cluster needs into the repository's bin/ and lib/ (the
// same places `make build` uses; the plugin into lib/slurm-<version>/, against
// the headers of the Slurm under test), or checks they exist when
// COSCHEML_INTEGRATION_NOBUILD=1.
//
// COSCHEML_INSTALLED=PREFIX (the packages' /usr) builds nothing of coscheml and
// tests the installed files instead: PREFIX/bin, PREFIX/lib/coscheml, the plugin in
// the Slurm under test's plugin folder, PREFIX/libexec/coscheml hooks.
func build(t *testing.T) artifacts {
	t.Helper()
	repo := repoRoot(t)
	s := findSlurm(t)
	if prefix := os.Getenv("COSCHEML_INSTALLED"); prefix != "" {
		return installedArtifacts(t, repo, prefix, s)
	}
	a := artifacts{repo: repo, binDir: filepath.Join(repo, "bin"), libDir: filepath.Join(repo, "lib"),
		pluginDir: s.pluginOutDir(repo), hookDir: filepath.Join(repo, "slurm"), slurm: s}
	if os.Getenv("COSCHEML_INTEGRATION_NOBUILD") == "" {
		steps := [][]string{
			{"go", "build", "-o", a.binDir + "/", "./cmd/coscheml", "./cmd/coscheml-node"},
			{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(a.libDir, "libcoscheml.so"), "./cmd/libcoscheml"},
			{"make", "-C", "plugin-c", "SLURM_INCLUDE=" + s.include,
				"OUT=" + filepath.Join(a.pluginDir, "job_submit_coscheml.so"), "EXTRA_CFLAGS=-Werror"},
		}
		for _, s := range steps {
			start := time.Now()
			cmd := exec.Command("nice", s...)
			cmd.Dir = repo
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build step %q: %v\n%s", strings.Join(s, " "), err, tail(out, 4000))
			}
			t.Logf("built: %s (%.1fs)", strings.Join(s, " "), time.Since(start).Seconds())
		}
	}
	for _, f := range []string{
		filepath.Join(a.binDir, "coscheml"), filepath.Join(a.binDir, "coscheml-node"),
		filepath.Join(a.libDir, "libcoscheml.so"), filepath.Join(a.pluginDir, "job_submit_coscheml.so"),
	} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("needed artifact missing: %v (run `make build`)", err)
		}
	}
	return a
}

// installedArtifacts describes an installed coscheml (the .deb's layout below
// prefix) and fails naming every file that is missing. The plugin must sit in the
// Slurm under test's own plugin folder, as the package puts it.
func installedArtifacts(t *testing.T, repo, prefix string, s *slurmInstall) artifacts {
	t.Helper()
	a := artifacts{repo: repo, binDir: filepath.Join(prefix, "bin"), libDir: filepath.Join(prefix, installedLibDir),
		pluginDir: s.pluginDir, hookDir: filepath.Join(prefix, installedHookDir), installed: true, slurm: s}
	files := []string{
		filepath.Join(a.binDir, "coscheml"), filepath.Join(a.binDir, "coscheml-node"),
		filepath.Join(a.libDir, "libcoscheml.so"), filepath.Join(a.pluginDir, "job_submit_coscheml.so"),
		filepath.Join(a.hookDir, "prolog.sh"), filepath.Join(a.hookDir, "epilog.sh"),
	}
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("COSCHEML_INSTALLED=%s: installed files missing: %s (install the packages, docs/packaging.md)",
			prefix, strings.Join(missing, ", "))
	}
	t.Logf("testing the installed coscheml (COSCHEML_INSTALLED=%s): %s", prefix, strings.Join(files, ", "))
	return a
}

// ensureMunge starts munged when credentials cannot be made, and stops it (by PID)
// when the test ends if this test started it.
func ensureMunge(t *testing.T) {
	t.Helper()
	if mungeWorks() {
		return
	}
	out, err := exec.Command("service", "munge", "start").CombinedOutput()
	if err != nil {
		t.Fatalf("service munge start: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	retry := time.Now().Add(2 * time.Second)
	for !mungeWorks() {
		if time.Now().After(deadline) {
			t.Fatal("munge -n | unmunge still fails after starting munged")
		}
		if time.Now().After(retry) {
			// A munged a previous test stopped may still have been exiting:
			// the init script then saw it running and started nothing.
			retry = time.Now().Add(2 * time.Second)
			exec.Command("service", "munge", "start").Run()
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := readPidFile("/run/munge/munged.pid")
	t.Logf("started munged (pid %d)", pid)
	t.Cleanup(func() {
		if pid > 0 {
			stopPID(t, pid, "munged", 5*time.Second)
		}
	})
}

func mungeWorks() bool {
	enc, err := exec.Command("munge", "-n").Output()
	if err != nil {
		return false
	}
	dec := exec.Command("unmunge")
	dec.Stdin = bytes.NewReader(enc)
	out, err := dec.Output()
	return err == nil && bytes.Contains(out, []byte("Success"))
}

func readPidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// freePorts returns n distinct TCP ports that were free on all addresses.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// portFree reports whether port can be bound again.
func portFree(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// cluster is one private Slurm cluster in a temporary folder.
type cluster struct {
	t    *testing.T
	a    artifacts
	dir  string
	host string

	ctldPort  int
	nodePorts []int
	nodes     []string

	cfgPath string        // coscheml.yaml
	cfg     config.Config // what cfgPath holds now
	plugin  bool          // JobSubmitPlugins=coscheml in slurm.conf
	topo    topology      // how the GPUs are described to Slurm

	pins tally // placements checked against Slurm's allocation

	ctld    *proc
	ctldLog string // slurmctld's own log file
	// ctldStops: when the suite stopped slurmctld (SIGTERM), for telling a
	// batch launch Slurm lost across a stop from a lost job (accounting.go).
	ctldStops []time.Time
	slurmd    map[string]*proc
	env       []string // environment of every Slurm client command
}

// topology is how a test cluster describes its GPUs to Slurm.
type topology struct {
	// typed gives every GPU of a node its own Type g0..g3 and one shard line
	// per GPU with that Type (shard:gI:4 in slurm.conf), so that a request can
	// name the GPU, one or several of them: exact pinning.
	typed bool
	// untypedShards, with typed, is the earlier layout: the per-GPU shard
	// lines without Type= (slurm.conf's shard:16), which pins one GPU exactly
	// but misallocates a request naming several.
	untypedShards bool
	// cores binds GPUs 0-1 to socket 0 (cores 0-3) and GPUs 2-3 to socket 1
	// (cores 4-7) in gres.conf, as real nodes do; 24.05.4+ orders the shard
	// pick by that affinity.
	cores bool
	// selectParams is SelectTypeParameters ("" = CR_Core).
	selectParams string
	// extraConf is appended to slurm.conf (lines), e.g. the e2e replay's
	// OverTimeLimit.
	extraConf string
	// redecide is the interval of the re-decide loop the cluster starts when
	// its configuration defers waits (0: no loop; the plugin then defers
	// nothing, as on a site without coscheml-redecide.service).
	redecide time.Duration
	// minJobAge keeps a finished job's record this long (0: 600 s), so that a
	// replay longer than that still sees its first jobs' end states.
	minJobAge time.Duration
	// hetero: two node groups, n1 of heteroSmallGPUs GPUs of Type a100 with
	// feature a100, the other nodes of gpusPerNode GPUs of Type h200 with
	// feature h200 (all with feature ib, which no group names); coscheml's
	// configuration lists them as cluster.groups.
	hetero bool
}

// heteroSmallGPUs is the GPU count of the hetero topology's node n1.
const heteroSmallGPUs = 2

// gpusOf is the GPU count of node i (0-based) and its Type.
func (tp topology) gpusOf(i int) (int, string) {
	if tp.hetero && i == 0 {
		return heteroSmallGPUs, "a100"
	}
	return gpusPerNode, "h200"
}

func (tp topology) String() string {
	var parts []string
	switch {
	case tp.typed && tp.untypedShards:
		parts = append(parts, "per-GPU types, untyped shard lines")
	case tp.typed:
		parts = append(parts, "per-GPU types")
	default:
		parts = append(parts, "one GPU type")
	}
	if tp.cores {
		parts = append(parts, "Cores= affinity")
	}
	if tp.selectParams != "" {
		parts = append(parts, "SelectTypeParameters="+tp.selectParams)
	}
	return strings.Join(parts, ", ")
}

// startMu serialises cluster start-ups (port choice to daemons bound) within
// this process; startLockPath does the same across processes, so that suites
// against different Slurm releases may run side by side (.ci/integration-repeat
// with COSCHEML_REPEAT_LOCK).
var startMu sync.Mutex

const startLockPath = "/tmp/coscheml-cluster-start.lock"

// lockStart takes both start-up locks and returns what releases them.
func lockStart(t *testing.T) (unlock func()) {
	t.Helper()
	startMu.Lock()
	f, err := os.OpenFile(startLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		startMu.Unlock()
		t.Fatalf("opening the cluster start-up lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		startMu.Unlock()
		t.Fatalf("taking the cluster start-up lock %s: %v", startLockPath, err)
	}
	return func() {
		f.Close() // closing the only descriptor releases the flock
		startMu.Unlock()
	}
}

// newCluster writes the cluster folder and starts slurmctld and the slurmd; all of
// it is stopped by t.Cleanup.
func newCluster(t *testing.T, a artifacts, plugin bool, edit func(*config.Config)) *cluster {
	t.Helper()
	return newClusterTopo(t, a, plugin, topology{}, edit)
}

// newClusterTopo is newCluster with the GPUs described by topo.
func newClusterTopo(t *testing.T, a artifacts, plugin bool, topo topology, edit func(*config.Config)) *cluster {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "coscheml-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, a: a, dir: dir, host: host, plugin: plugin, topo: topo, slurmd: map[string]*proc{}}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("COSCHEML_INTEGRATION_KEEP") != "" {
			// A decision slower than decide_timeout (a starved machine) passes
			// the job through unchanged, by design: name it, so that a test
			// failing on an unchanged job is not read as a placement bug.
			if l := c.logLines("no decision within"); len(l) > 0 {
				t.Logf("slurmctld passed jobs through on decide_timeout (machine overloaded?): %s", strings.Join(l, "\n"))
			}
			t.Logf("cluster folder kept for inspection: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	// Clusters started at once (TestPinning with COSCHEML_PINNING_PARALLEL) must
	// not pick the same free ports: one start-up at a time, until the daemons
	// hold theirs.
	unlockStart := lockStart(t)
	started := false
	defer func() {
		if !started {
			unlockStart()
		}
	}()
	ports := freePorts(t, 1+numNodes)
	c.ctldPort, c.nodePorts = ports[0], ports[1:]
	for i := 1; i <= numNodes; i++ {
		c.nodes = append(c.nodes, fmt.Sprintf("n%d", i))
	}
	c.ctldLog = filepath.Join(dir, "log", "slurmctld.log")
	// The release's own clients first: coscheml explain runs scontrol, and a
	// client of another release cannot talk to these daemons.
	c.env = append(os.Environ(), "SLURM_CONF="+c.path("slurm.conf"),
		"PATH="+a.slurm.binDir+":"+os.Getenv("PATH"))
	c.writeFiles(edit)
	t.Cleanup(c.stopAll)
	c.startCtld()
	for _, n := range c.nodes {
		c.startSlurmd(n)
	}
	c.waitIdle(60 * time.Second)
	started = true
	unlockStart()
	// The daemon-name trap shows as Gres=(null): the GPUs must be there.
	// (With Cores=, newer releases add the sockets: gpu:h200:4(S:0-1).)
	want := regexp.MustCompile(fmt.Sprintf(`Gres=gpu:h200:%d(\(S:[0-9-]+\))?,shard:`, gpusPerNode))
	if topo.hetero {
		want = regexp.MustCompile(fmt.Sprintf(`Gres=gpu:a100:%d(\(S:[0-9-]+\))?,shard:`, heteroSmallGPUs))
	}
	if topo.typed {
		want = regexp.MustCompile(`Gres=gpu:g0:1(\(S:[0-9-]+\))?,gpu:g1:1`)
	}
	if out, err := c.run("scontrol", "show", "node", c.nodes[0]); err != nil || !want.MatchString(out) {
		t.Fatalf("node %s lacks %s (started under the -wlm names?): %v\n%s", c.nodes[0], want, err, out)
	}
	if plugin && c.cfg.WaitDefer > 0 && topo.redecide > 0 {
		// Deferred waits need the loop, as on a site; exactly one, as the
		// service runs (two would re-decide every job twice, racing).
		t.Cleanup(c.startRedecide(topo.redecide))
	}
	return c
}

func (c *cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.dir}, parts...)...)
}

func (c *cluster) mkdirs(dirs ...string) {
	for _, d := range dirs {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cluster) writeFile(name, content string, mode os.FileMode) {
	if err := os.WriteFile(c.path(name), []byte(content), mode); err != nil {
		c.t.Fatal(err)
	}
}

// writeFiles lays out the cluster folder: daemon links, fake GPUs, slurm.conf,
// gres.conf, node hooks, coscheml.yaml, profile store, model.
func (c *cluster) writeFiles(edit func(*config.Config)) {
	t := c.t
	c.mkdirs("sbin", "dev", "spool", "run", "state", "log", "jobs", "hooks", "var/profiles",
		"var/residency", "var/observations", "models")

	// The daemon-name trap: Slurm picks its role from argv[0]'s basename, and the
	// -wlm names silently drop a node's Gres=.
	for _, d := range []string{"slurmctld", "slurmd", "slurmstepd"} {
		if err := os.Symlink(c.a.slurm.daemons[d], c.path("sbin", d)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < gpusPerNode; i++ {
		dev := c.path("dev", fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(195<<8|i)); err != nil {
			t.Fatalf("mknod %s: %v", dev, err)
		}
	}

	// Node hooks: slurmd runs Prolog/Epilog with an environment of its own making,
	// so a wrapper names this cluster's configuration and binaries before handing
	// over to the project's slurm/prolog.sh and epilog.sh.
	for _, hook := range []string{"prolog", "epilog"} {
		c.writeFile(filepath.Join("hooks", hook+".sh"), fmt.Sprintf(`#!/bin/sh
export COSCHEML_CONFIG=%q
export COSCHEML_BIN=%q
export PATH=%q:"$PATH"
exec %q "$@"
`, c.path("coscheml.yaml"), c.a.binDir, c.a.binDir+":"+c.a.slurm.binDir, filepath.Join(c.a.hookDir, hook+".sh")), 0o755)
	}

	c.writeSlurmConf()
	c.writeFile("gres.conf", c.gresConf(), 0o644)

	// Profiles: the Lucid solo measurements, imported the way an admin would.
	c.coscheml("profile", "import", "--format", "lucid", "--store", c.path("var/profiles"), filepath.Join(c.a.repo, lucidSolo))

	// A private copy of the shipped model, so tests can remove, corrupt and swap it.
	c.installModel(filepath.Join(c.a.repo, "models", "default.model"))

	cfg := config.Default()
	cfg.ProfileDir = c.path("var/profiles")
	cfg.ModelPath = c.path("models", "current.model")
	cfg.ResidencyDir = c.path("var/residency")
	cfg.ObservationDir = c.path("var/observations")
	cfg.DecisionLog = c.path("var/decisions.log")
	cfg.DecisionKey = c.path("var/decision.key")
	cfg.SlotsPerGPU = shardsPerGPU
	cfg.Cluster = config.ClusterSpec{
		Nodes: fmt.Sprintf("n[1-%d]", numNodes), GPUsPerNode: gpusPerNode, GPUMemoryMiB: 143771,
	}
	if c.topo.hetero {
		cfg.Cluster = config.ClusterSpec{Groups: []config.NodeGroup{
			{Nodes: "n1", GPUsPerNode: heteroSmallGPUs, GPUMemoryMiB: 40960, GPUModel: "NVIDIA A100-SXM4-40GB", Feature: "a100", GresType: "a100"},
			{Nodes: fmt.Sprintf("n[2-%d]", numNodes), GPUsPerNode: gpusPerNode, GPUMemoryMiB: 143771, GPUModel: "NVIDIA H200", Feature: "h200", GresType: "h200"},
		}}
	}
	cfg.Profiling.Backend = "mock"
	cfg.Profiling.Interval = 100 * time.Millisecond
	// One short job of one user makes a profile here (tests follow one run).
	cfg.Profiling.MinRuns, cfg.Profiling.MinUsers, cfg.Profiling.MinRunTime = 1, 1, time.Second
	// The suite reads decisions from slurmctld's log (at SlurmctldDebug=info);
	// the performance tests and testLogLevels run the default (verbose).
	cfg.LogDecisions = config.LogInfo
	if edit != nil {
		edit(&cfg)
	}
	c.writeConfig(cfg)
}

// installModel puts src in place as the cluster's model the way an admin should:
// a copy beside it, then rename over the old one (never cp over a file in use).
func (c *cluster) installModel(src string) {
	b, err := os.ReadFile(src)
	if err != nil {
		c.t.Fatalf("reading model %s: %v", src, err)
	}
	c.replaceFile(c.path("models", "current.model"), b)
}

// replaceFile writes b to a temporary file next to dst and renames it over dst.
func (c *cluster) replaceFile(dst string, b []byte) {
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		c.t.Fatal(err)
	}
}

// writeConfig replaces coscheml.yaml (by rename, as an admin's editor or config
// management would) with cfg.
func (c *cluster) writeConfig(cfg config.Config) {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := config.Parse(b); err != nil {
		c.t.Fatalf("the test's own coscheml.yaml does not validate: %v\n%s", err, b)
	}
	c.cfg = cfg
	c.cfgPath = c.path("coscheml.yaml")
	c.replaceFile(c.cfgPath, b)
}

// gresConf describes the fake GPUs: one type and evenly spread shards, or (typed)
// one Type and one shard line per GPU; with cores, GPUs 0-1 on cores 0-3 and
// GPUs 2-3 on cores 4-7.
func (c *cluster) gresConf() string {
	var b strings.Builder
	nodes := fmt.Sprintf("n[1-%d]", numNodes)
	affinity := func(i int) string {
		if !c.topo.cores {
			return ""
		}
		if i < gpusPerNode/2 {
			return " Cores=0-3"
		}
		return " Cores=4-7"
	}
	switch {
	case c.topo.hetero:
		for i, n := range c.nodes {
			gpus, typ := c.topo.gpusOf(i)
			fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=%s File=%s/nvidia[0-%d]\nNodeName=%s Name=shard Count=%d\n",
				n, typ, c.path("dev"), gpus-1, n, gpus*shardsPerGPU)
		}
	case c.topo.typed:
		for i := 0; i < gpusPerNode; i++ {
			fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=g%d File=%s/nvidia%d%s\n", nodes, i, c.path("dev"), i, affinity(i))
		}
		for i := 0; i < gpusPerNode; i++ {
			typ := fmt.Sprintf(" Type=g%d", i)
			if c.topo.untypedShards {
				typ = ""
			}
			fmt.Fprintf(&b, "NodeName=%s Name=shard%s Count=%d File=%s/nvidia%d%s\n", nodes, typ, shardsPerGPU, c.path("dev"), i, affinity(i))
		}
	case c.topo.cores:
		for i := 0; i < gpusPerNode; i++ {
			fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=h200 File=%s/nvidia%d%s\n", nodes, c.path("dev"), i, affinity(i))
		}
		for i := 0; i < gpusPerNode; i++ {
			fmt.Fprintf(&b, "NodeName=%s Name=shard Count=%d File=%s/nvidia%d%s\n", nodes, shardsPerGPU, c.path("dev"), i, affinity(i))
		}
	default:
		fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=h200 File=%s/nvidia[0-%d]\nNodeName=%s Name=shard Count=%d\n",
			nodes, c.path("dev"), gpusPerNode-1, nodes, gpusPerNode*shardsPerGPU)
	}
	return b.String()
}

func (c *cluster) writeSlurmConf() {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Private test cluster written by slurm/integration (coscheml).")
	p("ClusterName=coscheml%d", c.ctldPort)
	p("SlurmctldHost=%s", c.host)
	p("SlurmctldPort=%d", c.ctldPort)
	p("SlurmUser=root")
	p("SlurmdUser=root")
	p("AuthType=auth/munge")
	p("StateSaveLocation=%s", c.path("state"))
	p("SlurmdSpoolDir=%s/%%n", c.path("spool"))
	p("SlurmdPidFile=%s/slurmd-%%n.pid", c.path("run"))
	p("SlurmctldPidFile=%s", c.path("run", "slurmctld.pid"))
	p("SlurmctldLogFile=%s", c.ctldLog)
	p("SlurmdLogFile=%s/slurmd-%%n.log", c.path("log"))
	p("SlurmctldDebug=info")
	p("SlurmdDebug=info")
	p("ProctrackType=proctrack/linuxproc")
	p("SelectType=select/cons_tres")
	p("SelectTypeParameters=%s", cmp.Or(c.topo.selectParams, "CR_Core"))
	p("SlurmdParameters=config_overrides")
	// Newer releases dropped some "none" plugins (26.05 has no task/none,
	// jobacct_gather/none, accounting_storage/none): their default is the same.
	for _, kv := range [][2]string{
		{"AccountingStorageType", "accounting_storage/none"},
		{"JobAcctGatherType", "jobacct_gather/none"},
		{"TaskPlugin", "task/none"},
		{"MpiDefault", "mpi/none"},
	} {
		if c.a.slurm.hasPlugin(kv[1]) {
			p("%s=%s", kv[0], strings.TrimPrefix(kv[1], "mpi/"))
		}
	}
	p("MailProg=/bin/true")
	p("ReturnToService=2")
	p("MaxJobCount=20000")
	// Newer releases hold a batch job up to 3 s before trying to start it; the
	// suite starts jobs one by one and waits for each.
	// 23.11-25.11 without accounting storage (the "none" plugin is gone): the
	// main scheduler skips a job as "has invalid account" and only backfill
	// starts it, every bf_interval (default 30 s).
	p("SchedulerParameters=batch_sched_delay=0,bf_interval=1")
	p("MinJobAge=%d", int(cmp.Or(c.topo.minJobAge, 600*time.Second).Seconds()))
	p("GresTypes=gpu,shard")
	if c.a.pluginDir == c.a.slurm.pluginDir {
		p("PluginDir=%s", c.a.slurm.pluginDir) // an installed plugin
	} else {
		p("PluginDir=%s:%s", c.a.slurm.pluginDir, c.a.pluginDir)
	}
	if c.plugin {
		p("JobSubmitPlugins=coscheml")
	}
	p("PrologFlags=Alloc")
	p("Prolog=%s", c.path("hooks", "prolog.sh"))
	p("Epilog=%s", c.path("hooks", "epilog.sh"))
	gres := fmt.Sprintf("gpu:h200:%d,shard:%d", gpusPerNode, gpusPerNode*shardsPerGPU)
	if c.topo.typed {
		var g []string
		for i := 0; i < gpusPerNode; i++ {
			g = append(g, fmt.Sprintf("gpu:g%d:1", i))
		}
		if c.topo.untypedShards {
			g = append(g, fmt.Sprintf("shard:%d", gpusPerNode*shardsPerGPU))
		} else {
			for i := 0; i < gpusPerNode; i++ {
				g = append(g, fmt.Sprintf("shard:g%d:%d", i, shardsPerGPU))
			}
		}
		gres = strings.Join(g, ",")
	}
	cpus := "CPUs=8"
	if c.topo.cores {
		cpus = "CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=1"
	}
	for i, n := range c.nodes {
		g, features := gres, ""
		if c.topo.hetero {
			gpus, typ := c.topo.gpusOf(i)
			g, features = fmt.Sprintf("gpu:%s:%d,shard:%d", typ, gpus, gpus*shardsPerGPU), " Features="+typ+",ib"
		}
		p("NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d %s RealMemory=2000%s Gres=%s",
			n, c.host, c.nodePorts[i], cpus, features, g)
	}
	p("PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
	if c.topo.extraConf != "" {
		p("%s", c.topo.extraConf)
	}
	c.writeFile("slurm.conf", b.String(), 0o644)
}

// proc is a daemon this test started; done closes when it has exited and been reaped.
type proc struct {
	name string
	pid  int
	done chan struct{}
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to d for the exit, then SIGKILL.
func (p *proc) stop(t *testing.T, d time.Duration) {
	if !p.alive() {
		return
	}
	syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(d):
	}
	t.Logf("%s (pid %d) ignored SIGTERM for %v: SIGKILL", p.name, p.pid, d)
	syscall.Kill(p.pid, syscall.SIGKILL)
	<-p.done
}

// daemon starts one Slurm daemon in the foreground (-D) as a child of the test.
func (c *cluster) daemon(name string, logName string, args ...string) *proc {
	out, err := os.OpenFile(c.path("log", logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(c.path("sbin", name), args...)
	cmd.Dir = c.path("run")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.path("coscheml.yaml"))
	if !c.a.installed {
		// An installed plugin finds the installed library by its built-in path,
		// which is what the package promises; a repo build is told where it is.
		cmd.Env = append(cmd.Env, "COSCHEML_LIB="+filepath.Join(c.a.libDir, "libcoscheml.so"))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name + " " + strings.Join(args, " "), pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p
}

func (c *cluster) startCtld() {
	c.ctld = c.daemon("slurmctld", "slurmctld.out", "-D", "-i", "-f", c.path("slurm.conf"))
	c.waitPing(30 * time.Second)
}

func (c *cluster) startSlurmd(node string) {
	c.slurmd[node] = c.daemon("slurmd", "slurmd-"+node+".out",
		"-D", "-N", node, "-f", c.path("slurm.conf"), "-d", c.path("sbin", "slurmstepd"))
}

// ctldAlive checks that slurmctld's process runs and answers.
func (c *cluster) ctldAlive() error {
	if !c.ctld.alive() {
		return fmt.Errorf("slurmctld (pid %d) is not running; log tail:\n%s", c.ctld.pid, c.logTail(3000))
	}
	if out, err := c.run("scontrol", "ping"); err != nil || !strings.Contains(out, "UP") {
		return fmt.Errorf("scontrol ping: %v: %s", err, out)
	}
	return nil
}

func (c *cluster) mustCtldAlive() {
	c.t.Helper()
	if err := c.ctldAlive(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitPing(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, err := c.run("scontrol", "ping")
		if err == nil && strings.Contains(out, "UP") {
			return
		}
		if !c.ctld.alive() {
			c.t.Fatalf("slurmctld exited during start-up; log tail:\n%s", c.logTail(4000))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("slurmctld does not answer after %v: %s\n%s", d, out, c.logTail(3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitIdle waits until every node is idle (or mixed/allocated: it is up).
func (c *cluster) waitIdle(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, err := c.run("sinfo", "-h", "-N", "-o", "%N %t")
		up := 0
		if err == nil {
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				if len(f) == 2 && (f[1] == "idle" || f[1] == "mix" || f[1] == "alloc") {
					up++
				}
			}
		}
		if up == numNodes {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nodes not up after %v: %s", d, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopCtld stops slurmctld with SIGTERM (it saves its state) and waits.
func (c *cluster) stopCtld() {
	if c.ctld.alive() {
		c.ctldStops = append(c.ctldStops, time.Now())
	}
	c.ctld.stop(c.t, 20*time.Second)
}

// stoppedAfter reports whether the suite stopped slurmctld at or after t
// (t has scontrol's one-second resolution).
func (c *cluster) stoppedAfter(t time.Time) bool {
	for _, s := range c.ctldStops {
		if !t.IsZero() && t.Unix() <= s.Unix() {
			return true
		}
	}
	return false
}

// launched returns the jobs whose batch launch a slurmd of this cluster logged.
func (c *cluster) launched() map[int]bool {
	ids := map[int]bool{}
	for _, n := range c.nodes {
		b, _ := os.ReadFile(c.path("log", "slurmd-"+n+".log"))
		launchedJobs(b, ids)
	}
	return ids
}

// restartCtld stops slurmctld and starts it again on the same state.
func (c *cluster) restartCtld() {
	c.t.Helper()
	// While it is down its port is free: another suite must not pick it then.
	unlockStart := lockStart(c.t)
	c.stopCtld()
	c.startCtld()
	unlockStart()
	c.waitIdle(60 * time.Second)
}

// stopPID sends SIGTERM to pid, waits up to d for it to go, then SIGKILL.
func stopPID(t *testing.T, pid int, name string, d time.Duration) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return // already gone
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !pidRunning(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s (pid %d) ignored SIGTERM for %v: SIGKILL", name, pid, d)
	p.Signal(syscall.SIGKILL)
	for i := 0; i < 100 && pidRunning(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// pidRunning is true while pid exists and is not a zombie.
func pidRunning(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// stopAll cancels the cluster's jobs, stops every daemon this test started (by
// PID), then any job step daemon left behind in this cluster's folders, and
// checks that the ports are free again.
func (c *cluster) stopAll() {
	t := c.t
	if c.ctld.alive() {
		c.run("scancel", "--user=root")
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			out, err := c.run("squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i")
			if err == nil && strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for _, n := range c.nodes {
		c.slurmd[n].stop(t, 10*time.Second)
	}
	c.stopCtld()
	// slurmstepd outlives slurmd by design; ours run with their working folder
	// inside this cluster's folder.
	for _, pid := range c.leftoverSteps() {
		t.Logf("stopping leftover slurmstepd pid %d", pid)
		stopPID(t, pid, "slurmstepd", 5*time.Second)
	}
	for _, port := range append([]int{c.ctldPort}, c.nodePorts...) {
		free := false
		for i := 0; i < 50 && !free; i++ {
			if free = portFree(port); !free {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !free {
			t.Errorf("port %d still in use after the cluster stopped", port)
		}
	}
}

// leftoverSteps lists slurmstepd processes whose working folder is in this cluster.
func (c *cluster) leftoverSteps() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if b := filepath.Base(exe); b != "slurmstepd-wlm" && b != "slurmstepd" {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if strings.HasPrefix(cwd, c.dir+"/") && pidRunning(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// run runs a Slurm client command against this cluster; it returns stdout and,
// on failure, an error carrying stderr.
func (c *cluster) run(name string, args ...string) (string, error) {
	stdout, stderr, err := c.run3(name, args...)
	if err != nil {
		return stdout, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr))
	}
	return stdout, nil
}

func (c *cluster) run3(name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.a.slurm.bin(name), args...)
	cmd.Env = c.env
	cmd.Dir = c.path("jobs")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// coscheml runs the project's CLI with this cluster's configuration.
func (c *cluster) coscheml(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.a.binDir, "coscheml"), args...)
	cmd.Env = append(c.env, "COSCHEML_CONFIG="+c.path("coscheml.yaml"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("coscheml %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var jobIDRE = regexp.MustCompile(`^Submitted batch job (\d+)`)

// sbatch submits a job; it returns the job ID or the error with sbatch's stderr.
func (c *cluster) sbatch(args ...string) (int, string, error) {
	stdout, stderr, err := c.run3("sbatch", args...)
	if err != nil {
		return 0, stderr, fmt.Errorf("sbatch %s: %w", strings.Join(shorten(args), " "), err)
	}
	m := jobIDRE.FindStringSubmatch(strings.TrimSpace(stdout))
	if m == nil {
		return 0, stderr, fmt.Errorf("sbatch printed no job ID: %q", stdout)
	}
	id, _ := strconv.Atoi(m[1])
	return id, stderr, nil
}

func (c *cluster) mustSbatch(args ...string) int {
	c.t.Helper()
	id, stderr, err := c.sbatch(args...)
	if err != nil {
		c.t.Fatalf("%v\nstderr: %s", err, stderr)
	}
	return id
}

// job is what `scontrol show job -d` says about one job.
type job struct {
	ID          int
	State       string
	Reason      string
	NodeList    string
	ReqNodeList string
	TresPerNode string // in 22.05's spelling ("gres:gpu:1") on every release
	Comment     string
	Restarts    int       // requeues by Slurm (launch failures, node trouble)
	StartTime   time.Time // when Slurm allocated it (zero if not yet)
	GPUIdx      string    // GPU indices of the first allocated node, e.g. "0" or "0,1"
	Raw         string
}

var fieldRE = regexp.MustCompile(`(\w+)=(\S*)`)

func (c *cluster) showJob(id int) job {
	c.t.Helper()
	out, err := c.run("scontrol", "show", "job", "-d", strconv.Itoa(id))
	if err != nil {
		c.t.Fatal(err)
	}
	return parseJob(id, out)
}

// parseJob reads `scontrol show job -d` of one job.
func parseJob(id int, out string) job {
	j := job{ID: id, Raw: out}
	for _, line := range strings.Split(out, "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "Comment=") {
			// The comment may hold spaces: it runs to the end of its line.
			j.Comment = strings.TrimSpace(strings.TrimPrefix(trim, "Comment="))
			continue
		}
		for _, m := range fieldRE.FindAllStringSubmatch(line, -1) {
			switch m[1] {
			case "JobState":
				j.State = m[2]
			case "Reason":
				j.Reason = m[2]
			case "NodeList":
				j.NodeList = m[2]
			case "ReqNodeList":
				j.ReqNodeList = m[2]
			case "TresPerNode":
				// 23.11+ writes gres/gpu where 22.05 writes gres:gpu.
				j.TresPerNode = strings.ReplaceAll(m[2], "gres/", "gres:")
			case "Restarts":
				j.Restarts, _ = strconv.Atoi(m[2])
			case "StartTime":
				// scontrol prints local time; "Unknown" or "None" until allocated.
				j.StartTime, _ = time.ParseInLocation("2006-01-02T15:04:05", m[2], time.Local)
			case "GRES":
				if j.GPUIdx == "" && strings.HasPrefix(trim, "Nodes=") {
					j.GPUIdx = gresIndices(m[2])
				}
			}
		}
	}
	return j
}

var (
	idxRE     = regexp.MustCompile(`\(IDX:([0-9,-]+)\)`)
	perGPURE  = regexp.MustCompile(`\(((?:\d+/\d+,?)+)\)`)
	gresEntRE = regexp.MustCompile(`(?:^|,)((?:gpu|shard)[^(,]*)`)
)

// gresIndices reads the GPU indices of one node's GRES allocation, as
// `scontrol show job -d` prints it: "gpu:h200:1(IDX:2)" (every release),
// "shard:2(IDX:0)" (22.05) or per GPU "shard:2(0/4,0/4,2/4,0/4)" (23.11+: the
// GPUs with a share of the job's shards), an entry per shard Type of a
// several-GPU job ("shard:g0:2(IDX:0),shard:g3:2(IDX:3)"). The indices in
// order, ranges expanded ("0,3"); "" when it has none.
func gresIndices(gres string) string {
	if gresEntRE.FindString(gres) == "" {
		return ""
	}
	set := map[int]bool{}
	for _, m := range idxRE.FindAllStringSubmatch(gres, -1) {
		for _, part := range strings.Split(m[1], ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			for i := a; i <= b && i-a < 64; i++ {
				set[i] = true
			}
		}
	}
	for _, m := range perGPURE.FindAllStringSubmatch(gres, -1) {
		for i, part := range strings.Split(m[1], ",") {
			used, _, _ := strings.Cut(part, "/")
			if n, err := strconv.Atoi(used); err == nil && n > 0 {
				set[i] = true
			}
		}
	}
	var idx []int
	for i := range set {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ",")
}

// startJob submits a job that touches a marker file and then sleeps: the marker
// exists only after the node Prolog finished (slurmd runs the Prolog before the
// batch script), so the job's GPU residency is on record once it appears.
func (c *cluster) startJob(comment, gres string) job {
	c.t.Helper()
	args := []string{"--gres=" + gres, "--time=10", "-o", "/dev/null"}
	if comment != "" {
		args = append(args, "--comment="+comment)
	}
	marker := c.path("jobs", fmt.Sprintf("started.%d", time.Now().UnixNano()))
	args = append(args, "--wrap=touch "+marker+"; exec sleep 300")
	id := c.mustSbatch(args...)
	if !c.waitStarted(id, marker, 30*time.Second) {
		c.t.Fatalf("job %d did not start within 30s (nor after a Slurm requeue):\n%s", id, c.showJob(id).Raw)
	}
	j := c.showJob(id)
	c.checkPlacement(j)
	return j
}

// requeueWait bounds the wait for a job Slurm requeued itself (a failed batch
// launch: "requeue JobId=... per user/system request", Restarts>0). Slurm makes
// a requeued batch job eligible again only after the credential lifetime
// (AuthInfo cred_expire, 120 s by default; 25.11+ also requeue_delay) plus one
// second, so the retry starts about two minutes later.
const requeueWait = 150 * time.Second

// waitStarted waits up to d for the marker file job id's script touches first.
// When d passes and Slurm has requeued the job (Restarts>0), the job is Slurm's
// own retry, not a lost one: the wait is extended once by requeueWait and the
// requeue logged. It reports whether the marker appeared.
func (c *cluster) waitStarted(id int, marker string, d time.Duration) bool {
	c.t.Helper()
	deadline := time.Now().Add(d)
	extended := false
	for {
		if _, err := os.Stat(marker); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			if extended {
				return false
			}
			j := c.showJob(id)
			if j.Restarts == 0 {
				return false
			}
			c.t.Logf("job %d was requeued by Slurm (Restarts=%d, %s, reason %s): waiting up to %v for its retry",
				id, j.Restarts, j.State, j.Reason, requeueWait)
			deadline, extended = time.Now().Add(requeueWait), true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countLog counts slurmctld log lines containing every one of subs.
func (c *cluster) countLog(subs ...string) int {
	return countLines(c.ctldLog, subs...)
}

// countLines counts the lines of the file at path containing every one of
// subs (0 when it cannot be read).
func countLines(path string, subs ...string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		for _, s := range subs {
			if !strings.Contains(sc.Text(), s) {
				continue next
			}
		}
		n++
	}
	return n
}

// countLogs counts lines containing sub in slurmctld's log file and in its own
// stdout/stderr (where a library that cannot reach Slurm's logger writes).
func (c *cluster) countLogs(sub string) int {
	n := c.countLog(sub)
	b, _ := os.ReadFile(c.path("log", "slurmctld.out"))
	for _, l := range strings.Split(string(b), "\n") {
		// slurmctld -D also copies its log lines to stderr ("slurmctld: ...",
		// 23.11+ "[timestamp] ..."): count each once.
		if strings.Contains(l, sub) && !daemonCopyRE.MatchString(l) {
			n++
		}
	}
	return n
}

// daemonCopyRE matches slurmctld's own stderr copies of its log lines:
// "slurmctld: ..." on 22.05, "[2026-12-01T00:40:00.123] ..." from 23.11 on.
var daemonCopyRE = regexp.MustCompile(`^(\[[^\]]*\] |slurmctld: )`)

// lastLogLine returns the last slurmctld log line containing sub.
func (c *cluster) lastLogLine(sub string) string {
	l := c.logLines(sub)
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// logLines returns slurmctld log lines containing sub.
func (c *cluster) logLines(sub string) []string {
	b, _ := os.ReadFile(c.ctldLog)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func (c *cluster) logTail(n int) string {
	b, _ := os.ReadFile(c.ctldLog)
	return string(tail(b, n))
}

// queued lists the IDs squeue shows in any state.
func (c *cluster) queued() map[int]string {
	c.t.Helper()
	out, err := c.run("squeue", "-h", "-a", "-t", "all", "-o", "%i %T")
	if err != nil {
		c.t.Fatal(err)
	}
	ids := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		id, err := strconv.Atoi(f[0])
		if err == nil {
			ids[id] = f[1]
		}
	}
	return ids
}

// waitRan waits up to d until every job of ids is in a terminal state; it
// returns the last squeue states and the jobs Slurm requeued (Restarts>0) that
// are not terminal yet.
func (c *cluster) waitRan(ids []int, terminal func(string) bool, d time.Duration) (map[int]string, []int) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		q := c.queued()
		var open []int
		for _, id := range ids {
			if !terminal(q[id]) {
				open = append(open, id)
			}
		}
		if len(open) == 0 || time.Now().After(deadline) {
			var requeued []int
			for _, id := range open {
				out, err := c.run("scontrol", "show", "job", "-d", strconv.Itoa(id))
				if err == nil && parseJob(id, out).Restarts > 0 {
					requeued = append(requeued, id)
				}
			}
			return q, requeued
		}
		time.Sleep(time.Second)
	}
}

// waitNoJobs waits until no job is pending, running or completing, then lets the
// library's residency reads see the Epilogs.
func (c *cluster) waitNoJobs(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, err := c.run("squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%i")
		if err == nil && strings.TrimSpace(out) == "" {
			time.Sleep(residencySettle)
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("jobs still queued after %v: %s", d, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitGone waits until the jobs have left the nodes (their Epilog finished).
func (c *cluster) waitGone(js ...job) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		q := c.queued()
		busy := 0
		for _, j := range js {
			if st := q[j.ID]; st == "RUNNING" || st == "COMPLETING" || st == "PENDING" || st == "CONFIGURING" {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d jobs still on the nodes after 60s", busy)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPinnable submits held probe jobs of tag until the plugin pins one (a
// reservation-free GPU exists for it) or d passes, then cancels the probes. It
// says whether one was pinned.
func (c *cluster) waitPinnable(tag string, d time.Duration) bool {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var probes []int
	defer func() { c.cancel(probes...) }()
	for {
		id := c.mustSbatch("--hold", "--gres=gpu:1", "-o", "/dev/null", "--comment=coscheml:app="+tag, "--wrap=true")
		probes = append(probes, id)
		if j := c.showJob(id); j.ReqNodeList != "(null)" && j.ReqNodeList != "" {
			// The pinned probe's reservation outlives its cancellation until a
			// queue check finds it older than the grace (5 s): let it age, so the
			// check at the next slurmctld start drops it.
			time.Sleep(6 * time.Second)
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Second)
	}
}

func (c *cluster) cancel(ids ...int) {
	if len(ids) == 0 {
		return
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.Itoa(id)
	}
	// scancel takes many IDs at once; chunk to keep the command line short.
	for len(args) > 0 {
		n := min(len(args), 500)
		if _, err := c.run("scancel", args[:n]...); err != nil {
			c.t.Logf("scancel: %v", err)
		}
		args = args[n:]
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// shorten keeps long arguments (a 10,000-character comment) out of messages.
func shorten(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 100 {
			a = a[:60] + fmt.Sprintf("...(%d chars)", len(a))
		}
		out[i] = a
	}
	return out
}

// subtests returns a runner of subtests that share c: each runs f under its
// own *testing.T, c's t pointing at it meanwhile.
func (c *cluster) subtests(t *testing.T) func(name string, f func(t *testing.T, c *cluster)) {
	return func(name string, f func(t *testing.T, c *cluster)) {
		t.Run(name, func(st *testing.T) {
			c.t = st
			defer func() { c.t = t }()
			f(st, c)
		})
	}
}
