// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// `coscheml-node prolog --help` prints the usage and exits 0 without an error
// line: asking for help is not a problem to report.
func TestHookHelpIsNoError(t *testing.T) {
	for _, kind := range []string{"prolog", "epilog"} {
		t.Run(kind, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			old := os.Stderr
			os.Stderr = w
			code := runHook(kind, []string{"--help", "--no-syslog"}, nil, time.Now)
			os.Stderr = old
			w.Close()
			out, _ := io.ReadAll(r)
			if code != 0 {
				t.Errorf("exit %d", code)
			}
			if !strings.Contains(string(out), "-config") {
				t.Errorf("no usage printed: %q", out)
			}
			if strings.Contains(string(out), "help requested") || strings.Contains(string(out), "coscheml-node: ") {
				t.Errorf("help ends with an error line: %q", out)
			}
		})
	}
}
