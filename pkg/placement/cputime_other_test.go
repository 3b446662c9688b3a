// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package placement

func cpuTimeNS() int64 { return 0 }
