/*
 * Per-launch cost of the hooks, measured on the real driver inside one
 * process: blocks of launches of an empty kernel (PTX loaded at run time)
 * whose parameters point into three tracked allocations alternate between
 * the symbol the program binds (libflextensor's hook when preloaded) and
 * libcuda's own function (found in libcuda's ELF symbol table with libelf,
 * which no hook can intercept).  Both forms: kernelParams with four
 * parameters (ATen-like) and a 1720-byte packed extra buffer through
 * cuLaunchKernelEx (cuBLASLt-like).  The median over blocks of (hooked -
 * direct) is the hook's cost; without the preload it measures the noise.
 * Exits 77 when no CUDA device is usable.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/elf_symbols.h"

struct lookup {
	const char *name;
	uint64_t value;
};

static int match(void *ud, const char *name, uint64_t value)
{
	struct lookup *l = ud;
	if (strcmp(name, l->name))
		return 0;
	l->value = value;
	return 1;
}

/* Address of libcuda's own definition of name. */
static void *libcuda_symbol(const char *name)
{
	Dl_info info;
	struct lookup l = { name, 0 };
	if (!dladdr((void *)cuInit, &info) || !info.dli_fname ||
	    elf_defined_symbols(info.dli_fname, match, &l) < 0 || !l.value)
		return NULL;
	return (char *)info.dli_fbase + l.value;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry small(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n"
	"{ ret; }\n"
	".visible .entry packed(.param .align 8 .b8 buf[1720])\n"
	"{ ret; }\n";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define N 20000
#define BLOCKS 15

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction small, packed;
	CUstream s;
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx)) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	if (cuModuleLoadData(&mod, ptx) || cuModuleGetFunction(&small, mod, "small") ||
	    cuModuleGetFunction(&packed, mod, "packed") ||
	    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
		fprintf(stderr, "module load failed\n");
		return 1;
	}
	CUdeviceptr a, b, c;
	cuMemAlloc(&a, 1 << 20);
	cuMemAlloc(&b, 1 << 20);
	cuMemAlloc(&c, 1 << 20);
	unsigned n = 7;
	void *params[] = { &a, &b, &c, &n };

	unsigned char buf[1720];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 37);
	memcpy(buf + 64, &a, 8);
	memcpy(buf + 512, &b, 8);
	memcpy(buf + 1200, &c, 8);
	size_t bufsize = sizeof(buf);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
			  &bufsize, CU_LAUNCH_PARAM_END };
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = s };

	PFN_cuLaunchKernel_v4000 direct = (PFN_cuLaunchKernel_v4000)libcuda_symbol("cuLaunchKernel");
	PFN_cuLaunchKernelEx_v11060 direct_ex =
		(PFN_cuLaunchKernelEx_v11060)libcuda_symbol("cuLaunchKernelEx");
	if (!direct || !direct_ex) {
		fprintf(stderr, "libcuda's own cuLaunchKernel not found\n");
		return 1;
	}
	double d_small[BLOCKS], d_packed[BLOCKS], base_small[BLOCKS];
	for (int rep = -1; rep < BLOCKS; rep++) {
		double t[5];
		t[0] = now();
		for (int i = 0; i < N; i++)
			cuLaunchKernel(small, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
		cuStreamSynchronize(s);
		t[1] = now();
		for (int i = 0; i < N; i++)
			direct(small, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
		cuStreamSynchronize(s);
		t[2] = now();
		for (int i = 0; i < N; i++)
			cuLaunchKernelEx(&cfg, packed, NULL, extra);
		cuStreamSynchronize(s);
		t[3] = now();
		for (int i = 0; i < N; i++)
			direct_ex(&cfg, packed, NULL, extra);
		cuStreamSynchronize(s);
		t[4] = now();
		if (rep < 0)
			continue; /* warm-up */
		base_small[rep] = (t[2] - t[1]) * 1e9 / N;
		d_small[rep] = ((t[1] - t[0]) - (t[2] - t[1])) * 1e9 / N;
		d_packed[rep] = ((t[3] - t[2]) - (t[4] - t[3])) * 1e9 / N;
	}
	qsort(d_small, BLOCKS, sizeof(double), cmp);
	qsort(d_packed, BLOCKS, sizeof(double), cmp);
	qsort(base_small, BLOCKS, sizeof(double), cmp);
	printf("launch %.0f ns direct; hook adds %.1f ns (kernelParams, 4 params), "
	       "%.1f ns (extra, 1720 B) [median of %d blocks of %d; quartiles %.1f..%.1f, %.1f..%.1f]\n",
	       base_small[BLOCKS / 2], d_small[BLOCKS / 2], d_packed[BLOCKS / 2], BLOCKS, N,
	       d_small[BLOCKS / 4], d_small[3 * BLOCKS / 4], d_packed[BLOCKS / 4],
	       d_packed[3 * BLOCKS / 4]);
	return 0;
}
