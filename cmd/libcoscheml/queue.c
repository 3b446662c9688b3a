/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue.c: coscheml_decide as slurmctld's threads call it, in C, and the queue
 * that hands each job to the library's Go worker (queue.h says why).
 *
 * Ownership (queue.h lists the states): a request is malloc'ed by the caller,
 * one block with the job's strings, and freed by whoever sees it last. Done:
 * the caller copies the answer's strings into its own answer and frees the
 * request. Timed out (queued or while the worker decides): the caller marks it
 * abandoned and returns; the worker frees it when it meets it, so a late
 * answer is never written into the caller's (gone) struct. Cancelled by
 * cq_stop: the caller and the worker both let go of it, the last one frees it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

static int cq_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/*
 * cq_colon_word: s has a word of 6 to 10 bytes ending in ':' ("cosceml:",
 * "coschemel:"): it may be a misspelt directive, which Go answers with a
 * warning (pkg/comment's nearMiss, whose prefixes are "coscheml" +- 2 edits).
 * A superset of what Go warns about, cheap enough for every untagged job;
 * "http:" and "run 3:" stay here.
 */
int cq_colon_word(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, CQ_MAX_INPUT);
	for (size_t i = 0; i < n; i++) {
		size_t k = i;

		if (s[i] != ':')
			continue;
		while (k > 0 && !cq_space(s[k - 1]) && i - k <= 10)
			k--;
		if (i - k >= 6 && i - k <= 10 && (k == 0 || cq_space(s[k - 1])))
			return 1;
	}
	return 0;
}

/* cq_passes: job is answered "unchanged" without Go (see cq_pass_until). */
static int cq_passes(const struct coscheml_job *job)
{
	int64_t until = __atomic_load_n(&cq_pass_until, __ATOMIC_ACQUIRE);

	if (!until || !job || job->size < COSCHEML_JOB_SIZE_4_0 || job->modify)
		return 0;
	if (cq_mentions(job->comment, "coscheml") ||
	    cq_colon_word(job->comment) ||
	    cq_mentions(job->tres_per_node, "shard") ||
	    cq_mentions(job->tres_per_job, "shard") ||
	    cq_mentions(job->tres_per_task, "shard") ||
	    cq_mentions(job->tres_per_socket, "shard"))
		return 0;
	return mono_ns() < until;
}

/* The Go decision, called directly only while no worker runs (main.go). */
extern int cq_decide_go(struct coscheml_job *job, struct coscheml_answer *ans);

/*
 * Callers take cq_lock to push, to leave the list of waiting requests and to
 * read cq_fd; the worker never takes it (it uses the atomics of queue.h).
 */
static pthread_mutex_t cq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cq_req *cq_live;  /* waiting requests (cq_stop cancels them) */
static int cq_fd = -1;          /* the worker's eventfd; -1: no worker */
static int cq_stuck; /* abandoned requests the worker decides (atomic) */
struct cq_req *cq_head;
uint32_t cq_idle;
uint32_t cq_stopping;
uint32_t cq_said_stuck;

