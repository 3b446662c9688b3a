// SPDX-License-Identifier: Apache-2.0

//go:build unix

package placement

import "syscall"

// cpuTimeNS is the process's user+system CPU time: on a shared machine it measures
// the work a benchmark did, where wall-clock ns/op also counts time spent waiting
// for a core.
func cpuTimeNS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
