// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Lucid-derived files: only coscheml-model-lucid may ship them.
var lucidFiles = []string{
	"models/default.model",
	"models/data/lucid-train/solo_profiles.csv",
	"models/data/lucid-train/colocate_pairs.csv",
}

// lucidMarkers are byte strings found only in the Lucid files: a data row of
// each CSV and a window of the model's body.
func lucidMarkers(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range lucidFiles {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".csv") {
			lines := bytes.Split(b, []byte("\n"))
			if len(lines) < 3 {
				t.Fatalf("%s: fewer than 3 lines", f)
			}
			out[f] = lines[1]
		} else {
			out[f] = b[len(b)/2 : len(b)/2+64]
		}
	}
	return out
}

// The packages' configurations: the Lucid files go into coscheml-model-lucid
// and nowhere else.
func TestLucidFilesOnlyInTheModelPackage(t *testing.T) {
	shipped := map[string]map[string]bool{}
	for _, file := range []string{"nfpm-coscheml.yaml", "nfpm-slurm-plugin.yaml", "nfpm-model-lucid.yaml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var c nfpmConfig
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		shipped[c.Name] = map[string]bool{}
		for _, e := range c.Contents {
			shipped[c.Name][e.Src] = true
		}
	}
	for _, f := range lucidFiles {
		for name, srcs := range shipped {
			if name != "coscheml-model-lucid" && srcs[f] {
				t.Errorf("package %s ships %s", name, f)
			}
		}
		if !shipped["coscheml-model-lucid"][f] {
			t.Errorf("coscheml-model-lucid does not ship %s", f)
		}
	}
}

// The programs and library `make package` builds (make package-binaries)
// contain no Lucid data, read it from LUCID_DIR when it is there, and say what
// is missing when it is not. A repository build still embeds it, which also
// shows the markers would be found.
func TestPackagedBinariesHaveNoLucidData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the packaged programs (a minute or more)")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	markers := lucidMarkers(t)
	tmp := t.TempDir()
	lucidDir := filepath.Join(tmp, "lucid")
	pkg := filepath.Join(tmp, "package")
	out, err := exec.Command("make", "-s", "-C", "..", "package-binaries", "PKGBUILD="+pkg, "LUCID_DIR="+lucidDir).CombinedOutput()
	if err != nil {
		t.Fatalf("make package-binaries: %v\n%s", err, out)
	}
	for _, bin := range []string{"bin/coscheml", "bin/coscheml-train", "bin/coscheml-node", "lib/libcoscheml.so"} {
		b, err := os.ReadFile(filepath.Join(pkg, bin))
		if err != nil {
			t.Fatal(err)
		}
		for f, m := range markers {
			if bytes.Contains(b, m) {
				t.Errorf("packaged %s contains Lucid data (%s)", bin, f)
			}
		}
	}

	// Positive control: the repository's own build embeds the data.
	repoBin := filepath.Join(tmp, "coscheml-repo")
	if out, err := exec.Command("go", "build", "-o", repoBin, "../cmd/coscheml").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := os.ReadFile(repoBin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, markers["models/data/lucid-train/solo_profiles.csv"]) {
		t.Error("a repository build of coscheml does not embed the Lucid solo profiles: the markers prove nothing")
	}

	cfg := filepath.Join(tmp, "c.yaml")
	yml := "profile_dir: " + filepath.Join(tmp, "profiles") + "\nresidency_dir: " + filepath.Join(tmp, "residency") + "\n"
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	predict := func() (string, error) {
		cmd := exec.Command(filepath.Join(pkg, "bin/coscheml"), "--config", cfg, "predict", "resnet18-bs128", "dcgan-bs128")
		cmd.Env = append(os.Environ(), "COSCHEML_CONFIG=", "COSCHEML_MODEL=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name      string
		installed bool
		wantErr   bool
		want      string
	}{
		{"without coscheml-model-lucid", false, true, "coscheml-model-lucid"},
		{"with coscheml-model-lucid", true, false, "resnet18-bs128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.installed {
				if err := os.MkdirAll(lucidDir, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, f := range lucidFiles {
					b, err := os.ReadFile(filepath.Join("..", f))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(lucidDir, filepath.Base(f)), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			out, err := predict()
			if (err != nil) != tc.wantErr || !strings.Contains(out, tc.want) {
				t.Errorf("coscheml predict: err %v, want an error: %v; output does not say %q:\n%s", err, tc.wantErr, tc.want, out)
			}
		})
	}
}

// When make package has run, the .deb files in dist/ split as documented: the
// programs' package lists no Lucid file and its binaries hold no Lucid data;
// coscheml-model-lucid holds the data.
func TestDebPackagesSplitLucid(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("no dpkg-deb")
	}
	debs := map[string]string{}
	for _, pattern := range []string{"coscheml_*.deb", "coscheml-model-lucid_*.deb"} {
		m, _ := filepath.Glob(filepath.Join("..", "dist", pattern))
		if len(m) == 0 {
			t.Skipf("no dist/%s (make package)", pattern)
		}
		debs[pattern] = m[len(m)-1]
	}
	list := func(deb string) string {
		out, err := exec.Command("dpkg-deb", "-c", deb).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: %v", deb, err)
		}
		return string(out)
	}
	if l := list(debs["coscheml_*.deb"]); strings.Contains(l, "/lucid") || strings.Contains(l, "default.model") ||
		strings.Contains(l, "colocate_pairs") || strings.Contains(l, "solo_profiles") {
		t.Errorf("%s lists Lucid files:\n%s", debs["coscheml_*.deb"], l)
	}
	l := list(debs["coscheml-model-lucid_*.deb"])
	for _, f := range []string{"usr/share/coscheml/lucid/default.model", "usr/share/coscheml/lucid/solo_profiles.csv",
		"usr/share/coscheml/lucid/colocate_pairs.csv", "usr/share/coscheml/lucid/LICENSE.txt"} {
		if !strings.Contains(l, f) {
			t.Errorf("%s lacks %s", debs["coscheml-model-lucid_*.deb"], f)
		}
	}
	dir := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", debs["coscheml_*.deb"], dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	markers := lucidMarkers(t)
	for _, bin := range []string{"usr/bin/coscheml", "usr/bin/coscheml-train", "usr/bin/coscheml-node", "usr/lib/coscheml/libcoscheml.so"} {
		b, err := os.ReadFile(filepath.Join(dir, bin))
		if err != nil {
			t.Fatal(err)
		}
		for f, m := range markers {
			if bytes.Contains(b, m) {
				t.Errorf("packaged /%s contains Lucid data (%s)", bin, f)
			}
		}
	}
}
