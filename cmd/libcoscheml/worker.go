// SPDX-License-Identifier: Apache-2.0

package main

/*
#include <stdlib.h>
#include <sys/eventfd.h>
#include "queue.h"
*/
import "C"

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/coscheml/coscheml/pkg/submit"
)

// workerStopWait bounds how long coscheml_fini waits for the worker to answer
// the decision in progress and leave: fini runs in slurmctld's shutdown.
const workerStopWait = 2 * time.Second

var (
	workerMu   sync.Mutex
	workerDone chan struct{} // closed when the running worker has left; nil: none
)

// startWorker starts the goroutine that answers the calls queued by
// coscheml_decide (queue.c), unless one runs. It waits on an eventfd through
// Go's netpoller, so while idle it holds no P and Go's threads sleep; slurmctld's
// threads never enter Go. Without a worker, calls are decided on the calling
// thread (the way before the queue), so a failure here only costs speed.
func startWorker() error {
	workerMu.Lock()
	defer workerMu.Unlock()
	if workerDone != nil {
		return nil
	}
	fd, err := C.eventfd(0, C.EFD_NONBLOCK|C.EFD_CLOEXEC)
	if fd < 0 {
		return fmt.Errorf("eventfd for the decision worker: %w", err)
	}
	// A non-blocking descriptor: os.NewFile registers it with the netpoller.
	f := os.NewFile(uintptr(fd), "coscheml-decide-queue")
	if C.cq_start(fd) != 0 {
		f.Close()
		return fmt.Errorf("a decision worker runs already")
	}
	done := make(chan struct{})
	workerDone = done
	go work(f, done)
	return nil
}

// stopWorker answers the queued calls "unchanged", lets the worker answer the
// decision in progress and waits (bounded) for it to leave.
func stopWorker() {
	workerMu.Lock()
	defer workerMu.Unlock()
	if workerDone == nil {
		return
	}
	C.cq_stop()
	select {
	case <-workerDone:
	case <-time.After(workerStopWait):
	}
	workerDone = nil
}

// work answers the requests that coscheml_decide (queue.c) pushes, oldest
// first, with the bridge's one code path (decideJob), until cq_stop. Per
// decision it makes no cgo call and no syscall that enters Go's scheduler
// (queue.h says why): the stack is taken with an atomic swap, each request's
// state moved with compare-and-swap, the eventfd read with a raw non-blocking
// read inside the netpoller's RawConn, the caller woken with a raw FUTEX_WAKE.
func work(f *os.File, done chan struct{}) {
	defer close(done)
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		// Cannot happen for an *os.File; fail open: the callers decide on
		// their own threads from now on.
		C.cq_stop()
		drainAndExit(nil)
		return
	}
	var (
		buf     [8]byte
		readErr syscall.Errno
		batch   []*C.struct_cq_req
		timeout int // the decide_timeout handed to queue.c (0: not yet)
	)
	// One closure for every wait (no allocation per wait). A non-blocking
	// eventfd read never blocks: EAGAIN parks the goroutine in the netpoller.
	drain := func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == syscall.EAGAIN {
			return false
		}
		readErr = e
		return true
	}
	applyTimeout(&timeout)
	for {
		if atomic.LoadUint32(cqStopping()) != 0 {
			drainAndExit(batch)
			return
		}
		batch = takeAll(batch[:0])
		if len(batch) == 0 {
			// Callers write the eventfd only while cq_idle is 1; set, then
			// look again (a push between the take and the store would not
			// have written it).
			atomic.StoreUint32(cqIdle(), 1)
			if atomic.LoadPointer(cqHead()) != nil || atomic.LoadUint32(cqStopping()) != 0 {
				atomic.StoreUint32(cqIdle(), 0)
				continue
			}
			if err := rc.Read(drain); err != nil || (readErr != 0 && readErr != syscall.EINTR) {
				// Cannot happen with an open eventfd; fail open: stop, and the
				// callers decide on their own threads from now on.
				C.cq_stop()
			}
			readErr = 0
			continue
		}
		for _, r := range batch {
			serve(r)
		}
		applyTimeout(&timeout)
	}
}

// Atomic views of queue.c's shared words (C memory; the pointers stored
// there are C pointers or nil, never Go pointers).
func cqHead() *unsafe.Pointer             { return (*unsafe.Pointer)(unsafe.Pointer(&C.cq_head)) }
func cqIdle() *uint32                     { return (*uint32)(unsafe.Pointer(&C.cq_idle)) }
func cqStopping() *uint32                 { return (*uint32)(unsafe.Pointer(&C.cq_stopping)) }
func reqState(r *C.struct_cq_req) *uint32 { return (*uint32)(unsafe.Pointer(&r.state)) }

// takeAll appends the pending requests to batch, oldest first (the stack
// holds them newest first).
func takeAll(batch []*C.struct_cq_req) []*C.struct_cq_req {
	for r := (*C.struct_cq_req)(atomic.SwapPointer(cqHead(), nil)); r != nil; r = r.next {
		batch = append(batch, r)
	}
	slices.Reverse(batch)
	return batch
}

