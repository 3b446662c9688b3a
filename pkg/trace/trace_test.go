// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/profile"
)

func TestReadPhilly(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		jobs    []Job
		skipped int
	}{
		{name: "ok sorted relative", in: "timestamp,duration,num_gpus,gpu_time,cluster\n" +
			"2017-10-09 07:01:55,66.0,1,66.0,a\n2017-10-09 07:00:55,10,4,40,b\n2017-10-09 07:00:56,0,1,0,b\n",
			jobs: []Job{{ID: "philly-2", Submit: 0, Duration: 10, GPUs: 4}, {ID: "philly-1", Submit: 60, Duration: 66, GPUs: 1}}, skipped: 1},
		{name: "empty", in: "", wantErr: "empty file"},
		{name: "missing column", in: "timestamp,duration\n", wantErr: "num_gpus"},
		{name: "bad time", in: "timestamp,duration,num_gpus\nyesterday,1,1\n", wantErr: "line 2: timestamp"},
		{name: "negative duration", in: "timestamp,duration,num_gpus\n2017-10-09 07:01:55,-1,1\n", wantErr: "duration"},
		{name: "fractional gpus", in: "timestamp,duration,num_gpus\n2017-10-09 07:01:55,1,1.5\n", wantErr: "num_gpus"},
		{name: "nan", in: "timestamp,duration,num_gpus\n2017-10-09 07:01:55,NaN,1\n", wantErr: "duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ReadPhilly(strings.NewReader(tc.in))
			checkTrace(t, tr, err, tc.wantErr, tc.jobs, tc.skipped)
		})
	}
}

func checkTrace(t *testing.T, tr *Trace, err error, wantErr string, jobs []Job, skipped int) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != len(jobs) {
		t.Fatalf("got %d jobs %+v, want %d", len(tr.Jobs), tr.Jobs, len(jobs))
	}
	for i := range jobs {
		if !reflect.DeepEqual(tr.Jobs[i], jobs[i]) {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], jobs[i])
		}
	}
	if tr.SkippedTotal() != skipped {
		t.Errorf("skipped %v, want %d", tr.Skipped, skipped)
	}
}

const aliHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"

func TestReadAlibaba(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		jobs    []Job
		skipped int
	}{
		{name: "ok", in: aliHeader +
			"openb-pod-0017,12000,16384,1,1000,,LS,Running,100,1100,150\n" +
			"openb-pod-0018,6000,8192,1,460,V100M16,BE,Succeeded,50,500,60\n" +
			"openb-pod-0019,6000,8192,0,0,,BE,Succeeded,50,500,60\n" +
			"openb-pod-0020,6000,8192,2,1000,,BE,Pending,50,,\n" +
			"openb-pod-0021,6000,8192,8,1000,,BE,Failed,70,,80\n",
			jobs: []Job{
				{ID: "alibaba-openb-pod-0018", Submit: 0, Duration: 440, GPUs: 1, GPUFrac: 0.46, GPUModels: []string{"V100M16"}},
				{ID: "alibaba-openb-pod-0017", Submit: 50, Duration: 950, GPUs: 1},
			}, skipped: 3},
		{name: "hostile name", in: aliHeader + "../../x\x01,1,1,1,1000,,LS,Running,0,10,1\n",
			jobs: []Job{{ID: "alibaba-1", Submit: 0, Duration: 9, GPUs: 1}}},
		{name: "missing column", in: "name,num_gpu\n", wantErr: "gpu_milli"},
		{name: "several models", in: aliHeader + "p,1,1,1,1000,V100M16|V100M32,LS,Running,0,10,1\n",
			jobs: []Job{{ID: "alibaba-p", Submit: 0, Duration: 9, GPUs: 1, GPUModels: []string{"V100M16", "V100M32"}}}},
		{name: "no gpu_spec column", in: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,1,1000,LS,Running,0,10,1\n",
			jobs: []Job{{ID: "alibaba-p", Submit: 0, Duration: 9, GPUs: 1}}},
		{name: "bad model name", in: aliHeader + "p,1,1,1,1000,V100|a b,LS,Running,0,10,1\n", wantErr: "gpu_spec"},
		{name: "empty model in list", in: aliHeader + "p,1,1,1,1000,V100||T4,LS,Running,0,10,1\n", wantErr: "gpu_spec"},
		{name: "bad milli", in: aliHeader + "p,1,1,1,2000,,LS,Running,0,10,1\n", wantErr: "gpu_milli"},
		{name: "bad time", in: aliHeader + "p,1,1,1,1000,,LS,Running,x,10,1\n", wantErr: "creation_time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ReadAlibaba(strings.NewReader(tc.in))
			checkTrace(t, tr, err, tc.wantErr, tc.jobs, tc.skipped)
		})
	}
}

