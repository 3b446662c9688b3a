/*
 * queue.c: coscheml_decide as slurmctld's threads call it, in C, and the queue
 * that hands each job to the library's Go worker (queue.h says why).
 *
 * Ownership: a request is calloc'ed by the caller and freed by whoever sees it
 * last. Done: the caller moves the answer's strings into its own answer and
 * frees the request. Timed out while queued: the caller unlinks and frees it.
 * Timed out while the worker decides: the caller marks it abandoned and
 * returns; the worker frees it, answer strings included, when it is done, so a
 * late answer is never written into the caller's (gone) struct.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "queue.h"

/*
 * A decision takes tens of microseconds; a garbage collection or a loaded
 * machine adds milliseconds. Past this the job passes through unchanged
 * rather than hold slurmctld (which holds its job lock meanwhile). The
 * configuration's decide_timeout sets it (cq_set_timeout_ms, from the worker);
 * callers read it without the lock, so both sides access it atomically.
 */
int cq_timeout_ms = CQ_DEFAULT_TIMEOUT_MS;

int cq_get_timeout_ms(void)
{
	return __atomic_load_n(&cq_timeout_ms, __ATOMIC_RELAXED);
}

void cq_set_timeout_ms(int ms)
{
	if (ms < CQ_MIN_TIMEOUT_MS)
		ms = CQ_MIN_TIMEOUT_MS;
	if (ms > CQ_MAX_TIMEOUT_MS)
		ms = CQ_MAX_TIMEOUT_MS;
	__atomic_store_n(&cq_timeout_ms, ms, __ATOMIC_RELAXED);
}

/* Bounds each copied string as the Go side bounds what it reads (maxInput). */
#define CQ_MAX_INPUT (1 << 20)

/*
 * The untagged pass window (pkg/submit/passwindow.go): until cq_pass_until
 * (CLOCK_MONOTONIC nanoseconds; 0: shut), the engine answers "unchanged",
 * with nothing to log, every new submission whose comment does not contain
 * "coscheml" in any case and whose GPU requests do not contain "shard". Such
 * a job is answered here without waking the worker: most jobs of a site are
 * untagged, and each wake-up of Go costs slurmctld far more than the call.
 * Go opens, extends and shuts the window (cq_set_pass_ms); any doubt here
 * means the normal path, which answers the same or better.
 */
static int64_t cq_pass_until;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cq_set_pass_ms(int64_t ms)
{
	int64_t until = 0;

	if (ms > 0)
		until = mono_ns() + ms * 1000000;
	__atomic_store_n(&cq_pass_until, until, __ATOMIC_RELEASE);
}

/* cq_pass_open: the window is open now (for tests). */
int cq_pass_open(void)
{
	int64_t until = __atomic_load_n(&cq_pass_until, __ATOMIC_ACQUIRE);

	return until && mono_ns() < until;
}

/*
 * cq_mentions: s (read as the Go side reads it, at most CQ_MAX_INPUT bytes)
 * contains word in any ASCII letter case; word is lower case ASCII. Go's
 * test for "coscheml" (strings.EqualFold on 8-byte windows) can only match 8
 * ASCII bytes, so this finds exactly what it finds.
 */
int cq_mentions(const char *s, const char *word)
{
	size_t n, w = strlen(word);

	if (!s)
		return 0;
	n = strnlen(s, CQ_MAX_INPUT);
	for (size_t i = 0; i + w <= n; i++) {
		size_t k = 0;

		while (k < w && (s[i + k] | 0x20) == word[k])
			k++;
		if (k == w)
			return 1;
	}
	return 0;
}

/* cq_passes: job is answered "unchanged" without Go (see cq_pass_until). */
static int cq_passes(const struct coscheml_job *job)
{
	int64_t until = __atomic_load_n(&cq_pass_until, __ATOMIC_ACQUIRE);

	if (!until || !job || job->size < sizeof(*job) || job->modify)
		return 0;
	if (cq_mentions(job->comment, "coscheml") ||
	    cq_mentions(job->tres_per_node, "shard") ||
	    cq_mentions(job->tres_per_job, "shard") ||
	    cq_mentions(job->tres_per_task, "shard") ||
	    cq_mentions(job->tres_per_socket, "shard"))
		return 0;
	return mono_ns() < until;
}

/* The Go decision, called directly only while no worker runs (main.go). */
extern int cq_decide_go(struct coscheml_job *job, struct coscheml_answer *ans);

static pthread_mutex_t cq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cq_req *cq_head, *cq_tail;
static int cq_fd = -1;      /* the worker's eventfd; -1: no worker */
static int cq_stopping;     /* cq_stop called: the worker is leaving */
static int cq_idle;         /* the worker waits on cq_fd: wake it */
static int cq_stuck;        /* abandoned requests the worker still holds */
static int cq_said_stuck;   /* a timeout was logged; no answer since */

