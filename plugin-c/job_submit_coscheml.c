/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * job_submit/coscheml: the thin C shim between slurmctld and libcoscheml.so.
 *
 * It parses nothing and decides nothing: it hands a job's fields to the Go
 * library and applies the answer with Slurm's own allocator. Every failure to
 * load or initialise the library leaves the plugin in pass-through mode, so
 * slurmctld always starts and jobs are never blocked by this plugin's own
 * trouble (fail open).
 *
 * Built against the public headers of libslurm-dev only. Slurm's allocator and
 * logger are exported by libslurmfull.so, which slurmctld has already loaded,
 * so they are declared here by hand.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "coscheml_abi.h"

#ifndef SLURM_VERSION_NUM
#error "slurm/slurm.h did not define SLURM_VERSION_NUM: libslurm-dev too old or missing"
#endif

#ifndef COSCHEML_LIBDIR
#define COSCHEML_LIBDIR "/usr/local/lib/coscheml"
#endif
#define COSCHEML_DEFAULT_LIB COSCHEML_LIBDIR "/libcoscheml.so"
#define COSCHEML_DEFAULT_CONFIG "/etc/coscheml/coscheml.yaml"

/* Slurm's exported allocator and logger (libslurmfull.so). */
extern char *slurm_xstrdup(const char *str);
extern void slurm_xfree(void **item);
extern void slurm_info(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
extern void slurm_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
extern void slurm_verbose(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
extern void slurm_debug(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

const char plugin_name[] = "coscheml interference-aware GPU co-location";
const char plugin_type[] = "job_submit/coscheml";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;
/* The interface to libcoscheml.so, readable by `coscheml preflight` from the file. */
const uint32_t coscheml_plugin_abi = COSCHEML_ABI_VERSION;

/*
 * The job ID field: 25.11 removed job_desc_msg_t.job_id; the ID lives in
 * step_id.job_id from then on.
 */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
#define JOB_DESC_ID(jd) ((jd)->step_id.job_id)
#else
#define JOB_DESC_ID(jd) ((jd)->job_id)
#endif

/*
 * Set up by init() only and read-only afterwards, except conf_seen which
 * remembers the last slurm.conf generation handed to coscheml_reconfigure.
 * When lib.decide is NULL the plugin passes every job through unchanged.
 */
static struct {
	void *handle;
	coscheml_decide_fn decide;
	coscheml_void_fn reconfigure;
	coscheml_void_fn fini;
	const slurm_conf_t *conf; /* slurmctld's config, to notice reconfigure */
} lib;
static pthread_mutex_t conf_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t conf_seen;

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);
	return (v && *v) ? v : fallback;
}

typedef void (*slurm_log_fn)(const char *fmt, ...);

/*
 * Log each line of a multi-line Go log text with the plugin prefix, through
 * Slurm's logger of that level (which drops a line above SlurmctldDebug
 * before formatting it).
 */
static void log_lines_at(slurm_log_fn log, const char *text)
{
	const char *p = text;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		if (len > 0)
			log("%s: %.*s", plugin_type, len, p);
		p = nl ? nl + 1 : NULL;
	}
}

static void log_lines(const char *text)
{
	log_lines_at(slurm_info, text);
}

/* The logger of an answer's decision_level (COSCHEML_LOG_*). */
static slurm_log_fn logger_of(uint32_t level)
{
	switch (level) {
	case COSCHEML_LOG_INFO:
		return slurm_info;
	case COSCHEML_LOG_DEBUG:
		return slurm_debug;
	default:
		return slurm_verbose;
	}
}

/* Replace a Slurm-owned string with a copy made by Slurm's allocator. */
static void set_slurm_str(char **field, const char *value)
{
	char *copy = slurm_xstrdup(value);

	slurm_xfree((void **)field);
	*field = copy;
}

/* Replace a Slurm-owned string, or free it (NULL) when value is NULL. */
static void set_or_clear(char **field, const char *value)
{
	if (value) {
		set_slurm_str(field, value);
		return;
	}
	slurm_xfree((void **)field);
	*field = NULL;
}

/*
 * slurmctld has no reconfigure hook for job_submit plugins (22.05), but it
 * stamps slurm_conf.last_update whenever it reads slurm.conf again: when that
 * stamp moves, tell the library so that it reloads its files.
 */
static void check_reconfigure(void)
{
	time_t now_conf;
	bool changed = false;

	if (!lib.conf || !lib.reconfigure)
		return;
	now_conf = __atomic_load_n(&lib.conf->last_update, __ATOMIC_RELAXED);
	pthread_mutex_lock(&conf_lock);
	if (now_conf != conf_seen) {
		conf_seen = now_conf;
		changed = true;
	}
	pthread_mutex_unlock(&conf_lock);
	if (changed)
		lib.reconfigure();
}

