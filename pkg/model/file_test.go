// SPDX-License-Identifier: Apache-2.0

package model

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/profile"
)

// smallModel is a two-tree forest cut from the default model (this package
// cannot train; see package training), compiled, with distinct metadata.
func smallModel(t testing.TB) *Model {
	t.Helper()
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	m.Trees = m.Trees[:2]
	m.Params.Trees, m.Params.Seed = 2, 7
	if err := m.Compile(); err != nil {
		t.Fatal(err)
	}
	m.Source = "test"
	m.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return m
}

func TestSaveLoadRoundTrip(t *testing.T) {
	m := smallModel(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.model")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	// Overwrite in place: the rename replaces the old file.
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries after save, want just the model (no temp files)", len(entries))
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Info(), got.Info()
	if a.String() != b.String() || !got.CreatedAt.Equal(m.CreatedAt) || got.Params.Seed != 7 {
		t.Fatalf("info differs after reload:\n%s\n%s", a, b)
	}
	cases := lucidCases(t)
	for i := range cases {
		s := &cases[i]
		if x, y := m.PredictSpeed(s.Job, s.Co), got.PredictSpeed(s.Job, s.Co); x != y {
			t.Fatalf("sample %d: %v before save, %v after", i, x, y)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	good, err := smallModel(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	otherVersion := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(otherVersion[8:12], FormatVersion+1)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"not a model", []byte("model1,dataset1\n"), "bad magic"},
		{"header cut", good[:10], "truncated header"},
		{"other version", otherVersion, "format version 4, this program reads versions 1 to 3"},
		{"truncated", good[:len(good)-40], "truncated"},
		{"trailing", append(append([]byte(nil), good...), 0), "trailing"},
		{"corrupt", flipped, "checksum"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".model")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrFormat, the path and %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing.model")); err == nil || !strings.Contains(err.Error(), "missing.model") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestDecodeRejectsInvalidContent re-encodes broken models with a valid header
// and checksum, to reach the checks behind them.
func TestDecodeRejectsInvalidContent(t *testing.T) {
	base := smallModel(t)
	tests := []struct {
		name   string
		mutate func(m *Model)
		want   string
	}{
		{"other features", func(m *Model) { m.Features = m.Features[:3] }, "features"},
		{"no trees", func(m *Model) { m.Trees = nil }, "0 trees"},
		{"child loops back", func(m *Model) { m.Trees[0].Left[0] = 0 }, "out of order"},
		{"child out of range", func(m *Model) { m.Trees[0].Right[0] = 1 << 20 }, "out of order or range"},
		{"feature out of range", func(m *Model) { m.Trees[0].Feature[0] = numFeatures }, "feature"},
		{"short arrays", func(m *Model) { m.Trees[0].Value = m.Trees[0].Value[:1] }, "lengths"},
		{"shared child", func(m *Model) {
			t := &m.Trees[0]
			t.Right[0] = t.Left[0]
		}, "parents"},
		{"measured speed above 1", func(m *Model) { m.Measured[0].Speed = 1.5 }, "measured pair 1"},
		{"measured speed NaN", func(m *Model) { m.Measured[1].Speed = math.NaN() }, "measured pair 2"},
		{"measured without a measurement", func(m *Model) { m.Measured[0].N = 0 }, "at least 1"},
		{"measured pair twice", func(m *Model) { m.Measured[1] = m.Measured[0] }, "listed twice"},
		{"measured bad tag", func(m *Model) { m.Measured[0].Co = "a b" }, "co-runner"},
		{"measured noise", func(m *Model) { m.MeasuredSD = -1 }, "noise"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := *base
			m.Trees = make([]Tree, len(base.Trees))
			for i, tr := range base.Trees {
				m.Trees[i] = Tree{
					Feature: append([]int32(nil), tr.Feature...), Threshold: append([]float64(nil), tr.Threshold...),
					Left: append([]int32(nil), tr.Left...), Right: append([]int32(nil), tr.Right...),
					Value: append([]float64(nil), tr.Value...), Samples: append([]int32(nil), tr.Samples...),
				}
			}
			m.Features = append([]string(nil), base.Features...)
			m.Measured = append([]MeasuredPair(nil), base.Measured...)
			tc.mutate(&m)
			b, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(b)
			if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrFormat mentioning %q", err, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	good, err := smallModel(f).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(models.DefaultModel)
	f.Add(good[:len(good)/2])
	f.Add([]byte(fileMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		// Whatever decodes must predict without panicking and round-trip.
		job := prof("j", 50, 20, 1000)
		_ = m.PredictSpeed(job, []*profile.Profile{job})
		_ = m.Explain(job, []*profile.Profile{job})
		_ = m.Info().String()
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-encoded model does not decode: %v", err)
		}
	})
}

// FuzzDecodeBody fuzzes what lies behind the checksum: arbitrary bodies wrapped
// in a valid header and checksum reach the CBOR decoder and the validator.
func FuzzDecodeBody(f *testing.F) {
	good, err := smallModel(f).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[headerLen : len(good)-sumLen])
	f.Add([]byte{0xa0})             // empty CBOR map
	f.Add([]byte{0x9b, 0xff, 0xff}) // huge array length, truncated
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte(fileMagic), 0, 0, 0, FormatVersion)
		b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
		b = append(b, body...)
		sum := sha256.Sum256(b)
		m, err := Decode(append(b, sum[:]...))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		job := prof("j", 50, 20, 1000)
		if s := m.PredictSpeed(job, []*profile.Profile{job}); math.IsNaN(s) {
			t.Fatalf("decoded model predicts NaN")
		}
		_ = m.Explain(job, []*profile.Profile{job})
	})
}

// installedDefault is the default model of a build without the embedded one:
// the coscheml-model-lucid package's file, or an error that says what to do.
func TestInstalledDefault(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "default.model")
	if err := os.WriteFile(good, models.DefaultModel, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.model")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		path    string
		noLucid bool
		errHas  []string
	}{
		{"installed", good, false, nil},
		{"not installed", filepath.Join(dir, "missing.model"), true, []string{"coscheml-model-lucid", "model_path", "missing.model"}},
		{"corrupt", bad, false, []string{"default model", "bad.model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := installedDefault(tc.path)
			if tc.errHas == nil {
				if err != nil || m == nil {
					t.Fatalf("installedDefault = %v, %v", m, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if errors.Is(err, models.ErrNoLucid) != tc.noLucid {
				t.Errorf("errors.Is(err, ErrNoLucid) = %v, want %v", !tc.noLucid, tc.noLucid)
			}
		})
	}
}
