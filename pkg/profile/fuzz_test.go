// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func FuzzValidateTag(f *testing.F) {
	for _, s := range []string{"resnet18-bs32-amp", "a", "../x", "a..b", "a/b", "a b", "x\x00", ".", "a.b_c-d", "A", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateTag(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r\x00\x1b") {
				t.Fatalf("error echoes control characters: %q", err)
			}
			return
		}
		if len(s) == 0 || len(s) > MaxTagLen || strings.ContainsAny(s, "/\\ ") || strings.Contains(s, "..") ||
			strings.HasPrefix(s, ".") || strings.HasPrefix(s, "-") {
			t.Fatalf("accepted unsafe tag %q", s)
		}
		for _, c := range []byte(s) {
			if c < 0x21 || c > 0x7e {
				t.Fatalf("accepted tag %q with byte %#x", s, c)
			}
		}
		if Sanitize(s) != s {
			t.Fatalf("valid tag %q changes when sanitized", s)
		}
		// It cannot name anything outside the store's folder.
		const dir = "/store"
		if p := filepath.Join(dir, s+Ext); filepath.Dir(p) != dir {
			t.Fatalf("tag %q escapes: %s", s, p)
		}
	})
}

func FuzzReadLucidSolo(f *testing.F) {
	if b, err := os.ReadFile(lucidSolo); err == nil {
		f.Add(string(b))
	}
	f.Add("model,batchsize,amp,speed,gpu_util,gmem_util,gmem\nA,1,0,1,1,1,1\n")
	f.Add("model,batchsize,amp,speed,gpu_util,gmem_util,gmem\nA,1,0,1,1,1\n")
	f.Add("model,batchsize,amp,speed,gpu_util,gmem_util,gmem\n\"A\nB\",1,1,1e308,100,0,0\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ReadLucidSolo(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "lucid solo csv: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		checkImported(t, ps)
	})
}

func FuzzReadGenericCSV(f *testing.F) {
	f.Add("tag,class,sm_mean,membw_mean,mem_used_mib\nx,hpc,1,2,3\n")
	f.Add("tag,class,sm_mean,sm_p95,sm_max,membw_mean,mem_used_mib,collected_at,gpu_model\n" +
		"x,infer,1,2,3,4,5,2026-01-02T03:04:05+01:00,H200\n# c\ny,train,0,0,0,0,0,,\n")
	f.Add("tag,class,sm_mean,membw_mean,mem_used_mib,samples\nx,hpc,1,2,3,99999999999\n")
	f.Add("tag\n")
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ReadGenericCSV(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "profile csv: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		checkImported(t, ps)
	})
}

// checkImported asserts what an importer promises: valid, distinct profiles that
// survive an encode/decode round trip.
func checkImported(t *testing.T, ps []*Profile) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("no profiles and no error")
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			t.Fatalf("imported invalid profile: %v", err)
		}
		if seen[p.Tag] {
			t.Fatalf("duplicate tag %q", p.Tag)
		}
		seen[p.Tag] = true
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		q, err := Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if q.Tag != p.Tag || q.SMUtil != p.SMUtil || q.MemUsedMiB != p.MemUsedMiB {
			t.Fatalf("round trip changed %+v into %+v", p, q)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder, both as a whole file and as a
// correctly framed payload (so the CBOR decoder itself is exercised), and through
// the store: never a panic, always an error naming the file.
func FuzzDecode(f *testing.F) {
	good, err := Encode(validProfile())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[headerLen:])
	f.Add(good[:len(good)-1])
	f.Add([]byte("CSMLPROF"))
	f.Add([]byte{0xbf, 0x63, 't', 'a', 'g', 0x61, 'x', 0xff})
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // huge array length
	dir := f.TempDir()
	s, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, "fuzz.prof")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, frame(good, b)} {
			p, err := Decode(in)
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("error does not wrap ErrFormat: %v", err)
				}
				continue
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("decoded an invalid profile: %v", err)
			}
		}
		if err := os.WriteFile(path, frame(good, b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get("fuzz"); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("store error does not name the file: %v", err)
		}
	})
}

// tagRE is the tag grammar as a regular expression: tagShape's definition.
var tagRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$`)

func FuzzTagShape(f *testing.F) {
	for _, s := range []string{"", "a", "a-", "-a", "a.b_c-d", "0", "a\x00b", "A", "é", "ab", "a b", "z9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := tagShape(s), tagRE.MatchString(s); got != want {
			t.Fatalf("tagShape(%q) = %v, the grammar says %v", s, got, want)
		}
	})
}
