/* SPDX-License-Identifier: Apache-2.0 */
/*
 * callcost: what one coscheml_decide costs the calling C thread, measured as
 * that thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and wall time, for an
 * untagged job (the engine answers "unchanged": the pure cost of the call) and
 * a tagged one, in two ways:
 *   same:   every call from one thread (Go keeps its M bound to that thread);
 *   thread: every call from a new thread, as slurmctld 22.05 serves each RPC
 *           on a thread of its own (the thread's first call into Go).
 * Prints one line per (way, job) with p50/p90/p99 in ns and the answers seen.
 * For the thread way, proc_p50/proc_p99 are the whole process's CPU time
 * around the thread's creation, call, exit and join: also what Go does when
 * the thread exits (its M is dropped by a thread-exit destructor) and on its
 * own threads; the job "none" makes no call (the thread alone).
 *   paced:  a new thread per call, calls 5 ms apart (a busy submit rate): the
 *           process CPU per call over the whole run, so also what Go's
 *           threads do between calls (sysmon polling while the caller's P
 *           sits in its syscall state), against the same run without calls,
 *           and the call's wall time (p50, p90 in us: with both CPUs idle
 *           between calls, as slurmctld's sdiag sees it).
 * usage: callcost LIB CONFIG N [paced]: with "paced", only the paced lines,
 * five interleaved rounds of N calls each (for perf and for the spread).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../../../plugin-c/coscheml_abi.h"

static coscheml_decide_fn decide;

struct call {
	const char *comment;
	int64_t cpu, wall;
	int rc;
	int skip; /* no call: the cost of the thread alone */
};

static int64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *one(void *arg)
{
	struct call *c = arg;
	struct coscheml_job j = {0};
	struct coscheml_answer a = {0};

	j.size = sizeof(j);
	a.size = sizeof(a);
	j.comment = c->comment;
	j.tres_per_node = "gres:gpu:1";
	j.user_id = 1000;
	j.submit_uid = 1000;
	j.min_nodes = 1;
	j.max_nodes = 1;
	j.time_limit = 60;
	j.job_id = 0xfffffffe;
	j.num_tasks = 0xfffffffe;
	j.flags = COSCHEML_SET_COMMENT | COSCHEML_SET_TRES;
	int64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
	c->rc = c->skip ? COSCHEML_UNCHANGED : decide(&j, &a);
	c->cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	c->wall = now_ns(CLOCK_MONOTONIC) - w0;
	free(a.tres_per_node);
	free(a.req_nodes);
	free(a.comment);
	free(a.user_msg);
	free(a.log);
	free(a.tres_per_job);
	free(a.tres_per_task);
	return NULL;
}

static int cmp64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

static int64_t pct(int64_t *v, int n, int p)
{
	int i = (p * n + 99) / 100 - 1;

	return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

static void run(const char *way, const char *what, const char *comment, int n,
		int threads)
{
	int64_t *cpu = calloc(n, sizeof(*cpu)), *wall = calloc(n, sizeof(*wall));
	int64_t *proc = calloc(n, sizeof(*proc));
	int rcs[8] = {0};

	for (int i = 0; i < n; i++) {
		struct call c = {.comment = comment, .skip = comment == NULL};

		if (threads) {
			pthread_t t;
			int64_t p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);

			if (pthread_create(&t, NULL, one, &c) != 0) {
				printf("pthread_create failed\n");
				exit(1);
			}
			pthread_join(t, NULL);
			proc[i] = now_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
		} else {
			one(&c);
		}
		cpu[i] = c.cpu;
		wall[i] = c.wall;
		rcs[c.rc & 7]++;
	}
	qsort(cpu, n, sizeof(*cpu), cmp64);
	qsort(wall, n, sizeof(*wall), cmp64);
	qsort(proc, n, sizeof(*proc), cmp64);
	printf("%s %s calls=%d cpu_p50=%lld cpu_p90=%lld cpu_p99=%lld wall_p50=%lld wall_p99=%lld proc_p50=%lld proc_p99=%lld unchanged=%d rewrite=%d other=%d\n",
	       way, what, n, (long long)pct(cpu, n, 50), (long long)pct(cpu, n, 90),
	       (long long)pct(cpu, n, 99), (long long)pct(wall, n, 50),
	       (long long)pct(wall, n, 99), (long long)pct(proc, n, 50),
	       (long long)pct(proc, n, 99), rcs[COSCHEML_UNCHANGED],
	       rcs[COSCHEML_REWRITE], n - rcs[COSCHEML_UNCHANGED] - rcs[COSCHEML_REWRITE]);
	free(cpu);
	free(wall);
	free(proc);
}

static double proc_us(void)
{
	return now_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e3;
}

/* Context switches of the whole process (every thread's wake-ups). */
static long ctxsw(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

static void paced(const char *what, const char *comment, int n)
{
	int64_t *wall = calloc(n, sizeof(*wall));
	long s0 = ctxsw();
	double c0 = proc_us();

	for (int i = 0; i < n; i++) {
		struct call c = {.comment = comment, .skip = comment == NULL};
		pthread_t t;

		if (pthread_create(&t, NULL, one, &c) != 0) {
			printf("pthread_create failed\n");
			exit(1);
		}
		pthread_join(t, NULL);
		wall[i] = c.wall;
		usleep(5000);
	}
	double c1 = proc_us();
	qsort(wall, n, sizeof(*wall), cmp64);
	printf("paced %s calls=%d proc_per_call_us=%.1f ctxsw_per_call=%.1f wall_p50_us=%.1f wall_p90_us=%.1f\n",
	       what, n, (c1 - c0) / n, (double)(ctxsw() - s0) / n,
	       pct(wall, n, 50) / 1e3, pct(wall, n, 90) / 1e3);
	free(wall);
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && strcmp(argv[4], "paced") == 0))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n = atoi(argv[3]);
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	coscheml_init_fn init = (coscheml_init_fn)dlsym(h, "coscheml_init");
	decide = (coscheml_decide_fn)dlsym(h, "coscheml_decide");
	if (!init || !decide || n <= 0) {
		printf("missing symbol or N\n");
		return 1;
	}
	char *log = NULL;
	printf("init rc=%d\n", init(argv[2], 0x160508, NULL, &log));
	free(log);
	/* Warm-up: the engine's first decisions and the runtime's extra Ms. */
	run("warmup", "untagged", "hello", 200, 1);
	run("warmup", "tagged", "coscheml:app=harness-app", 50, 0);
	if (argc == 5) {
		for (int round = 0; round < 5; round++) {
			paced("none", NULL, n);
			paced("untagged", "hello", n);
			paced("tagged", "coscheml:app=harness-app", n);
		}
		return 0;
	}
	for (int round = 0; round < 2; round++) {
		run("thread", "none", NULL, n, 1);
		run("same", "untagged", "hello", n, 0);
		run("thread", "untagged", "hello", n, 1);
		run("same", "tagged", "coscheml:app=harness-app", n, 0);
		run("thread", "tagged", "coscheml:app=harness-app", n, 1);
	}
	for (int round = 0; round < 2; round++) {
		paced("none", NULL, n / 5);
		paced("untagged", "hello", n / 5);
		paced("tagged", "coscheml:app=harness-app", n / 5);
	}
	return 0;
}
