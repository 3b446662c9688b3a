// SPDX-License-Identifier: Apache-2.0

//go:build unix

package sim

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: benchmarks report it next to
// wall time because CI machines are shared and wall time there measures the load.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
