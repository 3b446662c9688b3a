// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

const lucidSolo = "../../models/data/lucid-train/solo_profiles.csv"

func TestReadLucidSoloRealFile(t *testing.T) {
	f, err := os.Open(lucidSolo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := ReadLucidSolo(f)
	if err != nil {
		t.Fatal(err)
	}
	// Check every profile against an independent read of the same file.
	raw, err := os.ReadFile(lucidSolo)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(rows)-1 {
		t.Fatalf("%d profiles from %d data rows", len(ps), len(rows)-1)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tags := map[string]bool{}
	for i, row := range rows[1:] { // model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label
		p := ps[i]
		bs, _ := strconv.Atoi(row[2])
		tag, _ := LucidTag(row[0], bs, row[3] == "1")
		if p.Tag != tag || p.Class != ClassTrain {
			t.Errorf("row %d: tag %q class %q, want %q train", i+2, p.Tag, p.Class, tag)
		}
		if p.SMUtil.Mean != num(row[5]) || p.SMUtil.P95 != p.SMUtil.Mean || p.SMUtil.Max != p.SMUtil.Mean {
			t.Errorf("%s: SMUtil %+v, want all %s", p.Tag, p.SMUtil, row[5])
		}
		if p.MemBWUtil.Mean != num(row[6]) || p.MemBWUtil.Max != p.MemBWUtil.Mean {
			t.Errorf("%s: MemBWUtil %+v, want %s", p.Tag, p.MemBWUtil, row[6])
		}
		if p.MemUsedMiB != num(row[7]) || p.SoloThroughput != num(row[4]) {
			t.Errorf("%s: mem %v thr %v, want %s %s", p.Tag, p.MemUsedMiB, p.SoloThroughput, row[7], row[4])
		}
		if !p.Partial || p.PartialNote == "" || p.GPUModel != LucidGPUModel || !p.CollectedAt.IsZero() ||
			!strings.HasPrefix(p.Source, LucidSource) {
			t.Errorf("%s: provenance fields %+v", p.Tag, p)
		}
		tags[p.Tag] = true
	}
	if len(tags) != len(ps) {
		t.Errorf("%d distinct tags for %d profiles", len(tags), len(ps))
	}
	t.Logf("imported %d Lucid profiles", len(ps))
}

func TestReadLucidSoloErrors(t *testing.T) {
	const hdr = "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\n"
	for _, tc := range []struct {
		name, in string
		want     []string // all must appear in the error
	}{
		{"empty", "", []string{"no header"}},
		{"header only", hdr, []string{"no data rows"}},
		{"missing column", "model,batchsize,amp,speed,gpu_util,gmem\nA,1,0,1,1,1\n", []string{"line 1", `"gmem_util"`}},
		{"bad amp", hdr + "BERT,SQuAD,32,2,84,99,62,20162,2\n", []string{"line 2", "column amp"}},
		{"bad batch", hdr + "BERT,SQuAD,x,0,84,99,62,20162,2\n", []string{"line 2", "column batchsize"}},
		{"zero batch", hdr + "BERT,SQuAD,0,0,84,99,62,20162,2\n", []string{"line 2", "column batchsize"}},
		{"util over 100", hdr + "BERT,SQuAD,32,0,84,199,62,20162,2\n", []string{"line 2", "column gpu_util"}},
		{"NaN speed", hdr + "BERT,SQuAD,32,0,NaN,99,62,20162,2\n", []string{"line 2", "column speed"}},
		{"zero speed", hdr + "BERT,SQuAD,32,0,0,99,62,20162,2\n", []string{"line 2", "column speed"}},
		{"negative memory", hdr + "BERT,SQuAD,32,0,84,99,62,-1,2\n", []string{"line 2", "column gmem"}},
		{"bad model", hdr + "???,SQuAD,32,0,84,99,62,1,2\n", []string{"line 2", "column model"}},
		{"short row", hdr + "BERT,SQuAD,32\n", []string{"line 2", "fields"}},
		{"duplicate", hdr + "BERT,SQuAD,32,0,84,99,62,20162,2\nbert,other,32,0,80,90,60,20000,2\n",
			[]string{"line 3", "bert-bs32", "line 2"}},
	} {
		_, err := ReadLucidSolo(strings.NewReader(tc.in))
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

func TestReadGenericCSV(t *testing.T) {
	in := "\ufefftag,class,sm_mean,sm_p95,sm_max,membw_mean,membw_p95,membw_max,mem_used_mib," +
		"pcie_tx_mbps_mean,pcie_rx_mbps_mean,power_w_mean,sm_clock_mhz_mean,solo_runtime_s,solo_throughput," +
		"samples,duration_s,gpu_model,collected_at,collected_on,source\n" +
		"# a comment line\n" +
		"stream,hpc,30,35,40,92.5,97,99,2048,10,11,350,1980,60,,120,60,NVIDIA H200,2026-11-30T05:00:00Z,node7,by hand\n" +
		"llama-infer,infer,20,,,10,,,30000,,,,,,15.5,,,,,,\n"
	ps, err := ReadGenericCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d profiles", len(ps))
	}
	s := ps[0]
	want := Profile{
		Tag: "stream", Class: ClassHPC, GPUModel: "NVIDIA H200",
		SMUtil: Stat{30, 35, 40}, MemBWUtil: Stat{92.5, 97, 99}, MemUsedMiB: 2048,
		PCIeTxMBps: Stat{Mean: 10}, PCIeRxMBps: Stat{Mean: 11}, PowerW: Stat{Mean: 350}, SMClockMHz: Stat{Mean: 1980},
		SoloRuntimeS: 60, Samples: 120, DurationS: 60,
		CollectedAt: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC), CollectedOn: "node7", Source: "by hand",
	}
	if !s.CollectedAt.Equal(want.CollectedAt) {
		t.Errorf("collected_at %v", s.CollectedAt)
	}
	s.CollectedAt = want.CollectedAt
	if *s != want {
		t.Errorf("row 1:\n got %+v\nwant %+v", *s, want)
	}
	l := ps[1]
	if l.Class != ClassInfer || l.SMUtil != (Stat{20, 20, 20}) || l.MemBWUtil != (Stat{10, 10, 10}) ||
		l.SoloThroughput != 15.5 || !l.Partial || !strings.Contains(l.PartialNote, "sm_p95") || l.Source != "generic profile csv" {
		t.Errorf("row 2: %+v", *l)
	}
}

func TestReadGenericCSVErrors(t *testing.T) {
	const hdr = "tag,class,sm_mean,membw_mean,mem_used_mib"
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown column", hdr + ",sm_mena\n", []string{"line 1", `unknown column "sm_mena"`}},
		{"duplicate column", hdr + ",tag\n", []string{"line 1", `"tag" appears twice`}},
		{"missing required", "tag,class,sm_mean\n", []string{`"membw_mean"`}},
		{"bad tag", hdr + "\n../x,hpc,1,1,1\n", []string{"line 2", "column tag"}},
		{"bad class", hdr + "\nx,batch,1,1,1\n", []string{"line 2", "column class"}},
		{"empty required", hdr + "\nx,hpc,,1,1\n", []string{"line 2", "column sm_mean", "empty"}},
		{"p95 over 100", hdr + ",sm_p95\nx,hpc,1,1,1,101\n", []string{"line 2", "column sm_p95"}},
		{"max below mean", hdr + ",sm_max\nx,hpc,50,1,1,40\n", []string{"line 2", "column sm_max"}},
		{"bad time", hdr + ",collected_at\nx,hpc,1,1,1,yesterday\n", []string{"line 2", "column collected_at"}},
		{"bad samples", hdr + ",samples\nx,hpc,1,1,1,-3\n", []string{"line 2", "column samples"}},
		{"control in text", hdr + ",gpu_model\nx,hpc,1,1,1,\"H200\x1b[2J\"\n", []string{"line 2", "column gpu_model"}},
		{"duplicate tag", hdr + "\nx,hpc,1,1,1\n# c\nx,train,1,1,1\n", []string{"line 4", "line 2", `"x"`}},
		{"bare quote", hdr + "\nx,hpc,1\"2,1,1\n", []string{"line 2"}},
	} {
		_, err := ReadGenericCSV(strings.NewReader(tc.in))
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
