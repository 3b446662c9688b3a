// SPDX-License-Identifier: Apache-2.0

package models

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// LucidDir is where the coscheml-model-lucid package installs the Lucid data and
// the default model. A build without them (tag nolucid) reads them there; a
// variable so that tests can point it elsewhere.
var LucidDir = "/usr/share/coscheml/lucid"

// The files of LucidDir.
const (
	ModelFile = "default.model"
	SoloFile  = "solo_profiles.csv"
	PairsFile = "colocate_pairs.csv"
)

// ErrNoLucid: this binary carries no Lucid data and LucidDir holds none.
var ErrNoLucid = errors.New("the Lucid data and default model are not built into this binary " +
	"and the coscheml-model-lucid package is not installed")

// maxCSVBytes bounds a Lucid CSV read from LucidDir (the shipped files are
// under 100 KiB); a bigger file is not the packaged one.
const maxCSVBytes = 16 << 20

// ModelPath is the default model's file under LucidDir (for builds without it).
func ModelPath() string { return filepath.Join(LucidDir, ModelFile) }

// Source says where the Lucid data comes from: "built in", or LucidDir.
func Source() string {
	if Embedded {
		return "built in"
	}
	return LucidDir
}

// Solo returns the Lucid solo profiles CSV: the embedded copy, else LucidDir's.
func Solo() ([]byte, error) { return lucidFile(DefaultSoloCSV, SoloFile) }

// Pairs returns the Lucid co-located pairs CSV: the embedded copy, else LucidDir's.
func Pairs() ([]byte, error) { return lucidFile(DefaultPairsCSV, PairsFile) }

func lucidFile(embedded []byte, name string) ([]byte, error) {
	if Embedded {
		return embedded, nil
	}
	return readLucid(LucidDir, name)
}

// readLucid reads dir/name, a regular file of at most maxCSVBytes; a missing
// file is ErrNoLucid (Missing).
func readLucid(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Missing(path)
	}
	if err != nil {
		return nil, fmt.Errorf("lucid data: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("lucid data %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("lucid data %s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCSVBytes+1))
	if err != nil {
		return nil, fmt.Errorf("lucid data %s: %w", path, err)
	}
	if len(b) > maxCSVBytes {
		return nil, fmt.Errorf("lucid data %s: more than %d bytes", path, maxCSVBytes)
	}
	return b, nil
}

// Missing is ErrNoLucid naming the file that was looked for.
func Missing(path string) error {
	return fmt.Errorf("%w (no %s; see docs/licensing.md)", ErrNoLucid, path)
}
