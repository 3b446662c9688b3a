// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/coscheml/coscheml/pkg/profile"
)

// seq returns a mock method that answers vals[0], vals[1], ... (then repeats the
// last one), as a counter that changes from read to read.
func seq(vals ...uint32) func() (uint32, gonvml.Return) {
	n := 0
	return func() (uint32, gonvml.Return) {
		v := vals[min(n, len(vals)-1)]
		n++
		return v, gonvml.SUCCESS
	}
}

// handServer is a dgxh200 with one GPU whose counters follow hand-picked sequences:
// utilization.gpu 5,10,...,100 (k*5), utilization.memory 100-k*5, memory used
// 1 GiB * k, PCIe TX k*1000 KB/s, RX 500 KB/s, power (100+k) W, SM clock 1500+k.
func handServer(rounds int) *server.Server {
	srv := dgxh200.New()
	srv.Devices = srv.Devices[:1]
	d := srv.Devices[0].(*server.Device)
	var sm, mem, tx, pw, clk []uint32
	for k := 1; k <= rounds; k++ {
		sm = append(sm, uint32(5*k))
		mem = append(mem, uint32(100-5*k))
		tx = append(tx, uint32(1000*k))
		pw = append(pw, uint32(1000*(100+k)))
		clk = append(clk, uint32(1500+k))
	}
	smF, memF, txF, pwF, clkF := seq(sm...), seq(mem...), seq(tx...), seq(pw...), seq(clk...)
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		g, _ := smF()
		m, _ := memF()
		return gonvml.Utilization{Gpu: g, Memory: m}, gonvml.SUCCESS
	}
	k := 0
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		k++
		return gonvml.Memory{Total: 141 << 30, Used: uint64(k) << 30}, gonvml.SUCCESS
	}
	d.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
		if c == gonvml.PCIE_UTIL_TX_BYTES {
			return txF()
		}
		return 500, gonvml.SUCCESS
	}
	d.GetPowerUsageFunc = pwF
	d.GetClockInfoFunc = func(gonvml.ClockType) (uint32, gonvml.Return) { return clkF() }
	d.GetProcessUtilizationFunc = func(uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		return nil, gonvml.ERROR_NOT_SUPPORTED
	}
	return srv
}

