// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"
)

func TestSamplerFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--dir", "relative"},
		{"--dir", "/tmp", "--interval", "1ms"},
		{"--dir", "/tmp", "--gpus", "x"},
		{"--dir", "/tmp", "extra"},
		{"--dir", "/tmp", "--max-life", "0s"},
	} {
		var out strings.Builder
		if code := samplerMain(args, &out); code != 2 {
			t.Errorf("samplerMain(%q) = %d, want 2 (%s)", args, code, out.String())
		}
	}
	o, err := parseSamplerFlags([]string{"--dir", "/x", "--backend", "mock", "--interval", "20ms", "--gpus", "1,3", "--max-rounds", "7", "--max-life", "1h"}, &strings.Builder{})
	if err != nil || o.Dir != "/x" || o.Backend != "mock" || o.Interval != 20*time.Millisecond || len(o.GPUs) != 2 || o.GPUs[1] != 3 || o.MaxRounds != 7 || o.MaxLife != time.Hour {
		t.Errorf("parsed %+v, %v", o, err)
	}
}

// The program runs the sampler to its round limit and exits 0.
func TestSamplerMainRuns(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	if code := samplerMain([]string{"--dir", dir, "--backend", "mock", "--interval", "10ms", "--max-rounds", "3"}, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