// serve decides one request and hands the answer over, or lets go of a
// request its caller gave up on (or cq_stop cancelled).
func serve(r *C.struct_cq_req) {
	st := reqState(r)
	if !atomic.CompareAndSwapUint32(st, C.CQ_QUEUED, C.CQ_TAKEN) {
		C.cq_drop(r, 0) // abandoned or cancelled before it was taken
		return
	}
	a := decideJob(r.jobp)
	writeAnswer(r, &a)
	// From a successful swap on, the request is the caller's (it may free
	// it at once): the wake uses the address, computed before.
	addr := uintptr(unsafe.Pointer(st))
	if !atomic.CompareAndSwapUint32(st, C.CQ_TAKEN, C.CQ_DONE) {
		C.cq_drop(r, 1) // the caller timed out while we decided
		return
	}
	futexWake(addr)
}

// futexWake wakes the caller waiting on addr. FUTEX_WAKE never blocks, so a
// raw syscall (no entersyscall, no sysmon wake-up) is safe. On a private
// futex the kernel does not read the word: if the caller already left and
// freed the request, the wake finds no one, or wakes a waiter on memory
// reused at that address spuriously, which futex users must tolerate anyway.
func futexWake(addr uintptr) {
	const futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	syscall.RawSyscall(syscall.SYS_FUTEX, addr, futexWakePrivate, 1)
}

// drainAndExit, once cq_stop was called, lets go of every request still
// pushed (cq_stop cancelled all that waited: none can be taken any more; one
// that could is answered "unchanged") and tells queue.c the worker left.
func drainAndExit(batch []*C.struct_cq_req) {
	for _, r := range takeAll(batch[:0]) {
		if atomic.CompareAndSwapUint32(reqState(r), C.CQ_QUEUED, C.CQ_TAKEN) {
			a := answer{code: C.int(submit.Unchanged)}
			writeAnswer(r, &a)
			addr := uintptr(unsafe.Pointer(reqState(r)))
			if atomic.CompareAndSwapUint32(reqState(r), C.CQ_TAKEN, C.CQ_DONE) {
				futexWake(addr)
				continue
			}
			C.cq_drop(r, 1)
			continue
		}
		C.cq_drop(r, 0)
	}
	C.cq_exit()
}

// writeAnswer stores a in r's answer fields: the strings into r's own buffer
// (Go writing C memory, no call), or, when they do not fit, into one
// allocation of queue.c's (a cgo call, rare) that the caller frees. Out of
// memory: "unchanged", no strings (fail open).
func writeAnswer(r *C.struct_cq_req, a *answer) {
	total := 0
	for i := range a.strs {
		r.ans_len[i] = -1
		r.ans_off[i] = 0
		if a.strs[i] != "" {
			total += len(a.strs[i]) + 1
		}
	}
	r.ans_big = nil
	var buf []byte
	switch {
	case total <= C.CQ_ANS_BUF:
		buf = unsafe.Slice((*byte)(unsafe.Pointer(&r.ans_buf[0])), C.CQ_ANS_BUF)
	case total <= maxAnswer:
		if p := C.cq_alloc(C.uint32_t(total)); p != nil {
			r.ans_big = p
			buf = unsafe.Slice((*byte)(unsafe.Pointer(p)), total)
		}
	}
	if buf == nil {
		r.rc, r.num = C.int32_t(submit.Unchanged), C.struct_coscheml_answer{decision_level: C.COSCHEML_LOG_INFO}
		return
	}
	off := 0
	for i, s := range a.strs {
		if s == "" {
			continue // "" stays NULL
		}
		copy(buf[off:], s)
		buf[off+len(s)] = 0
		r.ans_off[i], r.ans_len[i] = C.int32_t(off), C.int32_t(len(s))
		off += len(s) + 1
	}
	r.rc, r.num = C.int32_t(a.code), a.num
}

// maxAnswer bounds one answer's strings together (the int32 lengths of
// queue.h, and far above any real answer: a log line, a comment, TRES).
const maxAnswer = 64 << 20

// applyTimeout hands the engine's decide_timeout to queue.c when it differs
// from *cur (a cgo call only then): a reloaded configuration applies from
// the calls after the next decision.
func applyTimeout(cur *int) {
	e := engine.Load()
	if e == nil {
		return
	}
	ms := timeoutMS(e.DecideTimeout())
	if ms != *cur {
		C.cq_set_timeout_ms(C.int(ms))
		*cur = ms
	}
}

// timeoutMS is d in milliseconds within queue.c's bounds.
func timeoutMS(d time.Duration) int {
	return int(min(max(d.Milliseconds(), C.CQ_MIN_TIMEOUT_MS), C.CQ_MAX_TIMEOUT_MS))
}

// setPassWindow opens queue.c's untagged pass window for d (0 shuts it) on
// behalf of engine e; nil e shuts it for whoever holds it. An engine that is no
// longer the library's (closed by a reconfigure, its loop perhaps still
// running) changes nothing.
func setPassWindow(e *submit.Engine, d time.Duration) {
	if e != nil && engine.Load() != e {
		return
	}
	C.cq_set_pass_ms(C.int64_t(d.Milliseconds()))
}
