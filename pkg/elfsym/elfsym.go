// SPDX-License-Identifier: Apache-2.0

// Package elfsym reads the value of a constant exported by a shared object
// without loading it: coscheml preflight learns which Slurm release a
// job_submit plugin was built for (plugin_version) and which C interface the
// plugin and libcoscheml.so speak, from the files alone. Loading them instead
// would run their constructors (the Go runtime, for the library).
package elfsym

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNoSymbol: the file has no such dynamic symbol.
var ErrNoSymbol = errors.New("symbol not found")

// Uint32File returns the 4-byte value of the exported symbol name in the ELF
// file at path.
func Uint32File(path, name string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	v, err := Uint32(f, name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Uint32 returns the 4-byte value of the exported (dynamic) symbol name.
func Uint32(r io.ReaderAt, name string) (v uint32, err error) {
	// debug/elf is careful, but a hostile file must not take the caller down.
	defer func() {
		if p := recover(); p != nil {
			v, err = 0, fmt.Errorf("malformed ELF file: %v", p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return 0, fmt.Errorf("not an ELF file: %w", err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("no dynamic symbols: %w", err)
	}
	for _, s := range syms {
		if s.Name != name {
			continue
		}
		if s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) {
			return 0, fmt.Errorf("%s: %w (undefined here)", name, ErrNoSymbol)
		}
		if s.Size != 4 {
			return 0, fmt.Errorf("%s: %d bytes, want 4", name, s.Size)
		}
		sec := f.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS || s.Value < sec.Addr || s.Value-sec.Addr > sec.Size-4 || sec.Size < 4 {
			return 0, fmt.Errorf("%s: value outside its section %s", name, sec.Name)
		}
		var b [4]byte
		if _, err := sec.ReadAt(b[:], int64(s.Value-sec.Addr)); err != nil {
			return 0, fmt.Errorf("reading %s: %w", name, err)
		}
		return f.ByteOrder.Uint32(b[:]), nil
	}
	return 0, fmt.Errorf("%s: %w", name, ErrNoSymbol)
}

// SlurmVersion formats a SLURM_VERSION_NUMBER (0xMMmmuu) as Slurm prints it.
func SlurmVersion(v uint32) string {
	return fmt.Sprintf("%d.%02d.%d", v>>16&0xff, v>>8&0xff, v&0xff)
}
