// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/elfsym"
	"github.com/coscheml/coscheml/pkg/hostlist"
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/slurmconf"
	"github.com/urfave/cli/v2"
)

// abiVersion is the C interface between the plugin and libcoscheml.so this
// release speaks (COSCHEML_ABI_VERSION in plugin-c/coscheml_abi.h).
const abiVersion = 4

func preflightCommand() *cli.Command {
	return &cli.Command{
		Name:  "preflight",
		Usage: "check the installed plugin, library, configuration and folders before restarting slurmctld",
		Description: "slurmctld loads a job_submit plugin only if it was built for exactly its own\n" +
			"release (major.minor.micro), and stops at start if it refuses one. Run this\n" +
			"after every install and every Slurm upgrade, before restarting slurmctld:\n\n" +
			"   coscheml preflight\n" +
			"   coscheml preflight --slurmctld /opt/slurm/sbin/slurmctld --slurm-conf /opt/slurm/etc/slurm.conf\n\n" +
			"It reads the plugin's plugin_version and interface from the file (it never\n" +
			"loads it), runs `slurmctld -V`, checks that libcoscheml.so speaks the same\n" +
			"interface, that the configuration loads, that the folders it names exist and\n" +
			"that SlurmUser may read (and, for the decision log, write) them, and whether\n" +
			"slurm.conf lets the plugin pin its placements.\n\n" +
			"Exit codes: 0 all checks passed (warnings allowed), 1 a check failed, 2 bad arguments.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "slurmctld", Usage: "slurmctld `FILE` (default: slurmctld on PATH, /usr/sbin, /usr/local/sbin)"},
			&cli.StringFlag{Name: "slurm-conf", Usage: "slurm.conf `FILE` (default: $SLURM_CONF, /etc/slurm/slurm.conf)"},
			&cli.StringFlag{Name: "plugin", Usage: "job_submit_coscheml.so `FILE` (default: searched in slurm.conf's PluginDir)"},
			&cli.StringFlag{Name: "lib", Usage: "libcoscheml.so `FILE` (default: as the plugin looks: $COSCHEML_LIB, beside the plugin, the folder built into it; else /usr/lib/coscheml (packages), /usr/local/lib/coscheml (make install))"},
			&cli.BoolFlag{Name: "plugin-only", Usage: "only check that --plugin was built for the release of --slurmctld (make install uses this)"},
		},
		Action: runPreflight,
	}
}

// preflight collects check results.
type preflight struct {
	w     io.Writer
	fails int
	warns int
}

func (p *preflight) ok(what, format string, a ...any) {
	fmt.Fprintf(p.w, "ok    %-10s %s\n", what, fmt.Sprintf(format, a...))
}

func (p *preflight) warn(what, format string, a ...any) {
	p.warns++
	fmt.Fprintf(p.w, "warn  %-10s %s\n", what, fmt.Sprintf(format, a...))
}

func (p *preflight) fail(what, format string, a ...any) {
	p.fails++
	fmt.Fprintf(p.w, "FAIL  %-10s %s\n", what, fmt.Sprintf(format, a...))
}