/*
 * Where the Go library is: $COSCHEML_LIB; else libcoscheml.so beside this
 * plugin (a build tree or a site that keeps both in PluginDir); else the
 * compiled-in COSCHEML_LIBDIR. Writes into buf (size n).
 */
static const char *library_path(char *buf, size_t n)
{
	const char *env = getenv("COSCHEML_LIB");
	Dl_info self;

	if (env && *env)
		return env;
	if (dladdr((void *)&plugin_version, &self) && self.dli_fname) {
		const char *slash = strrchr(self.dli_fname, '/');

		if (slash &&
		    snprintf(buf, n, "%.*s/libcoscheml.so",
			     (int)(slash - self.dli_fname),
			     self.dli_fname) < (int)n &&
		    access(buf, R_OK) == 0)
			return buf;
	}
	return COSCHEML_DEFAULT_LIB;
}

static void load_library(void)
{
	char buf[4096];
	const char *path = library_path(buf, sizeof(buf));
	const char *config = env_or("COSCHEML_CONFIG", COSCHEML_DEFAULT_CONFIG);
	const slurm_conf_t *conf;
	coscheml_abi_version_fn go_abi;
	coscheml_init_fn go_init;
	char *log_text = NULL;
	uint32_t abi;
	int rc;

	lib.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib.handle) {
		slurm_error("%s: cannot load %s: %s; passing all jobs through unchanged",
			    plugin_type, path, dlerror());
		return;
	}
	/*
	 * A library from another build may expect other arguments: check the
	 * interface version before calling anything else.
	 */
	go_abi = (coscheml_abi_version_fn)dlsym(lib.handle,
						"coscheml_abi_version");
	if (!go_abi) {
		slurm_error("%s: %s has no coscheml_abi_version (a library older than this plugin, which speaks interface %u): install libcoscheml.so and job_submit_coscheml.so from the same build; passing all jobs through unchanged",
			    plugin_type, path, COSCHEML_ABI_VERSION);
		memset(&lib, 0, sizeof(lib));
		return;
	}
	abi = go_abi();
	if (abi != COSCHEML_ABI_VERSION) {
		slurm_error("%s: %s speaks interface %" PRIu32 ", this plugin speaks %u: install libcoscheml.so and job_submit_coscheml.so from the same build; passing all jobs through unchanged",
			    plugin_type, path, abi, COSCHEML_ABI_VERSION);
		memset(&lib, 0, sizeof(lib));
		return;
	}
	go_init = (coscheml_init_fn)dlsym(lib.handle, "coscheml_init");
	lib.decide = (coscheml_decide_fn)dlsym(lib.handle, "coscheml_decide");
	lib.reconfigure = (coscheml_void_fn)dlsym(lib.handle,
						  "coscheml_reconfigure");
	lib.fini = (coscheml_void_fn)dlsym(lib.handle, "coscheml_fini");
	if (!go_init || !lib.decide) {
		slurm_error("%s: %s lacks coscheml_init/coscheml_decide; passing all jobs through unchanged",
			    plugin_type, path);
		memset(&lib, 0, sizeof(lib));
		return;
	}

	conf = (const slurm_conf_t *)dlsym(RTLD_DEFAULT, "slurm_conf");
	rc = go_init(config, SLURM_VERSION_NUMBER,
		     conf ? conf->slurm_conf : NULL, &log_text);
	if (log_text)
		log_lines(log_text);
	free(log_text);
	if (rc != 0) {
		/*
		 * The library stays loaded and degraded: what is broken passes
		 * jobs through unchanged, and it logs the causes itself.
		 */
		slurm_error("%s: coscheml_init(%s) returned %d: running degraded, affected jobs pass through unchanged",
			    plugin_type, config, rc);
	}

	lib.conf = conf;
	if (lib.conf)
		conf_seen = lib.conf->last_update;
	slurm_info("%s: loaded %s (interface %u, config %s, Slurm %d.%02d.%d)",
		   plugin_type, path, COSCHEML_ABI_VERSION, config,
		   SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
		   SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
		   SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
}

int init(void)
{
	memset(&lib, 0, sizeof(lib));
	load_library();
	return SLURM_SUCCESS; /* never keep slurmctld from starting */
}

int fini(void)
{
	if (lib.fini)
		lib.fini();
	/* RTLD_NODELETE: the Go runtime cannot be unloaded; keep it mapped. */
	if (lib.handle)
		dlclose(lib.handle);
	memset(&lib, 0, sizeof(lib));
	return SLURM_SUCCESS;
}

