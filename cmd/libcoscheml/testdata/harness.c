/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness: plays slurmctld for the job_submit/coscheml shim. Compiled against
 * one release's public Slurm headers (-I.../headers/<version>), it loads the
 * shim built against the same headers, which loads libcoscheml.so, and calls
 * init, job_submit and job_modify with job_desc_msg_t as that release lays it
 * out (25.11+: the job ID in step_id.job_id). It stands in for libslurmfull's
 * allocator and logger (exported from this executable: link with -rdynamic),
 * counting allocations so that a leak or a double free shows.
 *
 * Prints one line per call; bridge_test.go checks them.
 * usage: harness SHIM LIB CONFIG
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "coscheml_abi.h"

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
#define JOB_DESC_ID(jd) ((jd)->step_id.job_id)
#else
#define JOB_DESC_ID(jd) ((jd)->job_id)
#endif

/* --- libslurmfull stand-ins, found by the shim through the executable --- */

slurm_conf_t slurm_conf;
static long live_strings; /* Slurm-allocated strings not yet freed */

char *slurm_xstrdup(const char *str)
{
	if (!str)
		return NULL;
	__atomic_add_fetch(&live_strings, 1, __ATOMIC_RELAXED);
	return strdup(str);
}

void slurm_xfree(void **item)
{
	if (item && *item) {
		__atomic_sub_fetch(&live_strings, 1, __ATOMIC_RELAXED);
		free(*item);
		*item = NULL;
	}
}

static void vlog(const char *level, const char *fmt, va_list ap)
{
	printf("%s: ", level);
	vprintf(fmt, ap);
	printf("\n");
}

void slurm_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("info", fmt, ap);
	va_end(ap);
}

void slurm_verbose(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("verbose", fmt, ap);
	va_end(ap);
}

void slurm_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("debug", fmt, ap);
	va_end(ap);
}

void slurm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("error", fmt, ap);
	va_end(ap);
}

/* --- the shim's entry points --- */

typedef int (*plugin_fn)(void);
typedef int (*submit_fn)(job_desc_msg_t *, uint32_t, char **);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
typedef int (*modify_fn)(job_desc_msg_t *, void *, uint32_t, char **);
#else
typedef int (*modify_fn)(job_desc_msg_t *, void *, uint32_t);
#endif

static submit_fn job_submit;
static modify_fn job_modify;

/* A job as sbatch hands it over: Slurm-allocated strings, NO_VAL defaults. */
static void job_init(job_desc_msg_t *jd, const char *comment, const char *tres)
{
	memset(jd, 0, sizeof(*jd));
	JOB_DESC_ID(jd) = NO_VAL;
	jd->user_id = 1000;
	jd->min_nodes = NO_VAL;
	jd->max_nodes = NO_VAL;
	jd->num_tasks = NO_VAL;
	jd->shared = NO_VAL16; /* as slurm_init_job_desc_msg leaves it */
	jd->time_limit = 60;
	jd->comment = slurm_xstrdup(comment);
	jd->tres_per_node = slurm_xstrdup(tres);
}

static void job_free(job_desc_msg_t *jd)
{
	slurm_xfree((void **)&jd->comment);
	slurm_xfree((void **)&jd->tres_per_node);
	slurm_xfree((void **)&jd->tres_per_job);
	slurm_xfree((void **)&jd->array_inx);
	slurm_xfree((void **)&jd->exc_nodes);
	slurm_xfree((void **)&jd->req_nodes);
	slurm_xfree((void **)&jd->job_id_str);
}

static const char *s(const char *v)
{
	return v ? v : "NULL";
}

/* The Slurm error code a job gets, by name: sbatch prints its text last. */
static const char *code_name(int rc)
{
	switch (rc) {
	case SLURM_SUCCESS:
		return "SLURM_SUCCESS";
	case SLURM_ERROR:
		return "SLURM_ERROR";
	case ESLURM_ACCESS_DENIED:
		return "ESLURM_ACCESS_DENIED";
	case ESLURM_INVALID_GRES:
		return "ESLURM_INVALID_GRES";
	default:
		return "other";
	}
}

static void show_submit_as(const char *what, const char *comment,
			   const char *tres, uint32_t uid)
{
	job_desc_msg_t jd;
	char *err = NULL;
	int rc;

	job_init(&jd, comment, tres);
	rc = job_submit(&jd, uid, &err);
	printf("%s rc=%d tres=%s nodes=%s msg=%s\n", what, rc != SLURM_SUCCESS,
	       s(jd.tres_per_node), s(jd.req_nodes), s(err));
	printf("%s code=%s\n", what, code_name(rc));
	slurm_xfree((void **)&err);
	job_free(&jd);
}

/*
 * A tagged job with the options a decision honours: --gpus (tres_per_job),
 * --array, -x, --exclusive (shared 0). Shows where the GPU request ends up.
 */
