/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue.h: the hand-off between slurmctld's threads and the library's Go
 * worker (queue.c). A thread that calls coscheml_decide never enters Go: it
 * copies the job into a request, pushes it on a lock-free stack, wakes the
 * worker through an eventfd (read by a goroutine through Go's netpoller) when
 * the worker sleeps, and waits on the request's state word (a futex), at most
 * cq_timeout_ms. Why: a C thread that calls into Go leaves its P in the
 * syscall state when it returns, and Go's sysmon then polls every 20 us or
 * more until it takes the P back 10 ms later (about 180 us of CPU per call;
 * docs/performance-slurm.md).
 *
 * The worker (worker.go) makes no cgo call and no syscall that enters Go's
 * scheduler per decision: it takes the stack with an atomic swap, moves each
 * request's state with atomic compare-and-swap, reads the job's strings in
 * place, writes the answer's strings into the request's own buffer and wakes
 * the caller with a raw, non-blocking FUTEX_WAKE. Each cgo call or syscall
 * after Go's Ps were all idle wakes sysmon, which then polls every 20 us.
 * Rare paths (an answer larger than the buffer, freeing a request whose
 * caller left, stopping) use cgo calls.
 */
#ifndef COSCHEML_QUEUE_H
#define COSCHEML_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "coscheml_abi.h"

/*
 * Only the interface (coscheml_abi.h) leaves libcoscheml.so: the queue's own
 * functions and words are hidden from slurmctld and its other plugins.
 */
#pragma GCC visibility push(hidden)

/*
 * A request's state (cq_req.state, atomic, the caller's futex word). Who may
 * move it, and who frees the request after:
 *   QUEUED -> TAKEN      the worker, when it starts the decision;
 *   TAKEN -> DONE        the worker, answer written; from then on the worker
 *                        never touches the request: the caller frees it;
 *   QUEUED/TAKEN -> ABANDONED  the caller, timed out, leaving: the worker
 *                        frees it when it meets it (cq_drop);
 *   QUEUED -> CANCELLED  cq_stop, under cq_lock: the caller returns
 *                        "unchanged"; the caller and the worker both let go
 *                        of it (refs), the last one frees it.
 */
enum {
	CQ_QUEUED = 0,
	CQ_TAKEN = 1,
	CQ_DONE = 2,
	CQ_ABANDONED = 3,
	CQ_CANCELLED = 4,
};

/* The answer's strings, in struct coscheml_answer's order: CQ_ANS_<field>. */
#define CQ_ANS_INDEX_(kind, name, ...) COSCHEML_IF_STR(kind, CQ_ANS_##name, )
enum { COSCHEML_ANSWER_FIELDS(CQ_ANS_INDEX_) CQ_NANS };

/* The job's strings: CQ_NJOBSTR of them. */
#define CQ_JOB_COUNT_(kind, name, ...) COSCHEML_IF_STR(kind, +1)
enum { CQ_NJOBSTR = 0 COSCHEML_JOB_FIELDS(CQ_JOB_COUNT_) };

/*
 * The answer's strings are written here by the worker (a decision's answer is
 * a few hundred bytes); a longer answer goes into ans_big, which the worker
 * allocates (a cgo call) and the caller frees.
 */
#define CQ_ANS_BUF 4096

struct cq_req {
	struct cq_req *next; /* the pending stack; read by the worker only */
	/* Callers' list of waiting requests, under cq_lock (for cq_stop). */
	struct cq_req *live_prev, *live_next;
	uint32_t state; /* CQ_*: atomic */
	uint32_t refs;  /* CANCELLED only: holders left (caller, worker) */
	int32_t rc;
	/* The answer's numbers (its strings are NULL here: see ans_len). */
	struct coscheml_answer num;
	/* NULL when the caller passed no job (the worker says so in the log). */
	struct coscheml_job *jobp;
	struct coscheml_job job; /* the caller's job, its strings copied */
	/* Each answer string: its length (-1: NULL) and offset in the buffer. */
	int32_t ans_len[CQ_NANS];
	int32_t ans_off[CQ_NANS];
	char *ans_big; /* malloc'ed by the worker; NULL: ans_buf */
	char ans_buf[CQ_ANS_BUF];
	/* The job's strings follow, in the same allocation. */
};

/* The worker's side: shared words, read and written with atomics. */
extern struct cq_req *cq_head;  /* pending requests, newest first */
extern uint32_t cq_idle;        /* 1: the worker sleeps; wake it */
extern uint32_t cq_stopping;    /* cq_stop called: the worker leaves */
extern uint32_t cq_said_stuck;  /* a timeout was logged; no answer since */

/* The worker side, called from Go (main.go, worker.go) on rare paths. */
int cq_start(int fd);
void cq_drop(struct cq_req *r, int taken);
void cq_exit(void);
void cq_stop(void);
char *cq_alloc(uint32_t n);

/* The shim's call (coscheml_abi.h's coscheml_decide_fn). */
__attribute__((visibility("default"))) int
coscheml_decide(const struct coscheml_job *job, struct coscheml_answer *ans);

/* The caller's side of DONE: moves r's answer into ans (for tests, too). */
int cq_move_answer(struct cq_req *r, struct coscheml_answer *ans);

/*
 * How long a caller waits for the worker before it passes the job through:
 * the configuration's decide_timeout, bounded by cq_set_timeout_ms to
 * CQ_MIN..CQ_MAX_TIMEOUT_MS (pkg/config validates the same range).
 */
#define CQ_DEFAULT_TIMEOUT_MS 500
#define CQ_MIN_TIMEOUT_MS 1
#define CQ_MAX_TIMEOUT_MS 10000
extern int cq_timeout_ms;
void cq_set_timeout_ms(int ms);
int cq_get_timeout_ms(void);

/*
 * The untagged pass window (queue.c): for ms milliseconds from now (0: shut),
 * new untagged submissions are answered "unchanged" without the worker.
 */
void cq_set_pass_ms(int64_t ms);
int cq_pass_open(void);
int cq_mentions(const char *s, const char *word);
int cq_colon_word(const char *s);

#pragma GCC visibility pop

#endif /* COSCHEML_QUEUE_H */
