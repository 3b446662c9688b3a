/* SPDX-License-Identifier: Apache-2.0 */
/*
 * abi4_layout: the structs of interface 4 as its first release had them,
 * frozen here; every field of theirs must keep its offset and size in
 * coscheml_abi.h's structs (fields are only appended within an ABI version),
 * so a shim built then still works with this library. Compiled by TestCABI;
 * a moved, removed or retyped field fails the build.
 */
#include <stddef.h>

#include "../../../plugin-c/coscheml_abi.h"

#if COSCHEML_ABI_VERSION == 4
struct abi4_job {
	uint32_t size;
	uint32_t modify;
	const char *comment;
	const char *tres_per_node;
	const char *partition;
	uint32_t user_id;
	uint32_t min_nodes;
	uint32_t max_nodes;
	uint32_t time_limit;
	uint32_t job_id;
	int64_t begin_time;
	const char *req_nodes;
	const char *exc_nodes;
	uint32_t submit_uid;
	uint32_t flags;
	const char *tres_per_job;
	const char *tres_per_task;
	const char *tres_per_socket;
	const char *mem_per_tres;
	const char *cpus_per_tres;
	const char *array_inx;
	uint32_t num_tasks;
	uint32_t exclusive;
};

struct abi4_answer {
	uint32_t size;
	char *tres_per_node;
	char *req_nodes;
	char *comment;
	char *user_msg;
	char *log;
	int64_t begin_time;
	char *tres_per_job;
	char *tres_per_task;
	uint32_t replace;
	uint32_t decision_level;
	char *decision_line;
};

#define SAME(now, then, f)                                                     \
	_Static_assert(offsetof(struct now, f) == offsetof(struct then, f) &&  \
			       sizeof(((struct now *)0)->f) ==                 \
				       sizeof(((struct then *)0)->f),          \
		       #now "." #f " moved")
SAME(coscheml_job, abi4_job, size);
SAME(coscheml_job, abi4_job, modify);
SAME(coscheml_job, abi4_job, comment);
SAME(coscheml_job, abi4_job, tres_per_node);
SAME(coscheml_job, abi4_job, partition);
SAME(coscheml_job, abi4_job, user_id);
SAME(coscheml_job, abi4_job, min_nodes);
SAME(coscheml_job, abi4_job, max_nodes);
SAME(coscheml_job, abi4_job, time_limit);
SAME(coscheml_job, abi4_job, job_id);
SAME(coscheml_job, abi4_job, begin_time);
SAME(coscheml_job, abi4_job, req_nodes);
SAME(coscheml_job, abi4_job, exc_nodes);
SAME(coscheml_job, abi4_job, submit_uid);
SAME(coscheml_job, abi4_job, flags);
SAME(coscheml_job, abi4_job, tres_per_job);
SAME(coscheml_job, abi4_job, tres_per_task);
SAME(coscheml_job, abi4_job, tres_per_socket);
SAME(coscheml_job, abi4_job, mem_per_tres);
SAME(coscheml_job, abi4_job, cpus_per_tres);
SAME(coscheml_job, abi4_job, array_inx);
SAME(coscheml_job, abi4_job, num_tasks);
SAME(coscheml_job, abi4_job, exclusive);
SAME(coscheml_answer, abi4_answer, size);
SAME(coscheml_answer, abi4_answer, tres_per_node);
SAME(coscheml_answer, abi4_answer, req_nodes);
SAME(coscheml_answer, abi4_answer, comment);
SAME(coscheml_answer, abi4_answer, user_msg);
SAME(coscheml_answer, abi4_answer, log);
SAME(coscheml_answer, abi4_answer, begin_time);
SAME(coscheml_answer, abi4_answer, tres_per_job);
SAME(coscheml_answer, abi4_answer, tres_per_task);
SAME(coscheml_answer, abi4_answer, replace);
SAME(coscheml_answer, abi4_answer, decision_level);
SAME(coscheml_answer, abi4_answer, decision_line);
_Static_assert(COSCHEML_JOB_SIZE_4_0 == sizeof(struct abi4_job), "job size 4.0");
_Static_assert(COSCHEML_ANSWER_SIZE_4_0 == sizeof(struct abi4_answer), "answer size 4.0");
#endif

int main(void)
{
	return 0;
}
