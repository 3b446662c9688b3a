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
	"github.com/coscheml/coscheml/pkg/placeconf"
	"github.com/coscheml/coscheml/pkg/slurmconf"
	"github.com/urfave/cli/v2"
)

// abiVersion is the C interface between the plugin and libcoscheml.so this
// release speaks (COSCHEML_ABI_VERSION in plugin-c/coscheml_abi.h).
const abiVersion = 2

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
			&cli.StringFlag{Name: "lib", Usage: "libcoscheml.so `FILE` (default: $COSCHEML_LIB, beside the plugin, /usr/local/lib/coscheml)"},
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

// findLibrary follows the plugin's own search: $COSCHEML_LIB, beside the plugin,
// then make install's default folder.
func findLibrary(plugin string) string {
	if p := os.Getenv("COSCHEML_LIB"); p != "" {
		return p
	}
	if plugin != "" {
		p := filepath.Join(filepath.Dir(plugin), "libcoscheml.so")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/usr/local/lib/coscheml/libcoscheml.so"
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
