// SPDX-License-Identifier: Apache-2.0

package model

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// Current resolves model_path as the plugin does: "" is the default model.
func TestCurrent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "site.model")
	def, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	site := *def
	site.Source = "a site model"
	if err := site.Save(file); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, name, source string
		err                error
	}{
		{"", DefaultModelName, def.Source, nil},
		{file, file, "a site model", nil},
		{filepath.Join(dir, "none.model"), filepath.Join(dir, "none.model"), "", fs.ErrNotExist},
	} {
		m, name, err := Current(tc.path)
		if name != tc.name || !errors.Is(err, tc.err) || (err == nil && m.Source != tc.source) {
			t.Errorf("Current(%q): name %q err %v, want %q and %v", tc.path, name, err, tc.name, tc.err)
		}
	}
}
