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

#define COSCHEML_ABI_VERSION 2u

/* The answers of coscheml_decide. */
enum {
	COSCHEML_UNCHANGED = 0,
	COSCHEML_REWRITE = 1,
	COSCHEML_REJECT = 2,
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
	/*
	 * Appended: the job's options a decision honours (job_desc_msg_t fields of
	 * the same names; NULL when unset). See docs/slurm-integration.md.
	 */
	const char *tres_per_job;    /* --gpus */
	const char *tres_per_task;   /* --gpus-per-task */
	const char *tres_per_socket; /* --gpus-per-socket */
	const char *mem_per_tres;    /* --mem-per-gpu */
	const char *cpus_per_tres;   /* --cpus-per-gpu */
	const char *array_inx;       /* --array */
	const char *req_nodes;       /* -w */
	const char *exc_nodes;       /* -x */
	uint32_t num_tasks;          /* -n; NO_VAL when unset */
	/*
	 * 1: --exclusive in any form (job_desc shared 0, user, mcs or topo); 0
	 * when shared is unset (NO_VAL16) or 1 (--oversubscribe). A flag, not the
	 * raw field, so that a zeroed struct means "not exclusive".
	 */
	uint32_t exclusive;
};

/* Bits of coscheml_answer.set: fields replaced even when the string is NULL. */
enum {
	COSCHEML_SET_TRES_PER_JOB = 1u,  /* tres_per_job := answer (NULL clears) */
	COSCHEML_SET_TRES_PER_TASK = 2u, /* tres_per_task := answer (NULL clears) */
	COSCHEML_CLEAR_REQ_NODES = 4u,   /* req_nodes := "" (an update drops the pin) */
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
	/* Appended: a single GPU asked for with --gpus/--gpus-per-task moves to
	 * tres_per_node; these carry what stays of the job's field. */
	char *tres_per_job;
	char *tres_per_task;
	uint32_t set; /* COSCHEML_SET_* / COSCHEML_CLEAR_* bits */
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