static void cq_wake(void)
{
	uint64_t one = 1;

	/* Under cq_lock: the worker closes cq_fd only after clearing it. */
	if (cq_fd >= 0 && cq_idle) {
		cq_idle = 0;
		if (write(cq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			cq_idle = 1; /* not woken; the next request tries again */
	}
}

static void free_answer(struct coscheml_answer *a)
{
	free(a->tres_per_node);
	free(a->req_nodes);
	free(a->comment);
	free(a->user_msg);
	free(a->log);
	free(a->tres_per_job);
	free(a->tres_per_task);
}

static void free_req(struct cq_req *r)
{
	struct coscheml_job *j = &r->job;

	free((char *)j->comment);
	free((char *)j->tres_per_node);
	free((char *)j->partition);
	free((char *)j->req_nodes);
	free((char *)j->exc_nodes);
	free((char *)j->tres_per_job);
	free((char *)j->tres_per_task);
	free((char *)j->tres_per_socket);
	free((char *)j->mem_per_tres);
	free((char *)j->cpus_per_tres);
	free((char *)j->array_inx);
	free_answer(&r->ans);
	pthread_cond_destroy(&r->cond);
	free(r);
}

/* Copies *s (bounded); returns 0 when out of memory. */
static int copy_str(const char **s)
{
	if (!*s)
		return 1;
	*s = strndup(*s, CQ_MAX_INPUT);
	return *s != NULL;
}

/* The caller's job, its strings copied: slurmctld frees its own on return. */
static int copy_job(struct cq_req *r, const struct coscheml_job *job)
{
	struct coscheml_job *j = &r->job;

	if (!job) {
		r->jobp = NULL;
		return 1;
	}
	r->jobp = j;
	if (job->size < sizeof(*j)) {
		/* Only size is read: the worker refuses the job and says why. */
		j->size = job->size;
		return 1;
	}
	*j = *job;
	j->size = sizeof(*j);
	int ok = 1;
	const char **strs[] = {&j->comment, &j->tres_per_node, &j->partition,
			       &j->req_nodes, &j->exc_nodes, &j->tres_per_job,
			       &j->tres_per_task, &j->tres_per_socket,
			       &j->mem_per_tres, &j->cpus_per_tres,
			       &j->array_inx};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (!ok) {
			*strs[i] = NULL; /* not copied: free_req skips it */
			continue;
		}
		ok = copy_str(strs[i]);
	}
	return ok;
}

static void unlink_req(struct cq_req *r)
{
	struct cq_req **p = &cq_head, *prev = NULL;

	while (*p && *p != r) {
		prev = *p;
		p = &(*p)->next;
	}
	if (!*p)
		return;
	*p = r->next;
	if (cq_tail == r)
		cq_tail = prev;
	r->next = NULL;
}

static struct cq_req *pop(void)
{
	struct cq_req *r = cq_head;

	if (r) {
		cq_head = r->next;
		if (!cq_head)
			cq_tail = NULL;
		r->next = NULL;
	}
	return r;
}

static void deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * A timed-out caller says so in slurmctld's log, once per episode (until a
 * request is answered again); stuck: the worker still holds its request.
 */
static void timed_out(struct coscheml_answer *ans, int stuck, int ms)
{
	char msg[256];
	int first;

	pthread_mutex_lock(&cq_lock);
	first = !cq_said_stuck;
	cq_said_stuck = 1;
	pthread_mutex_unlock(&cq_lock);
	if (!first)
		return;
	snprintf(msg, sizeof(msg),
		 "coscheml: no decision within %d ms, job left unchanged%s",
		 ms,
		 stuck ? "; jobs pass through unchanged until the decision in progress ends" : "");
	ans->log = strdup(msg);
}

int coscheml_decide(const struct coscheml_job *job,
		    struct coscheml_answer *ans)
{
	struct cq_req *r;
	pthread_condattr_t ca;
	struct timespec until;
	int rc, ms = __atomic_load_n(&cq_timeout_ms, __ATOMIC_RELAXED);

	/* Written only when the caller's struct is as large as ours (see abi.h). */
	if (!ans || ans->size < sizeof(*ans))
		return COSCHEML_UNCHANGED;
	uint32_t ans_size = ans->size;
	ans->tres_per_node = ans->req_nodes = ans->comment = NULL;
	ans->user_msg = ans->log = ans->tres_per_job = ans->tres_per_task = NULL;
	ans->begin_time = 0;
	ans->replace = 0;

