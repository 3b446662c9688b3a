// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sameAsJSON fails unless appendRecord writes what encoding/json writes for r,
// or both refuse it.
func sameAsJSON(t *testing.T, r Record) {
	t.Helper()
	want, werr := json.Marshal(r)
	got, gerr := appendRecord([]byte("prefix"), &r)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("errors differ: encoding/json %v, appendRecord %v (%+v)", werr, gerr, r)
	}
	if werr != nil {
		if string(got) != "prefix" {
			t.Fatalf("on an error dst changed: %q", got)
		}
		return
	}
	if !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("appendRecord differs from encoding/json:\n got %s\nwant %s", got[len("prefix"):], want)
	}
}

func TestAppendRecordMatchesJSON(t *testing.T) {
	full := Record{ID: "m4x9k2-17-abcdef0123456789", Time: time.Date(2026, 12, 1, 20, 1, 2, 345678900, time.UTC), Op: "submit",
		JobID: "1234", UserID: 4294967295, Tag: "resnet50-bs64", Class: "train", Outcome: "rewrite", Action: "share", Node: "n1017",
		GPU: 3, Shards: 2, GPUs: []int{3, 4}, Nodes: []string{"n1", "n2"}, Replaces: []string{"a-1", "b-2"}, PredictedSpeed: 0.9312, MinResidentSpeed: 1e-7,
		CoRunners: []string{"bert-base-bs32"}, Policy: "coscheml", Reason: "coscheml: share <&> \"q\" \\ \t\n\r\b\f\x00\x1f\x7f é \u2028\u2029 \xff",
		TresIn: "gres/gpu:1", TresOut: "gres/shard:2"}
	// A field added to Record must be set here, so that the comparison below
	// fails until appendRecord writes it too.
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("Record.%s is not set in the full record: set it here and write it in appendRecord", v.Type().Field(i).Name)
		}
	}
	for name, r := range map[string]Record{
		"zero":          {},
		"full":          full,
		"minimal":       {ID: "x", Time: time.Unix(0, 0), Op: "modify", Outcome: "unchanged", Action: "pass", GPU: -1, Reason: "untagged"},
		"zone":          {Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -(9*3600+30*60)))},
		"big speed":     {PredictedSpeed: 1e21, MinResidentSpeed: -123456.789},
		"tiny speed":    {PredictedSpeed: 5e-324, MinResidentSpeed: -1e-9},
		"empty slices":  {GPUs: []int{}, Nodes: []string{}, Replaces: []string{}, CoRunners: []string{}},
		"nan speed":     {PredictedSpeed: math.NaN()},
		"inf speed":     {MinResidentSpeed: math.Inf(-1)},
		"year 10000":    {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year before 0": {Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"long reason":   {Reason: strings.Repeat("coscheml: wait: job new needs 1 GPU(s) ", 100)},
	} {
		t.Run(name, func(t *testing.T) { sameAsJSON(t, r) })
	}
}

func FuzzAppendRecord(f *testing.F) {
	f.Add("m4x9k2-17-ab", int64(1764619262), int64(345678900), int32(0), "submit", "1234", uint32(1000), "resnet50-bs64", "train",
		"rewrite", "share", "n1", 3, 2, "<&>\"\\\x00\u2028\xff", uint64(math.Float64bits(0.93)), uint64(math.Float64bits(1e-7)), "a,b")
	f.Add("", int64(0), int64(0), int32(-34200), "", "", uint32(0), "", "", "", "", "", -1, 0, "", uint64(0), uint64(math.Float64bits(math.NaN())), "")
	f.Fuzz(func(t *testing.T, id string, sec, nsec int64, zone int32, op, jobID string, uid uint32, tag, class, outcome, action, node string,
		gpu, shards int, reason string, speed, minSpeed uint64, list string) {
		var ss []string
		if list != "" {
			ss = strings.Split(list, ",")
		}
		gpus := make([]int, 0, len(ss))
		for i := range ss {
			gpus = append(gpus, gpu+i)
		}
		r := Record{ID: id, Time: time.Unix(sec, nsec%1e9).In(time.FixedZone("z", int(zone%(30*3600)))), Op: op, JobID: jobID, UserID: uid,
			Tag: tag, Class: class, Outcome: outcome, Action: action, Node: node, GPU: gpu, Shards: shards, GPUs: gpus, Nodes: ss, Replaces: ss,
			PredictedSpeed: math.Float64frombits(speed), MinResidentSpeed: math.Float64frombits(minSpeed), CoRunners: ss, Policy: class,
			Reason: reason, TresIn: node, TresOut: tag}
		sameAsJSON(t, r)
	})
}

func BenchmarkAppendRecord(b *testing.B) {
	r := Record{ID: "m4x9k2-17-abcdef0123456789", Time: time.Now(), Op: "submit", UserID: 1000, Tag: "resnet50-bs64", Class: "train",
		Outcome: "rewrite", Action: "wait", Shards: 4, GPU: -1, Policy: "coscheml",
		Reason: "coscheml: wait: job new needs 1 GPU(s), 0 of 16 GPUs acceptable (16 at co-runner limit); queued for a whole GPU (shards of one GPU, any node)",
		TresIn: "gres/gpu:1", TresOut: "gres/shard:4"}
	b.Run("appendRecord", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = appendRecord(buf[:0], &r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(r)
		}
	})
}
