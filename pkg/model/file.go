// SPDX-License-Identifier: Apache-2.0

package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/safeopen"
	"github.com/ugorji/go/codec"
)

// File layout (all integers big-endian):
//
//	magic   8 bytes  "CSMLMODL"
//	version 4 bytes  FormatVersion
//	length  8 bytes  length of body
//	body    CBOR (github.com/ugorji/go/codec) encoding of Model
//	sum     32 bytes SHA-256 of everything before it
//
// The fixed header lets a reader name the problem (not a model, another version,
// truncated, corrupt) before it decodes anything.
const (
	fileMagic = "CSMLMODL"
	// FormatVersion is the newest model file format this program reads and
	// writes. Version 2 added Calibration; version 3, normalized margins
	// (Calibration.Scale), which an older reader would misread as margins in
	// speed, so a model is written as version 3 only when a calibration is
	// normalized (else version 2, which older programs read). Versions 1 (no
	// calibration) and 2 are still read.
	FormatVersion = 3
	// plainVersion is the format of a model without normalized margins.
	plainVersion = 2
	// oldestVersion is the oldest format this program reads.
	oldestVersion = 1
	headerLen     = 8 + 4 + 8
	sumLen        = sha256.Size
	// MaxFileBytes bounds a model file; the default model is a few KiB.
	MaxFileBytes = 64 << 20
	// maxTags bounds a model's list of trained applications (Model.Tags).
	maxTags = 1 << 16
)

// ErrFormat is wrapped by every error about a model file's content.
var ErrFormat = errors.New("invalid model file")

func cborHandle() *codec.CborHandle {
	h := &codec.CborHandle{}
	h.MaxInitLen = 4096 // a hostile length prefix cannot make the decoder allocate much up front
	return h
}

// Encode serializes the model in the file format.
func (m *Model) Encode() ([]byte, error) {
	var body []byte
	if err := codec.NewEncoderBytes(&body, cborHandle()).Encode(m); err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	out := make([]byte, 0, headerLen+len(body)+sumLen)
	out = append(out, fileMagic...)
	out = binary.BigEndian.AppendUint32(out, m.formatVersion())
	out = binary.BigEndian.AppendUint64(out, uint64(len(body)))
	out = append(out, body...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...), nil
}

// Decode parses and validates a model file's bytes. Errors wrap ErrFormat.
func Decode(b []byte) (*Model, error) {
	if len(b) < len(fileMagic) || string(b[:len(fileMagic)]) != fileMagic {
		return nil, fmt.Errorf("%w: not a coscheml model (bad magic)", ErrFormat)
	}
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: truncated header (%d bytes)", ErrFormat, len(b))
	}
	version := binary.BigEndian.Uint32(b[8:12])
	if version < oldestVersion || version > FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this program reads versions %d to %d (retrain or use a matching coscheml)", ErrFormat, version, oldestVersion, FormatVersion)
	}
	n := binary.BigEndian.Uint64(b[12:20])
	if n > MaxFileBytes || uint64(len(b)) < headerLen+n+sumLen {
		return nil, fmt.Errorf("%w: truncated (%d bytes, header says %d)", ErrFormat, len(b), headerLen+n+sumLen)
	}
	if uint64(len(b)) > headerLen+n+sumLen {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrFormat, uint64(len(b))-(headerLen+n+sumLen))
	}
	end := headerLen + int(n)
	if sum := sha256.Sum256(b[:end]); !bytes.Equal(sum[:], b[end:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt)", ErrFormat)
	}
	m := new(Model)
	if err := codec.NewDecoderBytes(b[headerLen:end], cborHandle()).Decode(m); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrFormat, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if v := m.formatVersion(); v == FormatVersion && version < v {
		// only a version 3 writer normalizes margins; a version 2 header on
		// one would tell older readers to misread them
		return nil, fmt.Errorf("%w: format version %d with normalized margins (version %d)", ErrFormat, version, v)
	}
	m.pack()
	return m, nil
}

// formatVersion is the file format the model needs: version 3 when a
// calibration is normalized, else 2.
func (m *Model) formatVersion() uint32 {
	if m.Calibration.Scale > 0 || m.SeenCalibration.Scale > 0 {
		return FormatVersion
	}
	return plainVersion
}

// validate checks a decoded model before it is used.
func (m *Model) validate() error {
	if want := FeatureNames(); !slices.Equal(m.Features, want) {
		return fmt.Errorf("features %q differ from the ones this program computes %q", m.Features, want)
	}
	if len(m.Trees) == 0 || len(m.Trees) > 1000 {
		return fmt.Errorf("%d trees: want 1..1000", len(m.Trees))
	}
	for i := range m.Trees {
		if err := m.Trees[i].validate(); err != nil {
			return fmt.Errorf("tree %d: %w", i+1, err)
		}
	}
	if err := m.Calibration.Valid(); err != nil {
		return err
	}
	if len(m.Tags) > maxTags {
		return fmt.Errorf("%d application tags, want at most %d", len(m.Tags), maxTags)
	}
	if err := m.SeenCalibration.Valid(); err != nil {
		return fmt.Errorf("seen-pairs %w", err)
	}
	return m.validateMeasured()
}

// Load reads a model file. Errors name the file.
func Load(path string) (*Model, error) {
	// Regular files only, without blocking (a FIFO would stall slurmctld); the
	// path is the admin's, so a symlink (e.g. current -> model-v3) is followed.
	f, err := safeopen.Regular(path, safeopen.FollowLinks)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	if st.Size() > MaxFileBytes+headerLen+sumLen {
		return nil, fmt.Errorf("load model %s: %w: %d bytes, more than %d", path, ErrFormat, st.Size(), MaxFileBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	m, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, nil
}

// Default returns the default model: the one built into the binary
// (models/default.model), or, in a build without the Lucid data (tag nolucid),
// the one the coscheml-model-lucid package installs (models.ModelPath). Without
// either the error wraps models.ErrNoLucid and says how a site gets a model.
func Default() (*Model, error) {
	if !models.Embedded {
		return installedDefault(models.ModelPath())
	}
	m, err := Decode(models.DefaultModel)
	if err != nil {
		return nil, fmt.Errorf("embedded default model: %w", err)
	}
	return m, nil
}

// installedDefault loads the default model a package installed at path; a
// missing file wraps models.ErrNoLucid and says what a site can do instead.
func installedDefault(path string) (*Model, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("default model: %w: install coscheml-model-lucid, "+
			"or train a model from your own profiles and observations (coscheml-train) and set model_path", models.Missing(path))
	}
	m, err := Load(path)
	if err != nil {
		return nil, fmt.Errorf("default model: %w", err)
	}
	return m, nil
}

// Save writes the model to path atomically: a temporary file in the same folder,
// fsync, rename over path, fsync the folder. Readers see the old or the new file,
// never a partial one.
func (m *Model) Save(path string) error {
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("save model %s: %w", path, err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("save model %s: %w", path, err)
	}
	return nil
}
