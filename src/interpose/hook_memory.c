/*
 * Allocation hooks: every way device-visible memory appears or disappears.
 * Each hook calls the driver, then, on success and when observing, tells the
 * registry.  Frees are observed before the call (the range is gone for the
 * caller from this point on, whatever the driver answers).
 */
#include <dlfcn.h>
#include <string.h>

#include "hooks.h"

#define OBSERVING() (ft_lib_ensure(), ft_observing())

/* Whether the code at ret (the caller of an allocation) belongs to a
 * library that shares its buffers with other processes through legacy IPC
 * handles (NCCL, whose static runtime calls the driver from inside
 * libnccl): such memory is left to the driver, never VMM-backed.  The
 * answer for the latest few callers is remembered. */
static int caller_shares(const void *ret)
{
	static _Thread_local struct {
		const void *ret;
		int shares;
	} seen[4];
	static _Thread_local unsigned next;
	for (unsigned i = 0; i < 4; i++)
		if (seen[i].ret == ret)
			return seen[i].shares;
	Dl_info info;
	const char *base = NULL;
	if (dladdr(ret, &info) && info.dli_fname)
		base = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1
						     : info.dli_fname;
	int shares = base && !strncmp(base, "libnccl", 7);
	seen[next % 4].ret = ret;
	seen[next++ % 4].shares = shares;
	if (shares)
		ft_info_once("allocations made by %s are left to the driver (it shares them "
			     "between processes): never offloaded", base);
	return shares;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	/* large allocations through VMM, so that offloading can re-back them */
	CUresult rc;
	uint64_t host = 0;
	if (OBSERVING() && dptr && !caller_shares(__builtin_return_address(0)) &&
	    !ft_vmm_alloc(&ft_g.vmm, dptr, size, &host)) {
		rc = CUDA_SUCCESS;
		FT_STAT_INC(&ft_g.stats, vmm_allocs);
		FT_STAT_ADD(&ft_g.stats, vmm_bytes, size);
		if (host) {
			FT_STAT_ADD(&ft_g.stats, vmm_host_bytes, host);
			ft_info_once("the GPU budget (FT_MAX_GPU_MEM_FRACTION) is full before a plan "
				     "exists: further allocations get host memory at their address "
				     "until offloading makes room");
		}
	} else {
		rc = FT_CALL(cuMemAlloc_v2, dptr, size);
	}
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemAlloc_v2", *dptr, size, FT_ALLOC_DEVICE, NULL);
	return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
			    size_t height, unsigned int elem)
{
	CUresult rc = FT_CALL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemAllocPitch_v2", *dptr, *pitch * height,
			     FT_ALLOC_PITCH, NULL);
	return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	CUresult rc = FT_CALL(cuMemAllocManaged, dptr, size, flags);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemAllocManaged", *dptr, size, FT_ALLOC_MANAGED, NULL);
	return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	if (OBSERVING())
		ft_obs_free("cuMemFree_v2", dptr);
	CUdeviceptr base;
	size_t size;
	CUresult rc;
	if (ft_vmm_range(&ft_g.vmm, dptr, &base, &size) && base == dptr) {
		ft_off_freed(ft_g.off, base, size);
		if (ft_vmm_free(&ft_g.vmm, dptr, &rc))
			return rc;
	}
	return FT_CALL(cuMemFree_v2, dptr);
}

/* What a VMM-backed allocation looks like from outside: one range, as if
 * cuMemAlloc had made it (the driver would answer per 2 MiB mapping). */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	CUdeviceptr base;
	size_t size;
	if (!ft_vmm_range(&ft_g.vmm, dptr, &base, &size))
		return FT_CALL(cuMemGetAddressRange_v2, pbase, psize, dptr);
	if (pbase)
		*pbase = base;
	if (psize)
		*psize = size;
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
	CUdeviceptr base;
	size_t size;
	if (data && (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ||
		     attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) &&
	    ft_vmm_range(&ft_g.vmm, ptr, &base, &size)) {
		if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			*(CUdeviceptr *)data = base;
		else
			*(size_t *)data = size;
		return CUDA_SUCCESS;
	}
	return FT_CALL(cuPointerGetAttribute, data, attr, ptr);
}

