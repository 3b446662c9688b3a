/*
 * harness: loads libcoscheml.so the way the job_submit shim does (dlopen) and
 * drives its C API: init, submit (good, rejected, NULL fields), modify,
 * reconfigure, fini. Prints one line per call; bridge_test.go checks them.
 * usage: harness LIB CONFIG
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_fn)(const char *);
typedef int (*decide_fn)(const char *, const char *, const char *, uint32_t,
			 uint32_t, uint32_t, uint32_t, uint32_t, char **,
			 char **, char **, char **, char **);
typedef void (*void_fn)(void);

static decide_fn submit, modify;

static void show(const char *what, decide_fn fn, const char *comment,
		 const char *tres, uint32_t job_id)
{
	char *o[5] = {0};
	int rc = fn(comment, tres, NULL, 1000, 1, 1, 60, job_id, &o[0], &o[1],
		    &o[2], &o[3], &o[4]);
	printf("%s rc=%d tres=%s nodes=%s msg=%s\n", what, rc,
	       o[0] ? o[0] : "NULL", o[1] ? o[1] : "NULL",
	       o[3] ? o[3] : "NULL");
	if (o[4] && strchr(o[4], '\n'))
		printf("%s multi-line log\n", what);
	for (int i = 0; i < 5; i++)
		free(o[i]); /* malloc'ed by the library: must be free()able */
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	init_fn init = (init_fn)dlsym(h, "coscheml_init");
	submit = (decide_fn)dlsym(h, "coscheml_job_submit");
	modify = (decide_fn)dlsym(h, "coscheml_job_modify");
	void_fn reconf = (void_fn)dlsym(h, "coscheml_reconfigure");
	void_fn fini = (void_fn)dlsym(h, "coscheml_fini");
	if (!init || !submit || !modify || !reconf || !fini) {
		printf("missing symbol\n");
		return 1;
	}
	printf("init rc=%d\n", init(argv[2]));
	show("untagged", submit, "hello", "gres:gpu:1", 0xfffffffe);
	show("nulls", submit, NULL, NULL, 0xfffffffe);
	show("badtag", submit, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe);
	char *longc = malloc(10001);
	memset(longc, 'a', 10000);
	memcpy(longc, "coscheml:app=", 13);
	longc[10000] = 0;
	show("long", submit, longc, "gres:gpu:1", 0xfffffffe);
	free(longc);
	show("unknown", submit, "coscheml:app=nosuch", "gres:gpu:1", 0xfffffffe);
	show("modify", modify, NULL, NULL, 17);
	reconf();
	for (int i = 0; i < 1000; i++) {
		char *o[5] = {0};
		submit("coscheml:app=nosuch", "gres:gpu:1", NULL, 1, 1, 1, 1,
		       0xfffffffe, &o[0], &o[1], &o[2], &o[3], &o[4]);
		for (int k = 0; k < 5; k++)
			free(o[k]);
	}
	printf("loop done\n");
	fini();
	show("afterfini", submit, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe);
	init(argv[2]);
	show("reinit", submit, "coscheml:app=../x", "gres:gpu:1", 0xfffffffe);
	return 0;
}
