// SPDX-License-Identifier: Apache-2.0

package truth

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/profile"
)

func prof(tag string, sm, bw, mem float64) *profile.Profile {
	return &profile.Profile{Tag: tag, Class: profile.ClassTrain, SMUtil: profile.Stat{Mean: sm}, MemBWUtil: profile.Stat{Mean: bw}, MemUsedMiB: mem}
}

func TestReadPairs(t *testing.T) {
	tests := []struct {
		name    string
		lucid   bool
		in      string
		want    []Pair
		wantErr string
	}{
		{name: "lucid", lucid: true, in: "model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util\n" +
			"MobileNetV3,ImageNet,1,32,0,0.983,ResNet18,CIFAR-10,1,32,1,1.034,64\n" +
			"MobileNetV3,ImageNet,2,32,0,0.5,ResNet18,CIFAR-10,1,32,1,0.5,64\n",
			want: []Pair{{A: "mobilenetv3-bs32", B: "resnet18-bs32-amp", SpeedA: 0.983, SpeedB: 1.034, Util: 64}}},
		{name: "lucid bad amp", lucid: true, in: "model1,batchsize1,amp1,speed1,model2,batchsize2,amp2,speed2\nA,32,2,1,B,32,0,1\n", wantErr: "amp"},
		{name: "lucid bad speed", lucid: true, in: "model1,batchsize1,amp1,speed1,model2,batchsize2,amp2,speed2\nA,32,1,-1,B,32,0,1\n", wantErr: "speed1"},
		{name: "lucid missing col", lucid: true, in: "model1,batchsize1\n", wantErr: "amp1"},
		{name: "lucid no rows", lucid: true, in: "model1,batchsize1,amp1,speed1,model2,batchsize2,amp2,speed2\n", wantErr: "no usable data rows"},
		{name: "generic", in: "tag_b,tag_a,speed_a,speed_b\nb,a,0.9,0.8\n", want: []Pair{{A: "a", B: "b", SpeedA: 0.9, SpeedB: 0.8}}},
		{name: "generic bad tag", in: "tag_a,tag_b,speed_a,speed_b\n../x,a,0.9,0.8\n", wantErr: "invalid tag"},
		{name: "generic util", in: "tag_a,tag_b,speed_a,speed_b,gpu_util\na,b,0.9,0.8,77.5\n", want: []Pair{{A: "a", B: "b", SpeedA: 0.9, SpeedB: 0.8, Util: 77.5}}},
		{name: "generic bad util", in: "tag_a,tag_b,speed_a,speed_b,gpu_util\na,b,0.9,0.8,101\n", wantErr: "gpu_util"},
		{name: "generic nan", in: "tag_a,tag_b,speed_a,speed_b\na,b,NaN,0.8\n", wantErr: "speed_a"},
		{name: "generic empty", in: "", wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Pair
			var err error
			if tc.lucid {
				got, err = ReadLucidPairs(strings.NewReader(tc.in))
			} else {
				got, err = ReadGenericPairs(strings.NewReader(tc.in))
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("pair %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestTableRules(t *testing.T) {
	ps := []*profile.Profile{prof("a", 90, 60, 8000), prof("b", 30, 10, 2000), prof("c", 88, 58, 7900), prof("lonely", 50, 50, 100)}
	pairs := []Pair{
		{A: "a", B: "b", SpeedA: 0.8, SpeedB: 1.2},  // b clipped to 1
		{A: "b", B: "a", SpeedA: 0.9, SpeedB: 0.6},  // a next to b: mean(0.8, 0.6) = 0.7
		{A: "a", B: "a", SpeedA: 0.5, SpeedB: 0.55}, // self pair, both count
		{A: "c", B: "b", SpeedA: 0.95, SpeedB: 0.97, Util: 80},
		{A: "b", B: "c", SpeedA: 0.9, SpeedB: 0.9, Util: 90},
	}
	tb, err := New(ps, pairs, Options{K: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tb.Tags(), ","); got != "a,b,c" {
		t.Fatalf("catalog %s, want a,b,c (lonely has no pair)", got)
	}
	idx := func(s string) int { i, _ := tb.Index(s); return i }
	a, b, c := idx("a"), idx("b"), idx("c")
	check := func(name string, got, want float64, measured bool, gotM bool) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 || measured != gotM {
			t.Errorf("%s = %v (measured %v), want %v (measured %v)", name, got, gotM, want, measured)
		}
	}
	check("a|b", tb.Speed(a, b), 0.7, true, tb.Measured(a, b))
	check("b|a", tb.Speed(b, a), (1+0.9)/2, true, tb.Measured(b, a))
	check("a|a", tb.Speed(a, a), 0.525, true, tb.Measured(a, a))
	// c|c is unmeasured; its nearest measured pair is a|a (c is close to a).
	check("c|c", tb.Speed(c, c), 0.525, false, tb.Measured(c, c))
	// product rule for two co-runners
	got := tb.PredictSpeed(ps[0], []*profile.Profile{ps[1], ps[0]})
	if math.Abs(got-0.7*0.525) > 1e-12 {
		t.Errorf("product rule %v, want %v", got, 0.7*0.525)
	}
	if tb.PredictSpeed(ps[3], []*profile.Profile{ps[0]}) != 0 || tb.PredictSpeed(ps[3], nil) != 1 {
		t.Error("unknown application: want 0 with co-runners, 1 alone")
	}
	m, total, samples := tb.Coverage()
	if m != 5 || total != 9 || samples != 10 {
		t.Errorf("coverage %d/%d samples %d, want 5/9 and 10", m, total, samples)
	}
	// Kernel utilization: alone = solo SM util; measured pair = mean measured
	// (either order); unmeasured = sum of util x speed, capped at 100.
	for _, tc := range []struct {
		apps []int32
		want float64
	}{
		{nil, 0}, {[]int32{int32(a)}, 90}, {[]int32{int32(b), int32(c)}, 85}, {[]int32{int32(c), int32(b)}, 85},
		{[]int32{int32(a), int32(b)}, min(100, 90*0.7+30*0.95)},
		{[]int32{int32(b), int32(b)}, 30 * tb.Speed(b, b) * 2},
	} {
		if got := tb.GPUUtil(tc.apps); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("GPUUtil(%v) = %v, want %v", tc.apps, got, tc.want)
		}
	}
	if _, err := New(ps, []Pair{{A: "a", B: "nope", SpeedA: 1, SpeedB: 1}}, Options{}); err == nil {
		t.Error("pair without profile accepted")
	}
	all, err := New(ps, pairs, Options{AllProfiles: true})
	if err != nil || all.Len() != 4 {
		t.Fatalf("AllProfiles: %v len %d", err, all.Len())
	}
}

// TestShippedData builds the table the simulator uses from the embedded Lucid data.
func TestShippedData(t *testing.T) {
	tb := Shipped(t)
	m, total, samples := tb.Coverage()
	// 790 rows, 43 applications, 43 self pairs: 2*(790-43)+43 measured ordered pairs.
	if tb.Len() != 43 || m != 1537 || total != 43*43 || samples != 1580 {
		t.Errorf("len %d coverage %d/%d samples %d", tb.Len(), m, total, samples)
	}
	for i := 0; i < tb.Len(); i++ {
		for j := 0; j < tb.Len(); j++ {
			if s := tb.Speed(i, j); !(s > 0 && s <= 1) {
				t.Fatalf("speed %s|%s = %v", tb.Tags()[i], tb.Tags()[j], s)
			}
		}
	}
	p0, p1 := tb.Profile(0), tb.Profile(1)
	co := []*profile.Profile{p1}
	if n := testing.AllocsPerRun(100, func() { tb.PredictSpeed(p0, co) }); n != 0 {
		t.Errorf("PredictSpeed allocates %v times", n)
	}
}

func Shipped(t testing.TB) *Table {
	t.Helper()
	ps, err := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := New(ps, pairs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func FuzzReadLucidPairs(f *testing.F) {
	f.Add("model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2\nA,x,1,32,0,0.9,B,y,1,64,1,1.1\n")
	f.Add("model1,batchsize1,amp1,speed1,model2,batchsize2,amp2,speed2\n\"a\nb\",1,1,1,c,1,1,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ReadLucidPairs(strings.NewReader(in))
		checkPairs(t, ps, err)
	})
}

func FuzzReadGenericPairs(f *testing.F) {
	f.Add("tag_a,tag_b,speed_a,speed_b\na,b,0.9,0.8\n")
	f.Add("tag_a,tag_b,speed_a,speed_b\na,a,10,1e-9\n")
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ReadGenericPairs(strings.NewReader(in))
		checkPairs(t, ps, err)
	})
}

func checkPairs(t *testing.T, ps []Pair, err error) {
	if err != nil {
		return
	}
	var profs []*profile.Profile
	for _, p := range ps {
		if profile.ValidateTag(p.A) != nil || profile.ValidateTag(p.B) != nil || !(p.SpeedA > 0) || !(p.SpeedB > 0) || p.SpeedA > maxSpeed || p.SpeedB > maxSpeed {
			t.Fatalf("bad pair %+v", p)
		}
		profs = append(profs, prof(p.A, 50, 50, 1000), prof(p.B, 50, 50, 1000))
	}
	tb, err := New(profs, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tb.Len(); i++ {
		for j := 0; j < tb.Len(); j++ {
			if s := tb.Speed(i, j); !(s > 0 && s <= 1) {
				t.Fatalf("speed %v", s)
			}
		}
	}
}

// The noise is the pooled spread of repeated measurements of one ordered pair.
func TestNoiseSD(t *testing.T) {
	ps := []*profile.Profile{
		{Tag: "a", SMUtil: profile.Stat{Mean: 50}},
		{Tag: "b", SMUtil: profile.Stat{Mean: 30}},
	}
	tests := []struct {
		name  string
		pairs []Pair
		want  float64
	}{
		{"none repeated", []Pair{{A: "a", B: "b", SpeedA: 0.8, SpeedB: 0.9}}, DefaultNoiseSD},
		// a next to b: 0.8, 0.9 (sd of the pair: sqrt(0.005)); b next to a: 0.9, 0.9.
		{"repeated", []Pair{{A: "a", B: "b", SpeedA: 0.8, SpeedB: 0.9}, {A: "b", B: "a", SpeedA: 0.9, SpeedB: 0.9}}, math.Sqrt(0.005 / 2)},
		// values above 1 are clipped before the spread is taken
		{"clipped", []Pair{{A: "a", B: "b", SpeedA: 1.2, SpeedB: 1}, {A: "a", B: "b", SpeedA: 1, SpeedB: 1.1}}, 0},
		// one row of a next to a is one measurement, not two repeats
		{"self pair once", []Pair{{A: "a", B: "a", SpeedA: 0.6, SpeedB: 0.7}}, DefaultNoiseSD},
		{"self pair twice", []Pair{{A: "a", B: "a", SpeedA: 0.6, SpeedB: 0.6}, {A: "a", B: "a", SpeedA: 0.8, SpeedB: 0.8}}, math.Sqrt(0.02)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt, err := New(ps, tc.pairs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.NoiseSD(); math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("NoiseSD %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFromLucid(t *testing.T) {
	for _, c := range []struct {
		name        string
		solo, pairs []byte
		want        string // error text; "" for success
	}{
		{"embedded", models.DefaultSoloCSV, models.DefaultPairsCSV, ""},
		{"bad solo", []byte("not,a\nlucid,file\n"), models.DefaultPairsCSV, "solo profiles"},
		{"bad pairs", models.DefaultSoloCSV, []byte("not,a\nlucid,file\n"), "pairs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tt, err := FromLucid(c.solo, c.pairs)
			if c.want == "" {
				if err != nil || len(tt.Tags()) == 0 {
					t.Fatalf("FromLucid: %v, %v", tt, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("FromLucid: err %v, want one naming %q", err, c.want)
			}
		})
	}
}
