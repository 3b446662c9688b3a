/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wakecost: what a hand-off between two threads costs on this machine, with
 * no Go in it: the floor under queue.c's hand-off (a slurmctld thread wakes
 * the worker and sleeps until the worker wakes it back). A caller thread
 * wakes a server thread through a futex and waits on a second futex for the
 * server's reply, N round trips, each after GAP_US of sleep (0: back to back;
 * 5000: the paced submissions of callcost.c, so that both CPUs can go idle
 * between trips, as a controller's do between submissions).
 *   cross: the two threads may run on any CPU (the scheduler puts the woken
 *          thread on an idle CPU when there is one: slurmctld's case);
 *   same:  both pinned to CPU 0 (the wake is a switch on one CPU).
 * Prints the round trip's wall time (p50, p90, in us) and the process CPU
 * per trip (us), the latter including the caller's sleep and wake-up.
 * usage: wakecost N GAP_US
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t ask, reply;
static int pinned;

static void wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_while(uint32_t *w, uint32_t v)
{
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) == v)
		syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void pin_cpu0(void)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(0, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static double us(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *server(void *arg)
{
	(void)arg;
	if (pinned)
		pin_cpu0();
	for (uint32_t i = 0;; i++) {
		wait_while(&ask, i);
		__atomic_store_n(&reply, i + 1, __ATOMIC_RELEASE);
		wake(&reply);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double d = *(const double *)a - *(const double *)b;

	return d < 0 ? -1 : d > 0;
}

static void run(int n, int gap)
{
	double *rt = calloc(n, sizeof(*rt));
	double cpu0 = us(CLOCK_PROCESS_CPUTIME_ID);

	if (!rt)
		exit(1);
	for (int k = 0; k < n; k++) {
		uint32_t i = __atomic_load_n(&ask, __ATOMIC_RELAXED);

		if (gap)
			usleep(gap);
		double t0 = us(CLOCK_MONOTONIC);
		__atomic_store_n(&ask, i + 1, __ATOMIC_RELEASE);
		wake(&ask);
		wait_while(&reply, i);
		rt[k] = us(CLOCK_MONOTONIC) - t0;
	}
	double cpu = (us(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / n;

	qsort(rt, n, sizeof(*rt), cmp);
	printf("%s gap_us=%d trips=%d wall_p50_us=%.1f wall_p90_us=%.1f proc_cpu_per_trip_us=%.1f\n",
	       pinned ? "same" : "cross", gap, n, rt[n / 2], rt[n * 9 / 10], cpu);
	free(rt);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: wakecost N GAP_US\n");
		return 2;
	}
	int n = atoi(argv[1]), gap = atoi(argv[2]);
	pthread_t t;

	if (n < 10 || gap < 0) {
		fprintf(stderr, "wakecost: N >= 10, GAP_US >= 0\n");
		return 2;
	}
	/* Pinned or not for the whole process: a second process does the other. */
	pinned = getenv("WAKECOST_SAME_CPU") != NULL;
	if (pinned)
		pin_cpu0();
	if (pthread_create(&t, NULL, server, NULL) != 0)
		return 1;
	usleep(1000);
	run(n, gap);
	return 0;
}