func TestReadGeneric(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		jobs    []Job
	}{
		{name: "ok", in: "submit,duration,gpus,tag,class\n10,100,2,resnet18-bs32,train\n5,50,1,,\n",
			jobs: []Job{{ID: "job-2", Submit: 0, Duration: 50, GPUs: 1}, {ID: "job-1", Submit: 5, Duration: 100, GPUs: 2, Tag: "resnet18-bs32", Class: profile.ClassTrain}}},
		{name: "no tag columns", in: "gpus,duration,submit\n1,2,3\n", jobs: []Job{{ID: "job-1", Duration: 2, GPUs: 1}}},
		{name: "bad tag", in: "submit,duration,gpus,tag\n1,1,1,../etc\n", wantErr: "invalid tag"},
		{name: "bad class", in: "submit,duration,gpus,class\n1,1,1,gaming\n", wantErr: "invalid class"},
		{name: "zero gpus", in: "submit,duration,gpus\n1,1,0\n", wantErr: "gpus"},
		{name: "zero duration", in: "submit,duration,gpus\n1,0,1\n", wantErr: "duration"},
		{name: "empty submit", in: "submit,duration,gpus\n,1,1\n", wantErr: "submit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ReadGeneric(strings.NewReader(tc.in))
			checkTrace(t, tr, err, tc.wantErr, tc.jobs, 0)
		})
	}
}

// TestShippedPhilly reads the real shipped trace (skipped if this checkout lacks it).
func TestShippedPhilly(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "models", "data", "philly", "philly.csv"))
	if err != nil {
		t.Skip("shipped trace not present:", err)
	}
	defer f.Close()
	tr, err := ReadPhilly(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tr.Jobs) + tr.SkippedTotal(); got != 82247 {
		t.Errorf("jobs+skipped = %d, want 82247", got)
	}
	for i := 1; i < len(tr.Jobs); i++ {
		if tr.Jobs[i].Submit < tr.Jobs[i-1].Submit {
			t.Fatalf("not sorted at %d", i)
		}
	}
}

func TestAssign(t *testing.T) {
	tags := []string{"c", "a", "b"}
	jobs := make([]Job, 3000)
	for i := range jobs {
		jobs[i] = Job{ID: "j" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), GPUs: 1, Duration: 1}
	}
	jobs[0].Tag, jobs[0].Class = "b", profile.ClassHPC
	jobs[1].GPUFrac = 0.5
	if err := Assign(jobs, tags, DefaultClassMix, 7); err != nil {
		t.Fatal(err)
	}
	if jobs[0].Tag != "b" || jobs[0].Class != profile.ClassHPC {
		t.Errorf("given tag/class overwritten: %+v", jobs[0])
	}
	if jobs[1].Class != profile.ClassInfer {
		t.Errorf("fractional job class %s, want infer", jobs[1].Class)
	}
	count := map[profile.Class]int{}
	tagCount := map[string]int{}
	for _, j := range jobs {
		count[j.Class]++
		tagCount[j.Tag]++
	}
	if f := float64(count[profile.ClassTrain]) / float64(len(jobs)); f < 0.55 || f > 0.65 {
		t.Errorf("train share %.3f, want about 0.6", f)
	}
	for _, tg := range tags {
		if tagCount[tg] < 900 {
			t.Errorf("tag %s used %d times of 3000", tg, tagCount[tg])
		}
	}
	// Stable under subsampling and reordering: the same ID gets the same answer.
	again := []Job{{ID: jobs[100].ID}, {ID: jobs[5].ID}}
	if err := Assign(again, []string{"b", "c", "a"}, DefaultClassMix, 7); err != nil {
		t.Fatal(err)
	}
	if again[0].Tag != jobs[100].Tag || again[0].Class != jobs[100].Class || again[1].Tag != jobs[5].Tag {
		t.Errorf("assignment depends on position or tag order")
	}
	if err := Assign([]Job{{ID: "x", Tag: "zzz"}}, tags, DefaultClassMix, 1); err == nil {
		t.Error("unknown tag accepted")
	}
	if err := Assign(jobs, nil, DefaultClassMix, 1); err == nil {
		t.Error("empty catalog accepted")
	}
}

