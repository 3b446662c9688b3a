// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/ugorji/go/codec"
)

func encodeUnchecked(t testing.TB, p *Profile) []byte {
	var payload []byte
	if err := codec.NewEncoderBytes(&payload, cborHandle()).Encode(p); err != nil {
		t.Fatal(err)
	}
	return payload
}

// frame builds a file around payload with a correct length and checksum, using
// hdr's magic and version.
func frame(hdr, payload []byte) []byte {
	b := append([]byte(nil), hdr[:headerLen]...)
	binary.BigEndian.PutUint32(b[10:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[14:], crc32.ChecksumIEEE(payload))
	return append(b, payload...)
}
