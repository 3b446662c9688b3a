/*
 * queue: drives ../queue.c (coscheml_decide's hand-off to the worker) with a
 * worker written in C, so that its timing can be forced: several threads
 * calling at once, a decision slower than the timeout (the caller passes the
 * job through; the late answer is freed by the worker), a call timing out in
 * the queue, cq_stop with calls queued and one in progress, a restart. Built
 * with AddressSanitizer (leaks included: no Go here) and ThreadSanitizer by
 * TestCQueue. The worker echoes the comment as tres_per_node; a comment
 * starting "slow" makes it sleep 150 ms first.
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

static void *worker(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct cq_req *prev = NULL;
	int rc = 0;

	for (;;) {
		int stop;
		struct cq_req *r = cq_next(prev, rc, &stop);
		uint64_t n;

		prev = NULL;
		if (stop) {
			close(fd);
			return NULL;
		}
		if (!r) {
			struct pollfd p = {.fd = fd, .events = POLLIN};

			poll(&p, 1, -1);
			if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
				return NULL;
			continue;
		}
		if (!r->jobp) {
			r->ans.log = strdup("worker: no job");
			rc = COSCHEML_UNCHANGED;
		} else if (r->jobp->size < sizeof(struct coscheml_job)) {
			char msg[64];

			snprintf(msg, sizeof(msg), "worker: job of %u bytes",
				 r->jobp->size);
			r->ans.log = strdup(msg);
			rc = COSCHEML_UNCHANGED;
		} else {
			const char *c = r->jobp->comment ? r->jobp->comment : "";

			__atomic_add_fetch(&worker_calls, 1, __ATOMIC_SEQ_CST);

			if (strncmp(c, "slow", 4) == 0)
				usleep(150000);
			r->ans.tres_per_node = strdup(c);
			r->ans.log = strdup("decided");
			rc = COSCHEML_REWRITE;
		}
		prev = r;
	}
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
	free_answer(&a);
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
		free_answer(&pa);
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
	pthread_create(&ts, NULL, call_thread, &slow);
	usleep(10000);
	pthread_create(&tq, NULL, call_thread, &queued);
	pthread_join(ts, NULL);
	pthread_join(tq, NULL);
	printf("queued-timeout rc=%d tres=%s slow rc=%d\n", queued.rc,
	       s(queued.tres), slow.rc);
	done(&slow);
	done(&queued);
	usleep(200000);

	/* cq_stop: queued calls get "unchanged" at once, the one in progress
	 * its answer; then the worker leaves and calls are decided directly. */
	cq_set_timeout_ms(5000);
	struct call inflight = {.comment = "slow-3"}, q[3];
	pthread_t ti, tqs[3];
	pthread_create(&ti, NULL, call_thread, &inflight);
	usleep(20000);
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
	cq_stop();
	pthread_join(w, NULL);
	printf("end\n");
	return 0;
}
