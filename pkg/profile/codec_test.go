// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	p := validProfile()
	p.Partial, p.PartialNote = true, "no PCIe counters"
	p.PCIeTxMBps = Stat{Mean: 1.5, P95: 2.25, Max: 3}
	p.SMClockMHz = Stat{Mean: 1755, P95: 1980, Max: 1980}
	p.SoloThroughput = 1234.5
	p.CollectedOn = "gpu-node-07"
	p.CollectedAt = time.Date(2026, 11, 30, 5, 1, 2, 123456789, time.FixedZone("", 3600))
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:8]) != "CSMLPROF" || binary.BigEndian.Uint16(b[8:]) != FormatVersion {
		t.Fatalf("header % x", b[:headerLen])
	}
	q, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	// The codec keeps times in UTC at microsecond precision.
	if !q.CollectedAt.Equal(p.CollectedAt.Round(time.Microsecond)) {
		t.Errorf("CollectedAt %v, want %v", q.CollectedAt, p.CollectedAt)
	}
	q.CollectedAt, p.CollectedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip:\n got %+v\nwant %+v", q, p)
	}
	// Same profile, same bytes (canonical encoding).
	b2, _ := Encode(q)
	b3, _ := Encode(p)
	if string(b2) != string(b3) {
		t.Error("encoding is not deterministic")
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	p := validProfile()
	p.SMUtil.Mean = 300
	if _, err := Encode(p); err == nil {
		t.Fatal("encoded an invalid profile")
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(validProfile())
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"text", []byte("tag,class\n"), "bad magic"},
		{"short header", good[:12], "truncated header"},
		{"version 2", mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[8:], 2); return b }), "format version 2"},
		{"truncated", good[:len(good)-10], "truncated"},
		{"trailing", append(append([]byte(nil), good...), 0), "unexpected bytes"},
		{"flipped bit", mut(func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b }), "checksum"},
		{"huge", make([]byte, MaxFileSize+1), "over the"},
	} {
		_, err := Decode(tc.b)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode error %v, want ErrFormat mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodePayloadInvalidProfile(t *testing.T) {
	// A well-formed file whose profile does not validate (written by a buggy or
	// hostile writer) is rejected on read.
	for _, edit := range []func(p *Profile){
		func(p *Profile) { p.Tag = "../../etc/x" },
		func(p *Profile) { p.SMUtil.Mean = 250 },
		func(p *Profile) { p.Class = "root" },
	} {
		p := validProfile()
		edit(p)
		b := rawEncode(t, p)
		if _, err := Decode(b); !errors.Is(err, ErrFormat) {
			t.Errorf("Decode of invalid profile %+v: %v", p, err)
		}
	}
}

// rawEncode frames p without validating it.
func rawEncode(t testing.TB, p *Profile) []byte {
	good := validProfile()
	b, err := Encode(good)
	if err != nil {
		t.Fatal(err)
	}
	payload := encodeUnchecked(t, p)
	return frame(b[:headerLen], payload)
}
