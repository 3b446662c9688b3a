/*
 * queue.h: the hand-off between slurmctld's threads and the library's Go
 * worker (queue.c). A thread that calls coscheml_decide never enters Go: it
 * copies the job into a request, queues it, wakes the worker through an
 * eventfd (read by a goroutine through Go's netpoller) and waits on a
 * condition variable, at most cq_timeout_ms. Why: a C thread that calls into
 * Go leaves its P in the syscall state when it returns, and Go's sysmon then
 * polls every 20 us or more until it takes the P back 10 ms later (about
 * 180 us of CPU per call; docs/performance-slurm.md, issue 13).
 */
#ifndef COSCHEML_QUEUE_H
#define COSCHEML_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "coscheml_abi.h"

/* A request's life; every change happens under the queue's mutex. */
enum {
	CQ_QUEUED = 0,    /* in the queue; the waiter may take it back */
	CQ_TAKEN = 1,     /* the worker decides; it owns job and answer */
	CQ_DONE = 2,      /* answered; the waiter takes the answer and frees it */
	CQ_ABANDONED = 3, /* the waiter gave up: the worker frees it when done */
};

struct cq_req {
	struct cq_req *next;
	int state;
	int rc;
	pthread_cond_t cond;
	/* NULL when the caller passed no job (the worker says so in the log). */
	struct coscheml_job *jobp;
	struct coscheml_job job; /* the caller's job with its strings copied */
	struct coscheml_answer ans;
};

/* The worker side, called from Go (main.go, worker.go). */
int cq_start(int fd);
struct cq_req *cq_next(struct cq_req *done, int rc, int *stop);
void cq_stop(void);

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

#endif /* COSCHEML_QUEUE_H */
