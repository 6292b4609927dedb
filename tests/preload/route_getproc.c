/*
 * Route 3: the CUDA runtime's way (>= 12.0): dlsym(libcuda,
 * "cuGetProcAddress_v2"), self-lookup through it, then every symbol by base
 * name and ABI version, legacy or per-thread.  With libflextensor preloaded,
 * every pointer handed out must live in libflextensor, and the per-thread
 * and legacy answers for cuLaunchKernel must differ.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"

static PFN_cuGetProcAddress_v12000 getproc;
static int failures;

static void *by_getproc(void *ud, const char *exact)
{
	(void)ud;
	char base[128];
	int pt;
	resolver_name(exact, base, sizeof(base), &pt);
	unsigned long long flags = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
				      : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	if (getproc(base, &p, 12080, flags, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return p;
}

static int in_flextensor(const void *p)
{
	Dl_info i;
	return dladdr(p, &i) && i.dli_fname && strstr(i.dli_fname, "libflextensor");
}

int main(void)
{
	scenario_prepare();
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	PFN_cuGetProcAddress_v12000 boot =
		h ? (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2") : NULL;
	void *self = NULL;
	if (!boot || boot("cuGetProcAddress", &self, 12000, 0, NULL) != CUDA_SUCCESS || !self) {
		fprintf(stderr, "FAIL: cuGetProcAddress self-lookup\n");
		return 1;
	}
	getproc = (PFN_cuGetProcAddress_v12000)self;

	struct api a;
	if (api_by_name(&a, by_getproc, NULL))
		return 1;
	if (dlsym(RTLD_DEFAULT, "ft_version")) {
		/* Every member but cuInit (not hooked) is a hooked symbol. */
		const void *const *p = (const void *const *)&a;
		for (size_t i = 1; i < sizeof(a) / sizeof(void *); i++)
			if (!in_flextensor(p[i])) {
				fprintf(stderr, "FAIL: pointer %zu not routed to libflextensor\n", i);
				failures++;
			}
		if (!in_flextensor(self) || !in_flextensor((void *)boot)) {
			fprintf(stderr, "FAIL: cuGetProcAddress not routed to libflextensor\n");
			failures++;
		}
		if ((void *)a.launch == (void *)a.launch_ptsz) {
			fprintf(stderr, "FAIL: legacy and per-thread cuLaunchKernel are one hook\n");
			failures++;
		}
		/* An unhooked symbol passes through untouched. */
		void *q = NULL;
		getproc("cuFuncGetName", &q, 12030, 0, NULL);
		if (!q || in_flextensor(q)) {
			fprintf(stderr, "FAIL: unhooked cuFuncGetName was substituted\n");
			failures++;
		}
	}
	return run_scenario(&a, "getproc") || failures ? 1 : 0;
}
