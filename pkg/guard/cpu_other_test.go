// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package guard

import "time"

var start = time.Now()

// processCPU falls back to wall time where getrusage is not offered: an upper
// bound of the CPU time of a single-threaded benchmark.
func processCPU() time.Duration { return time.Since(start) }