	pthread_mutex_lock(&cq_lock);
	int running = cq_fd >= 0 && !cq_stopping, stuck = cq_stuck;
	pthread_mutex_unlock(&cq_lock);
	if (!running) {
		/*
		 * No worker (before init, after fini, or it failed to start): Go
		 * decides on this thread, as before the queue existed (it removes
		 * user-written coscheml-id tokens even without an engine).
		 */
		return cq_decide_go((struct coscheml_job *)job, ans);
	}
	if (stuck || cq_passes(job))
		return COSCHEML_UNCHANGED; /* stuck: logged when the episode began */

	r = calloc(1, sizeof(*r));
	if (!r)
		return COSCHEML_UNCHANGED;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&r->cond, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		free(r);
		return COSCHEML_UNCHANGED;
	}
	pthread_condattr_destroy(&ca);
	r->ans.size = sizeof(r->ans);
	if (!copy_job(r, job)) {
		free_req(r);
		return COSCHEML_UNCHANGED;
	}
	deadline(&until, ms);

	pthread_mutex_lock(&cq_lock);
	if (cq_fd < 0 || cq_stopping) {
		pthread_mutex_unlock(&cq_lock);
		free_req(r);
		return COSCHEML_UNCHANGED; /* fini began meanwhile */
	}
	r->state = CQ_QUEUED;
	if (cq_tail)
		cq_tail->next = r;
	else
		cq_head = r;
	cq_tail = r;
	cq_wake();
	while (r->state == CQ_QUEUED || r->state == CQ_TAKEN) {
		if (pthread_cond_timedwait(&r->cond, &cq_lock, &until) ==
		    ETIMEDOUT)
			break;
	}
	switch (r->state) {
	case CQ_DONE:
		pthread_mutex_unlock(&cq_lock);
		*ans = r->ans;
		ans->size = ans_size;
		memset(&r->ans, 0, sizeof(r->ans)); /* moved, not freed */
		rc = r->rc;
		free_req(r);
		return rc;
	case CQ_QUEUED: /* timed out before the worker took it */
		unlink_req(r);
		pthread_mutex_unlock(&cq_lock);
		free_req(r);
		timed_out(ans, 0, ms);
		return COSCHEML_UNCHANGED;
	default: /* CQ_TAKEN: the worker frees it when done */
		r->state = CQ_ABANDONED;
		cq_stuck++;
		pthread_mutex_unlock(&cq_lock);
		timed_out(ans, 1, ms);
		return COSCHEML_UNCHANGED;
	}
}

/*
 * cq_start makes fd (a non-blocking eventfd the worker reads) the wake-up of
 * a new worker; -1 when one runs already.
 */
int cq_start(int fd)
{
	int ok;

	pthread_mutex_lock(&cq_lock);
	ok = cq_fd < 0;
	if (ok) {
		cq_fd = fd;
		cq_stopping = 0;
		cq_idle = 0;
	}
	pthread_mutex_unlock(&cq_lock);
	return ok ? 0 : -1;
}

/*
 * cq_next hands back the worker's last request (done, answered rc; NULL for
 * none) and returns the next one, or NULL when the queue is empty (the worker
 * then waits on its eventfd) or the worker must stop (*stop set; the eventfd
 * is no longer used by anyone and the worker closes it).
 */
struct cq_req *cq_next(struct cq_req *done, int rc, int *stop)
{
	struct cq_req *r = NULL;
	struct cq_req *late = NULL;

	*stop = 0;
	pthread_mutex_lock(&cq_lock);
	if (done) {
		if (done->state == CQ_ABANDONED) {
			late = done;
			cq_stuck--;
		} else {
			cq_said_stuck = 0;
			done->rc = rc;
			done->state = CQ_DONE;
			pthread_cond_signal(&done->cond);
		}
	}
	if (cq_stopping) {
		*stop = 1;
		cq_fd = -1;
	} else {
		r = pop();
		if (r)
			r->state = CQ_TAKEN;
		else
			cq_idle = 1;
	}
	pthread_mutex_unlock(&cq_lock);
	if (late)
		free_req(late);
	return r;
}

/*
 * cq_stop (coscheml_fini) answers every queued job "unchanged" and tells the
 * worker to leave once the decision in progress, if any, is answered.
 */
void cq_stop(void)
{
	struct cq_req *r;

	cq_set_pass_ms(0); /* the next engine opens it again */
	pthread_mutex_lock(&cq_lock);
	if (cq_fd < 0) {
		pthread_mutex_unlock(&cq_lock);
		return;
	}
	cq_stopping = 1;
	while ((r = pop())) {
		/* Answered "unchanged" (its answer is empty): its waiter frees it. */
		r->rc = COSCHEML_UNCHANGED;
		r->state = CQ_DONE;
		pthread_cond_signal(&r->cond);
	}
	cq_idle = 1;
	cq_wake();
	pthread_mutex_unlock(&cq_lock);
}
