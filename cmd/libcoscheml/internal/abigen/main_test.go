// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		nargs     int
		want      []field
		err       string
	}{
		{"job", "#define L(X) \\\n\t/* size */ \\\n\tX(META, size, _, sizeof(struct j)) \\\n\tX(STR, a_b, AB, f(x, y)) /* c */ \\\n\tX(U32, n, N, g(h(1), 2))\nint rest;\n", 4,
			[]field{{kind: "META", name: "size", goName: "_"}, {kind: "STR", name: "a_b", goName: "AB"}, {kind: "U32", name: "n", goName: "N"}}, ""},
		{"answer", "#define L(X) X(META, size, _, _, ALWAYS) X(U32, r, R, conv, REWRITE)\n", 5,
			[]field{{kind: "META", name: "size", goName: "_", conv: "_", when: "ALWAYS"}, {kind: "U32", name: "r", goName: "R", conv: "conv", when: "REWRITE"}}, ""},
		{"missing", "#define M(X) X(META, size, _, _)\n", 4, nil, "not defined"},
		{"kind", "#define L(X) X(META, size, _, _) X(PTR, p, P, _)\n", 4, nil, "unknown kind"},
		{"repeated", "#define L(X) X(META, size, _, _) X(U32, n, N, _) X(U32, n, M, _)\n", 4, nil, "repeated"},
		{"args", "#define L(X) X(META, size, _, _) X(U32, n, N)\n", 4, nil, "3 arguments"},
		{"meta go name", "#define L(X) X(META, size, Size, _)\n", 4, nil, "_ exactly for META"},
		{"unnamed", "#define L(X) X(META, size, _, _) X(U32, n, _, _)\n", 4, nil, "_ exactly for META"},
		{"size first", "#define L(X) X(U32, n, N, _)\n", 4, nil, "first field must be size"},
		{"when", "#define L(X) X(META, size, _, _, ALWAYS) X(U32, r, R, _, SOMETIMES)\n", 5, nil, "ALWAYS or REWRITE"},
		{"string conv", "#define L(X) X(META, size, _, _, ALWAYS) X(STR, s, S, f, ALWAYS)\n", 5, nil, "no conversion"},
		{"unclosed", "#define L(X) X(META, size, _, _\n", 4, nil, "unclosed"},
		{"stray", "#define L(X) X(META, size, _, _) Y(1)\n", 4, nil, "want X(...)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseList(tc.src, "L", tc.nargs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("field %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestGenerateFromHeader: the real header's lists parse, and each field of
// them reaches the Go code.
func TestGenerateFromHeader(t *testing.T) {
	out := filepath.Join(t.TempDir(), "abi_gen.go")
	if err := run("../../../../plugin-c/coscheml_abi.h", "../../queue.h", out, filepath.Join(t.TempDir(), "cqtest_gen.go")); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\bComment: +goString\(job\.comment\),`, `\bExclusive: +job\.exclusive != 0,`,
		`a\.num\.replace = replaceBits\(res\.Replace\)`, `s\[C\.CQ_ANS_decision_line\] = &ans\.decision_line`} {
		if !regexp.MustCompile(want).Match(code) {
			t.Errorf("generated code lacks %s", want)
		}
	}
}