/*
 * The job ID as a number. scontrol update fills job_id_str, not the numeric
 * field: parse it, so the library can tell a running job's update from a new
 * submission. NO_VAL when there is none.
 */
static uint32_t job_id_of(const job_desc_msg_t *job_desc)
{
	uint32_t job_id = JOB_DESC_ID(job_desc);

	if ((job_id == NO_VAL || job_id == 0) && job_desc->job_id_str) {
		char *end = NULL;
		unsigned long v = strtoul(job_desc->job_id_str, &end, 10);

		if (end && end != job_desc->job_id_str && *end == '\0' &&
		    v > 0 && v < NO_VAL)
			return (uint32_t)v;
	}
	return job_id == 0 ? NO_VAL : job_id;
}

/*
 * slurmctld's job record (job_record_t) is not in Slurm's public headers: its
 * head, up to the comment, as each series' source lays it out
 * (src/slurmctld/slurmctld.h in 23.11, src/common/job_record.h from 24.11 on),
 * for the series whose source was read. The magic cookie, at its place in
 * that head, must hold JOB_MAGIC before the comment is read. For any other
 * release the stored comment is NULL, as at submit.
 */
#define JOB_RECORD_MAGIC 0xf0b7392cu
#define JOB_RECORD_SERIES(major, minor)                                        \
	(SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(major, minor, 0) &&         \
	 SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(major, minor + 1, 0))
#if JOB_RECORD_SERIES(23, 11) || JOB_RECORD_SERIES(24, 11) ||                  \
	JOB_RECORD_SERIES(25, 11) || JOB_RECORD_SERIES(26, 5)
#define JOB_RECORD_KNOWN 1
struct job_record_head {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	slurm_step_id_t step_id; /* first from 25.11 on */
#endif
	uint32_t magic;
	char *account;
	char *admin_comment;
	char *alias_list;
	char *alloc_node;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	char *alloc_tls_cert;
#endif
	uint16_t alloc_resp_port;
	uint32_t alloc_sid;
	uint32_t array_job_id;
	uint32_t array_task_id;
	void *array_recs;
	uint32_t assoc_id;
	void *assoc_ptr;
	char *batch_features;
	uint16_t batch_flag;
	char *batch_host;
	double billable_tres;
	uint64_t bit_flags;
	char *burst_buffer;
	char *burst_buffer_state;
	char *clusters;
	char *comment;
};
#endif

/* job_ptr->comment at job_modify; NULL at submit or when unknown. */
static const char *stored_comment(const void *job_ptr)
{
#ifdef JOB_RECORD_KNOWN
	const struct job_record_head *head = job_ptr;

	if (head && head->magic == JOB_RECORD_MAGIC)
		return head->comment;
#else
	(void)job_ptr;
#endif
	return NULL;
}

/* user_id may be unset (NO_VAL) on some paths: fall back to the submitter. */
static uint32_t user_of(const job_desc_msg_t *job_desc, uint32_t submit_uid)
{
	return job_desc->user_id == NO_VAL ? submit_uid : job_desc->user_id;
}

/*
 * sbatch leaves min_nodes at NO_VAL unless -N is given; Slurm later makes
 * that 1, so hand the library Slurm's own default.
 */
static uint32_t min_nodes_of(const job_desc_msg_t *job_desc)
{
	return job_desc->min_nodes == NO_VAL ? 1 : job_desc->min_nodes;
}

/* COSCHEML_SET_* (which fields job_desc carries) | COSCHEML_ADMIN. */
static uint32_t flags_of(const job_desc_msg_t *job_desc, uint32_t submit_uid)
{
	uint32_t flags = (job_desc->comment ? COSCHEML_SET_COMMENT : 0) |
			 (job_desc->tres_per_node ? COSCHEML_SET_TRES : 0) |
			 (job_desc->partition ? COSCHEML_SET_PARTITION : 0) |
			 (job_desc->req_nodes ? COSCHEML_SET_REQ_NODES : 0) |
			 (job_desc->exc_nodes ? COSCHEML_SET_EXC_NODES : 0);

	/*
	 * Slurm's operators as slurmctld itself checks them first: root and
	 * SlurmUser. (AdminLevel from the accounting database would need the
	 * association lock inside job_submit; the library reads admin_users.)
	 */
	if (submit_uid == 0 ||
	    (lib.conf && submit_uid == lib.conf->slurm_user_id))
		flags |= COSCHEML_ADMIN;
	return flags;
}

/* --exclusive in any form: job_desc shared 0, user, mcs or topo. */
static uint32_t exclusive_of(const job_desc_msg_t *job_desc)
{
	return job_desc->shared != NO_VAL16 &&
	       job_desc->shared != JOB_SHARED_OK &&
	       job_desc->shared != INFINITE16;
}