/* Legacy IPC handles do not exist for VMM memory: said, not silently wrong. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr ptr)
{
	CUdeviceptr base;
	size_t size;
	if (ft_vmm_range(&ft_g.vmm, ptr, &base, &size)) {
		ft_error("cuIpcGetMemHandle on an allocation libflextensor serves through VMM "
			 "(%zu bytes): legacy IPC cannot share it; run with FT_VMM_MIN_BYTES=0 (no "
			 "offloading) or above %zu to share such memory between processes", size, size);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return FT_CALL(cuIpcGetMemHandle, h, ptr);
}

#define ALLOC_ASYNC(sym)                                                       \
	CUresult sym(CUdeviceptr *dptr, size_t size, CUstream s)               \
	{                                                                      \
		CUresult rc = FT_CALL(sym, dptr, size, s);                     \
		if (rc == CUDA_SUCCESS && OBSERVING())                         \
			ft_obs_alloc(#sym, *dptr, size, FT_ALLOC_ASYNC, s);    \
		return rc;                                                     \
	}
ALLOC_ASYNC(cuMemAllocAsync)
ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define ALLOC_POOL(sym)                                                        \
	CUresult sym(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) \
	{                                                                      \
		CUresult rc = FT_CALL(sym, dptr, size, pool, s);               \
		if (rc == CUDA_SUCCESS && OBSERVING())                         \
			ft_obs_alloc(#sym, *dptr, size, FT_ALLOC_POOL, s);     \
		return rc;                                                     \
	}
ALLOC_POOL(cuMemAllocFromPoolAsync)
ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz)

#define FREE_ASYNC(sym)                                                        \
	CUresult sym(CUdeviceptr dptr, CUstream s)                             \
	{                                                                      \
		if (OBSERVING())                                               \
			ft_obs_free(#sym, dptr);                               \
		return FT_CALL(sym, dptr, s);                                  \
	}
FREE_ASYNC(cuMemFreeAsync)
FREE_ASYNC(cuMemFreeAsync_ptsz)

/* VMM: reservations and physical handles hold no addressable memory by
 * themselves; a mapping does, so the registry tracks mappings. */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
			     CUdeviceptr addr, unsigned long long flags)
{
	CUresult rc = FT_CALL(cuMemAddressReserve, ptr, size, align, addr, flags);
	if (OBSERVING())
		ft_obs_event("va_reserve", "cuMemAddressReserve", rc, "ptr",
			     rc == CUDA_SUCCESS ? *ptr : 0, "size", size);
	return rc;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult rc = FT_CALL(cuMemAddressFree, ptr, size);
	if (OBSERVING())
		ft_obs_event("va_free", "cuMemAddressFree", rc, "ptr", ptr, "size", size);
	return rc;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUresult rc = FT_CALL(cuMemCreate, h, size, prop, flags);
	if (OBSERVING())
		ft_obs_event("mem_create", "cuMemCreate", rc, "handle",
			     rc == CUDA_SUCCESS ? *h : 0, "size", size);
	return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	CUresult rc = FT_CALL(cuMemRelease, h);
	if (OBSERVING())
		ft_obs_event("mem_release", "cuMemRelease", rc, "handle", h, NULL, 0);
	return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		  CUmemGenericAllocationHandle h, unsigned long long flags)
{
	CUresult rc = FT_CALL(cuMemMap, ptr, size, offset, h, flags);
	if (rc == CUDA_SUCCESS && OBSERVING()) {
		ft_obs_alloc("cuMemMap", ptr, size, FT_ALLOC_VMM, NULL);
		ft_obs_event("mem_map", "cuMemMap", rc, "ptr", ptr, "handle", h);
	}
	return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	if (OBSERVING())
		ft_obs_unmap("cuMemUnmap", ptr, size);
	return FT_CALL(cuMemUnmap, ptr, size);
}

/* Host memory the GPU can address (UVA: the device address is the host
 * address). */
CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	CUresult rc = FT_CALL(cuMemHostAlloc, pp, size, flags);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemHostAlloc", (uint64_t)(uintptr_t)*pp, size,
			     FT_ALLOC_HOST, NULL);
	return rc;
}

CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
	CUresult rc = FT_CALL(cuMemAllocHost_v2, pp, size);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemAllocHost_v2", (uint64_t)(uintptr_t)*pp, size,
			     FT_ALLOC_HOST, NULL);
	return rc;
}

CUresult cuMemFreeHost(void *p)
{
	if (OBSERVING())
		ft_obs_free("cuMemFreeHost", (uint64_t)(uintptr_t)p);
	return FT_CALL(cuMemFreeHost, p);
}

CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	CUresult rc = FT_CALL(cuMemHostRegister_v2, p, size, flags);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_alloc("cuMemHostRegister_v2", (uint64_t)(uintptr_t)p, size,
			     FT_ALLOC_HOST_REG, NULL);
	return rc;
}

CUresult cuMemHostUnregister(void *p)
{
	if (OBSERVING())
		ft_obs_free("cuMemHostUnregister", (uint64_t)(uintptr_t)p);
	return FT_CALL(cuMemHostUnregister, p);
}