// drive takes n rounds one second apart and returns the filled profile.
func drive(t *testing.T, b Backend, gpus []int, n int, extra ...Sink) (*profile.Profile, *Summary) {
	t.Helper()
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	var sum Summary
	sinks := append([]Sink{&sum}, extra...)
	s, err := NewSampler(b, gpus, Tee(sinks...))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := 0; i < n; i++ {
		if err := s.SampleOnce(t0.Add(time.Duration(i) * time.Second)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	var p profile.Profile
	sum.Fill(&p)
	return &p, &sum
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func checkStat(t *testing.T, name string, got, want profile.Stat) {
	t.Helper()
	if !near(got.Mean, want.Mean) || !near(got.P95, want.P95) || !near(got.Max, want.Max) {
		t.Errorf("%s = %+v, want %+v", name, got, want)
	}
}

func TestSummaryByHand(t *testing.T) {
	// 20 rounds. By hand:
	// utilization.gpu 5..100 step 5: mean = 5*(1+...+20)/20 = 5*210/20 = 52.5;
	//   p95 = rank ceil(0.95*20) = 19 -> 95; max 100.
	// utilization.memory 95..0: mean 47.5, p95 rank 19 of 0..95 -> 90, max 95.
	// memory used 1..20 GiB -> max 20480 MiB.
	// PCIe TX 1..20 MB/s: mean 10.5, p95 19, max 20. RX constant 0.5.
	// power 101..120 W: mean 110.5, p95 119, max 120. clock 1501..1520: mean 1510.5.
	p, sum := drive(t, Wrap(handServer(20), "mock"), []int{0}, 20)
	checkStat(t, "sm", p.SMUtil, profile.Stat{Mean: 52.5, P95: 95, Max: 100})
	checkStat(t, "membw", p.MemBWUtil, profile.Stat{Mean: 47.5, P95: 90, Max: 95})
	checkStat(t, "tx", p.PCIeTxMBps, profile.Stat{Mean: 10.5, P95: 19, Max: 20})
	checkStat(t, "rx", p.PCIeRxMBps, profile.Stat{Mean: 0.5, P95: 0.5, Max: 0.5})
	checkStat(t, "power", p.PowerW, profile.Stat{Mean: 110.5, P95: 119, Max: 120})
	checkStat(t, "clock", p.SMClockMHz, profile.Stat{Mean: 1510.5, P95: 1519, Max: 1520})
	if p.MemUsedMiB != 20480 {
		t.Errorf("mem used = %v, want 20480", p.MemUsedMiB)
	}
	if p.Samples != 20 || p.DurationS != 19 {
		t.Errorf("samples %d duration %v, want 20 and 19", p.Samples, p.DurationS)
	}
	if p.GPUModel != "NVIDIA H200 141GB HBM3e" {
		t.Errorf("gpu model %q", p.GPUModel)
	}
	// Per-process utilization unsupported is noted but is not a profile field.
	if p.Partial {
		t.Errorf("profile partial (%s), want complete", p.PartialNote)
	}
	if !strings.Contains(p.PartialNote, "per-process utilization not offered") {
		t.Errorf("note %q lacks the per-process remark", p.PartialNote)
	}
	if sum.Rounds() != 20 {
		t.Errorf("rounds %d", sum.Rounds())
	}
}

func TestMockSequencePooled(t *testing.T) {
	// Two mock GPUs, 4 rounds. utilization.gpu of GPU i at read n is
	// mockSM[(n+i)%8]: GPU0 35,50,65,80; GPU1 50,65,80,95. Pooled (8 values):
	// mean = (230+290)/8 = 65; p95 rank ceil(7.6)=8 -> 95; max 95.
	// Power does not depend on i: 150,160,170,180 W twice: mean 165, max 180.
	// Memory used max: GPU1 8192+1024+512*3 = 10752 MiB.
	p, _ := drive(t, NewMock(MockOptions{GPUs: 2}), nil, 4)
	checkStat(t, "sm", p.SMUtil, profile.Stat{Mean: 65, P95: 95, Max: 95})
	// utilization.memory is sm/2+5 in integers: GPU0 22,30,37,45; GPU1 30,37,45,52:
	// mean 298/8 = 37.25, p95 = max = 52.
	checkStat(t, "membw", p.MemBWUtil, profile.Stat{Mean: 37.25, P95: 52, Max: 52})
	checkStat(t, "power", p.PowerW, profile.Stat{Mean: 165, P95: 180, Max: 180})
	if p.MemUsedMiB != 10752 {
		t.Errorf("mem used %v, want 10752", p.MemUsedMiB)
	}
	if p.Partial || p.Samples != 4 {
		t.Errorf("partial=%v samples=%d (%s)", p.Partial, p.Samples, p.PartialNote)
	}
}

func TestPartialProfiles(t *testing.T) {
	cases := []struct {
		name      string
		backend   func() Backend
		rounds    int
		wantNote  string
		wantZero  func(*profile.Profile) bool
		wantCount int // samples
	}{
		{
			name:     "power unsupported",
			backend:  func() Backend { return NewMock(MockOptions{GPUs: 1, Unsupported: []Metric{PowerW}}) },
			rounds:   3,
			wantNote: "gpu 0: power.draw not supported",
			wantZero: func(p *profile.Profile) bool { return p.PowerW == (profile.Stat{}) && p.SMUtil.Max > 0 },
		},
		{
			name: "mock method left nil",
			backend: func() Backend {
				srv := handServer(3)
				srv.Devices[0].(*server.Device).GetClockInfoFunc = nil // dgxh200's default
				return Wrap(srv, "mock")
			},
			rounds:   3,
			wantNote: "gpu 0: clocks.sm not supported",
			wantZero: func(p *profile.Profile) bool { return p.SMClockMHz == (profile.Stat{}) && p.PowerW.Max == 103 },
		},
		{
			name:     "gpu lost mid-run",
			backend:  func() Backend { return NewMock(MockOptions{GPUs: 2, LoseAfter: map[int]int{1: 2}}) },
			rounds:   5,
			wantNote: "gpu 1: lost after 2 samples",
			// GPU0 reads 35,50,65,80,95; GPU1 50,65: the pooled max is still 95.
			wantZero: func(p *profile.Profile) bool { return p.SMUtil.Max == 95 && near(p.SMUtil.Mean, (325.0+115)/7) },
		},
		{
			name:     "gpu index missing",
			backend:  func() Backend { return NewMock(MockOptions{GPUs: 1}) },
			rounds:   2,
			wantNote: "gpu 3: cannot open",
			wantZero: func(p *profile.Profile) bool { return p.Samples == 2 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpus := []int{0}
			if tc.name == "gpu lost mid-run" {
				gpus = []int{0, 1}
			}
			if tc.name == "gpu index missing" {
				gpus = []int{0, 3}
			}
			p, _ := drive(t, tc.backend(), gpus, tc.rounds)
			if !p.Partial {
				t.Fatalf("profile not partial; notes %q", p.PartialNote)
			}
			if !strings.Contains(p.PartialNote, tc.wantNote) {
				t.Errorf("note %q lacks %q", p.PartialNote, tc.wantNote)
			}
			if !tc.wantZero(p) {
				t.Errorf("unexpected profile %+v", p)
			}
		})
	}
}

func TestAllGPUsLost(t *testing.T) {
	b := NewMock(MockOptions{GPUs: 1, LoseAfter: map[int]int{0: 1}})
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	var sum Summary
	s, err := NewSampler(b, nil, &sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SampleOnce(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.SampleOnce(time.Unix(2, 0)); !errors.Is(err, ErrNoGPUs) {
		t.Fatalf("err = %v, want ErrNoGPUs", err)
	}
	if sum.Rounds() != 1 {
		t.Errorf("rounds %d, want 1", sum.Rounds())
	}
}

// TestMissingNVML runs the real backend on this GPU-less machine: a clear error,
// no crash, and no device call reaching the unloaded library.
func TestMissingNVML(t *testing.T) {
	b := NewReal()
	if _, err := b.DeviceCount(); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("DeviceCount before Init: %v, want ErrNotInitialized", err)
	}
	err := b.Init()
	if err == nil {
		b.Shutdown()
		t.Skip("NVML is available on this machine; the missing-library path cannot be tested here")
	}
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "NVML not available") {
		t.Fatalf("Init error %q, want one wrapping ErrNotAvailable", err)
	}
	if _, err := b.Device(0); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Device after failed Init: %v", err)
	}
	if _, err := NewSampler(b, nil, &Summary{}); err == nil {
		t.Fatal("sampler on an uninitialized backend: no error")
	}
	if err := b.Shutdown(); err != nil {
		t.Fatalf("Shutdown after failed Init: %v", err)
	}
}

func TestOpen(t *testing.T) {
	for _, k := range []string{"nvml", "mock"} {
		b, err := Open(k)
		if err != nil || b.Kind() != k {
			t.Errorf("Open(%q) = %v, %v", k, b, err)
		}
	}
	if _, err := Open("cuda"); err == nil {
		t.Error("Open(cuda): no error")
	}
}

func TestRunStopsAtLimit(t *testing.T) {
	b := NewMock(MockOptions{GPUs: 1})
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	var sum Summary
	s, err := NewSampler(b, []int{0}, &sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background(), time.Millisecond, 3); err != nil {
		t.Fatal(err)
	}
	var p profile.Profile
	sum.Fill(&p)
	if p.Samples != 3 || !strings.Contains(p.PartialNote, "sample limit of 3") || p.Partial {
		t.Errorf("samples %d partial %v note %q", p.Samples, p.Partial, p.PartialNote)
	}
	// A cancelled context stops after the first round.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var sum2 Summary
	s2, _ := NewSampler(b, []int{0}, &sum2)
	if err := s2.Run(ctx, time.Hour, 0); err != nil || sum2.Rounds() != 1 {
		t.Errorf("cancelled run: err %v rounds %d", err, sum2.Rounds())
	}
}

func TestNearestRank(t *testing.T) {
	for _, tc := range []struct {
		n    int
		q    float64
		want int
	}{
		{1, 0.95, 0}, {19, 0.95, 18}, {20, 0.95, 18}, {21, 0.95, 19}, {100, 0.95, 94},
		{10, 0.5, 4}, {3, 1, 2}, {40, 0.95, 37},
	} {
		if got := NearestRank(tc.n, tc.q); got != tc.want {
			t.Errorf("NearestRank(%d, %v) = %d, want %d", tc.n, tc.q, got, tc.want)
		}
	}
	if s := Summarize(nil); s != (profile.Stat{}) {
		t.Errorf("Summarize(nil) = %+v", s)
	}
}

func TestSampleFileRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	direct, _ := drive(t, NewMock(MockOptions{GPUs: 2, Unsupported: []Metric{SMClockMHz}}), nil, 7, w)

	var back Summary
	if err := ReadSamples(bytes.NewReader(buf.Bytes()), &back); err != nil {
		t.Fatal(err)
	}
	var p profile.Profile
	back.Fill(&p)
	if p.SMUtil != direct.SMUtil || p.PowerW != direct.PowerW || p.MemUsedMiB != direct.MemUsedMiB ||
		p.Samples != direct.Samples || p.DurationS != direct.DurationS || p.Partial != direct.Partial ||
		p.PartialNote != direct.PartialNote || p.GPUModel != direct.GPUModel {
		t.Errorf("read back %+v\nwant %+v", p, direct)
	}

	// A sampler killed mid-line: the torn last line is ignored.
	torn := buf.Bytes()[:bytes.Index(buf.Bytes(), []byte("\n1700000006"))+15]
	var cut Summary
	if err := ReadSamples(bytes.NewReader(torn), &cut); err != nil {
		t.Fatal(err)
	}
	if cut.Rounds() != 6 {
		t.Errorf("torn file: %d rounds, want 6", cut.Rounds())
	}
}

func TestReadSamplesBad(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		wantErr  bool
		rounds   int
		note     string
	}{
		{"empty", "", true, 0, ""},
		{"not ours", "hello\n", true, 0, ""},
		{"bad row skipped", sampleMagic + "\n" + sampleHeader + "\n1,0,1,2,3,4,5,6,7,,\nx,0,,,,,,,,,\n", false, 1, "1 malformed"},
		{"negative value", sampleMagic + "\n5,0,-1,,,,,,,,\n", false, 0, "bad utilization.gpu"},
		{"wrong field count", sampleMagic + "\n5,0,1\n", false, 0, "3 fields"},
		{"long line", sampleMagic + "\n" + strings.Repeat("9", 2*maxLineLen) + "\n5,0,1,,,,,,,,\n", false, 1, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Summary
			err := ReadSamples(strings.NewReader(tc.in), &s)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if s.Rounds() != tc.rounds {
				t.Errorf("rounds %d, want %d", s.Rounds(), tc.rounds)
			}
			var p profile.Profile
			s.Fill(&p)
			if !strings.Contains(p.PartialNote, tc.note) {
				t.Errorf("notes %q lack %q", p.PartialNote, tc.note)
			}
		})
	}
}