func runPreflight(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("preflight takes no arguments")
	}
	p := &preflight{w: c.App.Writer}

	// slurmctld's release.
	ctld := c.String("slurmctld")
	if ctld == "" {
		ctld = findSlurmctld()
	}
	var ctldVersion string
	if ctld == "" {
		p.fail("slurmctld", "not found on PATH, in /usr/sbin or /usr/local/sbin: name it with --slurmctld")
	} else if v, err := slurmctldVersion(c.Context, ctld); err != nil {
		p.fail("slurmctld", "%v", err)
	} else {
		ctldVersion = v
		p.ok("slurmctld", "%s is Slurm %s", ctld, v)
	}

	var sc *slurmconf.Conf
	confPath := c.String("slurm-conf")
	if !c.Bool("plugin-only") {
		if confPath == "" {
			confPath = cmpOr(os.Getenv("SLURM_CONF"), "/etc/slurm/slurm.conf")
		}
		var err error
		if sc, err = slurmconf.LoadWithGres(confPath); err != nil {
			p.fail("slurm.conf", "%v (name it with --slurm-conf)", err)
		} else if !listed(sc.Get("JobSubmitPlugins"), "coscheml") {
			p.warn("slurm.conf", "%s: JobSubmitPlugins (%q) does not list coscheml: the plugin is not loaded", confPath, sanitize(sc.Get("JobSubmitPlugins")))
		} else {
			p.ok("slurm.conf", "%s loads job_submit/coscheml", confPath)
		}
	}

	// The plugin: built for this release?
	plugin := c.String("plugin")
	if plugin == "" {
		plugin = findPlugin(sc)
	}
	pluginABI := uint32(0)
	switch {
	case plugin == "":
		p.fail("plugin", "job_submit_coscheml.so not found in slurm.conf's PluginDir or the usual folders: name it with --plugin")
	default:
		v, err := elfsym.Uint32File(plugin, "plugin_version")
		switch {
		case err != nil:
			p.fail("plugin", "%v", err)
		case ctldVersion == "":
			p.warn("plugin", "%s was built for Slurm %s (slurmctld's release unknown)", plugin, elfsym.SlurmVersion(v))
		case elfsym.SlurmVersion(v) != ctldVersion:
			p.fail("plugin", "%s was built for Slurm %s but slurmctld is %s: slurmctld refuses it and DOES NOT START. "+
				"Rebuild against the %s headers and reinstall: make clean && make SLURM_INCLUDE=<prefix>/include build && make install "+
				"(docs/install.md, \"Every Slurm upgrade\")", plugin, elfsym.SlurmVersion(v), ctldVersion, ctldVersion)
		default:
			p.ok("plugin", "%s was built for Slurm %s, slurmctld's release", plugin, ctldVersion)
		}
		if a, err := elfsym.Uint32File(plugin, "coscheml_plugin_abi"); err == nil {
			pluginABI = a
		}
	}
	if c.Bool("plugin-only") {
		return p.result()
	}

	// The library: the interface the plugin speaks?
	lib := c.String("lib")
	if lib == "" {
		lib = findLibrary(plugin)
	}
	if a, err := elfsym.Uint32File(lib, "coscheml_library_abi"); err != nil {
		p.fail("library", "%v: the plugin passes every job through unchanged without it", err)
	} else if pluginABI != 0 && a != pluginABI {
		p.fail("library", "%s speaks interface %d, the plugin %d: the plugin passes every job through unchanged. Install both from one build (make install)", lib, a, pluginABI)
	} else if pluginABI == 0 && plugin != "" {
		p.fail("library", "the plugin %s predates interface versioning (or is not coscheml's): install both from one build (make install)", plugin)
	} else {
		p.ok("library", "%s speaks interface %d, as the plugin does", lib, a)
	}

	// The configuration and what it names.
	cfgPath := configPath(c)
	mode := config.Default().ShardPinning
	cfg, err := loadConfig(c)
	if err == nil {
		mode = cfg.ShardPinning
	}
	if err != nil {
		cfg = config.Default()
		p.fail("config", "%v", err)
	} else {
		p.ok("config", "%s loads", cmpOr(cfgPath, "(built-in defaults)"))
		slurmUser := "root"
		if sc != nil && sc.Get("SlurmUser") != "" {
			slurmUser = sc.Get("SlurmUser")
		}
		checkPaths(p, cfg, slurmUser)
		checkSharing(p, cfg, sc)
		checkModel(p, cfg)
	}
	if sc != nil {
		checkNodeHooks(p, sc)
	}

	// The inventory against slurm.conf: counts, features, Types.
	if sc != nil && err == nil {
		for _, f := range checkGroups(sc, cfg.Cluster) {
			if f.fail {
				p.fail("inventory", "%s", f.msg)
			} else {
				p.ok("inventory", "%s", f.msg)
			}
		}
	}

	// Can placements be pinned with this slurm.conf?
	if sc != nil {
		how := ""
		if mode == config.PinAuto {
			var why string
			if mode, why = placeconf.ResolvePinning(sc, cfg); why != "" {
				how = " (shard_pinning auto, not typed: " + why + ")"
			} else {
				how = " (shard_pinning auto)"
			}
		}
		if err := sc.CheckSteering(mode); err != nil {
			p.warn("pinning", "SAFE MODE at start: %v%s; tagged jobs will run on whole GPUs, no co-location", err, how)
		} else {
			p.ok("pinning", "%s pinning works with %s%s", mode, confPath, how)
			resolved := cfg
			resolved.ShardPinning = mode
			switch on, why := placeconf.ResolveShareMultiGPU(sc, resolved); {
			case on:
				p.ok("multi-gpu", "several-GPU jobs share GPU by GPU (share_multi_gpu; every shard line names its GPU's Type)")
			case why == "":
				p.ok("multi-gpu", "several-GPU jobs take whole GPUs (share_multi_gpu: false)")
			case mode != config.PinTyped:
				p.ok("multi-gpu", "several-GPU jobs take whole GPUs: %s", why)
			default:
				// Typed pinning works but the shard lines name no Type: the
				// layout an earlier install.md gave.
				p.warn("multi-gpu", "share_multi_gpu is on but several-GPU jobs will take whole GPUs: %s; install.md, \"Shards\"", why)
			}
		}
	}
	return p.result()
}

