/*
 * Memory a library shares with other processes: an allocation made from
 * inside libnccl* (here a stand-in of that name) is left to the driver, so
 * its legacy IPC handle works; the same allocation made by the program is
 * VMM-backed (offloadable), and asking an IPC handle for it fails with a
 * message instead of a handle to the wrong memory.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

CUresult nccl_stand_in_alloc(CUdeviceptr *p, size_t n, CUipcMemHandle *h);

static unsigned long long stat(const char *name)
{
	int (*get)(const char *, unsigned long long *) =
		(int (*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "ft_stat_get");
	unsigned long long v = 0;
	if (get)
		get(name, &v);
	return v;
}

int main(void)
{
	int failures = 0;
	cuInit(0);
	CUdeviceptr mine, shared;
	CUipcMemHandle h;
	if (cuMemAlloc_v2(&mine, 8 << 20) || stat("vmm_allocs") != 1) {
		fprintf(stderr, "FAIL: the program's allocation is not VMM-backed\n");
		failures++;
	}
	if (cuIpcGetMemHandle(&h, mine) == CUDA_SUCCESS) {
		fprintf(stderr, "FAIL: an IPC handle to VMM-backed memory\n");
		failures++;
	}
	CUresult rc = nccl_stand_in_alloc(&shared, 8 << 20, &h);
	if (rc || stat("vmm_allocs") != 1) {
		fprintf(stderr, "FAIL: libnccl's allocation: rc %d, vmm_allocs %llu\n", (int)rc,
			stat("vmm_allocs"));
		failures++;
	}
	printf("nccl_alloc: %d failure(s)\n", failures);
	return failures != 0;
}
