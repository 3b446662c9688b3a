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
	"sync"
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

// work pops requests one at a time and decides each with the bridge's one code
// path (decideInto), until cq_stop.
func work(f *os.File, done chan struct{}) {
	defer close(done)
	var (
		buf     [8]byte
		prev    *C.struct_cq_req
		rc      C.int
		timeout int // the decide_timeout handed to queue.c (0: not yet)
	)
	applyTimeout(&timeout)
	for {
		var stop C.int
		req := C.cq_next(prev, rc, &stop)
		prev = nil
		if stop != 0 {
			f.Close()
			return
		}
		if req == nil {
			// Parks in the netpoller until a caller writes the eventfd.
			if _, err := f.Read(buf[:]); err != nil {
				// Cannot happen with an open eventfd; fail open: stop, and the
				// callers decide on their own threads from now on.
				C.cq_stop()
			}
			continue
		}
		rc = decideInto(req.jobp, &req.ans)
		prev = req
		applyTimeout(&timeout)
	}
}

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

// queueTimeoutMS is the timeout callers wait now (for tests).
func queueTimeoutMS() int { return int(C.cq_get_timeout_ms()) }

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

// cMentions is queue.c's cq_mentions (for tests: cgo is not allowed in them).
func cMentions(s, word string) bool {
	cs, cw := C.CString(s), C.CString(word)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(cw))
	return C.cq_mentions(cs, cw) != 0
}

// passOpen says whether queue.c's pass window is open now (for tests).
func passOpen() bool { return C.cq_pass_open() != 0 }
