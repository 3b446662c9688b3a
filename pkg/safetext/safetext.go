// SPDX-License-Identifier: Apache-2.0

// Package safetext makes untrusted text (tags, comments, file contents) safe to put
// in a log line, an error or a user's terminal: printable ASCII only, bounded length.
package safetext

// Sanitize is for short quoted fields: printable ASCII only (others, and '"' and
// '\\', become '?'), at most 80 characters, then "...".
func Sanitize(s string) string { return clean(s, 80, true) }

// Limit is for longer messages: printable ASCII only (others become '?'), at most n
// bytes, then "...". Quotes are kept.
func Limit(s string, n int) string { return clean(s, n, false) }

func clean(s string, limit int, quotes bool) string {
	// Fast path, the common case on the submit path: nothing to replace or cut,
	// so the string is returned as is, without a copy.
	if len(s) <= limit && safeASCII(s, quotes) {
		return s
	}
	b := make([]byte, 0, min(len(s), limit)+3)
	for i, r := range s {
		if i >= limit {
			b = append(b, "..."...)
			break
		}
		if r < 0x20 || r > 0x7e || (quotes && (r == '"' || r == '\\')) {
			b = append(b, '?')
			continue
		}
		b = append(b, byte(r))
	}
	return string(b)
}

// safeASCII says whether every byte of s is printable ASCII (and, with quotes,
// neither '"' nor '\\'): clean would return s unchanged.
func safeASCII(s string, quotes bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || (quotes && (c == '"' || c == '\\')) {
			return false
		}
	}
	return true
}
