// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeReadings(t *testing.T, dir string, gpu int, rs ...DirReading) {
	t.Helper()
	for _, r := range rs {
		if err := WriteDirReading(dir, "n1", gpu, r); err != nil {
			t.Fatal(err)
		}
	}
}

// The emulated device answers as NVML would for the processes' readings.
func TestDirBackendReadsLikeNVML(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		readings []DirReading
		dead     uint32 // a process that is gone
		since    uint64
		wantUsed uint64
		wantUtil uint32
		wantPIDs []uint32 // per-process samples newer than since
	}{
		{name: "two processes, sum of shares",
			readings: []DirReading{{JobID: "11", PID: 101, MemBytes: 2000 * mib, MemTotal: 80000 * mib, SMUtil: 30, At: 10},
				{JobID: "12", PID: 102, MemBytes: 3000 * mib, MemTotal: 80000 * mib, SMUtil: 25, At: 20}},
			wantUsed: 5000 * mib, wantUtil: 55, wantPIDs: []uint32{101, 102}},
		{name: "contended GPU is fully busy",
			readings: []DirReading{{JobID: "11", PID: 101, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 30, Busy: true, At: 10},
				{JobID: "12", PID: 102, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 25, At: 20}},
			wantUsed: 2 * mib, wantUtil: 100, wantPIDs: []uint32{101, 102}},
		{name: "a stopped process keeps its memory and reports no new sample",
			readings: []DirReading{{JobID: "11", PID: 101, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 30, At: 10},
				{JobID: "12", PID: 102, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 25, At: 20}},
			since: 15, wantUsed: 2 * mib, wantUtil: 55, wantPIDs: []uint32{102}},
		{name: "a gone process is dropped",
			readings: []DirReading{{JobID: "11", PID: 101, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 30, At: 10},
				{JobID: "12", PID: 102, MemBytes: mib, MemTotal: 80000 * mib, SMUtil: 25, At: 20}},
			dead: 101, wantUsed: mib, wantUtil: 25, wantPIDs: []uint32{102}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeReadings(t, dir, 1, tc.readings...)
			b := NewDirBackend(dir, "n1")
			b.Alive = func(pid uint32) bool { return pid != tc.dead }
			if err := b.Init(); err != nil {
				t.Fatal(err)
			}
			d, err := b.Device(1)
			if err != nil {
				t.Fatal(err)
			}
			m, err := d.MemoryInfo()
			if err != nil || m.Used != tc.wantUsed || m.Total != 80000*mib {
				t.Errorf("memory %+v, %v; want used %d", m, err, tc.wantUsed)
			}
			u, err := d.Utilization()
			if err != nil || u.GPU != tc.wantUtil {
				t.Errorf("utilization %+v, %v; want %d", u, err, tc.wantUtil)
			}
			ps, err := d.(ProcessLister).ComputeProcesses()
			if err != nil || len(ps) != len(tc.readings)-map[bool]int{true: 1, false: 0}[tc.dead != 0] {
				t.Errorf("processes %+v, %v", ps, err)
			}
			ss, err := d.ProcessUtilization(tc.since)
			var pids []uint32
			for _, s := range ss {
				pids = append(pids, s.PID)
			}
			if err != nil || len(pids) != len(tc.wantPIDs) {
				t.Fatalf("samples %+v, %v; want pids %v", ss, err, tc.wantPIDs)
			}
			for i := range pids {
				if pids[i] != tc.wantPIDs[i] {
					t.Errorf("samples of pids %v, want %v", pids, tc.wantPIDs)
				}
			}
			if id, ok := b.JobOf(102); !ok || id != "12" {
				t.Errorf("JobOf(102) = %q, %v", id, ok)
			}
			if _, ok := b.JobOf(999); ok {
				t.Error("JobOf(999) found a job")
			}
		})
	}
}

