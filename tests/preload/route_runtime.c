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
	int pt;
	resolver_name(exact, base, sizeof(base), &pt);
	unsigned long long flags = pt ? cudaEnablePerThreadDefaultStream : cudaEnableLegacyStream;
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
