/* SPDX-License-Identifier: Apache-2.0 OR GPL-2.0-or-later */
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
 * size as the caller compiled it: the library reads and writes a struct only up
 * to that size, so a shim built before a field was appended keeps working, and
 * refuses one shorter than the version's first.
 *
 * Bump COSCHEML_ABI_VERSION on any change that is not "append a field".
 */
#ifndef COSCHEML_ABI_H
#define COSCHEML_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define COSCHEML_ABI_VERSION 4u

/* The answers of coscheml_decide. */
enum {
	COSCHEML_UNCHANGED = 0,
	COSCHEML_REWRITE = 1,
	/* Refuse: a bad directive (SLURM_ERROR, "Unspecified error"). */
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

/*
 * The fields of both structs are listed once, below, one X(...) line each, in
 * the structs' order; everything that names them is made from these lists:
 * the structs themselves, the library's copy of a job and of an answer
 * (queue.c), freeing an answer (coscheml_answer_free), the Go copies into
 * submit.JobFields and out of submit.Result (cmd/libcoscheml/abi_gen.go,
 * written by `go generate ./cmd/libcoscheml` from this file) and the shim's
 * filling of a job (job_submit_coscheml.c). Within one ABI version a field
 * is only ever appended at the end of its list.
 *
 * kind: STR  a string (const char * in the job, malloc'ed char * in the
 *            answer); NULL when unset
 *       U32  uint32_t
 *       I64  int64_t
 *       BOOL uint32_t, 0 or 1 (a Go bool)
 *       META uint32_t of the interface itself (size, flags): the generator
 *            leaves it to hand-written code
 */

/*
 * COSCHEML_JOB_FIELDS: one job as slurmctld handed it to job_submit or
 * job_modify. X(kind, name, go, from): go is the submit.JobFields field (_
 * for META); from is what the shim stores there, an expression over its
 * decide()'s job_desc (job_desc_msg_t *), job_ptr (slurmctld's job record,
 * NULL at submit), submit_uid and modify, expanded only by the shim.
 */
#define COSCHEML_JOB_FIELDS(X)                                                 \
	/* sizeof(struct coscheml_job) in the caller */                        \
	X(META, size, _, sizeof(struct coscheml_job))                          \
	/* 1: job_modify (scontrol update), 0: job_submit */                   \
	X(BOOL, modify, Modify, modify)                                        \
	X(STR, comment, Comment, job_desc->comment)                            \
	X(STR, tres_per_node, TresPerNode, job_desc->tres_per_node)            \
	X(STR, partition, Partition, job_desc->partition)                      \
	X(U32, user_id, UserID, user_of(job_desc, submit_uid))                 \
	X(U32, min_nodes, MinNodes, min_nodes_of(job_desc))                    \
	X(U32, max_nodes, MaxNodes, job_desc->max_nodes)                       \
	/* minutes; NO_VAL/INFINITE as Slurm has them */                       \
	X(U32, time_limit, TimeLimit, job_desc->time_limit)                    \
	/* NO_VAL for a new submission */                                      \
	X(U32, job_id, JobID, job_id_of(job_desc))                             \
	/* From interface 3 on. job_desc begin_time (unix s; 0: unset) */      \
	X(I64, begin_time, BeginTime, (int64_t)job_desc->begin_time)           \
	X(STR, req_nodes, ReqNodes, job_desc->req_nodes) /* -w, NodeList= */   \
	X(STR, exc_nodes, ExcNodes, job_desc->exc_nodes) /* -x */              \
	/* who submits or updates (not the job's owner) */                     \
	X(U32, submit_uid, SubmitUID, submit_uid)                              \
	/* COSCHEML_SET_* | COSCHEML_ADMIN */                                  \
	X(META, flags, _, flags_of(job_desc, submit_uid))                      \
	/*                                                                     \
	 * The job's other options a decision honours (job_desc_msg_t fields   \
	 * of the same names). See docs/slurm-integration.md.                  \
	 */                                                                    \
	X(STR, tres_per_job, TresPerJob, job_desc->tres_per_job) /* --gpus */  \
	X(STR, tres_per_task, TresPerTask, job_desc->tres_per_task)            \
	X(STR, tres_per_socket, TresPerSocket, job_desc->tres_per_socket)      \
	X(STR, mem_per_tres, MemPerTres, job_desc->mem_per_tres)               \
	X(STR, cpus_per_tres, CpusPerTres, job_desc->cpus_per_tres)            \
	X(STR, array_inx, ArrayInx, job_desc->array_inx) /* --array */         \
	X(U32, num_tasks, NumTasks, job_desc->num_tasks) /* -n; NO_VAL */      \
	/*                                                                     \
	 * 1: --exclusive in any form (job_desc shared 0, user, mcs or topo);  \
	 * 0 when shared is unset (NO_VAL16) or 1 (--oversubscribe). A flag,   \
	 * not the raw field, so that a zeroed struct means "not exclusive".   \
	 */                                                                    \
	X(BOOL, exclusive, Exclusive, exclusive_of(job_desc))                  \
	/* the comment slurmctld stores (job_modify; NULL at submit) */        \
	X(STR, job_comment, StoredComment, stored_comment(job_ptr))            \
	/* --constraint (node features); NULL when unset */                    \
	X(STR, features, Features, job_desc->features)

/*
 * COSCHEML_ANSWER_FIELDS: the library's answer. Every string is malloc'ed
 * by the library (or NULL) and free()d by the caller (coscheml_answer_free);
 * the library sets all of them to NULL first. X(kind, name, go, conv, when):
 * go is the submit.Result field it comes from, conv the Go function that
 * makes the C value of it (_: a plain conversion), when says which answers
 * carry it (ALWAYS, or REWRITE: only COSCHEML_REWRITE).
 */
#define COSCHEML_ANSWER_FIELDS(X)                                              \
	/* sizeof(struct coscheml_answer) in the caller */                     \
	X(META, size, _, _, ALWAYS)                                            \
	X(STR, tres_per_node, TresPerNode, _, REWRITE)                         \
	X(STR, req_nodes, ReqNodes, _, REWRITE)                                \
	X(STR, comment, Comment, _, REWRITE)                                   \
	X(STR, user_msg, UserMsg, _, ALWAYS)                                   \
	/* lines for slurmctld's log, '\n'-separated */                        \
	X(STR, log, Log, _, ALWAYS)                                            \
	/*                                                                     \
	 * The job's new begin_time (unix seconds; 0: leave it). A "wait"      \
	 * answer defers the job for re-decision.                              \
	 */                                                                    \
	X(I64, begin_time, BeginTime, _, REWRITE)                              \
	/*                                                                     \
	 * A single GPU asked for with --gpus/--gpus-per-task moves to         \
	 * tres_per_node: these carry what stays of the job's field, applied   \
	 * where replace says so.                                              \
	 */                                                                    \
	X(STR, tres_per_job, TresPerJob, _, REWRITE)                           \
	X(STR, tres_per_task, TresPerTask, _, REWRITE)                         \
	X(U32, replace, Replace, replaceBits, REWRITE) /* COSCHEML_ANS_* */    \
	/*                                                                     \
	 * From interface 4 on: the decision's one line for slurmctld's log,   \
	 * logged at decision_level (COSCHEML_LOG_*; log above is problems,    \
	 * refusals and removed tokens, at info).                              \
	 */                                                                    \
	X(U32, decision_level, LineLevel, logLevel, ALWAYS)                    \
	X(STR, decision_line, Line, _, ALWAYS)

/*
 * coscheml_answer.replace: fields the shim replaces with the answer's value
 * even when that is NULL (with COSCHEML_REWRITE).
 */
enum {
	COSCHEML_ANS_TRES_PER_JOB = 1u << 0,  /* tres_per_job := answer (NULL clears) */
	COSCHEML_ANS_TRES_PER_TASK = 1u << 1, /* tres_per_task := answer (NULL clears) */
	COSCHEML_ANS_CLEAR_REQ_NODES = 1u << 2, /* req_nodes := "" (an update drops the pin) */
};

/* The C type of each kind, in the job and in the answer. */
#define COSCHEML_JOB_CTYPE_STR const char *
#define COSCHEML_ANS_CTYPE_STR char *
#define COSCHEML_JOB_CTYPE_U32 uint32_t
#define COSCHEML_ANS_CTYPE_U32 uint32_t
#define COSCHEML_JOB_CTYPE_I64 int64_t
#define COSCHEML_ANS_CTYPE_I64 int64_t
#define COSCHEML_JOB_CTYPE_BOOL uint32_t
#define COSCHEML_ANS_CTYPE_BOOL uint32_t
#define COSCHEML_JOB_CTYPE_META uint32_t
#define COSCHEML_ANS_CTYPE_META uint32_t

/*
 * COSCHEML_IF_STR(kind, code...): code for STR fields, nothing for the
 * others; COSCHEML_IF_NUM: code for U32, I64 and BOOL fields.
 */
#define COSCHEML_IF_STR(kind, ...) COSCHEML_IF_STR_##kind(__VA_ARGS__)
#define COSCHEML_IF_STR_STR(...) __VA_ARGS__
#define COSCHEML_IF_STR_U32(...)
#define COSCHEML_IF_STR_I64(...)
#define COSCHEML_IF_STR_BOOL(...)
#define COSCHEML_IF_STR_META(...)
#define COSCHEML_IF_NUM(kind, ...) COSCHEML_IF_NUM_##kind(__VA_ARGS__)
#define COSCHEML_IF_NUM_STR(...)
#define COSCHEML_IF_NUM_U32(...) __VA_ARGS__
#define COSCHEML_IF_NUM_I64(...) __VA_ARGS__
#define COSCHEML_IF_NUM_BOOL(...) __VA_ARGS__
#define COSCHEML_IF_NUM_META(...)

#define COSCHEML_JOB_MEMBER_(kind, name, ...) COSCHEML_JOB_CTYPE_##kind name;
#define COSCHEML_ANS_MEMBER_(kind, name, ...) COSCHEML_ANS_CTYPE_##kind name;

struct coscheml_job {
	COSCHEML_JOB_FIELDS(COSCHEML_JOB_MEMBER_)
};

struct coscheml_answer {
	COSCHEML_ANSWER_FIELDS(COSCHEML_ANS_MEMBER_)
};

/*
 * The structs as interface 4 first had them: a caller's may be no shorter.
 * A longer struct's fields past the caller's size are neither read (the job:
 * they count as zero, NULL) nor written (the answer).
 */
#define COSCHEML_END_OF_(type, field)                                          \
	(offsetof(type, field) + sizeof(((type *)0)->field))
enum {
	COSCHEML_JOB_SIZE_4_0 = COSCHEML_END_OF_(struct coscheml_job, exclusive),
	COSCHEML_ANSWER_SIZE_4_0 =
		COSCHEML_END_OF_(struct coscheml_answer, decision_line),
};
/* COSCHEML_HAS(p, type, field): p->size holds field. */
#define COSCHEML_HAS(p, type, field)                                           \
	((p)->size >= COSCHEML_END_OF_(type, field))

/* Frees an answer's strings (NULL after) where a->size holds them. */
#define COSCHEML_ANS_FREE_(kind, name, ...)                                    \
	COSCHEML_IF_STR(kind, if (COSCHEML_HAS(a, struct coscheml_answer,      \
					      name)) {                         \
		free(a->name);                                                 \
		a->name = NULL;                                                \
	})
static inline void coscheml_answer_free(struct coscheml_answer *a)
{
	COSCHEML_ANSWER_FIELDS(COSCHEML_ANS_FREE_)
}

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
