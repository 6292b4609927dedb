/* Route 2: dlopen("libcuda.so.1") + dlsym per symbol, as Triton does. */
#include <dlfcn.h>
#include <stdio.h>

#include "scenario.h"

static void *by_dlsym(void *h, const char *name)
{
	return dlsym(h, name);
}

int main(void)
{
	scenario_prepare();
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "FAIL: %s\n", dlerror());
		return 1;
	}
	struct api a;
	if (api_by_name(&a, by_dlsym, h))
		return 1;
	return run_scenario(&a, "dlsym") ? 1 : 0;
}
