// SPDX-License-Identifier: Apache-2.0

package nvml

import "fmt"

// Metric is one profile field the sampler reads, in the profile's units.
type Metric int

// The metrics, named after nvidia-smi's query fields so logs and files read like
// NVML's own output.
const (
	SMUtil     Metric = iota // utilization.gpu: % of time a kernel ran
	MemBWUtil                // utilization.memory: % of time device memory was busy
	MemUsedMiB               // memory.used in MiB (bytes / 2^20)
	PCIeTxMBps               // PCIe TX in MB/s (NVML KB/s / 1000)
	PCIeRxMBps               // PCIe RX in MB/s (NVML KB/s / 1000)
	PowerW                   // power.draw in W (NVML mW / 1000)
	SMClockMHz               // clocks.sm in MHz
	NumMetrics
)

var metricNames = [NumMetrics]string{
	"utilization.gpu", "utilization.memory", "memory.used",
	"pcie.tx", "pcie.rx", "power.draw", "clocks.sm",
}

// String returns NVML's (nvidia-smi's) name of the metric.
func (m Metric) String() string {
	if m < 0 || m >= NumMetrics {
		return fmt.Sprintf("metric(%d)", int(m))
	}
	return metricNames[m]
}

// ParseMetric accepts a name as String returns it.
func ParseMetric(s string) (Metric, error) {
	for i, n := range metricNames {
		if n == s {
			return Metric(i), nil
		}
	}
	return 0, fmt.Errorf("unknown metric %q", s)
}
