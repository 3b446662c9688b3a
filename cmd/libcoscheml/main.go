// Command libcoscheml is the c-shared bridge that the job_submit/coscheml plugin
// loads into slurmctld:
//
//	go build -buildmode=c-shared -o lib/libcoscheml.so ./cmd/libcoscheml
//
// It only marshals: C strings in, pkg/submit decides, malloc'ed C strings out.
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
*/
import "C"

import (
	"fmt"
	"strings"
	"sync/atomic"

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

// decideInto answers job_submit (job.modify 0) and job_modify (1): the one code
// path of every decision, run by the worker (worker.go) on the C request that
// coscheml_decide (queue.c) queued, or by cq_decide_go.
func decideInto(job *C.struct_coscheml_job, ans *C.struct_coscheml_answer) (rc C.int) {
	// The answer is written only when the caller's struct is as large as ours;
	// a shorter one comes from a shim of another build, which the version check
	// should have stopped: fail open without touching it.
	if ans == nil || ans.size < C.uint32_t(C.sizeof_struct_coscheml_answer) {
		return C.int(submit.Unchanged)
	}
	outs := []**C.char{&ans.tres_per_node, &ans.req_nodes, &ans.comment, &ans.user_msg, &ans.log, &ans.tres_per_job, &ans.tres_per_task}
	for _, o := range outs {
		*o = nil
	}
	ans.begin_time = 0
	ans.replace = 0
	defer func() {
		if r := recover(); r != nil {
			rc = C.int(submit.Unchanged)
			// Outputs are set last, so nothing was handed over yet; the panic goes
			// to the log line only.
			setOut(&ans.log, fmt.Sprintf("internal error in the bridge, job left unchanged: %v", r))
		}
	}()
	if job == nil || job.size < C.uint32_t(C.sizeof_struct_coscheml_job) {
		size := 0
		if job != nil {
			size = int(job.size)
		}
		setOut(&ans.log, fmt.Sprintf("the plugin passed a job of %d bytes, this library needs %d: "+
			"install libcoscheml.so and job_submit_coscheml.so from the same build; job left unchanged",
			size, C.sizeof_struct_coscheml_job))
		return C.int(submit.Unchanged)
	}
	j := submit.JobFields{
		Comment: goString(job.comment), TresPerNode: goString(job.tres_per_node), Partition: goString(job.partition),
		UserID: uint32(job.user_id), MinNodes: uint32(job.min_nodes), MaxNodes: uint32(job.max_nodes),
		TimeLimit: uint32(job.time_limit), JobID: uint32(job.job_id), Modify: job.modify != 0,
		BeginTime: int64(job.begin_time),
		ReqNodes:  goString(job.req_nodes), ExcNodes: goString(job.exc_nodes), SubmitUID: uint32(job.submit_uid),
		Set: fieldSet(uint32(job.flags)), Admin: uint32(job.flags)&C.COSCHEML_ADMIN != 0,
		TresPerJob: goString(job.tres_per_job), TresPerTask: goString(job.tres_per_task), TresPerSocket: goString(job.tres_per_socket),
		MemPerTres: goString(job.mem_per_tres), CpusPerTres: goString(job.cpus_per_tres), ArrayInx: goString(job.array_inx),
		NumTasks: uint32(job.num_tasks), Exclusive: job.exclusive != 0,
	}
	res := decideGo(j)
	setOut(&ans.log, res.Log)
	setOut(&ans.user_msg, res.UserMsg)
	if res.Code == submit.Rewrite {
		setOut(&ans.tres_per_node, res.TresPerNode)
		setOut(&ans.req_nodes, res.ReqNodes)
		setOut(&ans.comment, res.Comment)
		ans.begin_time = C.int64_t(res.BeginTime)
		setOut(&ans.tres_per_job, res.TresPerJob)
		setOut(&ans.tres_per_task, res.TresPerTask)
		ans.replace = replaceBits(res.Replace)
	}
	return C.int(res.Code)
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

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoStringN(p, C.int(C.strnlen(p, maxInput)))
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
