/*
 * fakelib: a libcoscheml.so of another build, for the shim's version check.
 * With -DFAKE_ABI=N it claims interface N; with -DNO_ABI it predates interface
 * versioning (only the old per-argument exports). The shim must refuse it before
 * calling anything else: every other export aborts.
 */
#include <stdint.h>
#include <stdlib.h>

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
