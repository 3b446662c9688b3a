// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// workItem matches the ways a line can name a work item instead of saying what
// is true now. Unix sessions (setsid, "a new session") are not work items, so
// "session" counts only with an ordinal or a pointer word in front of it.
var workItem = regexp.MustCompile(`(?i)` + strings.Join([]string{
	`\bissues?\s*#?\d+`,
	`\bfollow-?ups?\b`,
	`\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(st|nd|rd|th))\s+pass(es)?\b`,
	`\bwork\s+items?\b`,
	`\b(this|that|previous|earlier|later|other|another|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+sessions?\b`,
	`(^|[\s(\[,;])#\d+\b`,
}, "|"))

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

// skippedDirs are build outputs, reports and data: nothing in them is written
// by hand.
var skippedDirs = map[string]bool{
	".git": true, "bin": true, "lib": true, "build": true, "dist": true,
	"demo-report": true, "e2e-report": true, "e2e-report-parts": true,
	"testdata": true, "node_modules": true,
}

// dataExt are files of data, not prose or code.
var dataExt = map[string]bool{
	".csv": true, ".json": true, ".model": true, ".svg": true, ".gz": true,
	".log": true, ".txt": true, ".prof": true, ".so": true, ".a": true, ".o": true,
}

// checkedFiles lists the hand-written files whose every line must say what is
// true now: Markdown, non-test Go, C and headers, Makefiles, scripts and
// configuration. Test files may name the history they guard against.
func checkedFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if skippedDirs[name] || rel == "models/data" ||
				(strings.HasPrefix(name, ".") && name != ".ci") ||
				strings.HasPrefix(name, "e2e-report") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") ||
			strings.HasSuffix(name, ".test") || dataExt[filepath.Ext(name)] {
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return files
}

// textOf returns the file's content, or nil for a binary file (a NUL byte in
// its first 8 KiB) or one too large to be hand-written.
func textOf(t *testing.T, path string) []byte {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if info.Size() > 4<<20 {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	head := b
	if len(head) > 8192 {
		head = head[:8192]
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	return b
}

func TestWorkItemPattern(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"fixed in issue 13", true},
		{"see Issue #27", true},
		{"figures of follow-up 8", true},
		{"the follow-up showed", true},
		{"measured in the ninth pass", true},
		{"Fifth pass (six runs)", true},
		{"the 3rd pass of the study", true},
		{"a work item of the lead", true},
		{"earlier this session", true},
		{"the fourth session's runs", true},
		{"four other sessions' suites", true},
		{"closes #12", true},
		{"(#7)", true},
		{"starts in a new session (setsid)", false},
		{"its own session, like the sampler", false},
		{`stroke="#333"`, false},
		{"palette #d62728", false},
		{"the loop's pass over deferred jobs", false},
		{"a second pass at wait_confidence", true},
		{"one pass of the loop", false},
		{"the helper may pass one interval", false},
		{"pass 29.9 | pass 354.5", false},
		{"issued 3 commands", false},
		{"an issue with the driver", false},
	} {
		if got := workItem.MatchString(tc.line); got != tc.want {
			t.Errorf("workItem.MatchString(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// TestNoWorkItemReferences fails on any line of the documentation or of
// non-test code that names a work item: such a line tells a reader about the
// project's history, which belongs in CHANGELOG.md (described, not numbered),
// instead of what is true now.
func TestNoWorkItemReferences(t *testing.T) {
	root := repoRoot(t)
	files := checkedFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no files to check")
	}
	checked := 0
	for _, path := range files {
		b := textOf(t, path)
		if b == nil {
			continue
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			if m := workItem.FindString(line); m != "" {
				t.Errorf("%s:%d names a work item (%q): say what is true now, or move the history to CHANGELOG.md", filepath.ToSlash(rel), i+1, strings.TrimSpace(m))
			}
		}
	}
	for _, must := range []string{"README.md", "docs/architecture.md", "docs/evaluation.md", "CHANGELOG.md"} {
		if _, err := os.Stat(filepath.Join(root, must)); err != nil {
			t.Errorf("%s: %v", must, err)
		}
	}
	t.Logf("%d files checked", checked)
}
