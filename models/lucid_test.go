// SPDX-License-Identifier: Apache-2.0

package models

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readLucid is how a build without the embedded data (tag nolucid) finds the
// files coscheml-model-lucid installs.
func TestReadLucid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		want    []byte
		noLucid bool   // the error is ErrNoLucid
		errHas  string // "" = no error
	}{
		{
			name:  "installed",
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, SoloFile), DefaultSoloCSV) },
			want:  DefaultSoloCSV,
		},
		{
			name:    "not installed",
			setup:   func(t *testing.T, dir string) {},
			noLucid: true,
			errHas:  "coscheml-model-lucid package is not installed",
		},
		{
			name: "a folder in its place",
			setup: func(t *testing.T, dir string) {
				if err := os.Mkdir(filepath.Join(dir, SoloFile), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			errHas: "not a regular file",
		},
		{
			name:   "too big",
			setup:  func(t *testing.T, dir string) { write(t, filepath.Join(dir, SoloFile), make([]byte, maxCSVBytes+1)) },
			errHas: "more than",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			got, err := readLucid(dir, SoloFile)
			if tc.errHas == "" {
				if err != nil || !bytes.Equal(got, tc.want) {
					t.Fatalf("readLucid = %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("readLucid error %v, want one saying %q", err, tc.errHas)
			}
			if errors.Is(err, ErrNoLucid) != tc.noLucid {
				t.Errorf("errors.Is(%v, ErrNoLucid) = %v, want %v", err, !tc.noLucid, tc.noLucid)
			}
			if tc.noLucid && !strings.Contains(err.Error(), filepath.Join(dir, SoloFile)) {
				t.Errorf("error %v does not name the file looked for", err)
			}
		})
	}
}

// A repository build embeds the data, and Solo/Pairs hand it out.
func TestEmbeddedLucid(t *testing.T) {
	if !Embedded {
		t.Skip("built with nolucid")
	}
	for name, get := range map[string]func() ([]byte, error){"Solo": Solo, "Pairs": Pairs} {
		b, err := get()
		if err != nil || len(b) == 0 {
			t.Errorf("%s() = %d bytes, %v", name, len(b), err)
		}
	}
	if Source() != "built in" {
		t.Errorf("Source() = %q", Source())
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
