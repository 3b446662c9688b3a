// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/pkg/guard"
)

func TestSuspendedRecord(t *testing.T) {
	sus := []guard.Suspension{{JobID: "12", Protects: "11", GPU: 3}, {JobID: "40_2", Protects: "39", GPU: 0}}
	got, err := parseSuspended(encodeSuspended(sus))
	if err != nil || !reflect.DeepEqual(got, sus) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"v":2,"suspended":[]}`, "version 2"},
		{`{"v":1,"suspended":[{"job":"12;rm","protects":"11","gpu":0}]}`, "invalid job id"},
		{`{"v":1,"suspended":[{"job":"12","protects":"","gpu":0}]}`, "protects"},
		{`{"v":1,"suspended":[{"job":"12","protects":"11","gpu":-1}]}`, "out of range"},
		{`{"v":1,"suspended":[],"x":1}`, "unknown field"},
		{`{"v":1,"suspended":[]} {}`, "trailing"},
		{`garbage`, "not a record"},
	} {
		if _, err := parseSuspended([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

// A record that cannot be read is moved aside and said, never read again nor
// silently overwritten.
func TestCorruptSuspendedRecordMovedAside(t *testing.T) {
	cfg := guardTestSetup(t)
	cfg.Guard.StateDir = t.TempDir()
	path := suspendedPath(cfg.Guard.StateDir, "n1")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logLines
	svc, err := newGuardService(cfg, "n1", logs.logf)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	svc.nvml = mockNode()
	svc.procRoot = writeProcRoot(t, nil)
	svc.step(t0)
	if b, err := os.ReadFile(path + ".corrupt"); err != nil || string(b) != "{not json" {
		t.Errorf("corrupt record not kept aside: %q %v", b, err)
	}
	if !logs.has("resumed by hand") {
		t.Errorf("no log line says what to do: %q", logs.lines)
	}
	if _, err := os.Stat(filepath.Join(cfg.Guard.StateDir, "n1.suspended")); err != nil {
		t.Errorf("no fresh record written: %v", err)
	}
}

// FuzzParseSuspended: whatever the file holds, the record is refused or every
// entry in it is valid.
func FuzzParseSuspended(f *testing.F) {
	f.Add(string(encodeSuspended([]guard.Suspension{{JobID: "12", Protects: "11", GPU: 1}})))
	f.Add(`{"v":1,"suspended":null}`)
	f.Add(`{"v":1,"suspended":[{"job":"1","protects":"2","gpu":1e9}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		sus, err := parseSuspended([]byte(in))
		if err != nil {
			return
		}
		for _, s := range sus {
			if s.JobID == "" || s.Protects == "" || s.GPU < 0 || strings.ContainsAny(s.JobID+s.Protects, " ;\n/") {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}