// Only a folder that no one but root or the guard's user can write is read, and
// only reading files those users own: an ordinary user cannot feed the guard.
func TestDirBackendTrust(t *testing.T) {
	me := uint32(os.Geteuid())
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, dir string) string // returns the folder to open
		owners    []uint32
		initErr   bool
		wantProcs int
	}{
		{name: "trusted folder", setup: func(t *testing.T, dir string) string { return dir }, owners: []uint32{me}, wantProcs: 1},
		{name: "world-writable folder", setup: func(t *testing.T, dir string) string {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return dir
		}, owners: []uint32{me}, initErr: true},
		{name: "world-writable node folder", setup: func(t *testing.T, dir string) string {
			if err := os.Chmod(filepath.Join(dir, "n1"), 0o777); err != nil {
				t.Fatal(err)
			}
			return dir
		}, owners: []uint32{me}, initErr: true},
		{name: "symbolic link", setup: func(t *testing.T, dir string) string {
			l := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(dir, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, owners: []uint32{me}, initErr: true},
		{name: "folder of another user", setup: func(t *testing.T, dir string) string { return dir }, owners: []uint32{me + 1}, initErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeReadings(t, dir, 0, DirReading{JobID: "7", PID: 70, MemBytes: 1, MemTotal: 10, SMUtil: 5, At: 1})
			b := NewDirBackend(tc.setup(t, dir), "n1")
			b.Owners, b.Alive = tc.owners, func(uint32) bool { return true }
			err := b.Init()
			if tc.initErr != (err != nil) {
				t.Fatalf("Init: %v, want error %v", err, tc.initErr)
			}
			if err != nil {
				if !errors.Is(err, ErrNotAvailable) {
					t.Errorf("Init error %v does not wrap ErrNotAvailable", err)
				}
				return
			}
			d, _ := b.Device(0)
			ps, err := d.(ProcessLister).ComputeProcesses()
			if err != nil || len(ps) != tc.wantProcs {
				t.Errorf("processes %+v, %v; want %d", ps, err, tc.wantProcs)
			}
		})
	}
}

// A reading file owned by a user the guard does not trust is skipped and said.
func TestDirBackendSkipsUntrustedFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	dir := t.TempDir()
	writeReadings(t, dir, 0, DirReading{JobID: "7", PID: 70, MemBytes: 1, MemTotal: 10, SMUtil: 5, At: 1},
		DirReading{JobID: "8", PID: 80, MemBytes: 1, MemTotal: 10, SMUtil: 5, At: 1})
	if err := os.Chown(filepath.Join(DirGPUPath(dir, "n1", 0), "8.json"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	b := NewDirBackend(dir, "n1")
	b.Alive = func(uint32) bool { return true }
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	d, _ := b.Device(0)
	ps, err := d.(ProcessLister).ComputeProcesses()
	if err != nil || len(ps) != 1 || ps[0].PID != 70 {
		t.Errorf("processes %+v, %v; want only pid 70", ps, err)
	}
	if p := b.Problems(); len(p) != 1 {
		t.Errorf("problems %q, want one line for the skipped file", p)
	}
}

func TestParseDirReading(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"job_id":"5","pid":9,"mem_bytes":1,"mem_total":2,"sm_util":50,"at_us":1}`, true},
		{`{"job_id":"6","pid":9}`, false},                             // another job's name
		{`{"job_id":"5","pid":0}`, false},                             // no pid
		{`{"job_id":"5","pid":9,"sm_util":101}`, false},               // share over 100
		{`{"job_id":"5","pid":9,"mem_bytes":3,"mem_total":2}`, false}, // more than the GPU
		{`{"job_id":"5","pid":9,"sm_util":-1}`, false},
		{`not json`, false},
	} {
		_, err := ParseDirReading([]byte(tc.in), "5")
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func FuzzParseDirReading(f *testing.F) {
	f.Add([]byte(`{"job_id":"5","pid":9,"mem_bytes":1,"mem_total":2,"sm_util":50,"at_us":1}`))
	f.Add([]byte(`{"job_id":"5","pid":9,"sm_util":1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseDirReading(b, "5")
		if err == nil && (r.JobID != "5" || r.PID == 0 || !(r.SMUtil >= 0 && r.SMUtil <= 100)) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
