/*
 * Threads: launches on four threads while a fifth allocates and frees.  No
 * crash, every launch counted, every launch of the stable allocations finds
 * them.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../fake/fake.h"

CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
			     unsigned, unsigned, unsigned, CUstream, void **, void **);

#define PER_THREAD 20000
static CUdeviceptr A, B, C;
static _Atomic int stop; /* read by the churn thread */

static void *launcher(void *ud)
{
	(void)ud;
	int n = 1;
	void *p[] = { &A, &B, &C, &n };
	for (int i = 0; i < PER_THREAD; i++)
		if (cuLaunchKernel_ptsz(fake_function("vec_add"), 1, 1, 1, 1, 1, 1, 0, NULL, p, NULL))
			abort();
	return NULL;
}

static void *churn(void *ud)
{
	(void)ud;
	while (!stop) {
		CUdeviceptr x;
		cuMemAlloc_v2(&x, 256);
		cuMemFree_v2(x);
	}
	return NULL;
}

int main(void)
{
	const char *trace = getenv("FT_TRACE");
	if (trace)
		unlink(trace);
	cuInit(0);
	cuMemAlloc_v2(&A, 64);
	cuMemAlloc_v2(&B, 64);
	cuMemAlloc_v2(&C, 64);
	pthread_t t[5];
	pthread_create(&t[4], NULL, churn, NULL);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, launcher, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	stop = 1;
	pthread_join(t[4], NULL);

	int (*get)(const char *, unsigned long long *) =
		(int (*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "ft_stat_get");
	unsigned long long launches = 0, refs = 0;
	get("launches", &launches);
	get("launch_refs", &refs);
	printf("threads: %llu launches, %llu refs\n", launches, refs);
	return launches == 4 * PER_THREAD && refs == 3ULL * 4 * PER_THREAD ? 0 : 1;
}
