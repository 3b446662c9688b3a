// Package safetext makes untrusted text (tags, comments, file contents) safe to put
// in a log line, an error or a user's terminal: printable ASCII only, bounded length.
package safetext

import "strings"

// Sanitize is for short quoted fields: printable ASCII only (others, and '"' and
// '\\', become '?'), at most 80 characters, then "...".
func Sanitize(s string) string { return clean(s, 80, true) }

// Limit is for longer messages: printable ASCII only (others become '?'), at most n
// bytes, then "...". Quotes are kept.
func Limit(s string, n int) string { return clean(s, n, false) }

func clean(s string, limit int, quotes bool) string {
	var b strings.Builder
	for i, r := range s {
		if i >= limit {
			b.WriteString("...")
			break
		}
		if r < 0x20 || r > 0x7e || (quotes && (r == '"' || r == '\\')) {
			b.WriteByte('?')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
