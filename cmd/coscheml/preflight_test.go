// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

// preflightSetup writes a fake installation: a slurmctld that prints a version,
// plugin and library shared objects carrying the constants preflight reads,
// slurm.conf, and a configuration whose folders exist.
type preflightSetup struct {
	dir, ctld, plugin, lib, slurmConf, config string
}

func soWith(t *testing.T, dir, name, body string) string {
	t.Helper()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte("#include <stdint.h>\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, name)
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

func newPreflight(t *testing.T, ctldVersion, pluginVersion string, pluginABI, libABI int, selectParams string) preflightSetup {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	s := preflightSetup{dir: dir}
	s.ctld = filepath.Join(dir, "slurmctld")
	if err := os.WriteFile(s.ctld, []byte("#!/bin/sh\necho 'slurm "+ctldVersion+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var maj, min, mic int
	fmt.Sscanf(pluginVersion, "%d.%d.%d", &maj, &min, &mic)
	pdir := filepath.Join(dir, "plugins")
	os.MkdirAll(pdir, 0o755)
	body := fmt.Sprintf("const uint32_t plugin_version = 0x%02x%02x%02x;\n", maj, min, mic)
	if pluginABI > 0 {
		body += fmt.Sprintf("const uint32_t coscheml_plugin_abi = %d;\n", pluginABI)
	}
	s.plugin = soWith(t, pdir, "job_submit_coscheml.so", body)
	s.lib = soWith(t, pdir, "libcoscheml.so", fmt.Sprintf("const uint32_t coscheml_library_abi = %d;\n", libABI))
	s.slurmConf = filepath.Join(dir, "slurm.conf")
	hooks := filepath.Join(dir, "libexec", "coscheml")
	os.MkdirAll(hooks, 0o755)
	for _, f := range []string{"prolog.sh", "epilog.sh"} {
		os.WriteFile(filepath.Join(hooks, f), []byte("#!/bin/sh\n"), 0o755)
	}
	conf := fmt.Sprintf("SlurmUser=root\nPluginDir=/nonexistent:%s\nJobSubmitPlugins=coscheml\nSelectTypeParameters=%s\nGresTypes=gpu,shard\n"+
		"Prolog=%s/prolog.sh\nEpilog=%s/epilog.sh\nNodeName=n1 Gres=gpu:h200:4,shard:16\n", pdir, selectParams, hooks, hooks)
	if err := os.WriteFile(s.slurmConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"profiles", "residency", "log"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	s.config = filepath.Join(dir, "coscheml.yaml")
	// One profile file: preflight counts them without reading them.
	os.WriteFile(filepath.Join(dir, "profiles", "resnet18"+profile.Ext), []byte("{}"), 0o644)
	y := fmt.Sprintf("profile_dir: %s\nresidency_dir: %s\ndecision_log: %s\n%s", filepath.Join(dir, "profiles"),
		filepath.Join(dir, "residency"), filepath.Join(dir, "log", "decisions.log"), preflightCluster)
	if err := os.WriteFile(s.config, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

const preflightCluster = "cluster:\n  nodes: n1\n  gpus_per_node: 4\n  gpu_memory_mib: 81920\n"

// editFile replaces old with new in path (the test fails when old is absent).
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q (%v)", path, old, err)
	}
	os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
}

func TestPreflight(t *testing.T) {
	t.Setenv("COSCHEML_LIB", "")
	cases := []struct {
		name              string
		ctld, plugin      string
		pluginABI, libABI int
		selectParams      string
		edit              func(t *testing.T, s preflightSetup)
		args              func(s preflightSetup) []string
		code              int
		want              []string
	}{
		{name: "all good", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			code: 0, want: []string{"ok    plugin", "built for Slurm 26.05.3, slurmctld's release", "speaks interface 4, as the plugin does",
				"first-fit pinning works", "shard_pinning auto, not typed", "counts 4 GPUs under one type",
				"ok    sharing", "holds 1 profile", "ok    hooks", "all checks passed (0 warning(s))"}},
		{name: "library where the plugin was built to look", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) {
				// As the package: the plugin in Slurm's folder, the library in its own,
				// the plugin built with COSCHEML_LIBDIR naming that folder.
				libdir := filepath.Join(s.dir, "usr", "lib", "coscheml")
				os.MkdirAll(libdir, 0o755)
				os.Rename(s.lib, filepath.Join(libdir, "libcoscheml.so"))
				os.Remove(s.plugin)
				soWith(t, filepath.Dir(s.plugin), "job_submit_coscheml.so", fmt.Sprintf(
					"const uint32_t plugin_version = 0x1a0503;\nconst uint32_t coscheml_plugin_abi = %d;\n"+
						"const char *coscheml_lib_fmt = \"%%.*s/libcoscheml.so\";\nconst char *coscheml_default_lib = \"%s/libcoscheml.so\";\n", abiVersion, libdir))
			},
			code: 0, want: []string{"ok    library", "/usr/lib/coscheml/libcoscheml.so speaks interface", "all checks passed"}},
		{name: "no cluster nodes", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) { editFile(t, s.config, preflightCluster, "") },
			code: 1, want: []string{"FAIL  sharing", "cluster.nodes is empty", "nothing is ever shared"}},
		{name: "nodes without shards", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) { editFile(t, s.slurmConf, ",shard:16", "") },
			code: 1, want: []string{"FAIL  sharing", "none of cluster.nodes (n1) has shards"}},
		{name: "GresTypes without shard", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) { editFile(t, s.slurmConf, "GresTypes=gpu,shard", "GresTypes=gpu") },
			code: 1, want: []string{"FAIL  sharing", "GresTypes (\"gpu\") does not list shard"}},
		{name: "no profiles, bootstrap", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) {
				os.Remove(filepath.Join(s.dir, "profiles", "resnet18"+profile.Ext))
			},
			code: 0, want: []string{"warn  profiles", "holds no profile: tagged jobs run alone", "1 warning"}},
		{name: "no profiles, reject", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) {
				os.Remove(filepath.Join(s.dir, "profiles", "resnet18"+profile.Ext))
				editFile(t, s.config, "cluster:", "unknown_profile: reject\ncluster:")
			},
			code: 1, want: []string{"FAIL  profiles", "unknown_profile is reject"}},
		{name: "no Prolog", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) {
				b, _ := os.ReadFile(s.slurmConf)
				os.WriteFile(s.slurmConf, []byte(strings.Replace(string(b), "Prolog=", "#Prolog=", 1)), 0o644)
			},
			code: 0, want: []string{"warn  hooks", "slurm.conf's Prolog (\"\") does not run coscheml's prolog.sh", "ok    hooks      Epilog"}},
		{name: "per-GPU types: auto is typed", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core,LL_SHARED_GRES",
			edit: func(t *testing.T, s preflightSetup) {
				b, _ := os.ReadFile(s.slurmConf)
				os.WriteFile(s.slurmConf, []byte(strings.Replace(string(b), "gpu:h200:4", "gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1", 1)), 0o644)
				gres := ""
				for i := 0; i < 4; i++ {
					gres += fmt.Sprintf("NodeName=n1 Name=shard Count=4 File=/dev/nvidia%d\n", i)
				}
				os.WriteFile(filepath.Join(filepath.Dir(s.slurmConf), "gres.conf"), []byte(gres), 0o644)
			},
			code: 0, want: []string{"ok    pinning", "typed pinning works", "(shard_pinning auto)", "warn  multi-gpu", "several-GPU jobs will take whole GPUs", "all checks passed (1 warning(s))"}},
		{name: "per-GPU types on the shard lines too: several-GPU jobs share", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) {
				b, _ := os.ReadFile(s.slurmConf)
				conf := strings.Replace(string(b), "gpu:h200:4", "gpu:g0:1,gpu:g1:1,gpu:g2:1,gpu:g3:1", 1)
				conf = strings.Replace(conf, ",shard:16", ",shard:g0:4,shard:g1:4,shard:g2:4,shard:g3:4", 1)
				os.WriteFile(s.slurmConf, []byte(conf), 0o644)
				gres := ""
				for i := 0; i < 4; i++ {
					gres += fmt.Sprintf("NodeName=n1 Name=gpu Type=g%d File=/dev/nvidia%d\nNodeName=n1 Name=shard Type=g%d Count=4 File=/dev/nvidia%d\n", i, i, i, i)
				}
				os.WriteFile(filepath.Join(filepath.Dir(s.slurmConf), "gres.conf"), []byte(gres), 0o644)
			},
			code: 0, want: []string{"ok    pinning", "typed pinning works", "ok    multi-gpu", "share GPU by GPU", "all checks passed (0 warning(s))"}},
		{name: "micro upgrade without rebuild", ctld: "24.11.7", plugin: "24.11.6", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			code: 1, want: []string{"FAIL  plugin", "built for Slurm 24.11.6 but slurmctld is 24.11.7", "DOES NOT START", "make install"}},
		{name: "library of another build", ctld: "25.11.7", plugin: "25.11.7", pluginABI: abiVersion, libABI: abiVersion + 1, selectParams: "CR_Core",
			code: 1, want: []string{"FAIL  library", "speaks interface 5, the plugin 4"}},
		{name: "plugin before versioning", ctld: "22.05.8", plugin: "22.05.8", pluginABI: 0, libABI: abiVersion, selectParams: "CR_Core",
			code: 1, want: []string{"FAIL  library", "predates interface versioning"}},
		{name: "LL_SHARED_GRES", ctld: "23.11.11", plugin: "23.11.11", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core,LL_SHARED_GRES",
			code: 0, want: []string{"warn  pinning", "SAFE MODE", "1 warning"}},
		{name: "missing residency folder", ctld: "26.05.3", plugin: "26.05.3", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			edit: func(t *testing.T, s preflightSetup) { os.RemoveAll(filepath.Join(s.dir, "residency")) },
			code: 1, want: []string{"FAIL  paths", "residency_dir", "no such file"}},
		{name: "plugin only", ctld: "26.05.3", plugin: "25.11.7", pluginABI: abiVersion, libABI: abiVersion, selectParams: "CR_Core",
			args: func(s preflightSetup) []string { return []string{"--plugin", s.plugin, "--plugin-only"} },
			code: 1, want: []string{"FAIL  plugin", "built for Slurm 25.11.7 but slurmctld is 26.05.3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newPreflight(t, tc.ctld, tc.plugin, tc.pluginABI, tc.libABI, tc.selectParams)
			if tc.edit != nil {
				tc.edit(t, s)
			}
			args := []string{"coscheml", "--config", s.config, "preflight", "--slurmctld", s.ctld, "--slurm-conf", s.slurmConf}
			if tc.args != nil {
				args = append(args, tc.args(s)...)
			}
			var out, errw strings.Builder
			code := run(args, &out, &errw)
			got := out.String() + errw.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestMayAccess judges permission bits for a user other than the file's owner.
func TestMayAccess(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	for _, tc := range []struct {
		mode os.FileMode
		perm uint32
		ok   bool
	}{
		{0o755, 5, true},
		{0o700, 5, false},
		{0o751, 1, true},
		{0o755, 3, false},
		{0o777, 3, true},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, tc.mode)
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := mayAccess(st, nobody, tc.perm); (err == nil) != tc.ok {
			t.Errorf("mode %o perm %d: %v, want ok=%v", tc.mode, tc.perm, err, tc.ok)
		}
	}
}

// TestBuiltInLibraryOfRealPlugin: the library folder compiled into the real
// plugin (the packages build it with COSCHEML_LIBDIR=/usr/lib/coscheml) is what
// preflight reads from the file, not the format string beside it.
func TestBuiltInLibraryOfRealPlugin(t *testing.T) {
	if _, err := os.Stat("/usr/include/slurm/slurm.h"); err != nil {
		t.Skip("no Slurm headers")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found")
	}
	for _, dir := range []string{"/usr/lib/coscheml", "/opt/site/lib/coscheml"} {
		so := filepath.Join(t.TempDir(), "job_submit_coscheml.so")
		out, err := exec.Command("gcc", "-O2", "-shared", "-fPIC", "-I../../plugin-c", `-DCOSCHEML_LIBDIR="`+dir+`"`,
			"-o", so, "../../plugin-c/job_submit_coscheml.c", "-ldl", "-lpthread").CombinedOutput()
		if err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		if got, want := builtInLibrary(so), dir+"/libcoscheml.so"; got != want {
			t.Errorf("COSCHEML_LIBDIR=%s: builtInLibrary = %q, want %q", dir, got, want)
		}
	}
}

// TestABIVersionMatchesHeader: the interface preflight names is the one in
// plugin-c/coscheml_abi.h.
func TestABIVersionMatchesHeader(t *testing.T) {
	b, err := os.ReadFile("../../plugin-c/coscheml_abi.h")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("#define COSCHEML_ABI_VERSION %du", abiVersion)
	if !strings.Contains(string(b), want) {
		t.Errorf("coscheml_abi.h lacks %q: abiVersion is stale", want)
	}
}
