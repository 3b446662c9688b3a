// SPDX-License-Identifier: Apache-2.0

package hostlist

import (
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"n1", []string{"n1"}},
		{"n[1-4,7]", []string{"n1", "n2", "n3", "n4", "n7"}},
		{"gpu[01-03],x", []string{"gpu01", "gpu02", "gpu03", "x"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"a[8-10]", []string{"a8", "a9", "a10"}},
		{"[1-2]", []string{"1", "2"}},
		{"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		{"", nil},
		{" n1 , n2 ", []string{"n1", "n2"}},
	}
	for _, tc := range tests {
		got, err := Expand(tc.in)
		if err != nil {
			t.Errorf("Expand(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Expand(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"n[1-", "unbalanced '['"},
		{"n1]", "unbalanced ']'"},
		{"n[4-1]", "backwards"},
		{"n[a-b]", "bad number"},
		{"n[1-999999999]", "more than"},
		{"n[1-2][1-999999]", "more than"},
		{"n;rm", "bad character"},
		{"../etc", "bad character"},
		{".hidden", "starts with"},
		{"n[[1]]", "nested"},
		{"n[]", "bad number"},
	}
	for _, tc := range tests {
		_, err := Expand(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Expand(%q) error = %v, want it to mention %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"n1": true, "gpu-01.cluster": true, "": false, "a/b": false, "-x": false, "a b": false} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"n[1-4,7]", "r[1-2]n[01-03]", "a,b,c", "x[", "n[9-1]", "]", "n[1-2],[3]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := Expand(s)
		if err != nil {
			return
		}
		if len(hosts) > MaxHosts {
			t.Fatalf("%d hosts > MaxHosts", len(hosts))
		}
		for _, h := range hosts {
			if !ValidName(h) {
				t.Fatalf("Expand(%q) produced invalid name %q", s, h)
			}
		}
	})
}
