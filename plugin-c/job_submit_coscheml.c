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

const char plugin_name[] = "coscheml interference-aware GPU co-location";
const char plugin_type[] = "job_submit/coscheml";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* The answers of coscheml_job_submit / coscheml_job_modify. */
enum {
	COSCHEML_UNCHANGED = 0,
	COSCHEML_REWRITE = 1,
	COSCHEML_REJECT = 2,
};

typedef int (*init_fn)(const char *config_path);
typedef int (*decide_fn)(const char *comment, const char *tres_per_node,
			 const char *partition, uint32_t user_id,
			 uint32_t min_nodes, uint32_t max_nodes,
			 uint32_t time_limit, uint32_t job_id,
			 char **out_tres_per_node, char **out_req_nodes,
			 char **out_comment, char **out_user_msg,
			 char **out_log);
typedef void (*void_fn)(void);
typedef void (*version_fn)(uint32_t slurm_version);

/*
 * Set up by init() only and read-only afterwards, except conf_seen which
 * remembers the last slurm.conf generation handed to coscheml_reconfigure.
 * When lib.submit is NULL the plugin passes every job through unchanged.
 */
static struct {
	void *handle;
	decide_fn submit;
	decide_fn modify;
	void_fn reconfigure;
	void_fn fini;
	const slurm_conf_t *conf; /* slurmctld's config, to notice reconfigure */
} lib;
static pthread_mutex_t conf_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t conf_seen;

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);
	return (v && *v) ? v : fallback;
}

/* Log each line of a multi-line Go log text with the plugin prefix. */
static void log_lines(const char *text)
{
	const char *p = text;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		if (len > 0)
			slurm_info("%s: %.*s", plugin_type, len, p);
		p = nl ? nl + 1 : NULL;
	}
}

/* Replace a Slurm-owned string with a copy made by Slurm's allocator. */
static void set_slurm_str(char **field, const char *value)
{
	char *copy = slurm_xstrdup(value);

	slurm_xfree((void **)field);
	*field = copy;
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
	init_fn go_init;
	version_fn go_version;
	int rc;

	lib.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib.handle) {
		slurm_error("%s: cannot load %s: %s; passing all jobs through unchanged",
			    plugin_type, path, dlerror());
		return;
	}
	go_init = (init_fn)dlsym(lib.handle, "coscheml_init");
	lib.submit = (decide_fn)dlsym(lib.handle, "coscheml_job_submit");
	lib.modify = (decide_fn)dlsym(lib.handle, "coscheml_job_modify");
	lib.reconfigure = (void_fn)dlsym(lib.handle, "coscheml_reconfigure");
	lib.fini = (void_fn)dlsym(lib.handle, "coscheml_fini");
	if (!go_init || !lib.submit || !lib.modify) {
		slurm_error("%s: %s lacks coscheml_init/coscheml_job_submit/coscheml_job_modify; passing all jobs through unchanged",
			    plugin_type, path);
		memset(&lib, 0, sizeof(lib));
		return;
	}
	/* Optional: lets the library pick the TRES syntax of this Slurm. */
	go_version = (version_fn)dlsym(lib.handle, "coscheml_slurm_version");
	if (go_version)
		go_version(SLURM_VERSION_NUMBER);

	rc = go_init(config);
	if (rc != 0) {
		/*
		 * The library stays loaded and degraded: what is broken passes
		 * jobs through unchanged, and it logs the causes itself.
		 */
		slurm_error("%s: coscheml_init(%s) returned %d: running degraded, affected jobs pass through unchanged",
			    plugin_type, config, rc);
	}

	lib.conf = (const slurm_conf_t *)dlsym(RTLD_DEFAULT, "slurm_conf");
	if (lib.conf)
		conf_seen = lib.conf->last_update;
	slurm_info("%s: loaded %s (config %s, Slurm %d.%02d.%d)", plugin_type,
		   path, config, SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
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
 * Ask the library and apply its answer to job_desc. Returns the Slurm error
 * code; *user_msg receives a malloc'ed message for the user (or NULL).
 */
static int decide(decide_fn fn, job_desc_msg_t *job_desc, uint32_t submit_uid,
		  char **user_msg)
{
	char *tres = NULL, *req_nodes = NULL, *comment = NULL, *log_text = NULL;
	uint32_t uid, min_nodes, job_id;
	int answer, rc = SLURM_SUCCESS;

	*user_msg = NULL;
	if (!fn)
		return SLURM_SUCCESS;
	check_reconfigure();

	/* user_id may be unset (NO_VAL) on some paths: fall back to the submitter. */
	uid = (job_desc->user_id == NO_VAL) ? submit_uid : job_desc->user_id;
	/*
	 * sbatch leaves min_nodes at NO_VAL unless -N is given; Slurm later
	 * makes that 1, so hand the library Slurm's own default.
	 */
	min_nodes = (job_desc->min_nodes == NO_VAL) ? 1 : job_desc->min_nodes;
	/*
	 * scontrol update fills job_id_str, not job_id: pass the number so the
	 * library can tell a running job's update from a new submission.
	 */
	job_id = job_desc->job_id;
	if ((job_id == NO_VAL || job_id == 0) && job_desc->job_id_str) {
		char *end = NULL;
		unsigned long v = strtoul(job_desc->job_id_str, &end, 10);

		if (end && end != job_desc->job_id_str && *end == '\0' &&
		    v > 0 && v < NO_VAL)
			job_id = (uint32_t)v;
	}
	answer = fn(job_desc->comment, job_desc->tres_per_node,
		    job_desc->partition, uid, min_nodes,
		    job_desc->max_nodes, job_desc->time_limit, job_id,
		    &tres, &req_nodes, &comment, user_msg, &log_text);

	if (log_text)
		log_lines(log_text);

	switch (answer) {
	case COSCHEML_UNCHANGED:
		break;
	case COSCHEML_REWRITE:
		if (tres)
			set_slurm_str(&job_desc->tres_per_node, tres);
		if (req_nodes)
			set_slurm_str(&job_desc->req_nodes, req_nodes);
		if (comment)
			set_slurm_str(&job_desc->comment, comment);
		break;
	case COSCHEML_REJECT:
		rc = ESLURM_INVALID_GRES;
		if (!*user_msg) {
			*user_msg = strdup("coscheml: job rejected (see slurmctld log)");
		}
		break;
	default:
		/* An answer this shim does not know: fail open. */
		slurm_error("%s: library returned unknown answer %d for job %" PRIu32 "; leaving it unchanged",
			    plugin_type, answer, job_desc->job_id);
		break;
	}

	free(tres);
	free(req_nodes);
	free(comment);
	free(log_text);
	return rc;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	char *user_msg = NULL;
	int rc = decide(lib.submit, job_desc, submit_uid, &user_msg);

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
	int rc = decide(lib.modify, job_desc, submit_uid, &user_msg);

	(void)job_ptr;
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
	int rc = decide(lib.modify, job_desc, submit_uid, &user_msg);

	(void)job_ptr;
	if (user_msg) {
		if (job_desc->job_id_str)
			slurm_info("%s: job %s update: %s", plugin_type,
				   job_desc->job_id_str, user_msg);
		else
			slurm_info("%s: job %" PRIu32 " update: %s",
				   plugin_type, job_desc->job_id, user_msg);
	}
	free(user_msg);
	return rc;
}
#endif
