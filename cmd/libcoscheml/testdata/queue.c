/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue: drives ../queue.c (coscheml_decide's hand-off to the worker) with a
 * worker written in C after worker.go's protocol (the same atomics on the
 * same words), so that its timing can be forced: several threads calling at
 * once, a decision slower than the timeout (the caller passes the job
 * through; the late answer is freed by the worker), a caller leaving while
 * the worker writes its answer, an answer larger than the request's buffer, a
 * call timing out in the queue, cq_stop with calls queued and one in
 * progress, cq_stop with abandoned requests held, a restart. Built with
 * AddressSanitizer (leaks included: no Go here) and ThreadSanitizer by
 * TestCQueue. The worker echoes the comment as tres_per_node; a comment
 * starting "slow" makes it sleep 150 ms first, "halfway" writes its answer
 * over 120 ms, "big" answers a 12 KiB message.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>

#include "../queue.c"

static int direct_calls;
static int worker_calls;

/* Stands in for the Go decision (main.go) while no worker runs. */
int cq_decide_go(struct coscheml_job *job, struct coscheml_answer *ans)
{
	(void)job;
	__atomic_add_fetch(&direct_calls, 1, __ATOMIC_SEQ_CST);
	ans->log = strdup("direct");
	return COSCHEML_UNCHANGED;
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * write_answer: worker.go's writeAnswer in C: the strings into the request's
 * buffer, or into one cq_alloc'ed block when they do not fit. pause_us > 0
 * sleeps between two strings (a caller timing out while the answer is being
 * written).
 */
static void write_answer(struct cq_req *r, int rc, const char *strs[CQ_NANS],
			 int pause_us)
{
	size_t total = 0, off = 0;
	char *buf = r->ans_buf;

	for (int i = 0; i < CQ_NANS; i++) {
		r->ans_len[i] = -1;
		r->ans_off[i] = 0;
		if (strs[i] && *strs[i])
			total += strlen(strs[i]) + 1;
	}
	r->ans_big = NULL;
	if (total > CQ_ANS_BUF) {
		buf = r->ans_big = cq_alloc((uint32_t)total);
		if (!buf) {
			r->rc = COSCHEML_UNCHANGED;
			return;
		}
	}
	for (int i = 0; i < CQ_NANS; i++) {
		size_t n;

		if (!strs[i] || !*strs[i])
			continue;
		n = strlen(strs[i]);
		memcpy(buf + off, strs[i], n + 1);
		r->ans_off[i] = (int32_t)off;
		r->ans_len[i] = (int32_t)n;
		off += n + 1;
		if (pause_us)
			usleep(pause_us);
	}
	r->rc = rc;
}

/* take_all: worker.go's takeAll: the stack, oldest first, into v (n max). */
static int take_all(struct cq_req **v, int max)
{
	struct cq_req *r = __atomic_exchange_n(&cq_head, NULL, __ATOMIC_SEQ_CST);
	int n = 0;

	for (; r; r = r->next) {
		if (n == max) {
			printf("batch too large\n");
			exit(1);
		}
		v[n++] = r;
	}
	for (int i = 0; i < n / 2; i++) {
		struct cq_req *t = v[i];

		v[i] = v[n - 1 - i];
		v[n - 1 - i] = t;
	}
	return n;
}

/* serve: worker.go's serve, deciding as described at the top. */
static void serve(struct cq_req *r)
{
	uint32_t s = CQ_QUEUED;
	const char *strs[CQ_NANS] = {0};
	char msg[64], *big = NULL;
	int rc, pause = 0;

	if (!__atomic_compare_exchange_n(&r->state, &s, CQ_TAKEN, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		cq_drop(r, 0);
		return;
	}
	if (!r->jobp) {
		strs[CQ_ANS_log] = "worker: no job";
		rc = COSCHEML_UNCHANGED;
	} else if (r->jobp->size < sizeof(struct coscheml_job)) {
		/* queue.c hands the worker only whole jobs or refused ones. */
		snprintf(msg, sizeof(msg), "worker: job of %u bytes",
			 r->jobp->size);
		strs[CQ_ANS_log] = msg;
		rc = COSCHEML_UNCHANGED;
	} else {
		const char *c = r->jobp->comment ? r->jobp->comment : "";

		__atomic_add_fetch(&worker_calls, 1, __ATOMIC_SEQ_CST);
		if (strncmp(c, "slow", 4) == 0)
			usleep(150000);
		strs[CQ_ANS_tres_per_node] = c;
		strs[CQ_ANS_log] = "decided";
		if (strncmp(c, "halfway", 7) == 0) {
			/* Written over 2 x 60 ms: the caller leaves meanwhile. */
			strs[CQ_ANS_comment] = "late";
			pause = 60000;
		}
		if (strncmp(c, "big", 3) == 0) {
			/* Larger than ans_buf: the cq_alloc'ed block. */
			big = malloc(3 * CQ_ANS_BUF);
			memset(big, 'b', 3 * CQ_ANS_BUF - 1);
			big[3 * CQ_ANS_BUF - 1] = '\0';
			strs[CQ_ANS_user_msg] = big;
		}
		rc = COSCHEML_REWRITE;
	}
	write_answer(r, rc, strs, pause);
	free(big);
	s = CQ_TAKEN;
	if (!__atomic_compare_exchange_n(&r->state, &s, CQ_DONE, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		cq_drop(r, 1);
		return;
	}
	futex_wake(&r->state); /* on a private futex: the address only */
}

/* The worker loop of worker.go: take, serve, sleep on the eventfd when idle. */
static void *worker(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct cq_req *v[4096];

	for (;;) {
		int n;

		if (__atomic_load_n(&cq_stopping, __ATOMIC_SEQ_CST)) {
			n = take_all(v, 4096);
			for (int i = 0; i < n; i++)
				serve(v[i]); /* all cancelled or abandoned */
			cq_exit();
			close(fd);
			return NULL;
		}
		n = take_all(v, 4096);
		if (!n) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			uint64_t cnt;

			__atomic_store_n(&cq_idle, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&cq_head, __ATOMIC_SEQ_CST) ||
			    __atomic_load_n(&cq_stopping, __ATOMIC_SEQ_CST)) {
				__atomic_store_n(&cq_idle, 0, __ATOMIC_SEQ_CST);
				continue;
			}
			poll(&p, 1, -1);
			if (read(fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
				return NULL;
			continue;
		}
		for (int i = 0; i < n; i++)
			serve(v[i]);
	}
}

/* Waits (bounded) until the worker has begun more than n decisions. */
static void wait_taken(int n)
{
	for (int i = 0; i < 2000 &&
			__atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST) <= n;
	     i++)
		usleep(1000);
}

static pthread_t start(void)
{
	pthread_t t;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (fd < 0 || cq_start(fd) != 0 ||
	    pthread_create(&t, NULL, worker, (void *)(intptr_t)fd) != 0) {
		printf("start failed\n");
		exit(1);
	}
	return t;
}

struct call {
	char comment[64];
	int rc;
	int64_t ms;
	char *tres, *log;
};

/* One call as the shim makes it: the comment on the caller's stack. */
static void call(struct call *c)
{
	char comment[64];
	struct coscheml_job j = {0};
	struct coscheml_answer a = {0};
	int64_t t0 = ms_now();

	memcpy(comment, c->comment, sizeof(comment));
	j.size = sizeof(j);
	a.size = sizeof(a);
	j.comment = comment;
	j.tres_per_node = "gres:gpu:1";
	c->rc = coscheml_decide(&j, &a);
	memset(comment, 'x', sizeof(comment) - 1); /* gone, as slurmctld's are */
	c->ms = ms_now() - t0;
	c->tres = a.tres_per_node;
	c->log = a.log;
	a.tres_per_node = a.log = NULL;
	coscheml_answer_free(&a);
}

static void *call_thread(void *arg)
{
	call(arg);
	return NULL;
}

static void done(struct call *c)
{
	free(c->tres);
	free(c->log);
}

#define THREADS 8
#define PER_THREAD 500

static void *many(void *arg)
{
	int id = (int)(intptr_t)arg, wrong = 0;

	for (int i = 0; i < PER_THREAD; i++) {
		struct call c = {0};

		snprintf(c.comment, sizeof(c.comment), "t%d-%d", id, i);
		call(&c);
		if (c.rc != COSCHEML_REWRITE || !c.tres ||
		    strcmp(c.tres, c.comment) != 0)
			wrong++;
		done(&c);
	}
	return (void *)(intptr_t)wrong;
}

static const char *s(const char *v)
{
	return v ? v : "NULL";
}

int main(void)
{
	struct call c = {0};
	pthread_t w, th[THREADS];

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* No worker yet: decided on the calling thread. */
	strcpy(c.comment, "first");
	call(&c);
	printf("noworker rc=%d log=%s direct=%d\n", c.rc, s(c.log), direct_calls);
	done(&c);

	w = start();
	int wrong = 0;
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, many, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++) {
		void *v;

		pthread_join(th[i], &v);
		wrong += (int)(intptr_t)v;
	}
	printf("concurrent calls=%d wrong=%d direct=%d\n", THREADS * PER_THREAD,
	       wrong, direct_calls);
	/*
	 * The untagged pass window: while open, a new submission without
	 * "coscheml" in its comment and "shard" in its GPU requests is answered
	 * "unchanged" here; everything else still reaches the worker.
	 */
	struct {
		const char *name, *comment, *tpn, *tpj, *tpt, *tps;
		uint32_t modify;
	} pj[] = {
		{"plain", "nightly", "gres:gpu:1", NULL, NULL, NULL, 0},
		{"nocomment", NULL, NULL, "gres/gpu:1", NULL, NULL, 0},
		{"tagged", "x coscheml:app=a", "gres:gpu:1", NULL, NULL, NULL, 0},
		{"tagcase", "CoScheML:app=a", "gres:gpu:1", NULL, NULL, NULL, 0},
		{"token", "coscheml-id=a-1:2", NULL, NULL, NULL, NULL, 0},
		{"shard", "", "gres:shard:2", NULL, NULL, NULL, 0},
		{"shardjob", "", NULL, "gres/SHARD:1", NULL, NULL, 0},
		{"shardtask", "", NULL, NULL, "gres/shard:1", NULL, 0},
		{"shardsocket", "", NULL, NULL, NULL, "gres/shard:1", 0},
		{"modify", "nightly", "gres:gpu:1", NULL, NULL, NULL, 1},
		/* A misspelt directive goes to Go, which warns the user. */
		{"nearmiss", "run cosceml:app=a", "gres:gpu:1", NULL, NULL, NULL, 0},
		{"nearmiss10", "coscheemmll:app=a", "gres:gpu:1", NULL, NULL, NULL, 0},
		{"url", "see http://x ticket 4: y", "gres:gpu:1", NULL, NULL, NULL, 0},
	};
	cq_set_pass_ms(60000);
	for (size_t i = 0; i < sizeof(pj) / sizeof(pj[0]); i++) {
		struct coscheml_job j = {.size = sizeof(j), .modify = pj[i].modify,
			.comment = pj[i].comment, .tres_per_node = pj[i].tpn,
			.tres_per_job = pj[i].tpj, .tres_per_task = pj[i].tpt,
			.tres_per_socket = pj[i].tps};
		struct coscheml_answer pa = {.size = sizeof(pa)};
		int before = __atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST);
		int prc = coscheml_decide(&j, &pa);

		printf("pass %s rc=%d worker=%d log=%s\n", pj[i].name, prc,
		       __atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST) - before,
		       s(pa.log));
		coscheml_answer_free(&pa);
	}
	/* A window ends by itself, and Go can shut it. */
	cq_set_pass_ms(20);
	usleep(40000);
	strcpy(c.comment, "expired");
	call(&c);
	printf("pass expired rc=%d\n", c.rc);
	done(&c);
	cq_set_pass_ms(60000);
	cq_set_pass_ms(0);
	strcpy(c.comment, "shut");
	call(&c);
	printf("pass shut rc=%d\n", c.rc);
	done(&c);

	/* decide_timeout is bounded whatever the configuration says. */
	cq_set_timeout_ms(0);
	int lo = __atomic_load_n(&cq_timeout_ms, __ATOMIC_RELAXED);
	cq_set_timeout_ms(1 << 30);
	printf("timeoutbounds lo=%d hi=%d\n", lo,
	       __atomic_load_n(&cq_timeout_ms, __ATOMIC_RELAXED));
	cq_set_timeout_ms(CQ_DEFAULT_TIMEOUT_MS);

	/* Size checks: a short answer is never written; a short job is refused. */
	struct coscheml_answer small = {.size = 8, .log = (char *)"keep"};
	printf("shortanswer rc=%d untouched=%d\n",
	       coscheml_decide(NULL, &small), small.log && !strcmp(small.log, "keep"));
	struct coscheml_answer a = {.size = sizeof(a)};
	struct coscheml_job shortjob = {.size = 8};
	int rc = coscheml_decide(&shortjob, &a);
	printf("shortjob rc=%d log=%s\n", rc, s(a.log));
	free(a.log);
	a.log = NULL;
	rc = coscheml_decide(NULL, &a);
	printf("nulljob rc=%d log=%s\n", rc, s(a.log));
	free(a.log);

	/*
	 * A shim of interface 4's first build: its job ends at
	 * COSCHEML_JOB_SIZE_4_0 (an allocation of exactly that size, so that
	 * AddressSanitizer sees a read past it); the fields appended since read
	 * as NULL and zero.
	 */
	struct coscheml_job *old = malloc(COSCHEML_JOB_SIZE_4_0);
	memset(old, 0, COSCHEML_JOB_SIZE_4_0);
	old->size = COSCHEML_JOB_SIZE_4_0;
	old->comment = "coscheml old-shim";
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	rc = coscheml_decide(old, &a);
	printf("oldjob rc=%d tres=%s log=%s\n", rc, s(a.tres_per_node), s(a.log));
	coscheml_answer_free(&a);
	free(old);

	/* A decision slower than the timeout: the caller passes the job. */
	cq_set_timeout_ms(50);
	strcpy(c.comment, "slow-1");
	call(&c);
	printf("timeout rc=%d tres=%s log=%s fast=%d\n", c.rc, s(c.tres),
	       s(c.log), c.ms < 140);
	done(&c);
	/* While the worker still holds it, jobs pass at once, unlogged. */
	strcpy(c.comment, "during");
	call(&c);
	printf("stuck rc=%d tres=%s log=%s fast=%d\n", c.rc, s(c.tres), s(c.log),
	       c.ms < 20);
	done(&c);
	usleep(200000);
	strcpy(c.comment, "after");
	call(&c);
	printf("recovered rc=%d tres=%s\n", c.rc, s(c.tres));
	done(&c);

	/* A call that times out in the queue behind a slow decision. */
	struct call slow = {.comment = "slow-2"}, queued = {.comment = "queued"};
	pthread_t ts, tq;
	int taken = __atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST);
	pthread_create(&ts, NULL, call_thread, &slow);
	wait_taken(taken); /* queued behind it, whatever the machine's load */
	pthread_create(&tq, NULL, call_thread, &queued);
	pthread_join(ts, NULL);
	pthread_join(tq, NULL);
	printf("queued-timeout rc=%d tres=%s slow rc=%d\n", queued.rc,
	       s(queued.tres), slow.rc);
	done(&slow);
	done(&queued);
	usleep(200000);

	/*
	 * The caller times out while the worker writes its answer: the worker
	 * finishes writing into the request, finds it abandoned and frees it
	 * (AddressSanitizer: no write after the caller left, no leak).
	 */
	strcpy(c.comment, "halfway-1");
	call(&c);
	printf("halfway rc=%d tres=%s fast=%d\n", c.rc, s(c.tres), c.ms < 140);
	done(&c);
	usleep(250000);
	strcpy(c.comment, "after-halfway");
	call(&c);
	printf("after-halfway rc=%d tres=%s\n", c.rc, s(c.tres));
	done(&c);

	/* An answer larger than the request's buffer. */
	cq_set_timeout_ms(5000);
	{
		struct coscheml_job j = {.size = sizeof(j), .comment = "big-1"};
		struct coscheml_answer ba = {.size = sizeof(ba)};
		int brc = coscheml_decide(&j, &ba);

		printf("big rc=%d tres=%s msglen=%zu\n", brc, s(ba.tres_per_node),
		       ba.user_msg ? strlen(ba.user_msg) : 0);
		coscheml_answer_free(&ba);
	}

	/* cq_stop: queued calls get "unchanged" at once, the one in progress
	 * its answer; then the worker leaves and calls are decided directly. */
	cq_set_timeout_ms(5000);
	struct call inflight = {.comment = "slow-3"}, q[3];
	pthread_t ti, tqs[3];
	taken = __atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST);
	pthread_create(&ti, NULL, call_thread, &inflight);
	wait_taken(taken);
	for (int i = 0; i < 3; i++) {
		memset(&q[i], 0, sizeof(q[i]));
		snprintf(q[i].comment, sizeof(q[i].comment), "q%d", i);
		pthread_create(&tqs[i], NULL, call_thread, &q[i]);
	}
	usleep(20000);
	cq_set_pass_ms(60000); /* cq_stop shuts it: "again" below reaches the worker */
	cq_stop();
	int unchanged = 0, quick = 0;
	for (int i = 0; i < 3; i++) {
		pthread_join(tqs[i], NULL);
		unchanged += q[i].rc == COSCHEML_UNCHANGED && !q[i].tres;
		quick += q[i].ms < 130;
		done(&q[i]);
	}
	pthread_join(ti, NULL);
	pthread_join(w, NULL);
	printf("stop queued=3 unchanged=%d quick=%d inflight rc=%d tres=%s\n",
	       unchanged, quick, inflight.rc, s(inflight.tres));
	done(&inflight);
	strcpy(c.comment, "afterstop");
	call(&c);
	printf("afterstop rc=%d log=%s direct=%d\n", c.rc, s(c.log), direct_calls);
	done(&c);

	w = start();
	strcpy(c.comment, "again");
	call(&c);
	printf("restart rc=%d tres=%s\n", c.rc, s(c.tres));
	done(&c);

	/*
	 * cq_stop while the worker still holds two abandoned requests: one it
	 * decides (its caller timed out), one behind it in the stack; it frees
	 * both before it leaves (leak check).
	 */
	cq_set_timeout_ms(50);
	struct call slow4 = {.comment = "slow-4"}, late = {.comment = "late"};
	taken = __atomic_load_n(&worker_calls, __ATOMIC_SEQ_CST);
	pthread_create(&ts, NULL, call_thread, &slow4);
	wait_taken(taken);
	pthread_create(&tq, NULL, call_thread, &late);
	pthread_join(ts, NULL);
	pthread_join(tq, NULL);
	cq_stop();
	pthread_join(w, NULL);
	printf("stopabandoned slow rc=%d late rc=%d\n", slow4.rc, late.rc);
	done(&slow4);
	done(&late);
	printf("end\n");
	return 0;
}