func (p *preflight) result() error {
	if p.fails > 0 {
		return cli.Exit(fmt.Sprintf("preflight: %d check(s) failed, %d warning(s): fix them before restarting slurmctld", p.fails, p.warns), exitFailure)
	}
	fmt.Fprintf(p.w, "preflight: all checks passed (%d warning(s))\n", p.warns)
	return nil
}

// checkPaths checks the folders and files the configuration names: they exist,
// and SlurmUser (slurmctld runs the plugin as that user) may read them and write
// the decision log.
func checkPaths(p *preflight, cfg config.Config, slurmUser string) {
	u, err := user.Lookup(slurmUser)
	if err != nil {
		p.fail("paths", "SlurmUser %q: %v", sanitize(slurmUser), err)
		return
	}
	type want struct {
		what, path string
		dir        bool
		perm       uint32 // 4 read, 2 write, 1 execute (search)
	}
	wants := []want{
		{"profile_dir", cfg.ProfileDir, true, 5},
		{"residency_dir", cfg.ResidencyDir, true, 5},
	}
	if cfg.ModelPath != "" {
		wants = append(wants, want{"model_path", cfg.ModelPath, false, 4})
	}
	if cfg.DecisionLog != "" {
		wants = append(wants, want{"decision_log folder", filepath.Dir(cfg.DecisionLog), true, 3})
	}
	for _, w := range wants {
		if w.path == "" {
			continue
		}
		st, err := os.Stat(w.path)
		switch {
		case err != nil:
			p.fail("paths", "%s %s: %v", w.what, w.path, err)
		case st.IsDir() != w.dir:
			p.fail("paths", "%s %s: is a folder: %v, want %v", w.what, w.path, st.IsDir(), w.dir)
		default:
			if err := mayAccess(st, u, w.perm); err != nil {
				p.fail("paths", "%s %s: SlurmUser %s: %v", w.what, w.path, slurmUser, err)
			} else {
				p.ok("paths", "%s %s (SlurmUser %s may use it)", w.what, w.path, slurmUser)
			}
		}
	}
}

// mayAccess checks the permission bits of st for user u (root passes).
func mayAccess(st os.FileInfo, u *user.User, perm uint32) error {
	if u.Uid == "0" {
		return nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // not a Unix file system: nothing to judge
	}
	mode := uint32(st.Mode().Perm())
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	bits := mode & 7
	if uint64(sys.Uid) == uid {
		bits = mode >> 6 & 7
	} else if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if gid, _ := strconv.ParseUint(g, 10, 32); uint64(sys.Gid) == gid {
				bits = mode >> 3 & 7
				break
			}
		}
	}
	if bits&perm != perm {
		return fmt.Errorf("mode %04o, owner %d:%d: lacks %s", mode, sys.Uid, sys.Gid, permWords(perm&^bits))
	}
	return nil
}

func permWords(p uint32) string {
	var w []string
	if p&4 != 0 {
		w = append(w, "read")
	}
	if p&2 != 0 {
		w = append(w, "write")
	}
	if p&1 != 0 {
		w = append(w, "search")
	}
	return strings.Join(w, "+")
}

func findSlurmctld() string {
	if p, err := exec.LookPath("slurmctld"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/slurmctld", "/usr/local/sbin/slurmctld"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

var slurmVersionRE = regexp.MustCompile(`\b(\d+\.\d+\.\d+)\b`)

// slurmctldVersion runs `slurmctld -V` ("slurm 26.05.3", Debian "slurm-wlm 22.05.8").
func slurmctldVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -V: %w", path, err)
	}
	m := slurmVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("%s -V printed no version: %q", path, sanitize(string(out)))
	}
	return m[1], nil
}

