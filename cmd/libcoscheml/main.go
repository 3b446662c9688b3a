// SPDX-License-Identifier: Apache-2.0

// Command libcoscheml is the c-shared bridge that the job_submit/coscheml plugin
// loads into slurmctld:
//
//	go build -buildmode=c-shared -o lib/libcoscheml.so ./cmd/libcoscheml
//
// It only marshals: C strings in, pkg/submit decides, C strings out.
// Every export recovers from panics (no Go panic may cross cgo) and fails open:
// anything unexpected means "leave the job unchanged". The C API is documented
// in docs/slurm-integration.md.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../plugin-c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "coscheml_abi.h"
#include "queue.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/submit"
)

// defaultConfig is used when the shim passes NULL or "".
const defaultConfig = "/etc/coscheml/coscheml.yaml"

// engine is the one decision engine of this process. A c-shared library has no
// other place for it: the C side holds no Go pointers.
var engine atomic.Pointer[submit.Engine]

// slurmVersion is the SLURM_VERSION_NUMBER the shim was built for (0 before
// init): the TRES syntax of a typed rewrite follows it when the job's own
// request gives none to follow.
var slurmVersion atomic.Uint32

func main() {}

// The Go side of the C interface's field lists (coscheml_abi.h).
//go:generate go run ./internal/abigen -header ../../plugin-c/coscheml_abi.h -queue queue.h -out abi_gen.go -cqtest internal/cqtest/abi_gen.go

// coscheml_abi_version is the first call the shim makes: it uses the library only
// when this equals its own COSCHEML_ABI_VERSION (see coscheml_abi.h).
//
//export coscheml_abi_version
func coscheml_abi_version() C.uint32_t {
	return C.COSCHEML_ABI_VERSION
}

//export coscheml_init
func coscheml_init(configPath *C.char, slurmVer C.uint32_t, slurmConf *C.char, outLog **C.char) (rc C.int) {
	if outLog != nil {
		*outLog = nil
	}
	defer func() {
		if r := recover(); r != nil {
			rc = 1
			setOut(outLog, fmt.Sprintf("internal error in coscheml_init: %v", r))
		}
	}()
	path := goString(configPath)
	if path == "" {
		path = defaultConfig
	}
	slurmVersion.Store(uint32(slurmVer))
	code, log := initGo(path, uint32(slurmVer), goString(slurmConf))
	var timeout int
	applyTimeout(&timeout) // decide_timeout from the first call, when loaded by now
	if err := startWorker(); err != nil {
		// Slower, not wrong: calls are decided on slurmctld's threads.
		log = strings.TrimSpace(log + "\n" + fmt.Sprintf("no decision worker, deciding on the calling threads: %v", err))
	}
	setOut(outLog, log)
	return C.int(code)
}

// cq_decide_go decides on the calling thread: queue.c's coscheml_decide calls it
// only while no worker runs (before init, after fini).
//
//export cq_decide_go
func cq_decide_go(job *C.struct_coscheml_job, ans *C.struct_coscheml_answer) C.int {
	return decideInto(job, ans)
}

// answer is one decision's answer, before it is handed to C: the strings in
// queue.h's CQ_ANS_* order ("" stays NULL), the numbers in num (its strings
// unused).
type answer struct {
	code C.int
	strs [C.CQ_NANS]string
	num  C.struct_coscheml_answer
}

// holds says whether a struct of size bytes holds the field at off of n bytes.
func holds(size C.uint32_t, off, n uintptr) bool { return off+n <= uintptr(size) }

// decideInto answers job_submit (job.modify 0) and job_modify (1) on the
// calling thread, into the caller's answer (malloc'ed strings): cq_decide_go's
// way, while no worker runs.
func decideInto(job *C.struct_coscheml_job, ans *C.struct_coscheml_answer) C.int {
	// Written only up to the caller's size; one shorter than interface 4's
	// first answer comes from a shim of another build, which the version check
	// should have stopped: fail open without touching it.
	if ans == nil || ans.size < C.COSCHEML_ANSWER_SIZE_4_0 {
		return C.int(submit.Unchanged)
	}
	a := decideJob(job)
	for i, o := range answerStrs(ans) {
		if o != nil {
			*o = nil
			setOut(o, a.strs[i])
		}
	}
	setAnswerNums(ans, &a.num)
	return a.code
}

