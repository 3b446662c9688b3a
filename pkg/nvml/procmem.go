// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ProcessMemory is one compute process's device memory on one GPU, as NVML's
// running-process list reports it. PIDs are the host's (NVML reports host PIDs).
type ProcessMemory struct {
	PID       uint32
	UsedBytes uint64
	// Known is false when the driver cannot attribute memory to the process
	// (NVML's NVML_VALUE_NOT_AVAILABLE, e.g. without permission): UsedBytes is 0 then.
	Known bool
}

// ProcessLister is offered by devices that can list their compute processes.
// It is a separate interface so that Device stays what it was for implementations
// outside this package; the backends here all offer it.
type ProcessLister interface {
	// ComputeProcesses lists the compute processes on the GPU with their memory.
	ComputeProcesses() ([]ProcessMemory, error)
}

// valueNotAvailable is NVML's NVML_VALUE_NOT_AVAILABLE for unsigned long long.
const valueNotAvailable = ^uint64(0)

func (d *device) ComputeProcesses() ([]ProcessMemory, error) {
	raw, err := call(d, "compute processes", d.h.GetComputeRunningProcesses)
	if err != nil {
		return nil, err
	}
	return convertProcesses(raw), nil
}

func convertProcesses(raw []gonvml.ProcessInfo) []ProcessMemory {
	out := make([]ProcessMemory, len(raw))
	for i, p := range raw {
		out[i] = ProcessMemory{PID: p.Pid}
		if p.UsedGpuMemory != valueNotAvailable {
			out[i].UsedBytes, out[i].Known = p.UsedGpuMemory, true
		}
	}
	return out
}