/* Under cq_lock: the worker clears cq_fd (cq_exit) before closing it. */
static void cq_wake(int force)
{
	uint64_t one = 1;

	if (cq_fd < 0)
		return;
	if (__atomic_exchange_n(&cq_idle, 0, __ATOMIC_SEQ_CST) || force) {
		if (write(cq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			__atomic_store_n(&cq_idle, 1, __ATOMIC_SEQ_CST);
	}
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Waits while *word is val, until the CLOCK_MONOTONIC deadline; 0: timed out. */
static int futex_wait_until(uint32_t *word, uint32_t val,
			    const struct timespec *until)
{
	if (syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, val, until,
		    NULL, FUTEX_BITSET_MATCH_ANY) < 0 &&
	    errno == ETIMEDOUT)
		return 0;
	return 1;
}

/*
 * clear_answer: every field of ans that ans->size holds is NULL or zero,
 * decision_level info.
 */
static void clear_answer(struct coscheml_answer *ans)
{
#define CQ_ANS_CLEAR_(kind, name, ...)                                         \
	if (COSCHEML_HAS(ans, struct coscheml_answer, name)) {                 \
		COSCHEML_IF_STR(kind, ans->name = NULL;)                       \
		COSCHEML_IF_NUM(kind, ans->name = 0;)                          \
	}
	COSCHEML_ANSWER_FIELDS(CQ_ANS_CLEAR_)
#undef CQ_ANS_CLEAR_
	ans->decision_level = COSCHEML_LOG_INFO;
}

/* dup_answer: a malloc'ed copy of r's answer string i (NULL: no memory). */
static char *dup_answer(const char *base, const struct cq_req *r, int i)
{
	int32_t n = r->ans_len[i];
	char *s = malloc((size_t)n + 1);

	if (s) {
		memcpy(s, base + r->ans_off[i], (size_t)n);
		s[n] = '\0';
	}
	return s;
}

static void free_req(struct cq_req *r)
{
	free(r->ans_big);
	free(r);
}

/* An allocation of the worker's (an answer larger than ans_buf); NULL: none. */
char *cq_alloc(uint32_t n)
{
	return malloc(n);
}

/*
 * The caller's job in one allocation with its strings (slurmctld frees its
 * own on return); NULL when out of memory. A caller's struct shorter than
 * ours (a shim of an earlier build of this interface) is read up to its size
 * only: the fields it lacks are zero and NULL in the copy.
 */
static struct cq_req *new_req(const struct coscheml_job *job)
{
	struct cq_req *r;
	size_t lens[CQ_NJOBSTR] = {0}, total = 0;
	struct coscheml_job j;
	char *p;
	int i;

	memset(&j, 0, sizeof(j));
	if (job && job->size >= COSCHEML_JOB_SIZE_4_0) {
		memcpy(&j, job, job->size < sizeof(j) ? job->size : sizeof(j));
		i = 0;
#define CQ_JOB_LEN_(kind, name, ...)                                           \
	COSCHEML_IF_STR(kind, lens[i] = j.name ? strnlen(j.name, CQ_MAX_INPUT) : 0; \
			total += j.name ? lens[i] + 1 : 0; i++;)
		COSCHEML_JOB_FIELDS(CQ_JOB_LEN_)
#undef CQ_JOB_LEN_
	}
	r = malloc(sizeof(*r) + total);
	if (!r)
		return NULL;
	memset(r, 0, offsetof(struct cq_req, ans_buf));
	if (!job) {
		r->jobp = NULL;
		return r;
	}
	r->jobp = &r->job;
	if (job->size < COSCHEML_JOB_SIZE_4_0) {
		/* Only size is read: the worker refuses the job and says why. */
		r->job.size = job->size;
		return r;
	}
	r->job = j;
	r->job.size = sizeof(j);
	/* The copy's strings point into the same allocation, after r. */
	p = (char *)(r + 1);
	i = 0;
#define CQ_JOB_COPY_(kind, name, ...)                                          \
	COSCHEML_IF_STR(kind, if (j.name) {                                    \
		memcpy(p, j.name, lens[i]);                                    \
		p[lens[i]] = '\0';                                             \
		r->job.name = p;                                               \
		p += lens[i] + 1;                                              \
	} i++;)
	COSCHEML_JOB_FIELDS(CQ_JOB_COPY_)
#undef CQ_JOB_COPY_
	return r;
}

/* Under cq_lock. */
static void live_add(struct cq_req *r)
{
	r->live_prev = NULL;
	r->live_next = cq_live;
	if (cq_live)
		cq_live->live_prev = r;
	cq_live = r;
}

/* Under cq_lock. */
static void live_remove(struct cq_req *r)
{
	if (r->live_prev)
		r->live_prev->live_next = r->live_next;
	else if (cq_live == r)
		cq_live = r->live_next;
	if (r->live_next)
		r->live_next->live_prev = r->live_prev;
	r->live_prev = r->live_next = NULL;
}

/* Under cq_lock: callers push one at a time; the worker swaps the head out. */
static void push(struct cq_req *r)
{
	struct cq_req *old = __atomic_load_n(&cq_head, __ATOMIC_RELAXED);

	do {
		r->next = old;
	} while (!__atomic_compare_exchange_n(&cq_head, &old, r, 1,
					      __ATOMIC_SEQ_CST,
					      __ATOMIC_RELAXED));
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

	if (__atomic_exchange_n(&cq_said_stuck, 1, __ATOMIC_RELAXED))
		return;
	snprintf(msg, sizeof(msg),
		 "coscheml: no decision within %d ms, job left unchanged%s",
		 ms,
		 stuck ? "; jobs pass through unchanged until the decision in progress ends" : "");
	ans->log = strdup(msg);
}

/*
 * cq_move_answer copies a DONE request's answer into ans (malloc'ed strings
 * that the shim frees; only the fields ans->size holds) and returns its code;
 * out of memory: nothing, and "unchanged". r stays the caller's to free.
 */
int cq_move_answer(struct cq_req *r, struct coscheml_answer *ans)
{
	const char *base = r->ans_big ? r->ans_big : r->ans_buf;
	char *s;

#define CQ_ANS_MOVE_(kind, name, ...)                                          \
	if (COSCHEML_HAS(ans, struct coscheml_answer, name)) {                 \
		COSCHEML_IF_STR(kind, s = NULL;                                \
			if (r->ans_len[CQ_ANS_##name] >= 0) {                  \
				s = dup_answer(base, r, CQ_ANS_##name);        \
				if (!s)                                        \
					goto oom;                              \
			} ans->name = s;)                                      \
		COSCHEML_IF_NUM(kind, ans->name = r->num.name;)                \
	}
	COSCHEML_ANSWER_FIELDS(CQ_ANS_MOVE_)
#undef CQ_ANS_MOVE_
	return r->rc;
oom:
	coscheml_answer_free(ans);
	clear_answer(ans);
	return COSCHEML_UNCHANGED;
}

/* Lets go of a cancelled request; the last of caller and worker frees it. */
static void release_cancelled(struct cq_req *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free_req(r);
}

int coscheml_decide(const struct coscheml_job *job,
		    struct coscheml_answer *ans)
{
	struct cq_req *r;
	struct timespec until;
	uint32_t s;
	int rc, ms = __atomic_load_n(&cq_timeout_ms, __ATOMIC_RELAXED);

	/* Written only up to the caller's size, at least interface 4's first. */
	if (!ans || ans->size < COSCHEML_ANSWER_SIZE_4_0)
		return COSCHEML_UNCHANGED;
	clear_answer(ans);

	pthread_mutex_lock(&cq_lock);
	int running = cq_fd >= 0 &&
		      !__atomic_load_n(&cq_stopping, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cq_lock);
	int stuck = __atomic_load_n(&cq_stuck, __ATOMIC_SEQ_CST) > 0;
	if (!running) {
		/*
		 * No worker (before init, after fini, or it failed to start): Go
		 * decides on this thread, without the queue (it removes
		 * user-written coscheml-id tokens even without an engine).
		 */
		return cq_decide_go((struct coscheml_job *)job, ans);
	}
	if (stuck || cq_passes(job))
		return COSCHEML_UNCHANGED; /* stuck: logged when the episode began */

	r = new_req(job);
	if (!r)
		return COSCHEML_UNCHANGED;
	deadline(&until, ms);

	pthread_mutex_lock(&cq_lock);
	if (cq_fd < 0 || __atomic_load_n(&cq_stopping, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&cq_lock);
		free_req(r);
		return COSCHEML_UNCHANGED; /* fini began meanwhile */
	}
	r->state = CQ_QUEUED;
	live_add(r);
	push(r);
	cq_wake(0);
	pthread_mutex_unlock(&cq_lock);

	/* The worker moves state and wakes this word; spurious wakes re-check. */
	for (;;) {
		s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
		if ((s != CQ_QUEUED && s != CQ_TAKEN) ||
		    !futex_wait_until(&r->state, s, &until))
			break;
	}

	/*
	 * Leave the waiting list first (cq_stop cancels only listed requests,
	 * under the lock): from here on only the worker races with us.
	 */
	pthread_mutex_lock(&cq_lock);
	s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
	if (s == CQ_CANCELLED) {
		pthread_mutex_unlock(&cq_lock); /* cq_stop unlisted it */
		release_cancelled(r);
		return COSCHEML_UNCHANGED;
	}
	live_remove(r);
	pthread_mutex_unlock(&cq_lock);

	for (;;) {
		s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
		if (s == CQ_DONE) {
			if (__atomic_load_n(&cq_said_stuck, __ATOMIC_RELAXED))
				__atomic_store_n(&cq_said_stuck, 0, __ATOMIC_RELAXED);
			rc = cq_move_answer(r, ans);
			free_req(r);
			return rc;
		}
		/*
		 * Timed out, queued or taken: the worker frees it (cq_drop).
		 * Counted as stuck before the worker can see it abandoned.
		 */
		uint32_t was = s;

		if (was == CQ_TAKEN)
			__atomic_add_fetch(&cq_stuck, 1, __ATOMIC_SEQ_CST);
		if (__atomic_compare_exchange_n(&r->state, &s, CQ_ABANDONED, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			timed_out(ans, was == CQ_TAKEN, ms);
			return COSCHEML_UNCHANGED;
		}
		if (was == CQ_TAKEN)
			__atomic_sub_fetch(&cq_stuck, 1, __ATOMIC_SEQ_CST);
		/* The worker took it or answered meanwhile: look again. */
	}
}

/*
 * cq_start makes fd (a non-blocking eventfd the worker reads) the wake-up of
 * a new worker; -1 when one runs already (or has not left yet).
 */
int cq_start(int fd)
{
	int ok;

	pthread_mutex_lock(&cq_lock);
	ok = cq_fd < 0;
	if (ok) {
		cq_fd = fd;
		__atomic_store_n(&cq_stopping, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&cq_idle, 0, __ATOMIC_SEQ_CST);
	}
	pthread_mutex_unlock(&cq_lock);
	return ok ? 0 : -1;
}

/*
 * cq_drop: the worker lets go of a request it cannot answer: abandoned by its
 * caller (taken: while the worker decided it; the stuck episode may end) or
 * cancelled by cq_stop.
 */
void cq_drop(struct cq_req *r, int taken)
{
	uint32_t s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);

	if (s == CQ_CANCELLED) {
		release_cancelled(r);
		return;
	}
	if (taken)
		__atomic_sub_fetch(&cq_stuck, 1, __ATOMIC_SEQ_CST);
	free_req(r);
}

/*
 * cq_exit: the worker leaves (after cq_stop, its stack drained); callers
 * decide on their own threads from now on, and no one writes its eventfd,
 * which it then closes.
 */
void cq_exit(void)
{
	pthread_mutex_lock(&cq_lock);
	cq_fd = -1;
	pthread_mutex_unlock(&cq_lock);
}

/*
 * cq_stop (coscheml_fini) answers every waiting queued job "unchanged" at
 * once and tells the worker to leave once the decision in progress, if any,
 * is answered.
 */
void cq_stop(void)
{
	struct cq_req *r, *next;

	cq_set_pass_ms(0); /* the next engine opens it again */
	pthread_mutex_lock(&cq_lock);
	if (cq_fd < 0) {
		pthread_mutex_unlock(&cq_lock);
		return;
	}
	__atomic_store_n(&cq_stopping, 1, __ATOMIC_SEQ_CST);
	for (r = cq_live; r; r = next) {
		uint32_t s = CQ_QUEUED;

		next = r->live_next;
		/* Held by its caller and by the worker's stack from now on. */
		__atomic_store_n(&r->refs, 2, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(&r->state, &s, CQ_CANCELLED, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			live_remove(r);
			futex_wake(&r->state);
		}
	}
	cq_wake(1);
	pthread_mutex_unlock(&cq_lock);
}
