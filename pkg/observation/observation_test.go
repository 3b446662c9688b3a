// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

const (
	lucidPairs = "../../models/data/lucid-train/colocate_pairs.csv"
	lucidSolo  = "../../models/data/lucid-train/solo_profiles.csv"
)

func TestReadLucidPairsRealFile(t *testing.T) {
	f, err := os.Open(lucidPairs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	obs, err := ReadLucidPairs(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(lucidPairs)
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 2*(len(rows)-1) {
		t.Fatalf("%d observations from %d pair rows", len(obs), len(rows)-1)
	}
	// Every tag has a solo profile (the data README promises it).
	sf, _ := os.Open(lucidSolo)
	defer sf.Close()
	ps, err := profile.ReadLucidSolo(sf)
	if err != nil {
		t.Fatal(err)
	}
	solo := map[string]bool{}
	for _, p := range ps {
		solo[p.Tag] = true
	}
	tagOf := func(m, bs, amp string) string {
		b, _ := strconv.Atoi(bs)
		tag, _ := profile.LucidTag(m, b, amp == "1")
		return tag
	}
	// model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,...
	for i, r := range rows[1:] {
		a, b := obs[2*i], obs[2*i+1]
		t1, t2 := tagOf(r[0], r[3], r[4]), tagOf(r[6], r[9], r[10])
		s1, _ := strconv.ParseFloat(r[5], 64)
		s2, _ := strconv.ParseFloat(r[11], 64)
		if a.Tag != t1 || !reflect.DeepEqual(a.CoTags, []string{t2}) || a.Speed != s1 ||
			b.Tag != t2 || !reflect.DeepEqual(b.CoTags, []string{t1}) || b.Speed != s2 {
			t.Fatalf("row %d: got %+v / %+v", i+2, a, b)
		}
		if a.Class != profile.ClassTrain || !strings.HasPrefix(a.Source, LucidPairsSource) {
			t.Fatalf("row %d: class %q source %q", i+2, a.Class, a.Source)
		}
		if !solo[a.Tag] || !solo[b.Tag] {
			t.Errorf("row %d: %s or %s has no solo profile", i+2, a.Tag, b.Tag)
		}
		if err := a.Validate(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d observations from %d pairs", len(obs), len(rows)-1)
}

func TestReadLucidPairsErrors(t *testing.T) {
	const hdr = "model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util,gmem_util,gmem\n"
	row := func(edit func(f []string)) string {
		f := strings.Split("MobileNetV3,ImageNet,1,32,0,0.983,ResNet18,CIFAR-10,1,32,0,1.034,64.789,29.461,5106", ",")
		edit(f)
		return hdr + strings.Join(f, ",") + "\n"
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", []string{"no header"}},
		{"header only", hdr, []string{"no data rows"}},
		{"missing column", "model1,batchsize1,amp1,speed1\n", []string{`"model2"`}},
		{"two gpus", row(func(f []string) { f[8] = "2" }), []string{"line 2", "column gpu_num2", "single-GPU"}},
		{"speed zero", row(func(f []string) { f[5] = "0" }), []string{"line 2", "column speed1"}},
		{"speed too big", row(func(f []string) { f[11] = "2.5" }), []string{"line 2", "column speed2"}},
		{"speed inf", row(func(f []string) { f[11] = "+Inf" }), []string{"line 2", "column speed2"}},
		{"bad amp", row(func(f []string) { f[10] = "yes" }), []string{"line 2", "column amp2"}},
		{"bad model", row(func(f []string) { f[0] = "++" }), []string{"line 2", "column model1"}},
	} {
		_, err := ReadLucidPairs(strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

func sampleObs() []Observation {
	return []Observation{
		{Tag: "stream", Class: profile.ClassHPC, CoTags: []string{"resnet18-bs32", "bert-bs32-amp"}, Speed: 0.8125,
			Source: "epilog", JobID: "1234", Node: "gpu07", When: time.Date(2026, 11, 30, 5, 6, 7, 890000000, time.UTC), UID: "1001"},
		{Tag: "alone", Speed: 1, When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", -5*3600))},
		{Tag: "quoted", Class: profile.ClassInfer, CoTags: []string{"a", "a"}, Speed: 1.0000000000000002,
			Source: `say "hi", then go`, JobID: "7_3"},
	}
}

func equalObs(a, b Observation) bool {
	if len(a.CoTags) == 0 && len(b.CoTags) == 0 {
		a.CoTags, b.CoTags = nil, nil
	}
	if !a.When.Equal(b.When) {
		return false
	}
	a.When, b.When = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestWriteReadCSVRoundTrip(t *testing.T) {
	in := sampleObs()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, in); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(buf.String(), "\n"); first != "tag,class,co_tags,speed,source,job_id,node,when,uid" {
		t.Errorf("header %q", first)
	}
	out, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d of %d read back", len(out), len(in))
	}
	for i := range in {
		if !equalObs(in[i], out[i]) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, out[i], in[i])
		}
	}
}

func TestReadCSVColumnOrderAndComments(t *testing.T) {
	in := "speed,co_tags,tag\n# comment\n0.5,x+y,z\n1,,solo\n"
	out, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Observation{{Tag: "z", CoTags: []string{"x", "y"}, Speed: 0.5}, {Tag: "solo", Speed: 1}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got %+v, want %+v", out, want)
	}
}

func TestReadCSVErrors(t *testing.T) {
	const hdr = "tag,class,co_tags,speed,source,job_id,node,when\n"
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"missing column", "tag,speed\n", []string{`"co_tags"`}},
		{"unknown column", "tag,co_tags,speed,speeed\n", []string{`unknown column "speeed"`}},
		{"bad tag", hdr + "../x,,,1,,,,\n", []string{"line 2", "column tag"}},
		{"bad co tag", hdr + "x,,a+../b,1,,,,\n", []string{"line 2", "column co_tags", "co-runner 2"}},
		{"empty co tag", hdr + "x,,a++b,1,,,,\n", []string{"line 2", "column co_tags"}},
		{"bad class", hdr + "x,gpu,,1,,,,\n", []string{"line 2", "column class"}},
		{"speed zero", hdr + "x,,,0,,,,\n", []string{"line 2", "column speed"}},
		{"speed negative", hdr + "x,,,-0.5,,,,\n", []string{"line 2", "column speed"}},
		{"speed over 2", hdr + "x,,,2.01,,,,\n", []string{"line 2", "column speed"}},
		{"speed NaN", hdr + "x,,,NaN,,,,\n", []string{"line 2", "column speed"}},
		{"speed empty", hdr + "x,,,,,,,\n", []string{"line 2", "column speed"}},
		{"bad when", hdr + "x,,,1,,,,tuesday\n", []string{"line 2", "column when"}},
		{"control char", hdr + "x,,,1,,\"a\x1bb\",,\n", []string{"line 2", "column job_id"}},
		{"too many co tags", hdr + "x,,a" + strings.Repeat("+a", MaxCoTags) + ",1,,,,\n", []string{"line 2", "co-runners"}},
		{"short row", hdr + "\nx,,\n", []string{"line 3"}},
	} {
		_, err := ReadCSV(strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Observation{Tag: "a", Speed: 1}
	for _, tc := range []struct {
		name string
		edit func(o *Observation)
		bad  bool
	}{
		{"ok", func(o *Observation) {}, false},
		{"max speed", func(o *Observation) { o.Speed = MaxSpeed }, false},
		{"speed zero", func(o *Observation) { o.Speed = 0 }, true},
		{"speed NaN", func(o *Observation) { o.Speed = math.NaN() }, true},
		{"speed Inf", func(o *Observation) { o.Speed = math.Inf(1) }, true},
		{"bad tag", func(o *Observation) { o.Tag = "A" }, true},
		{"bad co tag", func(o *Observation) { o.CoTags = []string{"ok", "a/b"} }, true},
		{"bad class", func(o *Observation) { o.Class = "x" }, true},
		{"padded node", func(o *Observation) { o.Node = " n1" }, true},
		{"newline source", func(o *Observation) { o.Source = "a\nb" }, true},
		{"year 10000", func(o *Observation) { o.When = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"odd offset", func(o *Observation) { o.When = time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", 30)) }, true},
	} {
		o := ok
		tc.edit(&o)
		if err := o.Validate(); (err != nil) != tc.bad {
			t.Errorf("%s: Validate = %v, want bad=%v", tc.name, err, tc.bad)
		}
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, []Observation{ok, {Tag: "b", Speed: 3}}); err == nil || buf.Len() != 0 {
		t.Errorf("WriteCSV with an invalid observation: err %v, wrote %d bytes", err, buf.Len())
	}
}