func FuzzReadSamples(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Device(0, "NVIDIA H200")
	w.Round(time.Unix(5, 0), []Sample{{GPU: 0, Procs: 2, ProcSMUtil: 40, Have: 3, Values: [NumMetrics]float64{40, 20}}})
	w.Note("gpu 0: power.draw not supported", true)
	f.Add(buf.String())
	f.Add(sampleMagic + "\n1,0,,,,,,,,,\n")
	f.Add(sampleMagic + "\n#gpu x\n#note\n")
	f.Fuzz(func(t *testing.T, in string) {
		var s Summary
		if err := ReadSamples(strings.NewReader(in), &s); err != nil {
			return
		}
		var p profile.Profile
		s.Fill(&p)
		for _, st := range []profile.Stat{p.SMUtil, p.MemBWUtil, p.PowerW, p.PCIeTxMBps, p.PCIeRxMBps, p.SMClockMHz} {
			if st.Mean < 0 || st.P95 > st.Max || math.IsNaN(st.Mean) || math.IsInf(st.Mean, 0) || st.Mean > st.Max*(1+1e-9) {
				t.Fatalf("inconsistent stat %+v", st)
			}
		}
		if strings.ContainsAny(p.PartialNote, "\n\r") {
			t.Fatalf("note with a line break: %q", p.PartialNote)
		}
	})
}

