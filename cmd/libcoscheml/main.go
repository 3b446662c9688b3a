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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"fmt"
	"sync/atomic"

	"github.com/coscheml/coscheml/pkg/submit"
)

// defaultConfig is used when the shim passes NULL or "".
const defaultConfig = "/etc/coscheml/coscheml.yaml"

// engine is the one decision engine of this process. A c-shared library has no
// other place for it: the C side holds no Go pointers.
var engine atomic.Pointer[submit.Engine]

// slurmVersion is what the shim reported through coscheml_slurm_version (0 if
// never called): the TRES syntax of a typed rewrite follows it when the job's own
// request gives none to follow.
var slurmVersion atomic.Uint32

func main() {}

//export coscheml_init
func coscheml_init(configPath *C.char) (rc C.int) {
	defer func() {
		if recover() != nil {
			rc = 1
		}
	}()
	path := goString(configPath)
	if path == "" {
		path = defaultConfig
	}
	return C.int(initGo(path))
}

//export coscheml_slurm_version
func coscheml_slurm_version(v C.uint32_t) {
	defer func() { _ = recover() }()
	slurmVersion.Store(uint32(v))
}

//export coscheml_job_submit
func coscheml_job_submit(comment, tres, partition *C.char, userID, minNodes, maxNodes, timeLimit, jobID C.uint32_t,
	outTres, outReqNodes, outComment, outUserMsg, outLog **C.char) C.int {
	return decideC(false, comment, tres, partition, userID, minNodes, maxNodes, timeLimit, jobID,
		outTres, outReqNodes, outComment, outUserMsg, outLog)
}

//export coscheml_job_modify
func coscheml_job_modify(comment, tres, partition *C.char, userID, minNodes, maxNodes, timeLimit, jobID C.uint32_t,
	outTres, outReqNodes, outComment, outUserMsg, outLog **C.char) C.int {
	return decideC(true, comment, tres, partition, userID, minNodes, maxNodes, timeLimit, jobID,
		outTres, outReqNodes, outComment, outUserMsg, outLog)
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
	if e := engine.Swap(nil); e != nil {
		e.Close()
	}
}

func decideC(modify bool, comment, tres, partition *C.char, userID, minNodes, maxNodes, timeLimit, jobID C.uint32_t,
	outTres, outReqNodes, outComment, outUserMsg, outLog **C.char) (rc C.int) {
	outs := []**C.char{outTres, outReqNodes, outComment, outUserMsg, outLog}
	for _, o := range outs {
		if o != nil {
			*o = nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			rc = C.int(submit.Unchanged)
			// Outputs are set last, so nothing was handed over yet; the panic goes
			// to the log line only.
			setOut(outLog, fmt.Sprintf("internal error in the bridge, job left unchanged: %v", r))
		}
	}()
	j := submit.JobFields{
		Comment: goString(comment), TresPerNode: goString(tres), Partition: goString(partition),
		UserID: uint32(userID), MinNodes: uint32(minNodes), MaxNodes: uint32(maxNodes),
		TimeLimit: uint32(timeLimit), JobID: uint32(jobID), Modify: modify,
	}
	res := decideGo(j)
	setOut(outLog, res.Log)
	setOut(outUserMsg, res.UserMsg)
	if res.Code == submit.Rewrite {
		setOut(outTres, res.TresPerNode)
		setOut(outReqNodes, res.ReqNodes)
		setOut(outComment, res.Comment)
	}
	return C.int(res.Code)
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