static void show_fields(const char *what, const char *tres_node,
			const char *tres_job, const char *array,
			const char *exc, uint16_t shared)
{
	job_desc_msg_t jd;
	char *err = NULL;
	int rc;

	job_init(&jd, "coscheml:app=harness-app", tres_node);
	jd.tres_per_job = slurm_xstrdup(tres_job);
	jd.array_inx = slurm_xstrdup(array);
	jd.exc_nodes = slurm_xstrdup(exc);
	jd.shared = shared;
	rc = job_submit(&jd, 1000, &err);
	printf("%s rc=%d tres=%s job=%s nodes=%s\n", what, rc != SLURM_SUCCESS,
	       s(jd.tres_per_node), s(jd.tres_per_job), s(jd.req_nodes));
	slurm_xfree((void **)&err);
	job_free(&jd);
}

/*
 * Several slurmctld threads submitting at once (each RPC has its own): every
 * answer must be the one for that thread's own job (untagged, a bad tag, a raw
 * shard request, in turn).
 */
#define CONC_THREADS 8
#define CONC_CALLS 60

static void *submit_many(void *arg)
{
	long wrong = 0;

	(void)arg;
	for (int i = 0; i < CONC_CALLS; i++) {
		static const char *comments[] = {"hello", "coscheml:app=../x", NULL};
		static const char *tres[] = {"gres:gpu:1", "gres:gpu:1", "gres:shard:1"};
		static const char *msgs[] = {NULL, "coscheml: invalid tag",
					     "coscheml: this job asks for GPU shards directly"};
		int k = i % 3;
		job_desc_msg_t jd;
		char *err = NULL;
		int rc;

		job_init(&jd, comments[k], tres[k]);
		rc = job_submit(&jd, 1000, &err);
		if ((rc != SLURM_SUCCESS) != (k != 0) ||
		    !jd.tres_per_node || strcmp(jd.tres_per_node, tres[k]) != 0 ||
		    (msgs[k] == NULL) != (err == NULL) ||
		    (msgs[k] && strncmp(err, msgs[k], strlen(msgs[k])) != 0))
			wrong++;
		slurm_xfree((void **)&err);
		job_free(&jd);
	}
	return (void *)wrong;
}

static void concurrent(void)
{
	pthread_t t[CONC_THREADS];
	long wrong = 0;

	for (int i = 0; i < CONC_THREADS; i++)
		if (pthread_create(&t[i], NULL, submit_many, NULL) != 0) {
			printf("pthread_create failed\n");
			exit(1);
		}
	for (int i = 0; i < CONC_THREADS; i++) {
		void *v;

		pthread_join(t[i], &v);
		wrong += (long)v;
	}
	printf("concurrent calls=%d wrong=%ld live=%ld\n",
	       CONC_THREADS * CONC_CALLS, wrong,
	       __atomic_load_n(&live_strings, __ATOMIC_RELAXED));
}

static void show_submit(const char *what, const char *comment, const char *tres)
{
	show_submit_as(what, comment, tres, 1000);
}

/*
 * scontrol update jobid=ID comment=... [NodeList=nodes] by uid: only
 * job_id_str and the changed fields are set.
 */
static void show_modify_as(const char *what, const char *id_str, uint32_t id,
			   const char *comment, const char *nodes, uint32_t uid)
{
	job_desc_msg_t jd;
	int rc;

	job_init(&jd, comment, NULL);
	JOB_DESC_ID(&jd) = id;
	jd.job_id_str = slurm_xstrdup(id_str);
	jd.req_nodes = slurm_xstrdup(nodes);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
	char *err = NULL;
	rc = job_modify(&jd, NULL, uid, &err);
	printf("%s rc=%d msg=%s\n", what, rc != SLURM_SUCCESS, s(err));
	slurm_xfree((void **)&err);
#else
	rc = job_modify(&jd, NULL, uid);
	printf("%s rc=%d msg=(log)\n", what, rc != SLURM_SUCCESS);
#endif
	job_free(&jd);
}

static void show_modify(const char *what, const char *id_str, uint32_t id,
			const char *comment)
{
	show_modify_as(what, id_str, id, comment, NULL, 0);
}

/*
 * slurmctld's job record: its head up to the comment as the Slurm sources of
 * 23.11, 24.11, 25.11 and 26.05 lay it out (the series whose records the shim
 * reads; for other releases it must hand over NULL), then room.
 */
struct job_record {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	slurm_step_id_t step_id;
#endif
	uint32_t magic;
	char *account, *admin_comment, *alias_list, *alloc_node;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	char *alloc_tls_cert;
#endif
	uint16_t alloc_resp_port;
	uint32_t alloc_sid, array_job_id, array_task_id;
	void *array_recs;
	uint32_t assoc_id;
	void *assoc_ptr;
	char *batch_features;
	uint16_t batch_flag;
	char *batch_host;
	double billable_tres;
	uint64_t bit_flags;
	char *burst_buffer, *burst_buffer_state, *clusters;
	char *comment;
	char rest[1024];
};

/*
 * With a library that answers "stored=<job_comment>" as the user message
 * (fakelib.c -DECHO_STORED): what the shim hands over as the job's stored
 * comment at submit and at job_modify, with a record whose magic is right or
 * wrong, and without a record.
 */
