// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MockOptions shapes the simulated node of NewMock.
type MockOptions struct {
	// GPUs is the number of H200s (default 8).
	GPUs int
	// Unsupported metrics answer ERROR_NOT_SUPPORTED on every GPU.
	Unsupported []Metric
	// LoseAfter maps a GPU index to the number of utilization reads it answers
	// before it returns ERROR_GPU_IS_LOST for good (a GPU falling off the bus).
	LoseAfter map[int]int
}

// Mock counter sequences: deterministic and changing from read to read, so
// summaries over them are computable by hand. Read n (0-based) of GPU i returns:
//
//	utilization.gpu    mockSM[(n+i) % 8]           %
//	utilization.memory mockSM[(n+i) % 8]/2 + 5     %
//	memory.used        8192 + 1024*i + 512*(n%4)   MiB
//	pcie tx / rx       2000 + 250*(n%4) / 4000 + 500*(n%4)  KB/s
//	power              150000 + 10000*(n%5)        mW
//	clocks.sm          1980 - 30*(n%3)             MHz
//	per process        one sample: pid 1000+i, SM util as utilization.gpu
//	compute processes  pid 1000+i using 8192+1024*i MiB
var mockSM = [8]uint32{35, 50, 65, 80, 95, 80, 65, 50}

// NewMock returns a backend on go-nvml's simulated DGX H200 (mock/dgxh200) with
// the counter methods that mock leaves nil filled in with the sequences above.
func NewMock(o MockOptions) Backend {
	n := o.GPUs
	if n <= 0 {
		n = 8
	}
	srv := dgxh200.New()
	if n < len(srv.Devices) {
		srv.Devices = srv.Devices[:n]
	}
	for len(srv.Devices) < n {
		srv.Devices = append(srv.Devices, dgxh200.NewDevice(len(srv.Devices)))
	}
	unsupported := map[Metric]bool{}
	for _, m := range o.Unsupported {
		unsupported[m] = true
	}
	for i, d := range srv.Devices {
		lose, ok := o.LoseAfter[i]
		if !ok {
			lose = -1
		}
		fillMockDevice(d.(*server.Device), i, unsupported, lose)
	}
	return Wrap(srv, "mock")
}

// fillMockDevice sets the ...Func fields of one mock device. Each metric keeps its
// own read counter, so the sequence a metric shows does not depend on which other
// metrics were read.
func fillMockDevice(d *server.Device, i int, unsupported map[Metric]bool, loseAfter int) {
	var mu sync.Mutex
	var nUtil, nMem, nTx, nRx, nPow, nClk int
	gone := false
	// The GPU goes when a utilization read finds loseAfter reads done; the other
	// fields follow from then on.
	lost := func() bool { return gone }
	next := func(c *int) int { v := *c; *c++; return v }

	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if gone || (loseAfter >= 0 && nUtil >= loseAfter) {
			gone = true
			return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
		}
		k := next(&nUtil)
		sm := mockSM[(k+i)%len(mockSM)]
		u := gonvml.Utilization{Gpu: sm, Memory: sm/2 + 5}
		if unsupported[SMUtil] || unsupported[MemBWUtil] {
			// NVML reports both or neither.
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		}
		return u, gonvml.SUCCESS
	}
	memInfo := d.GetMemoryInfoFunc
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST
		}
		if unsupported[MemUsedMiB] {
			return gonvml.Memory{}, gonvml.ERROR_NOT_SUPPORTED
		}
		m, _ := memInfo()
		k := next(&nMem)
		m.Used = uint64(8192+1024*i+512*(k%4)) << 20
		if m.Used > m.Total {
			m.Used = m.Total
		}
		m.Free = m.Total - m.Used
		return m, gonvml.SUCCESS
	}
	d.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return 0, gonvml.ERROR_GPU_IS_LOST
		}
		if c == gonvml.PCIE_UTIL_TX_BYTES {
			if unsupported[PCIeTxMBps] {
				return 0, gonvml.ERROR_NOT_SUPPORTED
			}
			return uint32(2000 + 250*(next(&nTx)%4)), gonvml.SUCCESS
		}
		if unsupported[PCIeRxMBps] {
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		return uint32(4000 + 500*(next(&nRx)%4)), gonvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return 0, gonvml.ERROR_GPU_IS_LOST
		}
		if unsupported[PowerW] {
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		return uint32(150000 + 10000*(next(&nPow)%5)), gonvml.SUCCESS
	}
	d.GetClockInfoFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return 0, gonvml.ERROR_GPU_IS_LOST
		}
		if t != gonvml.CLOCK_SM || unsupported[SMClockMHz] {
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		return uint32(1980 - 30*(next(&nClk)%3)), gonvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return nil, gonvml.ERROR_GPU_IS_LOST
		}
		k := nUtil
		sm := mockSM[(k+len(mockSM)-1+i)%len(mockSM)] // the last utilization read
		return []gonvml.ProcessUtilizationSample{{Pid: uint32(1000 + i), TimeStamp: since + 1, SmUtil: sm, MemUtil: sm/2 + 5}}, gonvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		if lost() {
			return nil, gonvml.ERROR_GPU_IS_LOST
		}
		return []gonvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: uint64(8192+1024*i) << 20}}, gonvml.SUCCESS
	}
}
