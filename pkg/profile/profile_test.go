// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateTag(t *testing.T) {
	for _, tc := range []struct {
		tag string
		ok  bool
	}{
		{"resnet18-bs32-amp", true},
		{"a", true},
		{"0", true},
		{"lammps_v2.1", true},
		{strings.Repeat("a", MaxTagLen), true},
		{strings.Repeat("a", MaxTagLen+1), false},
		{"", false},
		{"Upper", false},
		{"-lead", false},
		{"trail-", false},
		{"trail.", false},
		{".hidden", false},
		{"a..b", false},
		{"a/b", false},
		{"../etc/passwd", false},
		{"a b", false},
		{"a\nb", false},
		{"a\x00b", false},
		{"caf\u00e9", false},
		{"a;rm", false},
	} {
		err := ValidateTag(tc.tag)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateTag(%q) = %v, want ok=%v", tc.tag, err, tc.ok)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\x00/") && !strings.Contains(tc.tag, "/") {
			t.Errorf("ValidateTag(%q) error echoes unsafe bytes: %q", tc.tag, err)
		}
	}
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\x1b[31m", "a?b?[31m"},
		{`q"b\`, "q?b?"},
		{"é", "?"},
		{strings.Repeat("x", 100), strings.Repeat("x", 80) + "..."},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLucidTag(t *testing.T) {
	for _, tc := range []struct {
		model string
		batch int
		amp   bool
		want  string
		ok    bool
	}{
		{"ResNet18", 32, true, "resnet18-bs32-amp", true},
		{"BERT", 64, false, "bert-bs64", true},
		{" MobileNetV3 ", 128, false, "mobilenetv3-bs128", true},
		{"Deep-Speech 2", 8, false, "deepspeech2-bs8", true},
		{"!!!", 8, false, "", false},
		{strings.Repeat("m", 70), 8, false, "", false},
	} {
		got, err := LucidTag(tc.model, tc.batch, tc.amp)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("LucidTag(%q,%d,%v) = %q, %v; want %q ok=%v", tc.model, tc.batch, tc.amp, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseClass(t *testing.T) {
	for _, s := range []string{"hpc", "train", "infer"} {
		if c, err := ParseClass(s); err != nil || string(c) != s {
			t.Errorf("ParseClass(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"", "HPC", "training", "infer\n"} {
		if _, err := ParseClass(s); err == nil {
			t.Errorf("ParseClass(%q) accepted", s)
		}
	}
}

func validProfile() *Profile {
	return &Profile{
		Tag: "stream-bw", Class: ClassHPC, GPUModel: "NVIDIA H200",
		SMUtil:     Stat{Mean: 40, P95: 55, Max: 60},
		MemBWUtil:  Stat{Mean: 90, P95: 97, Max: 99},
		MemUsedMiB: 4096, PowerW: Stat{Mean: 300, P95: 500, Max: 550},
		SoloRuntimeS: 120, Samples: 240, DurationS: 120, Source: "nvml",
	}
}

func TestProfileValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(p *Profile)
		field string // must appear in the error; "" = valid
	}{
		{"valid", func(p *Profile) {}, ""},
		{"bad tag", func(p *Profile) { p.Tag = "../x" }, "invalid tag"},
		{"bad class", func(p *Profile) { p.Class = "batch" }, "invalid class"},
		{"empty class", func(p *Profile) { p.Class = "" }, "invalid class"},
		{"sm over 100", func(p *Profile) { p.SMUtil.P95 = 101 }, "sm_util p95"},
		{"membw negative", func(p *Profile) { p.MemBWUtil.Mean = -1 }, "membw_util mean"},
		{"sm NaN", func(p *Profile) { p.SMUtil.Mean = math.NaN() }, "sm_util mean"},
		{"max below mean", func(p *Profile) { p.SMUtil.Max = 30 }, "sm_util max"},
		{"zero max ok", func(p *Profile) { p.PowerW.Max = 0; p.PowerW.P95 = 0 }, ""},
		{"memory negative", func(p *Profile) { p.MemUsedMiB = -5 }, "mem_used_mib"},
		{"memory inf", func(p *Profile) { p.MemUsedMiB = math.Inf(1) }, "mem_used_mib"},
		{"power negative", func(p *Profile) { p.PowerW.Mean = -1 }, "power_w mean"},
		{"samples negative", func(p *Profile) { p.Samples = -1 }, "samples"},
		{"runtime negative", func(p *Profile) { p.SoloRuntimeS = -1 }, "solo_runtime_s"},
		{"gpu model control", func(p *Profile) { p.GPUModel = "H200\x1b[2J" }, "gpu_model"},
		{"source too long", func(p *Profile) { p.Source = strings.Repeat("s", MaxTextLen+1) }, "source"},
	} {
		p := validProfile()
		tc.edit(p)
		err := p.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.field)
		}
	}
	var nilp *Profile
	if nilp.Validate() == nil {
		t.Error("nil profile validated")
	}
}

func TestCatalogGet(t *testing.T) {
	p := validProfile()
	c := Catalog{p.Tag: p}
	if got, err := c.Get(p.Tag); err != nil || got != p {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if _, err := c.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(nope) = %v, want ErrNotFound", err)
	}
}

func TestCatalogOf(t *testing.T) {
	a1, b, a2 := &Profile{Tag: "a"}, &Profile{Tag: "b"}, &Profile{Tag: "a"}
	for _, tc := range []struct {
		name string
		in   []*Profile
		want Catalog
	}{
		{"none", nil, Catalog{}},
		{"distinct tags", []*Profile{a1, b}, Catalog{"a": a1, "b": b}},
		{"later wins", []*Profile{a1, b, a2}, Catalog{"a": a2, "b": b}},
	} {
		got := CatalogOf(tc.in)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d entries, want %d", tc.name, len(got), len(tc.want))
		}
		for tag, p := range tc.want {
			if got[tag] != p {
				t.Errorf("%s: %q is %p, want %p", tc.name, tag, got[tag], p)
			}
		}
	}
}
