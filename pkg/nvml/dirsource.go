// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DirReading is one emulated process's use of one GPU, the file a replay's
// emulated job (coscheml e2e-job) rewrites every interval at
// <dir>/<node>/gpu<N>/<job id>.json. A DirBackend reads these files as NVML
// would report the same GPU, so that the guard runs on a replay through the same
// Monitor as on real GPUs.
type DirReading struct {
	JobID    string  `json:"job_id"`
	PID      uint32  `json:"pid"`
	MemBytes uint64  `json:"mem_bytes"`
	MemTotal uint64  `json:"mem_total"` // the GPU's memory
	SMUtil   float64 `json:"sm_util"`   // percent of the SMs the process gets now
	// Busy: the process runs slower than alone next to co-runners, so the GPU
	// is contended: the emulated device then reports itself fully busy.
	Busy bool  `json:"busy"`
	At   int64 `json:"at_us"` // unix microseconds when written
}

// maxReadingBytes bounds one reading file; a larger one is not a reading.
const maxReadingBytes = 4096

// validReadingJobID accepts Slurm's numeric job ids (and array/het suffixes
// written as digits and underscores), nothing that could name another path.
func validReadingJobID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, r := range id {
		if (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// DirGPUPath is the folder of GPU gpu of node in dir.
func DirGPUPath(dir, node string, gpu int) string {
	return filepath.Join(dir, node, "gpu"+strconv.Itoa(gpu))
}

// WriteDirReading replaces the reading of r.JobID on GPU gpu of node
// (atomically: a temporary file renamed over it), creating the GPU's folder.
func WriteDirReading(dir, node string, gpu int, r DirReading) error {
	if !validReadingJobID(r.JobID) {
		return fmt.Errorf("reading: job id %q: want digits", r.JobID)
	}
	g := DirGPUPath(dir, node, gpu)
	if err := os.MkdirAll(g, 0o755); err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	f, err := os.CreateTemp(g, ".tmp-"+r.JobID+"-*")
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("reading: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("reading: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(g, r.JobID+".json")); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("reading: %w", err)
	}
	return nil
}

// RemoveDirReading removes the reading of jobID on GPU gpu of node (a job that
// ends no longer holds the GPU); a missing file is not an error.
func RemoveDirReading(dir, node string, gpu int, jobID string) error {
	if !validReadingJobID(jobID) {
		return fmt.Errorf("reading: job id %q: want digits", jobID)
	}
	err := os.Remove(filepath.Join(DirGPUPath(dir, node, gpu), jobID+".json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading: %w", err)
	}
	return nil
}

// ReadDirReading reads one job's reading on one GPU.
func ReadDirReading(dir, node string, gpu int, jobID string) (DirReading, error) {
	if !validReadingJobID(jobID) {
		return DirReading{}, fmt.Errorf("reading: job id %q: want digits", jobID)
	}
	b, err := os.ReadFile(filepath.Join(DirGPUPath(dir, node, gpu), jobID+".json"))
	if err != nil {
		return DirReading{}, fmt.Errorf("reading: %w", err)
	}
	return ParseDirReading(b, jobID)
}

// ParseDirReading decodes one reading file and checks it names jobID and holds
// plausible numbers.
func ParseDirReading(b []byte, jobID string) (DirReading, error) {
	var r DirReading
	if len(b) > maxReadingBytes {
		return r, fmt.Errorf("reading of job %s: %d bytes, over %d", jobID, len(b), maxReadingBytes)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("reading of job %s: %w", jobID, err)
	}
	switch {
	case r.JobID != jobID:
		return r, fmt.Errorf("reading of job %s names job %q", jobID, r.JobID)
	case r.PID == 0:
		return r, fmt.Errorf("reading of job %s: no pid", jobID)
	case !(r.SMUtil >= 0 && r.SMUtil <= 100) || math.IsNaN(r.SMUtil):
		return r, fmt.Errorf("reading of job %s: SM utilization %v: want 0..100", jobID, r.SMUtil)
	case r.MemTotal > 0 && r.MemBytes > r.MemTotal:
		return r, fmt.Errorf("reading of job %s: memory %d over the GPU's %d", jobID, r.MemBytes, r.MemTotal)
	}
	return r, nil
}

// DirBackend is a Backend over the readings an emulated cluster's jobs write in
// one node's folder of dir (evaluation only: make e2e). It answers like NVML:
// device memory is the sum of the live processes' memory, utilization.gpu is
// 100 while any process reports the GPU contended and otherwise the sum of the
// processes' SM shares, and per-process samples are the readings written since
// the caller's timestamp (a stopped, e.g. suspended, process writes none: it
// holds its memory and uses no SM, as on a GPU). A reading whose process is gone
// is dropped.
//
// Trust: the readings decide whose job is requeued, so Init refuses a folder
// that someone other than root or this process's user could write (owned by
// another user, group- or world-writable, a symbolic link), and a reading file
// owned by another user is skipped.
type DirBackend struct {
	dir, node string
	// Alive reports whether a process still exists (default: /proc/<pid>).
	Alive func(pid uint32) bool
	// Owners are the uids whose folders and files are trusted (default: root
	// and this process's effective uid).
	Owners []uint32

	mu     sync.Mutex
	inited bool
	last   map[int][]DirReading // per GPU, the live readings of the latest read
	skips  map[string]bool      // problems already returned through Problems
	probs  []string
}

// NewDirBackend returns the backend of node's folder in dir. Nothing is read
// until Init.
func NewDirBackend(dir, node string) *DirBackend {
	return &DirBackend{dir: dir, node: node, last: map[int][]DirReading{}, skips: map[string]bool{}}
}

func (b *DirBackend) Kind() string { return "emulated" }

func (b *DirBackend) owners() []uint32 {
	if b.Owners != nil {
		return b.Owners
	}
	return []uint32{0, uint32(os.Geteuid())}
}

// trusted checks that path is a folder or file only a trusted owner can change.
func (b *DirBackend) trusted(path string, wantDir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link", path)
	case wantDir != fi.IsDir():
		return fmt.Errorf("%s: not a %s", path, map[bool]string{true: "folder", false: "regular file"}[wantDir])
	case !wantDir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", path)
	case !ok:
		return fmt.Errorf("%s: no owner information", path)
	case !slices.Contains(b.owners(), st.Uid):
		return fmt.Errorf("%s is owned by uid %d, not by root or the guard's user", path, st.Uid)
	case wantDir && fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (mode %o)", path, fi.Mode().Perm())
	}
	return nil
}

