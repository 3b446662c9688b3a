// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
)

func FuzzReadLucidPairs(f *testing.F) {
	if b, err := os.ReadFile(lucidPairs); err == nil {
		f.Add(string(b[:4096])) // the header and the first rows (a cut last row included)
	}
	f.Add("model1,gpu_num1,batchsize1,amp1,speed1,model2,gpu_num2,batchsize2,amp2,speed2\nA,1,32,0,0.9,B,1,64,1,1.1\n")
	f.Add("model1,batchsize1,amp1,speed1,model2,batchsize2,amp2,speed2\nA,1,0,2,A,1,0,1e-300\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		obs, err := ReadLucidPairs(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "lucid pairs csv: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		if len(obs) == 0 || len(obs)%2 != 0 {
			t.Fatalf("%d observations", len(obs))
		}
		for i := 0; i < len(obs); i += 2 {
			a, b := obs[i], obs[i+1]
			if a.CoTags[0] != b.Tag || b.CoTags[0] != a.Tag {
				t.Fatalf("pair not mirrored: %+v %+v", a, b)
			}
		}
		roundTrip(t, obs)
	})
}

// FuzzReadCSV reads arbitrary text; whatever it accepts must validate and survive
// WriteCSV -> ReadCSV unchanged.
func FuzzReadCSV(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteCSV(&buf, sampleObs()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Add("speed,co_tags,tag\n# c\n0.5,x+y,z\n")
	f.Add("tag,co_tags,speed,when\nx,,1,2026-01-01T00:00:00.5+05:30\n")
	f.Add("tag,co_tags,speed\n\"x\",\"\",\"1\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		obs, err := ReadCSV(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, o := range obs {
			if err := o.Validate(); err != nil {
				t.Fatalf("ReadCSV accepted an invalid observation: %v", err)
			}
		}
		roundTrip(t, obs)
	})
}

// FuzzWriteCSV builds observations from fields; any that validates must be
// written and read back equal.
func FuzzWriteCSV(f *testing.F) {
	f.Add("stream", "hpc", "a+b", 0.75, "epilog", "12", "n1", int64(1700000000), int64(5), 0)
	f.Add("x", "", "", 2.0, `q"u,o`, "", "", int64(0), int64(0), 3600)
	f.Fuzz(func(t *testing.T, tag, class, co string, speed float64, src, job, node string, sec, nsec int64, off int) {
		o := Observation{Tag: tag, Class: profile.Class(class), Speed: speed, Source: src, JobID: job, Node: node}
		if co != "" {
			o.CoTags = strings.Split(co, "+")
		}
		if sec != 0 {
			o.When = time.Unix(sec%(1<<36), nsec%1e9).In(time.FixedZone("", off%86400))
		}
		var buf bytes.Buffer
		err := WriteCSV(&buf, []Observation{o})
		if (err == nil) != (o.Validate() == nil) {
			t.Fatalf("WriteCSV %v disagrees with Validate %v", err, o.Validate())
		}
		if err != nil {
			return
		}
		out, err := ReadCSV(&buf)
		if err != nil {
			t.Fatalf("written %q, read back error %v", buf.String(), err)
		}
		if len(out) != 1 || !equalObs(o, out[0]) {
			t.Fatalf("round trip: %+v -> %+v", o, out)
		}
	})
}

func roundTrip(t *testing.T, obs []Observation) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, obs); err != nil {
		t.Fatalf("WriteCSV of read observations: %v", err)
	}
	back, err := ReadCSV(&buf)
	if err != nil {
		t.Fatalf("ReadCSV of written observations: %v", err)
	}
	if len(back) != len(obs) {
		t.Fatalf("round trip: %d of %d", len(back), len(obs))
	}
	for i := range obs {
		if !equalObs(obs[i], back[i]) {
			t.Fatalf("round trip row %d: %+v -> %+v", i, obs[i], back[i])
		}
	}
}

// FuzzReadRows reads arbitrary file contents row by row: whatever it keeps must
// validate, be sane and survive WriteCSV -> ReadCSV; it never fails on a bad row,
// only on a missing or foreign header, and counts every skipped row.
func FuzzReadRows(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteCSV(&buf, sampleObs()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Add(buf.String() + "b,train,,0.\nc,,,0.5,,,,,\n")
	f.Add("tag,class,co_tags,speed,source,job_id,node,when\nx,,\"a+b,0.5\ny,,,0.7,,,,\n")
	f.Add("# comment\n\ntag,co_tags,speed,uid\nx,,0.01,7\nx,,0.9,07\n")
	f.Fuzz(func(t *testing.T, in string) {
		obs, bad, err := readRows(strings.NewReader(in))
		if err != nil {
			if len(obs) != 0 && !strings.Contains(err.Error(), "read") {
				t.Fatalf("error %v with %d observations", err, len(obs))
			}
			return
		}
		if bad.Count < len(bad.First) || len(bad.First) > maxBadRowsNamed {
			t.Fatalf("bad rows %d, named %d", bad.Count, len(bad.First))
		}
		for _, o := range obs {
			if err := o.Validate(); err != nil {
				t.Fatalf("kept an invalid observation: %v", err)
			}
			if err := Sane(o); err != nil {
				t.Fatalf("kept an insane observation: %v", err)
			}
		}
		roundTrip(t, obs)
	})
}
