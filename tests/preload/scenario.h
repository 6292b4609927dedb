/*
 * One driver workload, run by every route test (direct binding, dlsym,
 * cuGetProcAddress, cudaGetDriverEntryPoint): allocations of each kind,
 * copies, memsets, launches in both parameter forms with CUfunction and
 * CUkernel handles, a TMA descriptor, a captured graph and its replays.
 * It checks the numbers the fake kernels compute (results must pass through
 * unchanged) and, when libflextensor is preloaded, that the trace names
 * every referenced allocation of every launch.
 */
#ifndef FT_TEST_SCENARIO_H
#define FT_TEST_SCENARIO_H

#include <stddef.h>

#include <cudaTypedefs.h>

struct api {
	PFN_cuInit_v2000 init;
	PFN_cuMemAlloc_v3020 alloc;
	PFN_cuMemFree_v3020 free;
	PFN_cuMemAllocAsync_v11020 alloc_async;
	PFN_cuMemFreeAsync_v11020 free_async;
	PFN_cuMemHostAlloc_v2020 host_alloc;
	PFN_cuMemAddressReserve_v10020 reserve;
	PFN_cuMemCreate_v10020 create;
	PFN_cuMemMap_v10020 map;
	PFN_cuMemUnmap_v10020 unmap;
	PFN_cuMemcpyHtoD_v3020 htod;
	PFN_cuMemcpyDtoH_v3020 dtoh;
	PFN_cuMemsetD32_v3020 memset32;
	PFN_cuLaunchKernel_v4000 launch;
	PFN_cuLaunchKernel_v7000_ptsz launch_ptsz;
	PFN_cuLaunchKernelEx_v11060 launch_ex;
	PFN_cuLaunchCooperativeKernel_v9000 launch_coop;
	PFN_cuTensorMapEncodeTiled_v12000 encode_tiled;
	PFN_cuStreamBeginCapture_v10010 begin_capture;
	PFN_cuStreamEndCapture_v10000 end_capture;
	PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
	PFN_cuGraphLaunch_v10000 graph_launch;
};

/* Removes a trace left by an earlier run (call first in main, before any
 * CUDA call opens it). */
void scenario_prepare(void);

/* Returns the number of failed checks (0 = pass); prints each failure. */
int run_scenario(const struct api *a, const char *route);

/* The name a resolver is asked for, for an exact ELF name:
 * "cuMemcpyHtoD_v2_ptds" -> "cuMemcpyHtoD", per-thread 1. */
void resolver_name(const char *exact, char *base, size_t size, int *per_thread);

/* Fills every member with lookup(name) for the exact ELF names. */
int api_by_name(struct api *a, void *(*lookup)(void *ud, const char *name), void *ud);

#endif
