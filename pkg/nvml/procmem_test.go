// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func TestComputeProcesses(t *testing.T) {
	cases := []struct {
		name string
		raw  []gonvml.ProcessInfo
		ret  gonvml.Return
		want []ProcessMemory
		err  error
	}{
		{"two", []gonvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 30}, {Pid: 9, UsedGpuMemory: 5}},
			gonvml.SUCCESS, []ProcessMemory{{7, 1 << 30, true}, {9, 5, true}}, nil},
		{"memory not available", []gonvml.ProcessInfo{{Pid: 7, UsedGpuMemory: ^uint64(0)}},
			gonvml.SUCCESS, []ProcessMemory{{7, 0, false}}, nil},
		{"none", nil, gonvml.SUCCESS, []ProcessMemory{}, nil},
		{"lost", nil, gonvml.ERROR_GPU_IS_LOST, nil, ErrGPULost},
		{"unsupported", nil, gonvml.ERROR_NOT_SUPPORTED, nil, ErrNotSupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := dgxh200.New()
			srv.Devices[0].(*server.Device).GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
				return c.raw, c.ret
			}
			b := Wrap(srv, "mock")
			if err := b.Init(); err != nil {
				t.Fatal(err)
			}
			d, err := b.Device(0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.(ProcessLister).ComputeProcesses()
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("process %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestMockComputeProcesses(t *testing.T) {
	b := NewMock(MockOptions{GPUs: 2})
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := b.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.(ProcessLister).ComputeProcesses()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PID != 1001 || got[0].UsedBytes != 9216<<20 {
		t.Errorf("got %+v, want pid 1001 using 9216 MiB", got)
	}
}

// hangingMock returns a backend whose GPU 0 memory read blocks until release is
// closed, counting the calls that reached the driver.
func hangingMock(release <-chan struct{}, calls *int, mu *sync.Mutex) Backend {
	srv := dgxh200.New()
	d := srv.Devices[0].(*server.Device)
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		mu.Lock()
		*calls++
		mu.Unlock()
		<-release
		return gonvml.Memory{Total: 100, Used: 10}, gonvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 42}, gonvml.SUCCESS
	}
	return Wrap(srv, "mock")
}

func TestTimeoutHungCall(t *testing.T) {
	release := make(chan struct{})
	var calls int
	var mu sync.Mutex
	b := WithTimeout(hangingMock(release, &calls, &mu), 20*time.Millisecond)
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.MemoryInfo(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("hung read: err %v, want ErrTimeout", err)
	}
	// While the first call hangs, the device fails fast and never calls in again.
	for range 3 {
		if _, err := d.MemoryInfo(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("read while hung: err %v, want ErrTimeout", err)
		}
		if _, err := d.Utilization(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("other read while hung: err %v, want ErrTimeout", err)
		}
	}
	mu.Lock()
	n := calls
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d calls reached the driver while hung, want 1", n)
	}
	// Another GPU is not held up by GPU 0's hung call.
	d1, err := b.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d1.MemoryInfo(); err != nil {
		t.Errorf("GPU 1 read: %v", err)
	}
	// Once the driver answers, the device works again.
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		u, err := d.Utilization()
		if err == nil {
			if u.GPU != 42 {
				t.Errorf("utilization %d, want 42", u.GPU)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("device still failing after the driver answered: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if m, err := d.MemoryInfo(); err != nil || m.Total != 100 {
		t.Errorf("memory after recovery: %+v %v", m, err)
	}
}

func TestTimeoutPassesResults(t *testing.T) {
	b := WithTimeout(NewMock(MockOptions{GPUs: 1, LoseAfter: map[int]int{0: 1}}), time.Second)
	if _, err := b.Device(0); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("device before init: %v, want ErrNotInitialized", err)
	}
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.DeviceCount(); err != nil || n != 1 {
		t.Fatalf("count %d %v", n, err)
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := d.Utilization(); err != nil || u.GPU != 35 {
		t.Errorf("first read %+v %v, want 35", u, err)
	}
	if _, err := d.Utilization(); !errors.Is(err, ErrGPULost) {
		t.Errorf("lost GPU: %v, want ErrGPULost", err)
	}
	if _, err := d.(ProcessLister).ComputeProcesses(); !errors.Is(err, ErrGPULost) {
		t.Errorf("lost GPU processes: %v, want ErrGPULost", err)
	}
}

// Reopening a GPU whose call hangs must not start a second call into the driver.
func TestTimeoutReopenStillHung(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var calls int
	var mu sync.Mutex
	b := WithTimeout(hangingMock(release, &calls, &mu), 20*time.Millisecond)
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.MemoryInfo(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("hung read: %v", err)
	}
	if d2, err := b.Device(0); err == nil {
		if _, err := d2.MemoryInfo(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("read on reopened device: %v, want ErrTimeout", err)
		}
	} else if !errors.Is(err, ErrTimeout) {
		t.Fatalf("reopen: %v, want ErrTimeout", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("%d calls reached the driver, want 1", calls)
	}
}
