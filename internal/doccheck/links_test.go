// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+(\S+)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// proseLines returns the lines of a Markdown file outside fenced code blocks,
// numbered from 1; code blocks hold commands, not links.
func proseLines(text string) map[int]string {
	lines := map[int]string{}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			lines[i+1] = line
		}
	}
	return lines
}

// slug is GitHub's anchor for a heading: lower case, everything but letters,
// digits, spaces, hyphens and underscores dropped, spaces as hyphens.
func slug(title string) string {
	title = linkText.ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors a Markdown text defines: its headings' slugs
// (repeated titles numbered -1, -2, as GitHub does) and explicit <a id>.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
	}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ title, want string }{
		{"Slurm 22.05's first-fit shard choice", "slurm-2205s-first-fit-shard-choice"},
		{"6. Change slurm.conf and gres.conf", "6-change-slurmconf-and-gresconf"},
		{"`job_modify` (scontrol update)", "job_modify-scontrol-update"},
		{"Against the paper's claims", "against-the-papers-claims"},
		{"Ground truth (`pkg/truth`), separate from the model", "ground-truth-pkgtruth-separate-from-the-model"},
		{"See [the docs](x.md) now", "see-the-docs-now"},
	} {
		if got := slug(tc.title); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.title, got, tc.want)
		}
	}
	a := anchors("# A\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n<a id=\"here\"></a>\n")
	for _, want := range []string{"a", "notes", "notes-1", "here"} {
		if !a[want] {
			t.Errorf("anchors: %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("anchors: a comment in a code block counted as a heading")
	}
}

// TestMarkdownLinks fails on any intra-repository link in a Markdown file whose
// file does not exist or whose #anchor names no heading of its target.
func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	links := 0
	for _, path := range checkedFiles(t, root) {
		if filepath.Ext(path) != ".md" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for n, line := range proseLines(string(b)) {
			line = inlineCode.ReplaceAllString(line, "")
			var targets []string
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", rel, n, target, file)
						continue
					}
				}
				if anchor == "" || filepath.Ext(dest) != ".md" {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, n, target, err)
					continue
				}
				if !a[anchor] {
					t.Errorf("%s:%d: link %q: no heading with anchor #%s in %s", rel, n, target, anchor, filepath.Base(dest))
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no intra-repository links found: the link pattern is broken")
	}
	t.Logf("%d intra-repository links checked", links)
}
