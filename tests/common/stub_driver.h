/* Driver calls the block engine makes when it sets up, stages and brings
 * traps back, stubbed for tests without a GPU: each succeeds and moves
 * nothing (handles are counters).  A test sets these, then replaces the
 * ones it watches (event records, waits, copies, synchronisation). */
#ifndef FT_TEST_STUB_DRIVER_H
#define FT_TEST_STUB_DRIVER_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ft/real.h"
#include "ft/vmm.h"

static CUresult stub_event(CUevent *e, unsigned f)
{
	static uintptr_t n;
	(void)f;
	*e = (CUevent)++n;
	return CUDA_SUCCESS;
}
static CUresult stub_record(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
static CUresult stub_wait(CUstream s, CUevent e, unsigned f) { (void)s, (void)e, (void)f; return CUDA_SUCCESS; }
static CUresult stub_copy(CUdeviceptr d, const void *p, size_t n, CUstream s)
{
	(void)d, (void)p, (void)n, (void)s;
	return CUDA_SUCCESS;
}
static CUresult stub_copy_sync(CUdeviceptr d, const void *p, size_t n) { (void)d, (void)p, (void)n; return CUDA_SUCCESS; }
static CUresult stub_sync(void) { return CUDA_SUCCESS; }
static CUresult stub_create(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p,
			    unsigned long long f)
{
	static CUmemGenericAllocationHandle next = 1 << 20;
	(void)n, (void)p, (void)f;
	*h = next++;
	return CUDA_SUCCESS;
}
static CUresult stub_unmap(CUdeviceptr c, size_t n) { (void)c, (void)n; return CUDA_SUCCESS; }
static CUresult stub_map(CUdeviceptr c, size_t n, size_t o, CUmemGenericAllocationHandle h,
			 unsigned long long f)
{
	(void)c, (void)n, (void)o, (void)h, (void)f;
	return CUDA_SUCCESS;
}
static CUresult stub_access(CUdeviceptr c, size_t n, const CUmemAccessDesc *d, size_t k)
{
	(void)c, (void)n, (void)d, (void)k;
	return CUDA_SUCCESS;
}
static CUresult stub_release(CUmemGenericAllocationHandle h) { (void)h; return CUDA_SUCCESS; }
static CUresult stub_stream(CUstream *s, unsigned f) { (void)f; *s = (CUstream)0; return CUDA_SUCCESS; }
static CUresult stub_register(void *p, size_t n, unsigned f) { (void)p, (void)n, (void)f; return CUDA_SUCCESS; }
static CUresult stub_unregister(void *p) { (void)p; return CUDA_SUCCESS; }
static CUresult stub_dtoh(void *d, CUdeviceptr s, size_t n) { (void)d, (void)s, (void)n; return CUDA_SUCCESS; }

/* Every call the engine makes, stubbed (the copy stream is stream 0). */
static inline void stub_engine_driver(struct ft_real *r)
{
	r->cuEventCreate = stub_event;
	r->cuEventRecord = stub_record;
	r->cuStreamWaitEvent = stub_wait;
	r->cuMemcpyHtoDAsync_v2 = stub_copy;
	r->cuMemcpyHtoD_v2 = stub_copy_sync;
	r->cuCtxSynchronize = stub_sync;
	r->cuMemCreate = stub_create;
	r->cuMemUnmap = stub_unmap;
	r->cuMemMap = stub_map;
	r->cuMemSetAccess = stub_access;
	r->cuMemRelease = stub_release;
	r->cuStreamCreate = stub_stream;
	r->cuMemHostRegister_v2 = stub_register;
	r->cuMemHostUnregister = stub_unregister;
	r->cuMemcpyDtoH_v2 = stub_dtoh;
}

/* A started VMM over the allocations a[0..n) (sorted by base, chunks of
 * chunk bytes, each with memory of its own where a[i].own says), reaching
 * the driver through r: what the engine finds after the program's
 * allocations. */
static inline void stub_vmm(struct ft_vmm *v, const struct ft_real *r, size_t chunk,
			    struct ft_vmm_alloc *a, uint32_t n)
{
	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->lock, NULL);
	v->real = r;
	v->chunk = chunk;
	v->state = 1;
	v->a = a;
	v->n = n;
}

#endif
