// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/ugorji/go/codec"
)

// File format of one stored profile (docs/profiles.md):
//
//	offset size
//	0      8    magic "CSMLPROF"
//	8      2    format version, big-endian (FormatVersion)
//	10     4    payload length in bytes, big-endian
//	14     4    CRC-32 (IEEE) of the payload, big-endian
//	18     n    payload: the Profile as CBOR (github.com/ugorji/go/codec)
//
// The length and checksum make a truncated or damaged file a clear error rather
// than a half-decoded profile.
const (
	FormatVersion = 1
	magic         = "CSMLPROF"
	headerLen     = len(magic) + 2 + 4 + 4
	// MaxFileSize bounds what Decode accepts; a real profile is well under 1 KiB.
	MaxFileSize = 1 << 20
)

// ErrFormat is wrapped by every decoding error: not a profile file, another format
// version, truncated, damaged, or a payload that does not decode or validate.
var ErrFormat = errors.New("bad profile file")

func cborHandle() *codec.CborHandle {
	h := &codec.CborHandle{}
	h.TimeRFC3339 = true // a readable instant; the decoder returns it in UTC at µs precision
	h.Canonical = true   // same profile, same bytes
	return h
}

// Encode returns the file bytes of p (header and CBOR payload). p must validate.
func Encode(p *Profile) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var payload []byte
	if err := codec.NewEncoderBytes(&payload, cborHandle()).Encode(p); err != nil {
		return nil, fmt.Errorf("encode profile %s: %w", p.Tag, err)
	}
	if len(payload) > MaxFileSize-headerLen {
		return nil, fmt.Errorf("encode profile %s: %d bytes, over the %d-byte limit", p.Tag, len(payload), MaxFileSize)
	}
	b := make([]byte, headerLen, headerLen+len(payload))
	copy(b, magic)
	binary.BigEndian.PutUint16(b[8:], FormatVersion)
	binary.BigEndian.PutUint32(b[10:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[14:], crc32.ChecksumIEEE(payload))
	return append(b, payload...), nil
}

// Decode parses file bytes written by Encode and validates the result. Errors wrap
// ErrFormat and say what is wrong; the caller adds the file name.
func Decode(b []byte) (p *Profile, err error) {
	switch {
	case len(b) > MaxFileSize:
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrFormat, len(b), MaxFileSize)
	case len(b) < len(magic) || string(b[:len(magic)]) != magic:
		return nil, fmt.Errorf("%w: not a coscheml profile (bad magic)", ErrFormat)
	case len(b) < headerLen:
		return nil, fmt.Errorf("%w: truncated header (%d of %d bytes)", ErrFormat, len(b), headerLen)
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads version %d", ErrFormat, v, FormatVersion)
	}
	n := binary.BigEndian.Uint32(b[10:])
	payload := b[headerLen:]
	switch {
	case uint64(len(payload)) < uint64(n):
		return nil, fmt.Errorf("%w: truncated: header says %d payload bytes, found %d", ErrFormat, n, len(payload))
	case uint64(len(payload)) > uint64(n):
		return nil, fmt.Errorf("%w: %d unexpected bytes after the payload", ErrFormat, uint64(len(payload))-uint64(n))
	}
	if sum := crc32.ChecksumIEEE(payload); sum != binary.BigEndian.Uint32(b[14:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (damaged file)", ErrFormat)
	}
	return decodePayload(payload)
}

// decodePayload decodes and validates a CBOR payload. The codec reports malformed
// input by panicking internally; a panic that escapes it is turned into an error
// so that one bad file can never take a reader down.
func decodePayload(payload []byte) (p *Profile, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: payload does not decode: %s", ErrFormat, Sanitize(fmt.Sprint(r)))
		}
	}()
	var q Profile
	if err := codec.NewDecoderBytes(payload, cborHandle()).Decode(&q); err != nil {
		return nil, fmt.Errorf("%w: payload does not decode: %s", ErrFormat, Sanitize(err.Error()))
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return &q, nil
}
