/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakelib: a libcoscheml.so of another build, for the shim's version check.
 * With -DFAKE_ABI=N it claims interface N; with -DNO_ABI it predates interface
 * versioning (only the old per-argument exports). The shim must refuse it before
 * calling anything else: every other export aborts.
 *
 * With -DECHO_STORED it speaks this interface and answers every job
 * "unchanged" with the user message "stored=<job_comment>" (NULL: "NULL"),
 * so that the harness sees what the shim hands over.
 */
#include <stdint.h>
#include <stdlib.h>

#ifdef ECHO_STORED
#include <stdio.h>
#include <string.h>

#include "coscheml_abi.h"

uint32_t coscheml_abi_version(void)
{
	return COSCHEML_ABI_VERSION;
}

int coscheml_init(const char *config_path, uint32_t slurm_version,
		  const char *slurm_conf_path, char **out_log)
{
	(void)config_path;
	(void)slurm_version;
	(void)slurm_conf_path;
	*out_log = NULL;
	return 0;
}

int coscheml_decide(const struct coscheml_job *job,
		    struct coscheml_answer *ans)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "stored=%s",
		 job->job_comment ? job->job_comment : "NULL");
	ans->user_msg = strdup(msg);
	return COSCHEML_UNCHANGED;
}
#else

#ifndef NO_ABI
uint32_t coscheml_abi_version(void)
{
	return FAKE_ABI;
}
#endif

int coscheml_init(void)
{
	abort();
}

int coscheml_decide(void)
{
	abort();
}

int coscheml_job_submit(void)
{
	abort();
}

int coscheml_job_modify(void)
{
	abort();
}
#endif