func TestVisibleDevices(t *testing.T) {
	for _, tc := range []struct {
		in      string
		idx     []int
		uuids   int
		wantErr bool
	}{
		{"", nil, 0, false},
		{"0,2", []int{0, 2}, 0, false},
		{" 1 ", []int{1}, 0, false},
		{"GPU-8b5c9a2e-1234", nil, 1, false},
		{"0,GPU-abc", []int{0}, 1, false},
		{"MIG-1234", nil, 0, true},
		{"0,,1", nil, 0, true},
		{"-1", nil, 0, true},
		{"GPU-zz;rm", nil, 0, true},
		{"a", nil, 0, true},
	} {
		idx, uuids, err := VisibleDevices(tc.in)
		if (err != nil) != tc.wantErr || len(uuids) != tc.uuids || !equalInts(idx, tc.idx) {
			t.Errorf("VisibleDevices(%q) = %v %v %v", tc.in, idx, uuids, err)
		}
	}
}

func TestResolveUUIDs(t *testing.T) {
	srv := dgxh200.New()
	b := Wrap(srv, "mock")
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	u3 := srv.Devices[3].(*server.Device).UUID
	got, err := ResolveUUIDs(b, []string{u3[:20]})
	if err != nil || !equalInts(got, []int{3}) {
		t.Errorf("ResolveUUIDs = %v, %v", got, err)
	}
	if _, err := ResolveUUIDs(b, []string{"GPU-"}); err == nil {
		t.Error("ambiguous prefix accepted")
	}
	if _, err := ResolveUUIDs(b, []string{"GPU-ffffffff-0000"}); err == nil {
		t.Error("unknown UUID accepted")
	}
}

