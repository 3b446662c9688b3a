//go:build !unix

package placement

func cpuTimeNS() int64 { return 0 }
