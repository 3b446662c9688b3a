// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

const lucidSoloCSV = "../../models/data/lucid-train/solo_profiles.csv"

// profileEnv runs the CLI with a config whose profile_dir is a fresh folder.
func profileEnv(t *testing.T) (store string, runCLI func(args ...string) (int, string, string)) {
	t.Helper()
	t.Setenv("COSCHEML_CONFIG", "")
	t.Setenv("COSCHEML_MODEL", "")
	dir := t.TempDir()
	store = filepath.Join(dir, "profiles")
	cfg := filepath.Join(dir, "coscheml.yaml")
	if err := os.WriteFile(cfg, []byte("profile_dir: "+store+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return store, func(args ...string) (int, string, string) {
		t.Helper()
		var out, errw bytes.Buffer
		code := run(append([]string{"coscheml", "--config", cfg}, args...), &out, &errw)
		return code, out.String(), errw.String()
	}
}

func TestProfileImportListShow(t *testing.T) {
	store, cli := profileEnv(t)
	f, err := os.Open(lucidSoloCSV)
	if err != nil {
		t.Fatal(err)
	}
	want, err := profile.ReadLucidSolo(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Read-only commands do not create the store.
	if code, _, _ := cli("profile", "list"); code != exitNotFound {
		t.Errorf("list of a missing store: exit %d, want %d", code, exitNotFound)
	}
	if _, err := os.Stat(store); err == nil {
		t.Error("list created the store folder")
	}

	code, out, errw := cli("profile", "import", "--format", "lucid", lucidSoloCSV)
	if code != exitOK || !strings.Contains(out, "imported 53 profiles") {
		t.Fatalf("import: exit %d, out %q, err %q", code, out, errw)
	}
	// The files are on disk, in the configured store.
	st, err := profile.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, problems := st.List()
	if len(onDisk) != len(want) || len(problems) != 0 {
		t.Fatalf("store has %d profiles (problems %v), want %d", len(onDisk), problems, len(want))
	}

	code, out, _ = cli("profile", "list")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || len(lines) != len(want)+1 {
		t.Errorf("list: exit %d, %d lines, want %d", code, len(lines), len(want)+1)
	}
	code, out, _ = cli("profile", "list", "--json")
	var listed []*profile.Profile
	if err := json.Unmarshal([]byte(out), &listed); code != exitOK || err != nil || len(listed) != len(want) {
		t.Fatalf("list --json: exit %d, %v, %d profiles", code, err, len(listed))
	}

	code, out, _ = cli("profile", "show", "--json", want[0].Tag)
	var shown profile.Profile
	if err := json.Unmarshal([]byte(out), &shown); code != exitOK || err != nil {
		t.Fatalf("show --json: exit %d, %v", code, err)
	}
	if !reflect.DeepEqual(&shown, want[0]) {
		t.Errorf("show --json:\n got %+v\nwant %+v", shown, *want[0])
	}
	code, out, _ = cli("profile", "show", want[0].Tag)
	if code != exitOK || !strings.Contains(out, want[0].Tag) || !strings.Contains(out, "partial:") {
		t.Errorf("show: exit %d:\n%s", code, out)
	}
	// --store overrides the config.
	other := t.TempDir()
	if code, _, errw := cli("profile", "import", "--format", "lucid", "--store", other, lucidSoloCSV); code != exitOK {
		t.Fatalf("import --store: %d %s", code, errw)
	}
	if _, err := os.Stat(filepath.Join(other, want[0].Tag+".prof")); err != nil {
		t.Error(err)
	}
}

func TestProfileCLIErrors(t *testing.T) {
	store, cli := profileEnv(t)
	if code, _, errw := cli("profile", "import", "--format", "lucid", lucidSoloCSV); code != exitOK {
		t.Fatal(errw)
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("tag,class,sm_mean,membw_mean,mem_used_mib\nx,hpc,1,1,1\ny,hpc,1,500,1\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"profile", "show", "no-such-app"}, exitNotFound, []string{"no-such-app", "not found"}},
		{[]string{"profile", "show", "../etc/passwd"}, exitUsage, []string{"invalid tag"}},
		{[]string{"profile", "show"}, exitUsage, []string{"TAG"}},
		{[]string{"profile", "import", lucidSoloCSV}, exitUsage, []string{"--format"}},
		{[]string{"profile", "import", "--format", "csv", lucidSoloCSV}, exitUsage, []string{"csv"}},
		{[]string{"profile", "import", "--format", "lucid", "/no/such/file.csv"}, exitNotFound, []string{"/no/such/file.csv"}},
		{[]string{"profile", "import", "--format", "generic", bad}, exitFailure, []string{bad, "line 3", "membw_mean"}},
		{[]string{"profile", "import", "--format", "generic", lucidSoloCSV}, exitFailure, []string{"unknown column"}},
		{[]string{"profile", "list", "extra"}, exitUsage, []string{"extra"}},
	} {
		code, _, errw := cli(tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errw)
		}
		for _, w := range tc.want {
			if !strings.Contains(errw, w) {
				t.Errorf("%v: stderr %q does not mention %q", tc.args, errw, w)
			}
		}
	}
	// The failed generic import wrote nothing.
	if _, err := os.Stat(filepath.Join(store, "x.prof")); err == nil {
		t.Error("a failed import wrote a profile")
	}
	// A corrupt file is named, the others are still listed, and the exit code says
	// something failed.
	corrupt := filepath.Join(store, "broken.prof")
	os.WriteFile(corrupt, []byte("CSMLPROF\x00\x01junk"), 0o644)
	code, out, errw := cli("profile", "list")
	if code != exitFailure || !strings.Contains(errw, corrupt) || strings.Count(out, "\n") != 54 {
		t.Errorf("list with a corrupt file: exit %d, stderr %q, %d lines", code, errw, strings.Count(out, "\n"))
	}
	code, _, errw = cli("profile", "show", "broken")
	if code != exitFailure || !strings.Contains(errw, corrupt) {
		t.Errorf("show broken: exit %d, %q", code, errw)
	}
}
