/* SPDX-License-Identifier: Apache-2.0 */
/*
 * abi: drives libcoscheml.so's C interface directly, without Slurm's headers,
 * the way any shim must: version check first, then init, decide, reconfigure,
 * fini; and what a shim of another build would send (structs that are too
 * short). Prints one line per call; bridge_test.go checks them.
 * usage: abi LIB CONFIG
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../plugin-c/coscheml_abi.h"

static coscheml_decide_fn decide;

static void show(const char *what, uint32_t modify, const char *comment,
		 const char *tres, uint32_t job_id, uint32_t job_size)
{
	struct coscheml_job j = {0};
	struct coscheml_answer a = {0};

	j.size = job_size;
	j.modify = modify;
	j.comment = comment;
	j.tres_per_node = tres;
	j.user_id = 1000;
	j.min_nodes = 1;
	j.max_nodes = 1;
	j.time_limit = 60;
	j.job_id = job_id;
	a.size = sizeof(a);
	int rc = decide(&j, &a);
	if (what)
		printf("%s rc=%d tres=%s nodes=%s msg=%s log=%s level=%u line=%s\n",
		       what, rc, a.tres_per_node ? a.tres_per_node : "NULL",
		       a.req_nodes ? a.req_nodes : "NULL",
		       a.user_msg ? a.user_msg : "NULL", a.log ? a.log : "NULL",
		       a.decision_level,
		       a.decision_line ? a.decision_line : "NULL");
	coscheml_answer_free(&a);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	coscheml_abi_version_fn abi =
		(coscheml_abi_version_fn)dlsym(h, "coscheml_abi_version");
	coscheml_init_fn init = (coscheml_init_fn)dlsym(h, "coscheml_init");
	decide = (coscheml_decide_fn)dlsym(h, "coscheml_decide");
	coscheml_void_fn reconf =
		(coscheml_void_fn)dlsym(h, "coscheml_reconfigure");
	coscheml_void_fn fini = (coscheml_void_fn)dlsym(h, "coscheml_fini");
	if (!abi || !init || !decide || !reconf || !fini) {
		printf("missing symbol\n");
		return 1;
	}
	printf("abi=%" PRIu32 " header=%u\n", abi(), COSCHEML_ABI_VERSION);
	char *log = NULL;
	printf("init rc=%d\n", init(argv[2], 0x160508, NULL, &log));
	free(log);

	const uint32_t full = sizeof(struct coscheml_job);
	show("untagged", 0, "hello", "gres:gpu:1", 0xfffffffe, full);
	show("nulls", 0, NULL, NULL, 0xfffffffe, full);
	show("badtag", 0, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe, full);
	show("unknown", 0, "coscheml:app=nosuch", "gres:gpu:1", 0xfffffffe, full);
	show("modify", 1, "coscheml:app=nosuch", NULL, 17, full);
	/* A shim of an older build that sends fewer fields: refused, unchanged. */
	show("shortjob", 0, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe, 8);
	/*
	 * A shim of interface 4's first build: its job ends at
	 * COSCHEML_JOB_SIZE_4_0 and is decided; what lies past that in its
	 * memory (here bytes that would crash as a pointer) is never read.
	 */
	union {
		struct coscheml_job j;
		unsigned char raw[sizeof(struct coscheml_job) + 64];
	} old;
	memset(&old, 0xa5, sizeof(old));
	memset(&old, 0, COSCHEML_JOB_SIZE_4_0);
	old.j.size = COSCHEML_JOB_SIZE_4_0;
	old.j.comment = "coscheml:app=nosuch";
	old.j.tres_per_node = "gres:gpu:1";
	old.j.user_id = old.j.submit_uid = 1000;
	old.j.min_nodes = old.j.max_nodes = 1;
	old.j.time_limit = 60;
	old.j.job_id = 0xfffffffe;
	struct coscheml_answer oa = {.size = sizeof(oa)};
	int orc = decide(&old.j, &oa);
	printf("abi4.0 rc=%d msg=%s\n", orc, oa.user_msg ? oa.user_msg : "NULL");
	coscheml_answer_free(&oa);

	/* A too-short answer struct is left alone (nothing written, no crash). */
	struct {
		struct coscheml_answer a;
		uint64_t canary;
	} small;
	memset(&small, 0, sizeof(small));
	small.a.size = 4;
	small.canary = 0x5a5a5a5a5a5a5a5aull;
	struct coscheml_job j = {.size = full, .comment = "coscheml:app=../x",
				 .tres_per_node = "gres:gpu:1",
				 .job_id = 0xfffffffe};
	int rc = decide(&j, &small.a);
	printf("shortanswer rc=%d untouched=%d\n", rc,
	       small.a.log == NULL && small.canary == 0x5a5a5a5a5a5a5a5aull);
	printf("nullanswer rc=%d\n", decide(&j, NULL));
	printf("nulljob rc=%d\n", decide(NULL, NULL));

	reconf();
	for (int i = 0; i < 1000; i++)
		show(i == 999 ? "loop" : NULL, 0, "coscheml:app=nosuch",
		     "gres:gpu:1", 0xfffffffe, full);
	fini();
	show("afterfini", 0, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe, full);
	log = NULL;
	init(argv[2], 0x160508, NULL, &log);
	free(log);
	show("reinit", 0, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe, full);
	fini();
	return 0;
}
