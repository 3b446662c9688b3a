// SPDX-License-Identifier: Apache-2.0

// Package cqtest reaches libcoscheml's C side (queue.c, coscheml_decide) from
// its tests, which cannot use cgo themselves. Only tests import it, so these
// calls never reach the shipped libcoscheml.so: its C symbols are declared
// weak here and resolve in a test binary that links package main; anywhere
// else (a program that does not link queue.c) every call panics.
package cqtest

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../plugin-c -I${SRCDIR}/../..
#include <stdio.h>
#include <stdlib.h>
#include "coscheml_abi.h"
#include "queue.h"

#pragma weak coscheml_decide
#pragma weak cq_mentions
#pragma weak cq_colon_word
#pragma weak cq_pass_open
#pragma weak cq_get_timeout_ms
#pragma weak cq_set_timeout_ms

static int cqtest_linked(void)
{
	return coscheml_decide && cq_mentions && cq_colon_word &&
	       cq_pass_open && cq_get_timeout_ms && cq_set_timeout_ms;
}

// One coscheml_decide call as the shim makes it: a GPU job with this comment;
// the answer's strings into out (CQ_ANS_* order), its begin_time into begin.
static int cqtest_decide(const char *comment, char **out, int64_t *begin)
{
	struct coscheml_job j = {.size = sizeof(j), .comment = comment,
				 .tres_per_node = "gres:gpu:1", .user_id = 1000,
				 .submit_uid = 1000, .min_nodes = 1,
				 .max_nodes = 1, .time_limit = 60,
				 .job_id = 0xfffffffe, .num_tasks = 0xfffffffe,
				 .flags = COSCHEML_SET_COMMENT | COSCHEML_SET_TRES};
	struct coscheml_answer a = {.size = sizeof(a)};
	int rc = coscheml_decide(&j, &a), i = 0;

#define CQTEST_TAKE_(kind, name, ...) COSCHEML_IF_STR(kind, out[i++] = a.name;)
	COSCHEML_ANSWER_FIELDS(CQTEST_TAKE_)
	*begin = a.begin_time;
	return rc;
}

// One coscheml_decide call with every listed field of the job set: the k-th
// field that is not META (from 0) holds "f<k>" (STR), 1000+k (U32, I64) or
// 1 (BOOL); the answer's strings are freed.
static int cqtest_decide_all(void)
{
	struct coscheml_job j = {.size = sizeof(j)};
	struct coscheml_answer a = {.size = sizeof(a)};
	static char strs[64][16];
	int k = 0, rc;

#define CQTEST_SET_(kind, name, ...)                                           \
	COSCHEML_IF_STR(kind, snprintf(strs[k], sizeof(strs[k]), "f%d", k);   \
			j.name = strs[k]; k++;)                                \
	CQTEST_SET_NUM_##kind(name)
#define CQTEST_SET_NUM_STR(name)
#define CQTEST_SET_NUM_META(name)
#define CQTEST_SET_NUM_U32(name) j.name = 1000 + k++;
#define CQTEST_SET_NUM_I64(name) j.name = 1000 + k++;
#define CQTEST_SET_NUM_BOOL(name) j.name = 1, k++;
	COSCHEML_JOB_FIELDS(CQTEST_SET_)
	rc = coscheml_decide(&j, &a);
	coscheml_answer_free(&a);
	return rc;
}
*/
import "C"

import (
	"unsafe"
)

// NStrs is the number of an answer's strings; AnsBuf the size of a request's
// answer buffer (queue.h).
const (
	NStrs  = C.CQ_NANS
	AnsBuf = C.CQ_ANS_BUF
)

func linked() {
	if C.cqtest_linked() == 0 {
		panic("cqtest: libcoscheml's C side is not linked into this program")
	}
}

// Decide makes one coscheml_decide call as the shim does, from this
// goroutine's thread, and returns the answer's code, strings (CQ_ANS_* order)
// and begin_time.
func Decide(comment string) (int, [NStrs]string, int64) {
	linked()
	cs := C.CString(comment)
	defer C.free(unsafe.Pointer(cs))
	var out [NStrs]*C.char
	var begin C.int64_t
	rc := C.cqtest_decide(cs, &out[0], &begin)
	var strs [NStrs]string
	for i, p := range out {
		if p != nil {
			strs[i] = C.GoString(p)
			C.free(unsafe.Pointer(p))
		}
	}
	return int(rc), strs, int64(begin)
}

// DecideAll makes one coscheml_decide call with every field of the job set to
// a value of its own: the k-th field that is not META (from 0) holds "f<k>",
// 1000+k or true. It returns the answer's code.
func DecideAll() int {
	linked()
	return int(C.cqtest_decide_all())
}

// Mentions is queue.c's cq_mentions.
func Mentions(s, word string) bool {
	linked()
	cs, cw := C.CString(s), C.CString(word)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(cw))
	return C.cq_mentions(cs, cw) != 0
}

// ColonWord is queue.c's cq_colon_word: s has a word of 6 to 10 bytes ending
// in ':' (a possible misspelt directive, which the pass window sends to Go).
func ColonWord(s string) bool {
	linked()
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	return C.cq_colon_word(cs) != 0
}

// PassOpen says whether queue.c's untagged pass window is open now.
func PassOpen() bool {
	linked()
	return C.cq_pass_open() != 0
}

// TimeoutMS is how long callers wait for the worker now; SetTimeoutMS sets it
// as the worker does.
func TimeoutMS() int {
	linked()
	return int(C.cq_get_timeout_ms())
}

func SetTimeoutMS(ms int) {
	linked()
	C.cq_set_timeout_ms(C.int(ms))
}

// CStringAt puts s, NUL-terminated, at offset off of a fresh C allocation and
// returns where it starts and the allocation's release.
func CStringAt(s string, off int) (unsafe.Pointer, func()) {
	p := C.malloc(C.size_t(off + len(s) + 1))
	if p == nil {
		panic("cqtest: out of memory")
	}
	b := unsafe.Slice((*byte)(p), off+len(s)+1)
	copy(b[off:], s)
	b[off+len(s)] = 0
	return unsafe.Pointer(&b[off]), func() { C.free(p) }
}
