// SPDX-License-Identifier: Apache-2.0

// Package docblocks reads the fenced code blocks of a Markdown guide and the
// doctest markers in front of them, so that the docs test (slurm/integration,
// TestSlurm/docs) can run every shell command the install guide and the quick
// start show. The convention is in CONTRIBUTING.md: every ```sh or ```bash
// block is run unless an HTML comment on the line just above its fence says
//
//	<!-- doctest: skip: REASON -->
//
// and a block whose output must show something says
//
//	<!-- doctest: expect: TEXT -->
package docblocks

import (
	"fmt"
	"regexp"
	"strings"
)

// Block is one fenced code block.
type Block struct {
	Line   int    // line of the opening fence, from 1
	Lang   string // first word of the fence's info string ("sh", "yaml", "")
	Text   string // the lines between the fences, each ending in "\n"
	Skip   string // why the block is not run; "" for a block that runs
	Expect string // text the block's output must contain; "" for none
}

// Shell reports whether the block holds shell commands (```sh or ```bash).
func (b Block) Shell() bool { return b.Lang == "sh" || b.Lang == "bash" }

// Run reports whether the docs test runs the block.
func (b Block) Run() bool { return b.Shell() && b.Skip == "" }

var (
	fenceRE   = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([^`\\s]*)")
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	markerRE  = regexp.MustCompile(`^\s*<!--\s*doctest:(.*?)-->\s*$`)
)

// parseMarker reads the inside of a doctest comment ("skip: REASON",
// "expect: TEXT").
func parseMarker(s string) (kind, arg string, err error) {
	kind, arg, ok := strings.Cut(strings.TrimSpace(s), ":")
	kind, arg = strings.TrimSpace(kind), strings.TrimSpace(arg)
	if !ok || (kind != "skip" && kind != "expect") {
		return "", "", fmt.Errorf("doctest marker %q: want \"skip: REASON\" or \"expect: TEXT\"", strings.TrimSpace(s))
	}
	if arg == "" {
		return "", "", fmt.Errorf("doctest marker %q: %s needs its text", strings.TrimSpace(s), kind)
	}
	return kind, arg, nil
}

// Extract returns the fenced blocks of markdown in order. With a section title,
// only the blocks under the heading with exactly that title (up to the next
// heading of the same or a higher level); a missing section is an error, so a
// renamed heading cannot silently leave its commands untested. A marker that
// does not parse, or that no fence follows, is an error too.
func Extract(markdown, section string) ([]Block, error) {
	lines := strings.Split(markdown, "\n")
	var (
		blocks   []Block
		cur      *Block
		fenceTok string
		inSect   = section == ""
		found    = section == ""
		sectLvl  int
		pending  *Block // marker seen on the previous line
		pendLine int
	)
	for i, line := range lines {
		n := i + 1
		if cur != nil {
			if m := fenceRE.FindStringSubmatch(line); m != nil && strings.HasPrefix(m[2], fenceTok) && m[3] == "" {
				if inSect {
					blocks = append(blocks, *cur)
				}
				cur = nil
				continue
			}
			cur.Text += line + "\n"
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			b := Block{Line: n, Lang: m[3]}
			if pending != nil {
				b.Skip, b.Expect = pending.Skip, pending.Expect
				pending = nil
			}
			cur, fenceTok = &b, m[2]
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("line %d: doctest marker not directly above a code fence", pendLine)
		}
		if m := markerRE.FindStringSubmatch(line); m != nil {
			kind, arg, err := parseMarker(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			pending, pendLine = &Block{}, n
			if kind == "skip" {
				pending.Skip = arg
			} else {
				pending.Expect = arg
			}
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil && section != "" {
			lvl := len(m[1])
			switch {
			case m[2] == section:
				inSect, found, sectLvl = true, true, lvl
			case inSect && lvl <= sectLvl:
				inSect = false
			}
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: code fence never closed", cur.Line)
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: doctest marker not directly above a code fence", pendLine)
	}
	if !found {
		return nil, fmt.Errorf("no heading %q", section)
	}
	return blocks, nil
}

// Guide is a Markdown file (or one section of it) whose shell blocks the docs
// test runs.
type Guide struct {
	File    string // relative to the repository root
	Section string // heading title; "" for the whole file
}

// Guides are the files the docs test covers: the quick start of the README and
// the whole install guide.
var Guides = []Guide{
	{File: "README.md", Section: "Quick start with the shipped data"},
	{File: "docs/install.md"},
}

var (
	// hostCommandRE finds commands that change the host: packages, services,
	// installs, reboots.
	hostCommandRE = regexp.MustCompile(`(^|[\s;&|(])(systemctl|apt|apt-get|dnf|yum|rpm|dpkg|sudo|reboot|shutdown|make\s+(install|uninstall|clean|integration\S*))\b`)
	// hostPathRE finds the folders of a real installation.
	hostPathRE = regexp.MustCompile(`/etc/coscheml|/var/lib/coscheml|/var/log/slurm|/usr/libexec/coscheml|/usr/local/|/etc/slurm`)
)

// HostChange says why a block, after the docs test's path substitutions, must
// not run on the machine the suite runs on: it changes the host (packages,
// services, installs) or reaches a real installation's files. "" when it may run.
// A guide edited without a skip marker thus fails the test instead of touching
// the host.
func HostChange(script string) string {
	if m := hostCommandRE.FindString(script); m != "" {
		return fmt.Sprintf("runs %q, which changes the host", strings.TrimSpace(m))
	}
	if m := hostPathRE.FindString(script); m != "" {
		return fmt.Sprintf("reaches %s of the host", m)
	}
	return ""
}