/*
 * Ask the library and apply its answer to job_desc. job_ptr: slurmctld's
 * record of the job at job_modify, NULL at job_submit. Returns the Slurm
 * error code; *user_msg receives a malloc'ed message for the user (or NULL).
 */
static int decide(bool modify, job_desc_msg_t *job_desc, void *job_ptr,
		  uint32_t submit_uid, char **user_msg)
{
	struct coscheml_job job;
	struct coscheml_answer ans;
	int answer, rc = SLURM_SUCCESS;

	*user_msg = NULL;
	if (!lib.decide)
		return SLURM_SUCCESS;
	check_reconfigure();

	memset(&job, 0, sizeof(job));
	memset(&ans, 0, sizeof(ans));
	ans.size = sizeof(ans);
	/* Each field from where coscheml_abi.h's list says. */
#define FILL_(kind, name, go, from) job.name = (from);
	COSCHEML_JOB_FIELDS(FILL_)
#undef FILL_

	answer = lib.decide(&job, &ans);

	if (ans.log)
		log_lines(ans.log);
	if (ans.decision_line)
		log_lines_at(logger_of(ans.decision_level), ans.decision_line);

	switch (answer) {
	case COSCHEML_UNCHANGED:
		break;
	case COSCHEML_REWRITE:
		if (ans.tres_per_node)
			set_slurm_str(&job_desc->tres_per_node, ans.tres_per_node);
		if (ans.req_nodes)
			set_slurm_str(&job_desc->req_nodes, ans.req_nodes);
		if (ans.comment)
			set_slurm_str(&job_desc->comment, ans.comment);
		if (ans.begin_time > 0)
			job_desc->begin_time = (time_t)ans.begin_time;
		if (ans.replace & COSCHEML_ANS_TRES_PER_JOB)
			set_or_clear(&job_desc->tres_per_job, ans.tres_per_job);
		if (ans.replace & COSCHEML_ANS_TRES_PER_TASK)
			set_or_clear(&job_desc->tres_per_task,
				     ans.tres_per_task);
		if (ans.replace & COSCHEML_ANS_CLEAR_REQ_NODES)
			set_slurm_str(&job_desc->req_nodes, "");
		break;
	case COSCHEML_REJECT:
	case COSCHEML_DENY:
		/*
		 * A refused directive gets SLURM_ERROR ("Unspecified error"):
		 * no Slurm release has an error code for a comment, and any
		 * specific one (ESLURM_INVALID_GRES was) makes sbatch's last
		 * line contradict the plugin's message above it.
		 */
		rc = (answer == COSCHEML_DENY) ? ESLURM_ACCESS_DENIED :
						 SLURM_ERROR;
		*user_msg = ans.user_msg ? ans.user_msg :
			strdup("coscheml: job rejected (see slurmctld log)");
		ans.user_msg = NULL;
		break;
	default:
		/* An answer this shim does not know: fail open. */
		slurm_error("%s: library returned unknown answer %d for job %" PRIu32 "; leaving it unchanged",
			    plugin_type, answer, job.job_id);
		break;
	}
	if (ans.user_msg && answer != COSCHEML_REJECT &&
	    answer != COSCHEML_DENY) {
		/* A warning the user still sees ("accepted unshared because ..."). */
		*user_msg = ans.user_msg;
		ans.user_msg = NULL;
	}

	coscheml_answer_free(&ans);
	return rc;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	char *user_msg = NULL;
	int rc = decide(false, job_desc, NULL, submit_uid, &user_msg);

	/*
	 * On success a message is a warning the user still sees ("accepted
	 * unshared because ..."); on reject it is the reason.
	 */
	if (user_msg && err_msg) {
		slurm_xfree((void **)err_msg);
		*err_msg = slurm_xstrdup(user_msg);
	}
	free(user_msg);
	return rc;
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid,
	       char **err_msg)
{
	char *user_msg = NULL;
	int rc = decide(true, job_desc, job_ptr, submit_uid, &user_msg);

	if (user_msg && err_msg) {
		slurm_xfree((void **)err_msg);
		*err_msg = slurm_xstrdup(user_msg);
	}
	free(user_msg);
	return rc;
}
#else
/* Before 23.02 job_modify has no err_msg: the reason goes to the log. */
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
{
	char *user_msg = NULL;
	int rc = decide(true, job_desc, job_ptr, submit_uid, &user_msg);

	if (user_msg) {
		slurm_info("%s: job %" PRIu32 " update: %s", plugin_type,
			   job_id_of(job_desc), user_msg);
	}
	free(user_msg);
	return rc;
}
#endif