// findPlugin looks for the plugin in slurm.conf's PluginDir, then the usual
// plugin folders.
func findPlugin(sc *slurmconf.Conf) string {
	var dirs []string
	if sc != nil && sc.Get("PluginDir") != "" {
		dirs = strings.Split(sc.Get("PluginDir"), ":")
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm", "/usr/local/lib/slurm")
	for _, d := range dirs {
		p := filepath.Join(d, "job_submit_coscheml.so")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// libraryFolders are where the packages and make install (default PREFIX) put
// libcoscheml.so, in the order preflight tries them when the plugin names none.
var libraryFolders = []string{"/usr/lib/coscheml", "/usr/local/lib/coscheml"}

// findLibrary follows the plugin's own search: $COSCHEML_LIB, beside the plugin,
// then the folder compiled into the plugin (COSCHEML_LIBDIR: /usr/lib/coscheml in
// the package, $PREFIX/lib/coscheml from make install). A plugin whose folder
// cannot be read falls back to the first of libraryFolders that holds the library.
func findLibrary(plugin string) string {
	if p := os.Getenv("COSCHEML_LIB"); p != "" {
		return p
	}
	if plugin != "" {
		p := filepath.Join(filepath.Dir(plugin), "libcoscheml.so")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if p := builtInLibrary(plugin); p != "" {
			return p
		}
	}
	for _, d := range libraryFolders {
		p := filepath.Join(d, "libcoscheml.so")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join(libraryFolders[0], "libcoscheml.so")
}

// builtInLibrary reads the library path compiled into the plugin: the one
// NUL-terminated string of its file that is an absolute path ending in
// /libcoscheml.so (the plugin's other mention of the name is a format string).
func builtInLibrary(plugin string) string {
	f, err := os.Open(plugin)
	if err != nil {
		return ""
	}
	defer f.Close()
	// A plugin is tens of KiB; the bound keeps a wrong --plugin from costing much.
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return ""
	}
	const suffix = "/libcoscheml.so\x00"
	for i := 0; ; {
		j := strings.Index(string(b[i:]), suffix)
		if j < 0 {
			return ""
		}
		end := i + j + len(suffix) - 1
		start := end
		for start > 0 && b[start-1] >= 0x21 && b[start-1] < 0x7f {
			start--
		}
		if p := string(b[start:end]); strings.HasPrefix(p, "/") && filepath.Clean(p) == p {
			return p
		}
		i = end + 1
	}
}

// checkSharing fails a configuration under which the plugin never places a job
// on a shared GPU, and warns where sharing waits on something (no profile yet).
func checkSharing(p *preflight, cfg config.Config, sc *slurmconf.Conf) {
	nodes, err := hostlist.Expand(cfg.Cluster.Nodes)
	switch {
	case err != nil:
		p.fail("sharing", "cluster.nodes %q: %v", sanitize(cfg.Cluster.Nodes), err)
		return
	case len(nodes) == 0:
		p.fail("sharing", "cluster.nodes is empty: the plugin places no job and nothing is ever shared; "+
			"list the GPU nodes with cluster.nodes, cluster.gpus_per_node and cluster.gpu_memory_mib (docs/configuration.md)")
		return
	}
	if sc != nil {
		if !containsFoldAll(sc.GresTypes, "shard") {
			p.fail("sharing", "slurm.conf's GresTypes (%q) does not list shard: Slurm refuses every shared request; add GresTypes=gpu,shard",
				sanitize(strings.Join(sc.GresTypes, ",")))
		}
		shards := nodeShards(sc)
		var none []string
		for _, n := range nodes {
			if shards[n] == 0 {
				none = append(none, n)
			}
		}
		switch {
		case len(none) == len(nodes):
			p.fail("sharing", "none of cluster.nodes (%s) has shards in slurm.conf (NodeName=... Gres=gpu:...,shard:N): no GPU can be shared",
				sanitize(cfg.Cluster.Nodes))
		case len(none) > 0:
			p.warn("sharing", "%d of %d cluster.nodes have no shards in slurm.conf (first %s): jobs placed there cannot start", len(none), len(nodes), sanitize(none[0]))
		default:
			p.ok("sharing", "%d node(s) of cluster.nodes have shards in slurm.conf", len(nodes))
		}
	}
	if cfg.ProfileDir == "" {
		p.warn("profiles", "profile_dir is \"\": the plugin knows no application, every tagged job runs alone")
		return
	}
	if _, err := os.Stat(cfg.ProfileDir); err != nil {
		return // said under paths
	}
	st, err := profile.Open(cfg.ProfileDir)
	var n int
	if err == nil {
		n, err = st.Count()
	}
	switch {
	case err != nil:
		p.fail("profiles", "%v", err)
	case n > 0:
		p.ok("profiles", "%s holds %d profile(s)", cfg.ProfileDir, n)
	case cfg.UnknownProfile == config.UnknownBootstrap && cfg.Profiling.Enabled:
		p.warn("profiles", "%s holds no profile: tagged jobs run alone until each application's profile is measured "+
			"(unknown_profile: bootstrap), or import them: coscheml profile import (docs/profiles.md)", cfg.ProfileDir)
	default:
		p.fail("profiles", "%s holds no profile and unknown_profile is %s with profiling.enabled %v: no profile is ever measured and nothing is shared; "+
			"import profiles (coscheml profile import, docs/profiles.md)", cfg.ProfileDir, cfg.UnknownProfile, cfg.Profiling.Enabled)
	}
}

func containsFoldAll(list []string, name string) bool {
	for _, e := range list {
		if strings.EqualFold(strings.TrimSpace(e), name) {
			return true
		}
	}
	return false
}

// nodeShards maps each host of slurm.conf's NodeName lines to its shard count.
func nodeShards(sc *slurmconf.Conf) map[string]int64 {
	out := map[string]int64{}
	for _, n := range sc.Nodes {
		var shards int64
		for _, g := range n.Gres {
			if g.Name == "shard" {
				shards += g.Count
			}
		}
		hosts, err := hostlist.Expand(n.Names)
		if err != nil {
			continue
		}
		for _, h := range hosts {
			out[h] += shards
		}
	}
	return out
}

// hookFolders are where the packages and make install (default PREFIX) put the
// node Prolog/Epilog.
var hookFolders = []string{"/usr/libexec/coscheml", "/usr/local/libexec/coscheml"}

// checkNodeHooks warns when slurm.conf does not run coscheml's Prolog/Epilog, or
// names one that is not on this host (it must be on every GPU node; a controller
// that is not one may lack it, hence a warning).
func checkNodeHooks(p *preflight, sc *slurmconf.Conf) {
	for _, h := range []struct{ key, file string }{{"Prolog", "prolog.sh"}, {"Epilog", "epilog.sh"}} {
		installed := ""
		for _, d := range hookFolders {
			if f := filepath.Join(d, h.file); fileExists(f) {
				installed = f
				break
			}
		}
		set := sc.Get(h.key)
		// Newer releases take a comma list; a path with a comma is one path.
		var ours string
		entries := strings.Split(set, ",")
		if fileExists(set) {
			entries = []string{set}
		}
		for _, e := range entries {
			if strings.Contains(e, "coscheml") {
				ours = strings.TrimSpace(e)
			}
		}
		switch {
		case ours == "" && installed != "":
			p.warn("hooks", "slurm.conf's %s (%q) does not run coscheml's: set %s=%s (no residency, no profiling without it)", h.key, sanitize(set), h.key, installed)
		case ours == "":
			p.warn("hooks", "slurm.conf's %s (%q) does not run coscheml's %s (the packages install it in %s, make install in %s)",
				h.key, sanitize(set), h.file, hookFolders[0], hookFolders[1])
		case !fileExists(ours):
			hint := ""
			if installed != "" {
				hint = "; this host has " + installed
			}
			p.warn("hooks", "slurm.conf's %s names %s, not on this host (it must be on every GPU node)%s", h.key, sanitize(ours), hint)
		default:
			p.ok("hooks", "%s %s", h.key, ours)
		}
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// listed reports whether a comma list holds name.
func listed(list, name string) bool {
	for _, e := range strings.Split(list, ",") {
		if strings.TrimSpace(e) == name {
			return true
		}
	}
	return false
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
