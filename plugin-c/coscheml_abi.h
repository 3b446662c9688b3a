/*
 * coscheml_abi.h: the C interface between the job_submit/coscheml shim
 * (plugin-c/) and libcoscheml.so (cmd/libcoscheml). Both sides include this
 * file, so a shim and a library built from the same tree always agree.
 *
 * A shim and a library from different trees may meet (an admin replaces one
 * and not the other). The shim calls coscheml_abi_version() first and uses the
 * library only when it returns COSCHEML_ABI_VERSION; otherwise it logs both
 * numbers and passes every job through unchanged (fail open). Within one ABI
 * version the structs below only ever grow at their end, and each carries its
 * size as the caller compiled it, so the library can refuse a struct that is too
 * short instead of reading past it.
 *
 * Bump COSCHEML_ABI_VERSION on any change that is not "append a field".
 */
#ifndef COSCHEML_ABI_H
#define COSCHEML_ABI_H

#include <stdint.h>

#define COSCHEML_ABI_VERSION 4u

/* The answers of coscheml_decide. */
enum {
	COSCHEML_UNCHANGED = 0,
	COSCHEML_REWRITE = 1,
	COSCHEML_REJECT = 2,
	/* Refuse: the request would bypass placement (ESLURM_ACCESS_DENIED). */
	COSCHEML_DENY = 3,
};

/*
 * coscheml_job.flags. job_modify hands over only the fields the update
 * changes, and "" differs from NULL there (NodeList= clears the node list):
 * COSCHEML_SET_* say which fields the job description carries at all.
 */
enum {
	COSCHEML_SET_COMMENT = 1u << 0,
	COSCHEML_SET_TRES = 1u << 1,
	COSCHEML_SET_PARTITION = 1u << 2,
	COSCHEML_SET_REQ_NODES = 1u << 3,
	COSCHEML_SET_EXC_NODES = 1u << 4,
	/* submit_uid is root or SlurmUser (Slurm's own operators). */
	COSCHEML_ADMIN = 1u << 16,
};

/* One job as slurmctld handed it to job_submit or job_modify. */
struct coscheml_job {
	uint32_t size;   /* sizeof(struct coscheml_job) in the caller */
	uint32_t modify; /* 1: job_modify (scontrol update), 0: job_submit */
	const char *comment;
	const char *tres_per_node;
	const char *partition;
	uint32_t user_id;
	uint32_t min_nodes;
	uint32_t max_nodes;
	uint32_t time_limit; /* minutes; NO_VAL/INFINITE as Slurm has them */
	uint32_t job_id;     /* NO_VAL for a new submission */
	/* From interface 3 on. */
	int64_t begin_time;  /* job_desc begin_time (unix seconds; 0: unset) */
	const char *req_nodes; /* -w / NodeList= */
	const char *exc_nodes; /* -x / ExcNodeList= */
	uint32_t submit_uid;   /* who submits or updates (not the job's owner) */
	uint32_t flags;        /* COSCHEML_SET_* | COSCHEML_ADMIN */
	/*
	 * The job's other options a decision honours (job_desc_msg_t fields of
	 * the same names; NULL when unset). See docs/slurm-integration.md.
	 */
	const char *tres_per_job;    /* --gpus */
	const char *tres_per_task;   /* --gpus-per-task */
	const char *tres_per_socket; /* --gpus-per-socket */
	const char *mem_per_tres;    /* --mem-per-gpu */
	const char *cpus_per_tres;   /* --cpus-per-gpu */
	const char *array_inx;       /* --array */
	uint32_t num_tasks;          /* -n; NO_VAL when unset */
	/*
	 * 1: --exclusive in any form (job_desc shared 0, user, mcs or topo); 0
	 * when shared is unset (NO_VAL16) or 1 (--oversubscribe). A flag, not the
	 * raw field, so that a zeroed struct means "not exclusive".
	 */
	uint32_t exclusive;
};

/*
 * coscheml_answer.replace: fields the shim replaces with the answer's value
 * even when that is NULL (with COSCHEML_REWRITE).
 */
enum {
	COSCHEML_ANS_TRES_PER_JOB = 1u << 0,  /* tres_per_job := answer (NULL clears) */
	COSCHEML_ANS_TRES_PER_TASK = 1u << 1, /* tres_per_task := answer (NULL clears) */
	COSCHEML_ANS_CLEAR_REQ_NODES = 1u << 2, /* req_nodes := "" (an update drops the pin) */
};

/*
 * The library's answer. Every string is malloc'ed by the library (or NULL)
 * and free()d by the caller; the library sets all of them to NULL first.
 */
struct coscheml_answer {
	uint32_t size; /* sizeof(struct coscheml_answer) in the caller */
	char *tres_per_node;
	char *req_nodes;
	char *comment;
	char *user_msg;
	char *log; /* lines for slurmctld's log, '\n'-separated */
	/*
	 * With COSCHEML_REWRITE: the job's new begin_time (unix seconds; 0:
	 * leave it). A "wait" answer defers the job for re-decision.
	 */
	int64_t begin_time;
	/*
	 * A single GPU asked for with --gpus/--gpus-per-task moves to
	 * tres_per_node: these carry what stays of the job's field, applied
	 * where replace says so.
	 */
	char *tres_per_job;
	char *tres_per_task;
	uint32_t replace; /* COSCHEML_ANS_* bits */
	/*
	 * From interface 4 on: the decision's one line for slurmctld's log,
	 * logged at decision_level (log above is problems, refusals and
	 * removed tokens, at info).
	 */
	uint32_t decision_level; /* COSCHEML_LOG_* */
	char *decision_line;
};

/*
 * coscheml_answer.decision_level: the slurmctld log level of decision_line
 * (coscheml.yaml's log_decisions): Slurm's info, verbose or debug.
 */
enum {
	COSCHEML_LOG_INFO = 0,
	COSCHEML_LOG_VERBOSE = 1,
	COSCHEML_LOG_DEBUG = 2,
};

/* The library's exports, as function pointer types for dlsym. */
typedef uint32_t (*coscheml_abi_version_fn)(void);
/*
 * config_path NULL or "": the default. slurm_version: the shim's
 * SLURM_VERSION_NUMBER. slurm_conf_path: slurmctld's slurm.conf (NULL if
 * unknown), read for settings that decide whether placements can be steered.
 * *out_log (malloc'ed or NULL, free()d by the caller): lines for the log.
 * Returns 0 when everything loaded, non-zero when running degraded.
 */
typedef int (*coscheml_init_fn)(const char *config_path,
				uint32_t slurm_version,
				const char *slurm_conf_path, char **out_log);
typedef int (*coscheml_decide_fn)(const struct coscheml_job *job,
				  struct coscheml_answer *answer);
typedef void (*coscheml_void_fn)(void);

#endif /* COSCHEML_ABI_H */
