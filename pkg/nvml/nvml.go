// SPDX-License-Identifier: Apache-2.0

// Package nvml samples the GPU metrics a profile needs through NVIDIA's go-nvml,
// behind a small interface so that tests and GPU-less nodes can use go-nvml's own
// mocks (pkg/nvml/mock, mock/dgxh200) instead of the driver.
//
// Two rules shape this package. First, nothing here may crash a Slurm
// prolog/epilog: a missing library, a missing driver, an unsupported field or a
// vanished GPU becomes an error value (and, in a profile, a note), and every call
// into go-nvml is guarded against panics (the generated mocks panic on methods
// that were left nil). Second, no device call is made before Init succeeded:
// go-nvml resolves the library's symbols lazily, and calling one that was never
// loaded faults inside C, where recover cannot help.
package nvml

import (
	"errors"
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNotAvailable: NVML cannot be used on this node (no library, no driver).
	ErrNotAvailable = errors.New("NVML not available")
	// ErrNotSupported: this GPU or driver does not offer the field.
	ErrNotSupported = errors.New("not supported")
	// ErrGPULost: the GPU fell off the bus, was reset or is otherwise gone.
	ErrGPULost = errors.New("GPU lost")
	// ErrNotInitialized: a device call before Init or after Shutdown.
	ErrNotInitialized = errors.New("NVML not initialized")
)

// Utilization is NVML's utilization.gpu (percent of time a kernel ran) and
// utilization.memory (percent of time device memory was read or written).
type Utilization struct {
	GPU, Memory uint32
}

// Memory is device memory in bytes.
type Memory struct {
	Used, Total uint64
}

// ProcessSample is one process's share of a GPU, as NVML's per-process
// utilization reports it.
type ProcessSample struct {
	PID       uint32
	TimeStamp uint64 // microseconds, NVML's clock
	SMUtil    uint32
	MemUtil   uint32
}

// Backend is one NVML library (the real one or a mock).
type Backend interface {
	// Init loads and initializes the library; an error wraps ErrNotAvailable.
	Init() error
	Shutdown() error
	DeviceCount() (int, error)
	Device(index int) (Device, error)
	// Kind names the backend ("nvml" or "mock") for profiles' Source field.
	Kind() string
}

// Device reads one GPU. Every method may return an error wrapping ErrNotSupported
// or ErrGPULost.
type Device interface {
	Name() (string, error)
	UUID() (string, error)
	Utilization() (Utilization, error)
	MemoryInfo() (Memory, error)
	// PCIeThroughput returns KB/s over NVML's last 20 ms window.
	PCIeThroughput(tx bool) (uint32, error)
	// PowerUsage returns milliwatts.
	PowerUsage() (uint32, error)
	// SMClock returns the current SM clock in MHz.
	SMClock() (uint32, error)
	// ProcessUtilization returns samples newer than since (NVML microseconds).
	ProcessUtilization(since uint64) ([]ProcessSample, error)
}

// Open returns the backend named by the configuration: "nvml" (the driver's
// libnvidia-ml.so.1) or "mock" (a simulated DGX H200 with a deterministic,
// changing counter sequence, for GPU-less nodes and tests).
func Open(kind string) (Backend, error) {
	switch kind {
	case "nvml", "":
		return NewReal(), nil
	case "mock":
		return NewMock(MockOptions{}), nil
	}
	return nil, fmt.Errorf("unknown NVML backend %q: want nvml or mock", kind)
}

// NewReal returns the backend on the node's libnvidia-ml.so.1. Nothing is loaded
// until Init.
func NewReal() Backend { return Wrap(gonvml.New(), "nvml") }

// Wrap puts any go-nvml Interface (the library or one of its mocks) behind Backend.
func Wrap(lib gonvml.Interface, kind string) Backend {
	return &backend{lib: lib, kind: kind}
}

type backend struct {
	lib  gonvml.Interface
	kind string

	mu     sync.Mutex
	inited bool
}

func (b *backend) Kind() string { return b.kind }

func (b *backend) Init() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inited {
		return nil
	}
	ret, err := guard1("init", b.lib.Init)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAvailable, err)
	}
	switch ret {
	case gonvml.SUCCESS:
		b.inited = true
		return nil
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%w: libnvidia-ml.so.1 could not be loaded (no NVIDIA driver on this node?); use profiling.backend: mock for tests", ErrNotAvailable)
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w: the NVIDIA kernel driver is not loaded", ErrNotAvailable)
	case gonvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("%w: no permission to open the GPU devices", ErrNotAvailable)
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("%w: NVML library and kernel driver versions differ (reboot or reload the driver)", ErrNotAvailable)
	}
	return fmt.Errorf("%w: init: %s", ErrNotAvailable, retString(ret))
}

func (b *backend) Shutdown() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.inited {
		return nil
	}
	b.inited = false
	ret, err := guard1("shutdown", b.lib.Shutdown)
	if err != nil {
		return err
	}
	return retErr("shutdown", ret)
}

func (b *backend) ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.inited {
		return ErrNotInitialized
	}
	return nil
}

