/*
 * The VMM allocator's budget against the fake driver (real aliasing through
 * memfd): chunks beyond FT_MAX_GPU_MEM_FRACTION's share of the device get
 * host memory at their address; once room is freed, ft_vmm_migrate moves
 * them to the device with their bytes intact and the address unchanged.
 */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ft/vmm.h"
#include "../common/check.h"
#include "../fake/fake.h"

#define MB (1ull << 20)


int main(void)
{
	cuInit(0);
	static struct ft_real real;
	real.cuMemAddressReserve = cuMemAddressReserve;
	real.cuMemAddressFree = cuMemAddressFree;
	real.cuMemCreate = cuMemCreate;
	real.cuMemRelease = cuMemRelease;
	real.cuMemMap = cuMemMap;
	real.cuMemUnmap = cuMemUnmap;
	real.cuMemSetAccess = cuMemSetAccess;
	real.cuMemGetAllocationGranularity = cuMemGetAllocationGranularity;
	real.cuCtxGetDevice = cuCtxGetDevice;
	real.cuCtxSynchronize = cuCtxSynchronize;
	real.cuDeviceTotalMem_v2 = cuDeviceTotalMem_v2;
	real.cuMemcpyDtoD_v2 = cuMemcpyDtoD_v2;
	real.cuMemAlloc_v2 = cuMemAlloc_v2;
	real.cuMemFree_v2 = cuMemFree_v2;
	size_t total;
	cuDeviceTotalMem_v2(&total, 0);
	struct ft_vmm v;
	/* a budget of 8 MiB: four chunks */
	ft_vmm_init(&v, &real, 2 * MB, (double)(8 * MB) / (double)total, -1);
	CUdeviceptr a, b;
	uint64_t host;
	CHECK(!ft_vmm_alloc(&v, &a, 4 * MB, &host) && host == 0, "first allocation");
	/* allocations come from one reservation high in the address space,
	 * where packed integers in kernel parameters do not reach */
	CHECK(v.arena >> 40 && a == v.arena, "first allocation at 0x%llx, arena 0x%llx",
	      (unsigned long long)a, (unsigned long long)v.arena);
	CHECK(!ft_vmm_alloc(&v, &b, 8 * MB, &host), "second allocation");
	CHECK(b == a + 4 * MB, "second allocation not next to the first");
	CHECK(host == 4 * MB, "%llu bytes of the second in host memory, 4 MiB expected",
	      (unsigned long long)host);
	CHECK(v.device_bytes == 8 * MB && v.host_bytes == 4 * MB, "device %llu host %llu",
	      (unsigned long long)v.device_bytes, (unsigned long long)v.host_bytes);
	/* the whole allocation reads and writes as one range */
	unsigned char *p = (unsigned char *)(uintptr_t)b;
	for (size_t i = 0; i < 8 * MB; i++)
		p[i] = (unsigned char)(i * 7 + 3);
	/* nothing moves while the budget is full */
	CHECK(ft_vmm_migrate(&v) == 0, "moved with a full budget");
	CUresult rc;
	CHECK(ft_vmm_free(&v, a, &rc) == 1 && rc == CUDA_SUCCESS, "free");
	uint64_t moved = ft_vmm_migrate(&v);
	CHECK(moved == 4 * MB, "moved %llu bytes, 4 MiB expected", (unsigned long long)moved);
	CHECK(v.device_bytes == 8 * MB && v.host_bytes == 0, "after: device %llu host %llu",
	      (unsigned long long)v.device_bytes, (unsigned long long)v.host_bytes);
	size_t bad = 0;
	for (size_t i = 0; i < 8 * MB; i++)
		bad += p[i] != (unsigned char)(i * 7 + 3);
	CHECK(bad == 0, "%zu bytes changed by the move", bad);
	/* once a plan is applied the limit ends: new allocations on the device */
	ft_vmm_unlimit(&v);
	CUdeviceptr c;
	CHECK(!ft_vmm_alloc(&v, &c, 8 * MB, &host) && host == 0, "allocation after the plan");
	/* a's freed range is too small for c: c goes after b */
	CHECK(c == b + 8 * MB, "third allocation at 0x%llx", (unsigned long long)c);
	CUdeviceptr d;
	CHECK(!ft_vmm_alloc(&v, &d, 4 * MB, &host) && d == a, "a's range is reused");
	/* another device: left to the driver */
	CUdeviceptr e = 0;
	fake_set_device(1);
	CHECK(ft_vmm_alloc(&v, &e, 8 * MB, &host) == -1 && e == 0, "allocation on device 1");
	fake_set_device(0);
	CHECK(ft_vmm_free(&v, d, &rc) == 1, "free d");
	CHECK(ft_vmm_free(&v, c, &rc) == 1, "free c");
	CHECK(ft_vmm_free(&v, b, &rc) == 1, "free b");
	CHECK(v.device_bytes == 0 && v.host_bytes == 0, "all released");
	/* FT_GPU_DEVICE=1: device 0's allocations are the driver's, device 1's
	 * are served, though device 0 was current first */
	struct ft_vmm w;
	ft_vmm_init(&w, &real, 2 * MB, NAN, 1);
	CHECK(ft_vmm_alloc(&w, &e, 4 * MB, &host) == -1 && w.state == 0, "FT_GPU_DEVICE=1, on 0");
	fake_set_device(1);
	CHECK(!ft_vmm_alloc(&w, &e, 4 * MB, &host) && w.device == 1, "FT_GPU_DEVICE=1, on 1");
	CHECK(ft_vmm_free(&w, e, &rc) == 1, "free e");
	fake_set_device(0);
	printf("vmm_budget: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
