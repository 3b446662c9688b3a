// SPDX-License-Identifier: Apache-2.0

package model

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

// lucidData reads the embedded Lucid CSVs with a minimal private reader, so these
// tests do not depend on the importers in pkg/profile and pkg/observation.
func lucidData(t testing.TB) (profile.Catalog, []observation.Observation) {
	t.Helper()
	rows := func(b []byte) []map[string]string {
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]string
		for _, r := range recs[1:] {
			m := map[string]string{}
			for i, h := range recs[0] {
				m[h] = r[i]
			}
			out = append(out, m)
		}
		return out
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tag := func(model, bs, amp string) string {
		tg, err := profile.LucidTag(model, int(num(bs)), amp == "1")
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	cat := profile.Catalog{}
	for _, r := range rows(models.DefaultSoloCSV) {
		tg := tag(r["model"], r["batchsize"], r["amp"])
		cat[tg] = &profile.Profile{Tag: tg, Class: profile.ClassTrain,
			SMUtil: profile.Stat{Mean: num(r["gpu_util"])}, MemBWUtil: profile.Stat{Mean: num(r["gmem_util"])},
			MemUsedMiB: num(r["gmem"])}
	}
	var obs []observation.Observation
	for _, r := range rows(models.DefaultPairsCSV) {
		a := tag(r["model1"], r["batchsize1"], r["amp1"])
		b := tag(r["model2"], r["batchsize2"], r["amp2"])
		obs = append(obs,
			observation.Observation{Tag: a, CoTags: []string{b}, Speed: num(r["speed1"])},
			observation.Observation{Tag: b, CoTags: []string{a}, Speed: num(r["speed2"])})
	}
	return cat, obs
}

// lucidCase is one Lucid measurement as a prediction input.
type lucidCase struct {
	Job *profile.Profile
	Co  []*profile.Profile
}

// lucidCases returns every measurement of the embedded Lucid pairs as a
// prediction input (the trainer's datasets live in package training).
func lucidCases(t testing.TB) []lucidCase {
	t.Helper()
	cat, obs := lucidData(t)
	out := make([]lucidCase, len(obs))
	for i, o := range obs {
		out[i] = lucidCase{Job: cat[o.Tag], Co: []*profile.Profile{cat[o.CoTags[0]]}}
	}
	return out
}