func TestLoadAndSample(t *testing.T) {
	jobs := []Job{{ID: "a", Submit: 0, Duration: 100, GPUs: 1}, {ID: "b", Submit: 50, Duration: 100, GPUs: 2}, {ID: "c", Submit: 100, Duration: 100, GPUs: 1}}
	// work 400 GPU-s over a 100 s span on 2 GPUs = load 2.
	if got := OfferedLoad(jobs, 2); got != 2 {
		t.Fatalf("load %v, want 2", got)
	}
	f, err := SetLoad(jobs, 2, 4)
	if err != nil || f != 2 || jobs[2].Submit != 50 {
		t.Fatalf("SetLoad: f=%v err=%v jobs=%+v", f, err, jobs)
	}
	if err := ScaleLoad(jobs, 0); err == nil {
		t.Error("factor 0 accepted")
	}
	s := Sample(jobs, 2, 1)
	if len(s) != 2 || s[0].Submit != 0 || s[1].Submit <= 0 {
		t.Errorf("sample %+v", s)
	}
	w := Window(jobs, 20, 30) // submits are 0, 25, 50 after SetLoad
	if len(w) != 1 || w[0].ID != "b" || w[0].Submit != 5 {
		t.Errorf("window %+v", w)
	}
}

func FuzzReadPhilly(f *testing.F) {
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n")
	f.Add("timestamp,duration,num_gpus\n\"2017-10-09 07:01:55\",1e300,3\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadPhilly(strings.NewReader(in))
		checkFuzz(t, tr, err)
	})
}

func FuzzReadAlibaba(f *testing.F) {
	f.Add(aliHeader + "openb-pod-0017,12000,16384,1,460,,LS,Running,100,1100,150\n")
	f.Add(aliHeader + "p,,,,,,,,,,\n")
	f.Add(aliHeader + "p,1,1,1,1000,V100M16|T4,LS,Running,0,10,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadAlibaba(strings.NewReader(in))
		checkFuzz(t, tr, err)
	})
}

func FuzzReadGeneric(f *testing.F) {
	f.Add("submit,duration,gpus,tag,class\n10,100,2,resnet18-bs32,train\n5,50,1,,\n")
	f.Add("submit,duration,gpus\n-5,1e9,65536\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadGeneric(strings.NewReader(in))
		checkFuzz(t, tr, err)
	})
}

// checkFuzz asserts the invariants every accepted trace must satisfy.
func checkFuzz(t *testing.T, tr *Trace, err error) {
	if err != nil {
		return
	}
	for i, j := range tr.Jobs {
		if !(j.Duration > 0) || j.GPUs < 1 || j.Submit < 0 || j.GPUFrac < 0 || j.GPUFrac >= 1 {
			t.Fatalf("bad job %+v", j)
		}
		if i > 0 && j.Submit < tr.Jobs[i-1].Submit {
			t.Fatal("not sorted")
		}
		if j.Tag != "" && profile.ValidateTag(j.Tag) != nil {
			t.Fatalf("invalid tag accepted %q", j.Tag)
		}
	}
}
