// SPDX-License-Identifier: Apache-2.0

package licensecheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// headerLines is how far into a file the identifier may be: after a shebang
// and, in Go, before the build constraint.
const headerLines = 3

// expected is the SPDX licence expression a file must carry, by its path
// relative to the repository root (slash-separated).
func expected(rel string) string {
	switch {
	case rel == "plugin-c/coscheml_abi.h":
		// Included by the GPL plugin and the Apache-2.0 library alike.
		return "Apache-2.0 OR GPL-2.0-or-later"
	case strings.HasPrefix(rel, "plugin-c/"):
		// Loaded into slurmctld, built from Slurm's headers: Slurm's licence.
		return "GPL-2.0-or-later"
	default:
		return "Apache-2.0"
	}
}

// skippedDirs are build outputs and reports: nothing in them is written by hand.
var skippedDirs = map[string]bool{
	".git": true, "bin": true, "lib": true, "build": true, "dist": true,
	"demo-report": true, "node_modules": true,
}

// isSource says whether a file is source that needs a header: Go, C, headers,
// Makefiles, and any file that starts with a shebang (scripts, sbatch files).
func isSource(name string, head []byte) bool {
	switch filepath.Ext(name) {
	case ".go", ".c", ".h", ".sh":
		return true
	case ".md", ".csv", ".txt", ".model", ".json", ".yaml":
		return false
	}
	return name == "Makefile" || bytes.HasPrefix(head, []byte("#!"))
}

// identifier returns the SPDX expression in the first headerLines lines of text
// ("" when there is none).
func identifier(text []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for i := 0; i < headerLines && sc.Scan(); i++ {
		line := sc.Text()
		if _, after, ok := strings.Cut(line, "SPDX-License-Identifier:"); ok {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(after), "*/"))
		}
	}
	return ""
}

// problems walks root and lists every source file whose header is missing or
// names another licence than its part's.
func problems(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (skippedDirs[name] || strings.HasPrefix(name, "e2e-report") ||
				(strings.HasPrefix(name, ".") && name != ".ci")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.Contains(rel, "/testdata/fuzz/") {
			return nil // fuzz corpora are inputs, not source
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !isSource(name, text) {
			return nil
		}
		switch got, want := identifier(text), expected(rel); {
		case got == "":
			out = append(out, fmt.Sprintf("%s: no SPDX-License-Identifier in its first %d lines (want %s)", rel, headerLines, want))
		case got != want:
			out = append(out, fmt.Sprintf("%s: SPDX-License-Identifier %s, want %s", rel, got, want))
		}
		return nil
	})
	return out, err
}

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

func TestSourceFilesHaveSPDXHeaders(t *testing.T) {
	root := repoRoot(t)
	probs, err := problems(root)
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	for _, p := range probs {
		t.Error(p)
	}
}

// TestLicenceFilesPresent: the files NOTICE and the SPDX headers point to.
func TestLicenceFilesPresent(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		path, starts string
	}{
		{"LICENSE", "Apache License"},
		{"LICENSES/Apache-2.0.txt", "Apache License"},
		{"LICENSES/GPL-2.0-or-later.txt", "GNU GENERAL PUBLIC LICENSE"},
		{"plugin-c/LICENSE", "GNU GENERAL PUBLIC LICENSE"},
		{"NOTICE", "coscheml"},
		{"models/data/lucid-train/LICENSE.txt", "S-Lab License 1.0"},
		{"models/data/philly/LICENSE-Apache-2.0.txt", "Apache License"},
	} {
		b, err := os.ReadFile(filepath.Join(root, tc.path))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if !strings.HasPrefix(strings.TrimSpace(string(b)), tc.starts) {
			t.Errorf("%s does not start with %q", tc.path, tc.starts)
		}
	}
}

// TestProblemsFindsBadHeaders runs the check on a small tree of its own, so the
// check is known to catch what it is for.
func TestProblemsFindsBadHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, path, text string
		wantProblem      bool
	}{
		{"go with header", "pkg/a/a.go", "// SPDX-License-Identifier: Apache-2.0\n\npackage a\n", false},
		{"go without header", "pkg/a/a.go", "// Package a does things.\npackage a\n", true},
		{"go header too late", "pkg/a/a.go", "package a\n\n\n\n// SPDX-License-Identifier: Apache-2.0\n", true},
		{"go with build tag", "models/x.go", "// SPDX-License-Identifier: Apache-2.0\n\n//go:build nolucid\n\npackage models\n", false},
		{"plugin with GPL", "plugin-c/p.c", "/* SPDX-License-Identifier: GPL-2.0-or-later */\nint x;\n", false},
		{"plugin with Apache", "plugin-c/p.c", "/* SPDX-License-Identifier: Apache-2.0 */\nint x;\n", true},
		{"interface header dual", "plugin-c/coscheml_abi.h", "/* SPDX-License-Identifier: Apache-2.0 OR GPL-2.0-or-later */\n", false},
		{"interface header GPL only", "plugin-c/coscheml_abi.h", "/* SPDX-License-Identifier: GPL-2.0-or-later */\n", true},
		{"library C with GPL", "cmd/libcoscheml/q.c", "/* SPDX-License-Identifier: GPL-2.0-or-later */\n", true},
		{"script after shebang", ".ci/run", "#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\necho\n", false},
		{"script without", "slurm/prolog.sh", "#!/bin/sh\necho\n", true},
		{"extensionless script", "tools/x", "#!/bin/sh\nexit 0\n", true},
		{"makefile without", "Makefile", "all:\n", true},
		{"markdown ignored", "docs/x.md", "# x\n", false},
		{"fuzz corpus ignored", "pkg/a/testdata/fuzz/FuzzX/abc", "#!go test fuzz v1\n", false},
		{"build output ignored", "bin/coscheml", "#!/bin/sh\n", false},
		{"data ignored", "models/data/x.csv", "a,b\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, filepath.FromSlash(tc.path))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			probs, err := problems(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(probs) > 0; got != tc.wantProblem {
				t.Errorf("problems = %q, want a problem: %v", probs, tc.wantProblem)
			}
		})
	}
}
