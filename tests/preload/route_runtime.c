/* Route 4: cudaGetDriverEntryPoint[ByVersion] of the (fake) CUDA runtime. */
#include <stdio.h>
#include <string.h>

#include <driver_types.h>

#include "scenario.h"

int cudaGetDriverEntryPointByVersion(const char *, void **, unsigned int,
				     unsigned long long,
				     enum cudaDriverEntryPointQueryResult *);
int cudaGetDriverEntryPoint(const char *, void **, unsigned long long,
			    enum cudaDriverEntryPointQueryResult *);

static void *by_entry_point(void *ud, const char *exact)
{
	(void)ud;
	char base[128];
	snprintf(base, sizeof(base), "%s", exact);
	unsigned long long flags = cudaEnableLegacyStream;
	size_t n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, "_ptsz")) {
		base[n -= 5] = 0;
		flags = cudaEnablePerThreadDefaultStream;
	}
	if (n > 3 && !strcmp(base + n - 3, "_v2"))
		base[n - 3] = 0;
	if (!strcmp(base, "cuGraphInstantiateWithFlags"))
		strcpy(base, "cuGraphInstantiate");
	void *p = NULL;
	enum cudaDriverEntryPointQueryResult st;
	/* Alternate the two entry points so both are exercised. */
	if (base[2] == 'M')
		cudaGetDriverEntryPoint(base, &p, flags, &st);
	else
		cudaGetDriverEntryPointByVersion(base, &p, 12080, flags, &st);
	return p;
}

int main(void)
{
	scenario_prepare();
	struct api a;
	if (api_by_name(&a, by_entry_point, NULL))
		return 1;
	return run_scenario(&a, "runtime") ? 1 : 0;
}
