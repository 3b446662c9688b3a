// SPDX-License-Identifier: Apache-2.0

package jobprofile

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// maxThroughputBytes bounds what is read of a job's throughput file.
const maxThroughputBytes = 64

// ReadThroughputFile reads the number a job reported in path ("" = none: 0, nil).
// The Epilog runs as root on a path the job's user controls, so the file is opened
// without following a symlink, without blocking on a FIFO, must be a regular
// file, is read only up to 64 bytes, and its content is never echoed.
func ReadThroughputFile(path string) (float64, error) {
	if path == "" {
		return 0, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // the job did not report: fall back to run time
	}
	if err != nil {
		return 0, fmt.Errorf("throughput file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("throughput file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("throughput file %s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxThroughputBytes+1))
	if err != nil {
		return 0, fmt.Errorf("throughput file: %w", err)
	}
	v, err := ParseThroughput(string(b))
	if err != nil {
		return 0, fmt.Errorf("throughput file %s: %w", path, err)
	}
	return v, nil
}

// ParseThroughput parses a throughput report: one positive finite decimal number
// (e.g. "1234.5" samples/s), surrounding white space allowed, at most 64 bytes.
func ParseThroughput(s string) (float64, error) {
	if len(s) > maxThroughputBytes {
		return 0, fmt.Errorf("longer than %d bytes: want one number", maxThroughputBytes)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty: want one number")
	}
	for _, r := range t {
		if !strings.ContainsRune("0123456789.eE+-", r) {
			return 0, errors.New("not a number")
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v <= 0 {
		return 0, errors.New("want one positive finite number")
	}
	return v, nil
}
