// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"os"
	"testing"
)

// BenchmarkCatalog loads a store holding the 53 Lucid profiles, as the plugin and
// the CLI do once at start-up.
func BenchmarkCatalog(b *testing.B) {
	f, err := os.Open(lucidSolo)
	if err != nil {
		b.Fatal(err)
	}
	ps, err := ReadLucidSolo(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := Open(b.TempDir())
	for _, p := range ps {
		if err := s.Put(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c, problems := s.Catalog()
		if len(c) != len(ps) || len(problems) != 0 {
			b.Fatalf("%d profiles, %v", len(c), problems)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	enc, err := Encode(validProfile())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut includes the two fsyncs that make a write durable.
func BenchmarkPut(b *testing.B) {
	s, _ := Open(b.TempDir())
	p := validProfile()
	for b.Loop() {
		if err := s.Put(p); err != nil {
			b.Fatal(err)
		}
	}
}