// Init checks that the metrics folder and the node's folder are trusted,
// creating the node's folder when it is missing.
func (b *DirBackend) Init() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.trusted(b.dir, true); err != nil {
		return fmt.Errorf("emulated metrics folder: %w: %w", err, ErrNotAvailable)
	}
	nd := filepath.Join(b.dir, b.node)
	if err := os.Mkdir(nd, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("emulated metrics folder: %w: %w", err, ErrNotAvailable)
	}
	if err := b.trusted(nd, true); err != nil {
		return fmt.Errorf("emulated metrics folder: %w: %w", err, ErrNotAvailable)
	}
	b.inited = true
	return nil
}

func (b *DirBackend) Shutdown() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inited = false
	return nil
}

// DeviceCount is the highest GPU folder index plus one.
func (b *DirBackend) DeviceCount() (int, error) {
	ents, err := os.ReadDir(filepath.Join(b.dir, b.node))
	if err != nil {
		return 0, fmt.Errorf("emulated metrics: %w", err)
	}
	n := 0
	for _, e := range ents {
		if i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "gpu")); err == nil && strings.HasPrefix(e.Name(), "gpu") && i >= 0 && i < 64 {
			n = max(n, i+1)
		}
	}
	return n, nil
}

func (b *DirBackend) Device(index int) (Device, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.inited {
		return nil, ErrNotInitialized
	}
	if index < 0 || index >= 64 {
		return nil, fmt.Errorf("gpu %d: no such emulated GPU: %w", index, ErrGPULost)
	}
	return &dirDevice{b: b, gpu: index}, nil
}

// JobOf names the job of a process seen in the latest reads.
func (b *DirBackend) JobOf(pid uint32) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rs := range b.last {
		for _, r := range rs {
			if r.PID == pid {
				return r.JobID, true
			}
		}
	}
	return "", false
}

// Problems returns, once each, the reading files skipped since the last call
// (untrusted, unparsable) for the guard's log.
func (b *DirBackend) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.probs
	b.probs = nil
	return p
}

