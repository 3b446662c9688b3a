// SPDX-License-Identifier: Apache-2.0

package elfsym

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildSO compiles a small shared object exporting the given C source.
func buildSO(t *testing.T, src string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	c := filepath.Join(dir, "x.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, "x.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

func TestUint32(t *testing.T) {
	so := buildSO(t, `#include <stdint.h>
const uint32_t plugin_version = 0x1a0503;
const uint32_t coscheml_plugin_abi = 2;
const uint64_t wide = 7;
extern int undefined_here(void);
int f(void) { return undefined_here(); }
`)
	cases := []struct {
		name    string
		want    uint32
		wantErr string
	}{
		{"plugin_version", 0x1a0503, ""},
		{"coscheml_plugin_abi", 2, ""},
		{"wide", 0, "8 bytes"},
		{"missing", 0, "not found"},
		{"undefined_here", 0, "undefined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Uint32File(so, tc.name)
			if tc.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("got %#x, %v; want error with %q", v, err, tc.wantErr)
				}
				return
			}
			if err != nil || v != tc.want {
				t.Fatalf("got %#x, %v; want %#x", v, err, tc.want)
			}
		})
	}
	if _, err := Uint32File(so, "missing"); !errors.Is(err, ErrNoSymbol) {
		t.Errorf("missing symbol: %v is not ErrNoSymbol", err)
	}
	if _, err := Uint32File(filepath.Join(t.TempDir(), "none.so"), "x"); err == nil {
		t.Error("a missing file must be an error")
	}
	if got := SlurmVersion(0x1a0503); got != "26.05.3" {
		t.Errorf("SlurmVersion = %s", got)
	}
	if got := SlurmVersion(0x160508); got != "22.05.8" {
		t.Errorf("SlurmVersion = %s", got)
	}
}

func FuzzUint32(f *testing.F) {
	f.Add([]byte("\x7fELF"))
	f.Add([]byte("not elf at all"))
	if b, err := os.ReadFile("/bin/true"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Uint32(bytes.NewReader(b), "plugin_version") // must not panic or hang
	})
}
