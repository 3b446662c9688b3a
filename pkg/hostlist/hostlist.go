// SPDX-License-Identifier: Apache-2.0

// Package hostlist expands Slurm host lists such as "n[1-4,7],gpu[01-02]".
package hostlist

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds an expansion: a hostile or mistyped list such as "n[1-999999999]"
// must fail, not exhaust memory.
const MaxHosts = 1 << 20

// Expand returns the host names of a Slurm host list in order. Commas outside
// brackets separate host expressions; each bracket holds comma-separated numbers or
// ranges ("01-12" keeps the zero padding); several brackets in one expression form
// their cartesian product ("r[1-2]n[1-2]" is r1n1,r1n2,r2n1,r2n2).
func Expand(list string) ([]string, error) {
	var out []string
	for _, expr := range splitTop(list) {
		expr = strings.TrimSpace(expr)
		if expr == "" {
			continue
		}
		hosts, err := expandOne(expr, MaxHosts-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", clip(list), err)
		}
		for _, h := range hosts {
			if err := checkName(h); err != nil {
				return nil, fmt.Errorf("hostlist %q: %w", clip(list), err)
			}
		}
		out = append(out, hosts...)
	}
	return out, nil
}

// Split returns a host list's expressions (commas outside brackets separate
// them), unexpanded: for lists that may mix host expressions with other names
// (slurm.conf's NodeSet names, ALL).
func Split(list string) []string { return splitTop(list) }

// splitTop splits on commas that are not inside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandOne expands one expression with zero or more bracket groups.
func expandOne(expr string, budget int) ([]string, error) {
	open := strings.IndexByte(expr, '[')
	if open < 0 {
		if strings.IndexByte(expr, ']') >= 0 {
			return nil, fmt.Errorf("unbalanced ']' in %q", clip(expr))
		}
		if err := checkChars(expr); err != nil {
			return nil, err
		}
		return []string{expr}, nil
	}
	closeAt := strings.IndexByte(expr[open:], ']')
	if closeAt < 0 {
		return nil, fmt.Errorf("unbalanced '[' in %q", clip(expr))
	}
	closeAt += open
	prefix, body, rest := expr[:open], expr[open+1:closeAt], expr[closeAt+1:]
	if strings.IndexByte(body, '[') >= 0 {
		return nil, fmt.Errorf("nested '[' in %q", clip(expr))
	}
	if prefix != "" {
		if err := checkChars(prefix); err != nil {
			return nil, err
		}
	}
	suffixes := []string{""}
	if rest != "" {
		var err error
		if suffixes, err = expandOne(rest, budget); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, item := range strings.Split(body, ",") {
		lo, hi, width, err := parseRange(item)
		if err != nil {
			return nil, fmt.Errorf("in %q: %w", clip(expr), err)
		}
		if (hi-lo+1)*int64(len(suffixes)) > int64(budget-len(out)) {
			return nil, fmt.Errorf("expands to more than %d hosts", MaxHosts)
		}
		for n := lo; n <= hi; n++ {
			num := strconv.FormatInt(n, 10)
			if pad := width - len(num); pad > 0 {
				num = strings.Repeat("0", pad) + num
			}
			for _, s := range suffixes {
				out = append(out, prefix+num+s)
			}
		}
	}
	return out, nil
}

// parseRange reads "7" or "01-12"; width is the zero-padded width of the low bound.
func parseRange(item string) (lo, hi int64, width int, err error) {
	a, b, isRange := strings.Cut(item, "-")
	if lo, err = parseNum(a); err != nil {
		return 0, 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parseNum(b); err != nil {
			return 0, 0, 0, err
		}
		if hi < lo {
			return 0, 0, 0, fmt.Errorf("range %q runs backwards", clip(item))
		}
	}
	if len(a) > 1 && a[0] == '0' {
		width = len(a)
	}
	return lo, hi, width, nil
}

func parseNum(s string) (int64, error) {
	if s == "" || len(s) > 9 {
		return 0, fmt.Errorf("bad number %q in range", clip(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("bad number %q in range", clip(s))
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// ValidName reports whether s is a plausible node name: letters, digits, '-', '_'
// and '.', not starting with '.' or '-'. Node names become file names and
// req_nodes values, so nothing else is let through.
func ValidName(s string) bool { return checkName(s) == nil }

func checkName(s string) error {
	if s == "" || len(s) > 255 {
		return fmt.Errorf("bad host name length %d", len(s))
	}
	if s[0] == '.' || s[0] == '-' {
		return fmt.Errorf("host name %q starts with %q", clip(s), s[0])
	}
	return checkChars(s)
}

// checkChars accepts letters, digits, '-', '_' and '.'.
func checkChars(s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("bad character %q in host name %q", c, clip(s))
		}
	}
	return nil
}

// clip keeps error messages short and printable.
func clip(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i == 60 {
			b.WriteString("...")
			break
		}
		c := s[i]
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b.WriteByte(c)
	}
	return b.String()
}