static void stored_cases(void)
{
	struct job_record rec;
	job_desc_msg_t jd;
	char *err = NULL;
	int rc;

	job_init(&jd, "new", NULL);
	rc = job_submit(&jd, 1000, &err);
	printf("stored-submit rc=%d msg=%s\n", rc, s(err));
	slurm_xfree((void **)&err);
	job_free(&jd);

	memset(&rec, 0, sizeof(rec));
	rec.comment = "as stored";
	for (int i = 0; i < 3; i++) {
		const char *what[] = {"stored-modify", "stored-badmagic",
				      "stored-norecord"};

		rec.magic = i == 1 ? 0x1234 : 0xf0b7392c;
		job_init(&jd, "update", NULL);
		jd.job_id_str = slurm_xstrdup("42");
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
		rc = job_modify(&jd, i == 2 ? NULL : &rec, 0, &err);
		printf("%s rc=%d msg=%s\n", what[i], rc, s(err));
		slurm_xfree((void **)&err);
#else
		printf("%s\n", what[i]);
		rc = job_modify(&jd, i == 2 ? NULL : &rec, 0);
#endif
		job_free(&jd);
	}
}

int main(int argc, char **argv)
{
	void *h;
	plugin_fn init, fini;
	const uint32_t *version;

	if (argc != 4) {
		fprintf(stderr, "usage: harness SHIM LIB CONFIG\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("COSCHEML_LIB", argv[2], 1);
	setenv("COSCHEML_CONFIG", argv[3], 1);
	slurm_conf.slurm_conf = "/nonexistent/slurm.conf";
	slurm_conf.last_update = time(NULL);
	slurm_conf.slurm_user_id = 64030;

	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	init = (plugin_fn)dlsym(h, "init");
	fini = (plugin_fn)dlsym(h, "fini");
	job_submit = (submit_fn)dlsym(h, "job_submit");
	job_modify = (modify_fn)dlsym(h, "job_modify");
	version = (const uint32_t *)dlsym(h, "plugin_version");
	if (!init || !fini || !job_submit || !job_modify || !version) {
		printf("missing symbol\n");
		return 1;
	}
	printf("plugin_version=0x%06" PRIx32 " headers=0x%06x match=%d\n",
	       *version, SLURM_VERSION_NUMBER,
	       *version == SLURM_VERSION_NUMBER);
	printf("init rc=%d\n", init());
	if (getenv("HARNESS_STORED")) {
		stored_cases();
		fini();
		printf("end live=%ld\n", live_strings);
		return 0;
	}

	show_submit("untagged", "hello", "gres:gpu:1");
	show_submit("nulls", NULL, NULL);
	show_submit("badtag", "coscheml:app=../x", "gres:gpu:1");
	char *longc = malloc(10001);
	memset(longc, 'a', 10000);
	memcpy(longc, "coscheml:app=", 13);
	longc[10000] = 0;
	show_submit("long", longc, "gres:gpu:1");
	free(longc);
	show_submit("unknown", "coscheml:app=nosuch", "gres:gpu:1");
	show_fields("fields-gpus", NULL, "gres/gpu:1", NULL, NULL, NO_VAL16);
	show_fields("fields-array", "gres:gpu:1", NULL, "0-3", NULL, NO_VAL16);
	show_fields("fields-exclude", "gres:gpu:1", NULL, NULL, "n[1-2]", NO_VAL16);
	show_fields("fields-exclusive", "gres:gpu:1", NULL, NULL, NULL, 0);
	/* The library sees the ID whichever field carries it. */
	show_modify("modify-str", "17", NO_VAL, "coscheml:app=nosuch");
	show_modify("modify-num", NULL, 18, "coscheml:app=nosuch");
	show_modify("modify-bad", "17abc", NO_VAL, "coscheml:app=nosuch");
	show_modify("modify-untagged", "19", NO_VAL, NULL);
	/* raw_requests: refuse (the default) for users, not for root/SlurmUser. */
	show_submit("rawshard", NULL, "gres:shard:1");
	show_submit_as("rawshard-root", NULL, "gres:shard:1", 0);
	show_submit_as("rawshard-slurmuser", NULL, "gres:shard:1", 64030);
	show_modify_as("modify-nodes-user", "20", NO_VAL, NULL, "n1", 1000);
	show_modify_as("modify-nodes-root", "21", NO_VAL, NULL, "n1", 0);

	concurrent();

	/* slurm.conf read again: the shim tells the library once. */
	slurm_conf.last_update++;
	for (int i = 0; i < 1000; i++) {
		job_desc_msg_t jd;
		char *err = NULL;

		job_init(&jd, "coscheml:app=nosuch", "gres:gpu:1");
		job_submit(&jd, 1000, &err);
		slurm_xfree((void **)&err);
		job_free(&jd);
	}
	printf("loop done live=%ld\n", live_strings);
	fini();
	show_submit("afterfini", "coscheml:app=../x", "gres:gpu:1");
	init();
	show_submit("reinit", "coscheml:app=../x", "gres:gpu:1");
	fini();
	printf("end live=%ld\n", live_strings);
	return 0;
}
