// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/coscheml/coscheml"

// mapRow is a table row of docs/architecture.md that names a package:
// "| `pkg/submit` | ... |".
var mapRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// slurmctldMap returns the packages listed in the "In slurmctld" section of
// docs/architecture.md, in the module-relative form go list prints them after
// the module path.
func slurmctldMap(text string) ([]string, error) {
	var pkgs []string
	in, found := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.HasPrefix(line, "### In slurmctld")
			found = found || in
			continue
		}
		if m := mapRow.FindStringSubmatch(line); in && m != nil {
			pkgs = append(pkgs, m[1])
		}
	}
	if !found {
		return nil, errors.New(`no "### In slurmctld" section`)
	}
	if len(pkgs) == 0 {
		return nil, errors.New(`the "### In slurmctld" section lists no package`)
	}
	return pkgs, nil
}

func TestSlurmctldMapParse(t *testing.T) {
	doc := "# A\n\n### In slurmctld\n\n| package | role |\n|---|---|\n| `cmd/libcoscheml` | bridge |\n| `pkg/submit` | engine |\n\n### On the nodes\n\n| `cmd/coscheml-node` | node |\n"
	got, err := slurmctldMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cmd/libcoscheml", "pkg/submit"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("slurmctldMap = %v, want %v", got, want)
	}
	if _, err := slurmctldMap("# A\n\n### Elsewhere\n| `pkg/x` | y |\n"); err == nil {
		t.Error("a document without the section parsed without error")
	}
}

// slurmctldDeps lists the module's packages linked into slurmctld: the
// dependencies of the c-shared library, as go list resolves them.
func slurmctldDeps(t *testing.T, root string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if g := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
			goTool = g
		} else {
			t.Skip("the go tool is not on PATH: cannot list slurmctld's dependencies (go list -deps ./cmd/libcoscheml)")
		}
	}
	cmd := exec.Command(goTool, "list", "-deps", "./cmd/libcoscheml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps ./cmd/libcoscheml: %v\n%s", err, ee.Stderr)
		}
		t.Skipf("go list could not run: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if p == module {
			pkgs = append(pkgs, ".")
		} else if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			pkgs = append(pkgs, rel)
		}
	}
	return pkgs
}

// TestSlurmctldPackageMap fails when a package of this module is linked into
// slurmctld (go list -deps ./cmd/libcoscheml) without being on the map of
// docs/architecture.md, where the rules that hold only there are written, or
// when the map lists a package slurmctld no longer links.
func TestSlurmctldPackageMap(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("read docs/architecture.md: %v", err)
	}
	listed, err := slurmctldMap(string(b))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	deps := slurmctldDeps(t, root)
	if len(deps) == 0 {
		t.Fatal("go list -deps ./cmd/libcoscheml named no package of this module")
	}
	onMap := map[string]bool{}
	for _, p := range listed {
		onMap[p] = true
	}
	linked := map[string]bool{}
	for _, p := range deps {
		linked[p] = true
		if !onMap[p] {
			t.Errorf("%s is linked into slurmctld but not on the map: add it to \"In slurmctld\" in docs/architecture.md (and keep its decision path to the rules there), or keep it out of cmd/libcoscheml's imports", p)
		}
	}
	for _, p := range listed {
		if !linked[p] {
			t.Errorf("docs/architecture.md lists %s under \"In slurmctld\", but slurmctld does not link it: move it to where it runs", p)
		}
	}
	sort.Strings(deps)
	t.Logf("%d packages in slurmctld: %s", len(deps), strings.Join(deps, " "))
}