func (b *DirBackend) problem(msg string) {
	if b.skips[msg] || len(b.skips) > 4096 {
		return
	}
	b.skips[msg] = true
	b.probs = append(b.probs, msg)
}

func (b *DirBackend) alive(pid uint32) bool {
	if b.Alive != nil {
		return b.Alive(pid)
	}
	_, err := os.Stat("/proc/" + strconv.FormatUint(uint64(pid), 10))
	return err == nil
}

// read loads the live readings of one GPU.
func (b *DirBackend) read(gpu int) ([]DirReading, error) {
	g := DirGPUPath(b.dir, b.node, gpu)
	ents, err := os.ReadDir(g)
	if errors.Is(err, fs.ErrNotExist) {
		b.mu.Lock()
		delete(b.last, gpu)
		b.mu.Unlock()
		return nil, nil // no emulated job has used this GPU yet: an idle GPU
	}
	if err != nil {
		return nil, fmt.Errorf("gpu %d: %w", gpu, err)
	}
	var out []DirReading
	var probs []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validReadingJobID(id) {
			continue
		}
		p := filepath.Join(g, e.Name())
		if err := b.trusted(p, false); err != nil {
			probs = append(probs, "emulated metrics: skipped: "+err.Error())
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue // replaced or removed between listing and reading
		}
		r, err := ParseDirReading(data, id)
		if err != nil {
			probs = append(probs, "emulated metrics: skipped: "+err.Error())
			continue
		}
		if !b.alive(r.PID) {
			continue
		}
		out = append(out, r)
	}
	b.mu.Lock()
	b.last[gpu] = out
	for _, p := range probs {
		b.problem(p)
	}
	b.mu.Unlock()
	return out, nil
}

type dirDevice struct {
	b   *DirBackend
	gpu int
}

func (d *dirDevice) unsupported(what string) error {
	return fmt.Errorf("gpu %d %s: emulated GPU: %w", d.gpu, what, ErrNotSupported)
}

func (d *dirDevice) Name() (string, error) { return "emulated GPU", nil }
func (d *dirDevice) UUID() (string, error) {
	return fmt.Sprintf("GPU-emulated-%s-%d", d.b.node, d.gpu), nil
}
func (d *dirDevice) PCIeThroughput(bool) (uint32, error) { return 0, d.unsupported("pcie") }
func (d *dirDevice) PowerUsage() (uint32, error)         { return 0, d.unsupported("power") }
func (d *dirDevice) SMClock() (uint32, error)            { return 0, d.unsupported("sm clock") }

func (d *dirDevice) MemoryInfo() (Memory, error) {
	rs, err := d.b.read(d.gpu)
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, r := range rs {
		m.Used += r.MemBytes
		m.Total = max(m.Total, r.MemTotal)
	}
	return m, nil
}

func (d *dirDevice) Utilization() (Utilization, error) {
	rs, err := d.b.read(d.gpu)
	if err != nil {
		return Utilization{}, err
	}
	sum := 0.0
	for _, r := range rs {
		if r.Busy {
			return Utilization{GPU: 100}, nil
		}
		sum += r.SMUtil
	}
	return Utilization{GPU: uint32(min(100, math.Round(sum)))}, nil
}

func (d *dirDevice) ComputeProcesses() ([]ProcessMemory, error) {
	rs, err := d.b.read(d.gpu)
	if err != nil {
		return nil, err
	}
	out := make([]ProcessMemory, 0, len(rs))
	for _, r := range rs {
		out = append(out, ProcessMemory{PID: r.PID, UsedBytes: r.MemBytes, Known: true})
	}
	return out, nil
}

// ProcessUtilization returns the readings written after since (microseconds),
// as NVML returns the samples newer than its argument.
func (d *dirDevice) ProcessUtilization(since uint64) ([]ProcessSample, error) {
	rs, err := d.b.read(d.gpu)
	if err != nil {
		return nil, err
	}
	var out []ProcessSample
	for _, r := range rs {
		if r.At <= 0 || uint64(r.At) <= since {
			continue
		}
		out = append(out, ProcessSample{PID: r.PID, TimeStamp: uint64(r.At), SMUtil: uint32(math.Round(r.SMUtil))})
	}
	return out, nil
}

// ReadingNow is the At of a reading written at t.
func ReadingNow(t time.Time) int64 { return t.UnixMicro() }