func TestParseGPUList(t *testing.T) {
	got, err := ParseGPUList("3,1,3")
	if err != nil || !equalInts(got, []int{3, 1}) || FormatGPUList(got) != "3,1" {
		t.Errorf("ParseGPUList = %v %v", got, err)
	}
	for _, bad := range []string{"x", "1,", "-2", "99999"} {
		if _, err := ParseGPUList(bad); err == nil {
			t.Errorf("ParseGPUList(%q) accepted", bad)
		}
	}
}

func FuzzVisibleDevices(f *testing.F) {
	for _, s := range []string{"0,1", "GPU-abc", "MIG-x", "", ",", "7,GPU-1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		idx, _, err := VisibleDevices(s)
		if err != nil {
			return
		}
		for _, i := range idx {
			if i < 0 || i >= maxGPUs {
				t.Fatalf("index %d out of range", i)
			}
		}
		if l, err := ParseGPUList(s); err == nil {
			if _, err := ParseGPUList(FormatGPUList(l)); err != nil {
				t.Fatalf("format/parse round trip: %v", err)
			}
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BenchmarkSampleOnce: one round over 8 mock H200s (the go-nvml mock's call
// bookkeeping included).
func BenchmarkSampleOnce(b *testing.B) {
	be := NewMock(MockOptions{})
	if err := be.Init(); err != nil {
		b.Fatal(err)
	}
	var sum Summary
	s, err := NewSampler(be, nil, &sum)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Unix(1, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.SampleOnce(at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEpilogSummary reads and summarizes a sample file of the largest size a
// sampler writes (MaxSampleRows in pkg/jobprofile: 500,000 rows): the Epilog's
// worst case.
func BenchmarkEpilogSummary(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Device(0, "NVIDIA H200 141GB HBM3e")
	round := make([]Sample, 8)
	for r := 0; r < 500_000/8; r++ {
		for g := range round {
			round[g] = Sample{GPU: g, Procs: 1, ProcSMUtil: 50}
			for m := Metric(0); m < NumMetrics; m++ {
				round[g].Set(m, float64((r*7+g*13+int(m))%100))
			}
		}
		w.Round(time.Unix(1_700_000_000, int64(r)*int64(500*time.Millisecond)), round)
	}
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var sum Summary
		if err := ReadSamples(bytes.NewReader(buf.Bytes()), &sum); err != nil {
			b.Fatal(err)
		}
		var p profile.Profile
		sum.Fill(&p)
	}
}