// decideJob decides one job: the one code path of every decision, run by the
// worker (worker.go) on the request that coscheml_decide (queue.c) queued, or
// by decideInto. It reads the job's strings in place, without cgo calls.
func decideJob(job *C.struct_coscheml_job) (a answer) {
	a.code = C.int(submit.Unchanged)
	defer func() {
		if r := recover(); r != nil {
			a = answer{code: C.int(submit.Unchanged)}
			a.strs[C.CQ_ANS_log] = fmt.Sprintf("internal error in the bridge, job left unchanged: %v", r)
		}
	}()
	if job == nil || job.size < C.COSCHEML_JOB_SIZE_4_0 {
		size := 0
		if job != nil {
			size = int(job.size)
		}
		a.strs[C.CQ_ANS_log] = fmt.Sprintf("the plugin passed a job of %d bytes, this library needs at least %d: "+
			"install libcoscheml.so and job_submit_coscheml.so from the same build; job left unchanged",
			size, C.COSCHEML_JOB_SIZE_4_0)
		return a
	}
	if job.size < C.sizeof_struct_coscheml_job {
		// A shim of an earlier build of this interface: the fields it lacks
		// are zero and NULL (never read past its size).
		var full C.struct_coscheml_job
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&full)), job.size), unsafe.Slice((*byte)(unsafe.Pointer(job)), job.size))
		job = &full
	}
	j := jobFields(job)
	j.Set, j.Admin = fieldSet(uint32(job.flags)), uint32(job.flags)&C.COSCHEML_ADMIN != 0
	return answerOf(decideGo(j))
}

//export coscheml_reconfigure
func coscheml_reconfigure() {
	defer func() { _ = recover() }()
	if e := engine.Load(); e != nil {
		e.RequestReload() // returns at once: called from inside job_submit
	}
}

//export coscheml_fini
func coscheml_fini() {
	defer func() { _ = recover() }()
	// Queued calls are answered "unchanged"; the decision in progress is
	// answered (and logged by the engine) before the engine closes.
	stopWorker()
	setPassWindow(nil, 0) // also without a worker (cq_stop shuts it with one)
	if e := engine.Swap(nil); e != nil {
		e.Close()
	}
}

// fieldSet maps the shim's COSCHEML_SET_* flags to submit.FieldSet bit by bit
// (the two numberings are independent).
func fieldSet(flags uint32) submit.FieldSet {
	var s submit.FieldSet
	for _, m := range []struct {
		c uint32
		f submit.FieldSet
	}{
		{C.COSCHEML_SET_COMMENT, submit.FieldComment}, {C.COSCHEML_SET_TRES, submit.FieldTres},
		{C.COSCHEML_SET_PARTITION, submit.FieldPartition}, {C.COSCHEML_SET_REQ_NODES, submit.FieldReqNodes},
		{C.COSCHEML_SET_EXC_NODES, submit.FieldExcNodes},
	} {
		if flags&m.c != 0 {
			s |= m.f
		}
	}
	return s
}

// setOut stores a malloc'ed copy of s (the caller free()s it); "" stays NULL.
func setOut(o **C.char, s string) {
	if o == nil || s == "" {
		return
	}
	*o = C.CString(s)
}

// maxInput bounds how much of one C string is read: a comment larger than this is
// cut (and then refused as too long by the parser), never copied whole.
const maxInput = 1 << 20

// goString copies the C string at p, at most maxInput bytes, measured in Go
// (no cgo call: the worker makes none per decision).
func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(p)), cStrLen(unsafe.Pointer(p), maxInput)))
}

// goStringAt is goString of the C string at p (for tests, which cannot name
// C types).
func goStringAt(p unsafe.Pointer) string { return goString((*C.char)(p)) }

// cStrLen is strnlen(p, limit). It scans one page at a time: memory is mapped
// in whole pages, so no read passes the page that holds the string's end,
// whatever bytes.IndexByte reads around its slice within a page.
func cStrLen(p unsafe.Pointer, limit int) int {
	const page = 4096 // the smallest page size; larger pages hold whole 4 KiB ones
	n := 0
	for n < limit {
		chunk := min(page-int((uintptr(p)+uintptr(n))%page), limit-n)
		if i := bytes.IndexByte(unsafe.Slice((*byte)(unsafe.Add(p, n)), chunk), 0); i >= 0 {
			return n + i
		}
		n += chunk
	}
	return limit
}

// logLevel maps log_decisions to the answer's COSCHEML_LOG_* (verbose, the
// default, for "": no configuration loaded).
func logLevel(level string) C.uint32_t {
	switch level {
	case config.LogInfo:
		return C.COSCHEML_LOG_INFO
	case config.LogDebug:
		return C.COSCHEML_LOG_DEBUG
	}
	return C.COSCHEML_LOG_VERBOSE
}

// replaceBits maps submit.AnswerField to the answer's COSCHEML_ANS_* bits, bit by
// bit (the two numberings are independent).
func replaceBits(f submit.AnswerField) C.uint32_t {
	var out C.uint32_t
	for _, m := range []struct {
		f submit.AnswerField
		c C.uint32_t
	}{
		{submit.ReplaceTresPerJob, C.COSCHEML_ANS_TRES_PER_JOB}, {submit.ReplaceTresPerTask, C.COSCHEML_ANS_TRES_PER_TASK},
		{submit.ClearReqNodes, C.COSCHEML_ANS_CLEAR_REQ_NODES},
	} {
		if f&m.f != 0 {
			out |= m.c
		}
	}
	return out
}