func (b *backend) DeviceCount() (int, error) {
	if err := b.ready(); err != nil {
		return 0, err
	}
	n, ret, err := guard2("device count", b.lib.DeviceGetCount)
	if err != nil {
		return 0, err
	}
	return n, retErr("device count", ret)
}

func (b *backend) Device(index int) (Device, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("gpu %d", index)
	h, ret, err := guard2(op, func() (gonvml.Device, gonvml.Return) { return b.lib.DeviceGetHandleByIndex(index) })
	if err != nil {
		return nil, err
	}
	if ret == gonvml.ERROR_INVALID_ARGUMENT || ret == gonvml.ERROR_NOT_FOUND {
		// An index that was valid for the job but is not any more: the GPU went away.
		return nil, fmt.Errorf("%s: no such device: %w", op, ErrGPULost)
	}
	if err := retErr(op, ret); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%s: no handle: %w", op, ErrGPULost)
	}
	return &device{b: b, h: h, index: index}, nil
}

type device struct {
	b     *backend
	h     gonvml.Device
	index int
}

// call runs one guarded device read; it refuses once the backend is shut down.
func call[T any](d *device, field string, f func() (T, gonvml.Return)) (T, error) {
	var zero T
	if err := d.b.ready(); err != nil {
		return zero, err
	}
	v, ret, err := guard2("", f)
	if err == nil && ret == gonvml.SUCCESS {
		return v, nil // a successful read formats nothing
	}
	op := fmt.Sprintf("gpu %d %s", d.index, field)
	if err != nil {
		return zero, fmt.Errorf("%s%w", op, err)
	}
	return zero, retErr(op, ret)
}

func (d *device) Name() (string, error) { return call(d, "name", d.h.GetName) }
func (d *device) UUID() (string, error) { return call(d, "uuid", d.h.GetUUID) }

func (d *device) Utilization() (Utilization, error) {
	u, err := call(d, "utilization", d.h.GetUtilizationRates)
	return Utilization{GPU: u.Gpu, Memory: u.Memory}, err
}

func (d *device) MemoryInfo() (Memory, error) {
	m, err := call(d, "memory", d.h.GetMemoryInfo)
	return Memory{Used: m.Used, Total: m.Total}, err
}

func (d *device) PCIeThroughput(tx bool) (uint32, error) {
	c, name := gonvml.PCIE_UTIL_RX_BYTES, "pcie rx"
	if tx {
		c, name = gonvml.PCIE_UTIL_TX_BYTES, "pcie tx"
	}
	return call(d, name, func() (uint32, gonvml.Return) { return d.h.GetPcieThroughput(c) })
}

func (d *device) PowerUsage() (uint32, error) { return call(d, "power", d.h.GetPowerUsage) }

func (d *device) SMClock() (uint32, error) {
	return call(d, "sm clock", func() (uint32, gonvml.Return) { return d.h.GetClockInfo(gonvml.CLOCK_SM) })
}

func (d *device) ProcessUtilization(since uint64) ([]ProcessSample, error) {
	raw, err := call(d, "process utilization", func() ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		return d.h.GetProcessUtilization(since)
	})
	if err != nil {
		// NVML answers NOT_FOUND when no process sample is newer than since.
		if errors.Is(err, errNotFound) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]ProcessSample, len(raw))
	for i, s := range raw {
		out[i] = ProcessSample{PID: s.Pid, TimeStamp: s.TimeStamp, SMUtil: s.SmUtil, MemUtil: s.MemUtil}
	}
	return out, nil
}

var errNotFound = errors.New("not found")

// retErr maps an NVML return code to an error the sampler can classify.
func retErr(op string, r gonvml.Return) error {
	switch r {
	case gonvml.SUCCESS:
		return nil
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("%s: %w", op, ErrNotSupported)
	case gonvml.ERROR_GPU_IS_LOST, gonvml.ERROR_RESET_REQUIRED, gonvml.ERROR_GPU_NOT_FOUND:
		return fmt.Errorf("%s: %s: %w", op, retString(r), ErrGPULost)
	case gonvml.ERROR_NOT_FOUND:
		return fmt.Errorf("%s: %w", op, errNotFound)
	case gonvml.ERROR_UNINITIALIZED:
		return fmt.Errorf("%s: %w", op, ErrNotInitialized)
	}
	return fmt.Errorf("%s: %s", op, retString(r))
}

// retString names a return code without calling into the library (which may be
// gone): the numeric code is enough for a log line when the name is unknown.
func retString(r gonvml.Return) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("NVML error %d", int32(r))
		}
	}()
	return fmt.Sprintf("%s (%d)", r.Error(), int32(r))
}

// guard1 and guard2 turn a panic inside go-nvml (a mock method left nil, a bug)
// into an error. A nil mock method means "this backend does not offer the field",
// so the error wraps ErrNotSupported.
func guard1[R any](op string, f func() R) (r R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: call panicked (%v): %w", op, p, ErrNotSupported)
		}
	}()
	return f(), nil
}

func guard2[T, R any](op string, f func() (T, R)) (v T, r R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: call panicked (%v): %w", op, p, ErrNotSupported)
		}
	}()
	// (op may be empty: call prefixes the operation itself, only on error.)
	v, r = f()
	return v, r, nil
}
