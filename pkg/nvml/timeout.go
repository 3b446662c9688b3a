// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout: an NVML call gave no answer within its limit (a hung driver, a GPU
// stuck in recovery). The call may still be running; later calls on the same
// device fail fast with ErrTimeout until it returns.
var ErrTimeout = errors.New("NVML call timed out")

// DefaultCallTimeout bounds one NVML call of a long-running service; a healthy
// driver answers in well under a millisecond.
const DefaultCallTimeout = 2 * time.Second

// WithTimeout returns a Backend whose every call (Init, DeviceCount, Device and
// every device read) runs bounded by limit (DefaultCallTimeout when limit <= 0).
// A call that runs past its limit returns ErrTimeout and is left to finish on its
// own goroutine: Go cannot interrupt a call inside C. While such a call is still
// hung, every later call on that device (or, for backend calls, on the backend)
// returns ErrTimeout at once, so a hung driver costs one parked goroutine per
// device, never one per round.
func WithTimeout(b Backend, limit time.Duration) Backend {
	if limit <= 0 {
		limit = DefaultCallTimeout
	}
	return &timedBackend{inner: b, gate: &gate{limit: limit}, devGates: map[int]*gate{}}
}

// gate bounds the calls of one device (or of the backend itself).
type gate struct {
	limit time.Duration
	hung  atomic.Int32 // calls that timed out and have not returned yet
}

type outcome[T any] struct {
	v   T
	err error
}

// A call's state: the caller and the call's goroutine race to move it out of
// callRunning; whoever loses knows the other side's outcome.
const (
	callRunning int32 = iota
	callFinished
	callAbandoned
)

// bounded runs f with g's limit. op names the call in the error.
func bounded[T any](g *gate, op string, f func() (T, error)) (T, error) {
	var zero T
	if g.hung.Load() > 0 {
		return zero, fmt.Errorf("%s: an earlier call is still hung: %w", op, ErrTimeout)
	}
	done := make(chan outcome[T], 1)
	var state atomic.Int32
	go func() {
		v, err := f()
		done <- outcome[T]{v, err}
		if !state.CompareAndSwap(callRunning, callFinished) {
			g.hung.Add(-1) // abandoned: the caller counted this call as hung
		}
	}()
	t := time.NewTimer(g.limit)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
	}
	// Count the call as hung before abandoning it, so that the goroutine's undo
	// can never come before the count.
	g.hung.Add(1)
	if !state.CompareAndSwap(callRunning, callAbandoned) {
		g.hung.Add(-1) // it finished just now: its result is in done
		r := <-done
		return r.v, r.err
	}
	return zero, fmt.Errorf("%s: no answer within %v: %w", op, g.limit, ErrTimeout)
}

type timedBackend struct {
	inner Backend
	gate  *gate

	mu sync.Mutex
	// devGates keeps one gate per GPU index across Device calls: a caller that
	// reopens a hung GPU must still find it hung, not start a second stuck call.
	devGates map[int]*gate
}

func (b *timedBackend) devGate(index int) *gate {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := b.devGates[index]
	if !ok {
		g = &gate{limit: b.gate.limit}
		b.devGates[index] = g
	}
	return g
}

func (b *timedBackend) Kind() string { return b.inner.Kind() }

func (b *timedBackend) Init() error {
	_, err := bounded(b.gate, "init", func() (struct{}, error) { return struct{}{}, b.inner.Init() })
	return err
}

func (b *timedBackend) Shutdown() error {
	_, err := bounded(b.gate, "shutdown", func() (struct{}, error) { return struct{}{}, b.inner.Shutdown() })
	return err
}

func (b *timedBackend) DeviceCount() (int, error) {
	return bounded(b.gate, "device count", b.inner.DeviceCount)
}

func (b *timedBackend) Device(index int) (Device, error) {
	g := b.devGate(index)
	if g.hung.Load() > 0 {
		return nil, fmt.Errorf("gpu %d: an earlier call is still hung: %w", index, ErrTimeout)
	}
	d, err := bounded(b.gate, fmt.Sprintf("gpu %d", index), func() (Device, error) { return b.inner.Device(index) })
	if err != nil {
		return nil, err
	}
	return &timedDevice{inner: d, index: index, gate: g}, nil
}

// timedDevice bounds every read of one GPU; it offers ProcessLister whether or
// not the device it wraps does (ErrNotSupported then).
type timedDevice struct {
	inner Device
	index int
	gate  *gate
}

func devCall[T any](d *timedDevice, field string, f func() (T, error)) (T, error) {
	return bounded(d.gate, fmt.Sprintf("gpu %d %s", d.index, field), f)
}

func (d *timedDevice) Name() (string, error) { return devCall(d, "name", d.inner.Name) }
func (d *timedDevice) UUID() (string, error) { return devCall(d, "uuid", d.inner.UUID) }
func (d *timedDevice) Utilization() (Utilization, error) {
	return devCall(d, "utilization", d.inner.Utilization)
}
func (d *timedDevice) MemoryInfo() (Memory, error) { return devCall(d, "memory", d.inner.MemoryInfo) }
func (d *timedDevice) PCIeThroughput(tx bool) (uint32, error) {
	return devCall(d, "pcie", func() (uint32, error) { return d.inner.PCIeThroughput(tx) })
}
func (d *timedDevice) PowerUsage() (uint32, error) { return devCall(d, "power", d.inner.PowerUsage) }
func (d *timedDevice) SMClock() (uint32, error)    { return devCall(d, "sm clock", d.inner.SMClock) }
func (d *timedDevice) ProcessUtilization(since uint64) ([]ProcessSample, error) {
	return devCall(d, "process utilization", func() ([]ProcessSample, error) { return d.inner.ProcessUtilization(since) })
}

func (d *timedDevice) ComputeProcesses() ([]ProcessMemory, error) {
	pl, ok := d.inner.(ProcessLister)
	if !ok {
		return nil, fmt.Errorf("gpu %d compute processes: %w", d.index, ErrNotSupported)
	}
	return devCall(d, "compute processes", pl.ComputeProcesses)
}
