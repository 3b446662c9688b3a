// SPDX-License-Identifier: Apache-2.0

package csvtab

import (
	"io"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := "\ufeff Name ,Count,X\n# comment\n\"multi\nline\",7,\n\nb , 2.5 ,z\n"
	tb, err := New(strings.NewReader(in), Options{Required: []string{"name", "count"}, Comments: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Next(); err != nil {
		t.Fatal(err)
	}
	if tb.Line() != 3 || tb.Str("name") != "multi\nline" || tb.Has("x") || !tb.Column("x") || tb.Str("absent") != "" {
		t.Errorf("row 1: line %d name %q has(x)=%v", tb.Line(), tb.Str("name"), tb.Has("x"))
	}
	if n, err := tb.Int("count", 0, 10); err != nil || n != 7 {
		t.Errorf("Int = %d, %v", n, err)
	}
	if _, err := tb.Int("count", 8, 10); err == nil || !strings.Contains(err.Error(), "line 3, column count") {
		t.Errorf("range error %v", err)
	}
	if err := tb.Next(); err != nil {
		t.Fatal(err)
	}
	if tb.Line() != 6 {
		t.Errorf("row 2 on line %d, want 6", tb.Line())
	}
	if v, err := tb.Float("count", 0, 3); err != nil || v != 2.5 {
		t.Errorf("Float = %v, %v", v, err)
	}
	if _, err := tb.Int("count", 0, 3); err == nil || !strings.Contains(err.Error(), `"2.5" is not an integer`) {
		t.Errorf("Int of 2.5: %v", err)
	}
	for _, bad := range []string{"NaN", "Inf", "-Inf", "1e400", "", "x"} {
		tb.rec[tb.col["x"]] = bad
		if _, err := tb.Float("x", -1e308, 1e308); err == nil {
			t.Errorf("Float(%q) accepted", bad)
		}
	}
	if err := tb.Next(); err != io.EOF {
		t.Errorf("after last row: %v", err)
	}
}

func TestHeaderErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		o    Options
		want string
	}{
		{"", Options{}, "no header"},
		{"a,,b\n", Options{}, "header column 2 is empty"},
		{"a,A\n", Options{}, `"a" appears twice`},
		{"a,b\n", Options{Required: []string{"c"}}, `missing required column "c"`},
		{"a,b\x1b\n", Options{Known: map[string]bool{"a": true}}, `unknown column "b?"`},
		{"a,\"b\n", Options{}, "line 1"},
	} {
		_, err := New(strings.NewReader(tc.in), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestRowErrors(t *testing.T) {
	tb, err := New(strings.NewReader("a,b\n1,2\n1,2,3\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Next(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Next(); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("wrong field count: %v", err)
	}
}
