// SPDX-License-Identifier: Apache-2.0

package safetext

import (
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"resnet18-bs32", "resnet18-bs32"},
		{"a\nb\x00c", "a?b?c"},
		{`say "hi" \o/`, "say ?hi? ?o/"},
		{"héllo", "h?llo"},
		{strings.Repeat("x", 100), strings.Repeat("x", 80) + "..."},
	}
	for _, c := range cases {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLimit(t *testing.T) {
	if got := Limit(`a "b"`+"\r\n", 10); got != `a "b"??` {
		t.Errorf("Limit kept/removed the wrong bytes: %q", got)
	}
	if got := Limit(strings.Repeat("y", 20), 5); got != "yyyyy..." {
		t.Errorf("Limit cut: %q", got)
	}
}

func FuzzSanitize(f *testing.F) {
	f.Add("coscheml:app=../../etc;rm -rf /\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Sanitize(s), Limit(s, 300)} {
			for i := 0; i < len(out); i++ {
				if out[i] < 0x20 || out[i] > 0x7e {
					t.Fatalf("unsafe byte %#x in %q", out[i], out)
				}
			}
		}
		if got, want := Sanitize(s), cleanRef(s, 80, true); got != want {
			t.Fatalf("Sanitize(%q) = %q, the rune-by-rune reference says %q", s, got, want)
		}
		if got, want := Limit(s, 300), cleanRef(s, 300, false); got != want {
			t.Fatalf("Limit(%q) = %q, the rune-by-rune reference says %q", s, got, want)
		}
		if len(Sanitize(s)) > 83 {
			t.Fatalf("Sanitize too long: %d", len(Sanitize(s)))
		}
	})
}

// cleanRef is the plain rune-by-rune definition the fast path must agree with.
func cleanRef(s string, limit int, quotes bool) string {
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
