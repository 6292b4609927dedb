/*
 * A fake CUDA driver (libcuda.so.1) for tests on machines without a GPU.
 * Exports the symbols libflextensor hooks or calls, with real semantics where
 * the tests observe them: allocations are host memory, copies and memsets
 * move bytes, kernels are host functions fed from kernelParams or an extra
 * buffer, parameter layouts come from cuFuncGetParamInfo (CUfunction handles)
 * or cuKernelGetParamInfo (CUkernel handles only, like ATen's), and
 * cuGetProcAddress picks the exact versioned / per-thread symbol as the real
 * driver does.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "ft/checksum.h"
#include "fake.h"
#include "ft/codec.h"

#undef cuGetProcAddress
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#define API __attribute__((visibility("default")))
#define H(x) ((void *)(uintptr_t)(x))

/* ---- injected faults ----
 * FAKE_FAIL=name:n fails the n-th call (from 1, whoever makes it) of the
 * entry point name (as below), name:n+ every call from the n-th on (a limit
 * reached for good, as RLIMIT_MEMLOCK for cuMemHostRegister), with
 * CUDA_ERROR_OUT_OF_MEMORY.  One name per process. */
static unsigned long injected_calls;
/* FAKE_FAIL=name:0 fails nothing and says at exit how often name was
 * called (to choose n). */
__attribute__((destructor)) static void injected_report(void)
{
	const char *e = getenv("FAKE_FAIL");
	const char *c = e ? strchr(e, ':') : NULL;
	if (c && !strcmp(c, ":0"))
		fprintf(stderr, "fake: %.*s called %lu times\n", (int)(c - e), e, injected_calls);
}
static int injected(const char *name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	unsigned long calls;
	const char *e = getenv("FAKE_FAIL");
	size_t len = strlen(name);
	if (!e || strncmp(e, name, len) || e[len] != ':')
		return 0;
	char *end;
	unsigned long n = strtoul(e + len + 1, &end, 10);
	pthread_mutex_lock(&lock);
	unsigned long k = calls = ++injected_calls;
	pthread_mutex_unlock(&lock);
	return n && (*end == '+' ? k >= n : k == n);
}
#define INJECT(name)                                                            \
	do {                                                                    \
		if (injected(name))                                             \
			return CUDA_ERROR_OUT_OF_MEMORY;                        \
	} while (0)

/* ---- memory: a bump allocator over one anonymous mapping ---- */
static char *arena;
static size_t arena_used;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
#define ARENA (8ULL << 30) /* address space only: MAP_NORESERVE */

static void *bump(size_t n)
{
	pthread_mutex_lock(&arena_lock);
	if (!arena) {
		arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (arena == MAP_FAILED)
			abort();
	}
	size_t off = (arena_used + 255) & ~(size_t)255;
	void *p = NULL;
	if (off + n <= ARENA) {
		p = arena + off;
		arena_used = off + n;
	}
	pthread_mutex_unlock(&arena_lock);
	return p;
}

#define ALLOC_OR_FAIL(dst, n)                                                  \
	do {                                                                   \
		void *p_ = bump(n);                                            \
		if (!p_)                                                       \
			return CUDA_ERROR_OUT_OF_MEMORY;                       \
		dst = p_;                                                      \
	} while (0)

API CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
API CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
/* The current device: fake_set_device, first FAKE_DEVICE (a worker that
 * selected another device before its first allocation), else 0. */
static int current_device = -1;
API void fake_set_device(int d) { current_device = d; }
/* one context (the library asks for it, and sets it in its threads) */
static int fake_ctx;
API CUresult cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)&fake_ctx; return CUDA_SUCCESS; }
API CUresult cuCtxSetCurrent(CUcontext c) { return c == (CUcontext)&fake_ctx || !c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }
API CUresult cuCtxGetDevice(CUdevice *d)
{
	if (current_device < 0)
		current_device = getenv("FAKE_DEVICE") ? atoi(getenv("FAKE_DEVICE")) : 0;
	*d = current_device;
	return CUDA_SUCCESS;
}

/* Legacy IPC: the handle holds the address (one process, no sharing). */
API CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &p, sizeof(p));
	return CUDA_SUCCESS;
}
/* cuMemAlloc's allocations, in address order (the arena only grows): a
 * copy, decode or encode that starts in one and runs past its end aborts,
 * where a GPU would fault or write over the next allocation (addresses
 * outside them, VMM mappings and host memory, are not checked). */
static struct { uintptr_t lo, hi; } *allocs;
static size_t nallocs, capallocs;
static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_alloc(const void *p, size_t n)
{
	pthread_mutex_lock(&allocs_lock);
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 256;
		allocs = realloc(allocs, capallocs * sizeof(*allocs));
		if (!allocs)
			abort();
	}
	allocs[nallocs].lo = (uintptr_t)p;
	allocs[nallocs++].hi = (uintptr_t)p + n;
	pthread_mutex_unlock(&allocs_lock);
}

static void in_bounds(const void *p, size_t n, const char *what)
{
	uintptr_t a = (uintptr_t)p, hi = 0;
	pthread_mutex_lock(&allocs_lock);
	size_t lo = 0, up = nallocs; /* the last allocation that starts at or below a */
	while (lo < up) {
		size_t mid = (lo + up) / 2;
		if (allocs[mid].lo <= a)
			lo = mid + 1;
		else
			up = mid;
	}
	if (lo && a < allocs[lo - 1].hi)
		hi = allocs[lo - 1].hi;
	pthread_mutex_unlock(&allocs_lock);
	if (hi && n > hi - a) {
		fprintf(stderr, "fake driver: %s of %zu bytes at %#lx runs %zu bytes past the end "
			"of its cuMemAlloc allocation\n", what, n, (unsigned long)a,
			(size_t)(n - (hi - a)));
		abort();
	}
}

API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n)
{
	void *p;
	ALLOC_OR_FAIL(p, n);
	note_alloc(p, n);
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}
API CUresult cuMemAllocPitch_v2(CUdeviceptr *d, size_t *pitch, size_t w, size_t h,
				unsigned e)
{
	(void)e;
	*pitch = (w + 511) & ~(size_t)511;
	return cuMemAlloc_v2(d, *pitch * h);
}
API CUresult cuMemAllocManaged(CUdeviceptr *d, size_t n, unsigned f) { (void)f; return cuMemAlloc_v2(d, n); }
API CUresult cuMemFree_v2(CUdeviceptr d) { (void)d; return CUDA_SUCCESS; }
API CUresult cuMemAllocAsync(CUdeviceptr *d, size_t n, CUstream s) { (void)s; return cuMemAlloc_v2(d, n); }
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t n, CUstream s) { (void)s; return cuMemAlloc_v2(d, n); }
API CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) { (void)d; (void)s; return CUDA_SUCCESS; }
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { (void)d; (void)s; return CUDA_SUCCESS; }
API CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) { (void)f; ALLOC_OR_FAIL(*p, n); return CUDA_SUCCESS; }
API CUresult cuMemFreeHost(void *p) { (void)p; return CUDA_SUCCESS; }
API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned f) { (void)p; (void)n; (void)f; INJECT("cuMemHostRegister"); return CUDA_SUCCESS; }
API CUresult cuMemHostUnregister(void *p) { (void)p; return CUDA_SUCCESS; }
/* unified addressing: the host address is the device's */
API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f)
{
	(void)f;
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* VMM with real aliasing: a reservation is an inaccessible mapping, a
 * physical handle a memfd, cuMemMap maps the memfd shared at the address
 * (two addresses mapping one handle see the same bytes), cuMemUnmap makes
 * the range inaccessible again.  Handles are fd + 1.  The granularity is
 * 2 MiB as on the GPU, or FAKE_GRANULARITY_KIB (a replay of a recording
 * shrunk k times keeps its chunk alignment with 2048 / k). */
static size_t granularity(void)
{
	static size_t g;
	if (!g) {
		const char *e = getenv("FAKE_GRANULARITY_KIB");
		g = e && atoi(e) >= 64 ? (size_t)atoi(e) << 10 : 2ULL << 20;
	}
	return g;
}
#define FAKE_GRANULARITY granularity()
API CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t a, CUdeviceptr addr,
				 unsigned long long f)
{
	(void)addr; (void)f;
	size_t align = a > FAKE_GRANULARITY ? a : FAKE_GRANULARITY;
	char *m = mmap(NULL, n + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t q = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
	if (q > (uintptr_t)m)
		munmap(m, q - (uintptr_t)m);
	munmap((char *)q + n, (uintptr_t)m + align - q);
	*p = (CUdeviceptr)q;
	return CUDA_SUCCESS;
}
API CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
	return munmap(H(p), n) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n,
			 const CUmemAllocationProp *prop, unsigned long long f)
{
	(void)prop; (void)f;
	INJECT("cuMemCreate");
	int fd = memfd_create("fake-vmm", 0);
	if (fd < 0 || ftruncate(fd, (off_t)n)) {
		if (fd >= 0)
			close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*h = (CUmemGenericAllocationHandle)fd + 1;
	return CUDA_SUCCESS;
}
API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return close((int)h - 1) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
API CUresult cuMemMap(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h,
		      unsigned long long f)
{
	(void)f;
	INJECT("cuMemMap");
	void *m = mmap(H(p), n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, (int)h - 1,
		       (off_t)o);
	return m == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
API CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
	void *m = mmap(H(p), n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		       -1, 0);
	return m == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
API CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c)
{
	(void)p; (void)n; (void)d; (void)c;
	INJECT("cuMemSetAccess");
	return CUDA_SUCCESS;
}
API CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
					   CUmemAllocationGranularity_flags o)
{
	(void)prop; (void)o;
	*g = FAKE_GRANULARITY;
	return CUDA_SUCCESS;
}

/* ---- copies and memsets ---- */
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { in_bounds(H(d), n, "cuMemcpyHtoD"); memcpy(H(d), s, n); return CUDA_SUCCESS; }
API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n) { return cuMemcpyHtoD_v2(d, s, n); }
static CUresult htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st);
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { INJECT("cuMemcpyHtoDAsync"); return htod_async(d, s, n, st); }
API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st) { return htod_async(d, s, n, st); }
API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { in_bounds(H(d), n, "cuMemcpyDtoD"); in_bounds(H(s), n, "cuMemcpyDtoD"); memmove(H(d), H(s), n); return CUDA_SUCCESS; }
API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoD_v2(d, s, n); }
API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { in_bounds(H(s), n, "cuMemcpyDtoH"); memcpy(d, H(s), n); return CUDA_SUCCESS; }
API CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH_v2(d, s, n); }
API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoD_v2(d, s, n); }
API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyAsync(d, s, n, st); }
API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { memset(H(d), v, n); return CUDA_SUCCESS; }
API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((unsigned *)H(d))[i] = v;
	return CUDA_SUCCESS;
}
API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned v, size_t n) { return cuMemsetD32_v2(d, v, n); }
static CUresult memset_async(CUdeviceptr d, unsigned char v, size_t n, CUstream s);
API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_async(d, v, n, s); }
API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return cuMemsetD8Async(d, v, n, s); }

/* ---- kernels ---- */
struct kdesc {
	const char *name;
	unsigned nparams;
	struct { unsigned off, size; } p[7];
	void (*run)(const unsigned char *buf);
};

static void run_vec_add(const unsigned char *b)
{
	float *a, *x, *c;
	int n;
	memcpy(&a, b, 8); memcpy(&x, b + 8, 8); memcpy(&c, b + 16, 8); memcpy(&n, b + 24, 4);
	for (int i = 0; i < n; i++)
		c[i] = a[i] + x[i];
}

/* vec_add_ind: vec_add whose first operand's address is read from device
 * memory (a table), where no parameter shows it: a reader the library
 * cannot see. */
static void run_vec_add_ind(const unsigned char *b)
{
	float **t, *a, *x, *c;
	int n;
	memcpy(&t, b, 8); memcpy(&x, b + 8, 8); memcpy(&c, b + 16, 8); memcpy(&n, b + 24, 4);
	a = t[0];
	for (int i = 0; i < n; i++)
		c[i] = a[i] + x[i];
}

/* vec_add_out_ind: vec_add whose result's address is read from device
 * memory (a table): a writer the library cannot see. */
static void run_vec_add_out_ind(const unsigned char *b)
{
	float *a, *x, **t, *c;
	int n;
	memcpy(&a, b, 8); memcpy(&x, b + 8, 8); memcpy(&t, b + 16, 8); memcpy(&n, b + 24, 4);
	c = t[0];
	for (int i = 0; i < n; i++)
		c[i] = a[i] + x[i];
}

static void run_scale(const unsigned char *b)
{
	struct fake_scale_args s;
	memcpy(&s, b, sizeof(s));
	for (int i = 0; i < s.n; i++)
		s.y[i] = s.s * s.x[i];
}

/* The fake TMA encoding hides the address (xor, in word 5) so that only the
 * library's tensor-map table, not its word scan, can find it. */
#define TMA_KEY 0x5a5a5a5a5a5a5a5aULL
static void run_tma_sum(const unsigned char *b)
{
	uint64_t enc;
	float *out;
	int n;
	memcpy(&enc, b + 40, 8); memcpy(&out, b + 128, 8); memcpy(&n, b + 136, 4);
	const float *g = (const float *)(uintptr_t)(enc ^ TMA_KEY);
	float s = 0;
	for (int i = 0; i < n; i++)
		s += g[i];
	out[0] = s;
}

/* libflextensor's own checksum kernel, as its PTX computes it. */
static void run_checksum(const unsigned char *b)
{
	const uint64_t *p;
	uint64_t n, *out, acc = 0;
	memcpy(&p, b, 8); memcpy(&n, b + 8, 8); memcpy(&out, b + 16, 8);
	for (uint64_t i = 0; i < n; i++)
		acc += ft_checksum_word(p[i], i);
	*out += acc;
}

/* libflextensor's copy kernel (FT_GRAPH_COPY=kernel): n 16-byte vectors;
 * counted, so that tests see which copies it made. */
static unsigned long copy_kernels;
API unsigned long fake_copy_kernel_count(void) { return __atomic_load_n(&copy_kernels, __ATOMIC_RELAXED); }
static void run_copy16(const unsigned char *b)
{
	void *dst, *src;
	uint64_t n;
	memcpy(&dst, b, 8); memcpy(&src, b + 8, 8); memcpy(&n, b + 16, 8);
	memcpy(dst, src, n * 16);
	__atomic_add_fetch(&copy_kernels, 1, __ATOMIC_RELAXED);
}

/* libflextensor's decoder (FT_TRANSFER_COMPRESSION): the host's reference
 * decoder of the same format, chunk by chunk (include/ft/codec.h). */
static unsigned long decodes;
API unsigned long fake_decode_count(void) { return __atomic_load_n(&decodes, __ATOMIC_RELAXED); }
static void run_z_decode(const unsigned char *b)
{
	const unsigned char *src;
	const uint64_t *desc;
	uint64_t bias, nvals;
	uint16_t *dst;
	unsigned nchunks;
	memcpy(&src, b, 8); memcpy(&bias, b + 8, 8); memcpy(&desc, b + 16, 8);
	memcpy(&dst, b + 24, 8); memcpy(&nvals, b + 32, 8); memcpy(&nchunks, b + 40, 4);
	/* the pieces it reads (descriptor nchunks: the end of the last) */
	in_bounds(src, FT_Z_OFF(desc[nchunks]) - bias, "ft_z_decode's read");
	for (unsigned c = 0; c < nchunks; c++) {
		uint64_t first = (uint64_t)c * FT_Z_VALS, left = nvals - first;
		ft_z_decode_at(src + (FT_Z_OFF(desc[c]) - bias), desc[c],
			       left < FT_Z_VALS ? (uint32_t)left : FT_Z_VALS, dst + first);
	}
	__atomic_add_fetch(&decodes, 1, __ATOMIC_RELAXED);
}

/* ... and its encoder's two passes, as the host's encoder makes them. */
static unsigned long encodes;
API unsigned long fake_encode_count(void) { return __atomic_load_n(&encodes, __ATOMIC_RELAXED); }
static uint32_t words_of(uint64_t nvals, unsigned c)
{
	uint64_t left = nvals - (uint64_t)c * FT_Z_VALS;
	return left < FT_Z_VALS ? (uint32_t)left : FT_Z_VALS;
}
static void run_z_analyse(const unsigned char *b)
{
	const uint16_t *src;
	struct ft_z_meta *meta;
	uint64_t nvals;
	unsigned nchunks;
	memcpy(&src, b, 8); memcpy(&meta, b + 8, 8); memcpy(&nvals, b + 16, 8);
	memcpy(&nchunks, b + 24, 4);
	for (unsigned c = 0; c < nchunks; c++)
		ft_z_analyse(src + (uint64_t)c * FT_Z_VALS, words_of(nvals, c), &meta[c]);
}
static void run_z_code(const unsigned char *b)
{
	const uint16_t *src;
	const struct ft_z_meta *meta;
	const uint64_t *desc;
	uint64_t bias, nvals;
	unsigned char *dst;
	unsigned nchunks;
	memcpy(&src, b, 8); memcpy(&meta, b + 8, 8); memcpy(&desc, b + 16, 8);
	memcpy(&bias, b + 24, 8); memcpy(&dst, b + 32, 8); memcpy(&nvals, b + 40, 8);
	memcpy(&nchunks, b + 48, 4);
	in_bounds(dst, FT_Z_OFF(desc[nchunks]) - bias, "ft_z_code's write");
	for (unsigned c = 0; c < nchunks; c++)
		ft_z_code(src + (uint64_t)c * FT_Z_VALS, words_of(nvals, c), &meta[c],
			  dst + (FT_Z_OFF(desc[c]) - bias));
	__atomic_add_fetch(&encodes, 1, __ATOMIC_RELAXED);
}

static void run_nothing(const unsigned char *b)
{
	(void)b;
}

static const struct kdesc kernels[] = {
	{ "vec_add", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_vec_add },
	/* vec_add2: vec_add under another name (a prefill's GEMM kernels,
	 * new to the library when the first prefill comes) */
	{ "vec_add2", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_vec_add },
	{ "vec_add_ind", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_vec_add_ind },
	{ "vec_add_out_ind", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_vec_add_out_ind },
	/* vec_add_ind5: vec_add_ind with a fifth word it does not read (a
	 * grouped GEMM's parameters, one of whose words once held another
	 * layer's experts' address) */
	{ "vec_add_ind5", 5, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 }, { 32, 8 } },
	  run_vec_add_ind },
	{ "scale", 1, { { 0, sizeof(struct fake_scale_args) } }, run_scale },
	{ "tma_sum", 3, { { 0, 128 }, { 128, 8 }, { 136, 4 } }, run_tma_sum },
	{ "ft_checksum", 3, { { 0, 8 }, { 8, 8 }, { 16, 8 } }, run_checksum },
	{ "ft_copy16", 3, { { 0, 8 }, { 8, 8 }, { 16, 8 } }, run_copy16 },
	{ "ft_z_decode", 6, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 8 }, { 32, 8 }, { 40, 4 } },
	  run_z_decode },
	{ "ft_z_analyse", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_z_analyse },
	{ "ft_z_code", 7, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 8 }, { 32, 8 }, { 40, 8 }, { 48, 4 } },
	  run_z_code },
	/* touch4: four pointers, reads nothing (stray references) */
	{ "touch4", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 8 } }, run_nothing },
	/* touch4096: one 4096-byte parameter (a by-value struct), reads nothing;
	 * the last entry: replay handles share its layout */
	{ "touch4096", 1, { { 0, 4096 } }, run_nothing },
};
#define NK (sizeof(kernels) / sizeof(kernels[0]))
#define NREPLAY 4096

/* Handles: CUfunction = &fhandle[i], CUkernel = &khandle[i]; replay
 * functions (one per recorded kernel) = &fhandle[NK + i], touch4096's. */
static char fhandle[NK + NREPLAY], khandle[NK];

API CUfunction fake_replay_function(unsigned i)
{
	return i < NREPLAY ? (CUfunction)&fhandle[NK + i] : NULL;
}

API CUfunction fake_function(const char *name)
{
	for (size_t i = 0; i < NK; i++)
		if (!strcmp(kernels[i].name, name))
			return (CUfunction)&fhandle[i];
	return NULL;
}

API CUkernel fake_kernel(const char *name)
{
	for (size_t i = 0; i < NK; i++)
		if (!strcmp(kernels[i].name, name))
			return (CUkernel)&khandle[i];
	return NULL;
}

static const struct kdesc *desc_of(const void *h)
{
	const char *c = h;
	if (c >= fhandle + NK && c < fhandle + NK + NREPLAY)
		return &kernels[NK - 1];
	if (c >= fhandle && c < fhandle + NK)
		return &kernels[c - fhandle];
	if (c >= khandle && c < khandle + NK)
		return &kernels[c - khandle];
	return NULL;
}

static int is_function(const void *h)
{
	const char *c = h;
	return c >= fhandle && c < fhandle + NK + NREPLAY;
}

API CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
	if (!is_function(f))
		return CUDA_ERROR_INVALID_HANDLE;
	const struct kdesc *k = desc_of(f);
	if (i >= k->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*off = k->p[i].off;
	*size = k->p[i].size;
	return CUDA_SUCCESS;
}

API CUresult cuKernelGetParamInfo(CUkernel kh, size_t i, size_t *off, size_t *size)
{
	if (is_function(kh) || !desc_of(kh))
		return CUDA_ERROR_INVALID_HANDLE;
	const struct kdesc *k = desc_of(kh);
	if (i >= k->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*off = k->p[i].off;
	*size = k->p[i].size;
	return CUDA_SUCCESS;
}

API CUresult cuFuncGetName(const char **name, CUfunction f)
{
	if (!is_function(f))
		return CUDA_ERROR_INVALID_HANDLE;
	*name = desc_of(f)->name;
	return CUDA_SUCCESS;
}

API CUresult cuKernelGetName(const char **name, CUkernel k)
{
	if (is_function(k) || !desc_of(k))
		return CUDA_ERROR_INVALID_HANDLE;
	*name = desc_of(k)->name;
	return CUDA_SUCCESS;
}

API CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
				    void *addr, const cuuint64_t *dim,
				    const cuuint64_t *strides, const cuuint32_t *box,
				    const cuuint32_t *es, CUtensorMapInterleave il,
				    CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
				    CUtensorMapFloatOOBfill oob)
{
	(void)strides; (void)box; (void)es; (void)il; (void)sw; (void)l2; (void)oob;
	memset(m, 0, sizeof(*m));
	uint64_t w[16] = { 0x7e7e, t, rank, dim ? dim[0] : 0, 0,
			   (uint64_t)(uintptr_t)addr ^ TMA_KEY };
	memcpy(m, w, sizeof(w));
	return CUDA_SUCCESS;
}

/* ---- modules: a PTX image naming a kernel of the table loads ---- */
static char module_tag;
API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	if (!strstr((const char *)image, ".entry ft_checksum") &&
	    !strstr((const char *)image, ".entry ft_z_decode"))
		return CUDA_ERROR_INVALID_IMAGE;
	*m = (CUmodule)&module_tag;
	return CUDA_SUCCESS;
}
/* FAKE_NO_KERNEL=name: a module without that kernel (an older PTX) */
API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	(void)m;
	const char *no = getenv("FAKE_NO_KERNEL");
	*f = no && !strcmp(no, name) ? NULL : fake_function(name);
	return *f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- streams, events (host clock), device facts ---- */
/* every stream its own handle (captures tell streams apart) */
API CUresult cuStreamCreate(CUstream *s, unsigned f)
{
	(void)f;
	INJECT("cuStreamCreate");
	*s = (CUstream)malloc(1);
	return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
API CUresult cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
API CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
API CUresult cuMemAllocHost_v2(void **p, size_t n) { ALLOC_OR_FAIL(*p, n); return CUDA_SUCCESS; }
API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoH_v2(d, s, n); }

/* Streams are not freed: a handle the fake did not make (the legacy or
 * per-thread stream) may come here too. */
API CUresult cuStreamDestroy_v2(CUstream s) { (void)s; return CUDA_SUCCESS; }

/* A capture's dependency set: indices of nodes of the graph it captures
 * into.  Nodes have at most FAKE_DEPS predecessors, streams at most
 * FAKE_DEPS current dependencies. */
#define FAKE_DEPS 64
struct depset {
	unsigned n;
	unsigned i[FAKE_DEPS];
	unsigned char type[FAKE_DEPS]; /* the edge's CUgraphDependencyType */
};

/* Adds node i to d unless it is there: -1 when d is full. */
static int depset_add(struct depset *d, unsigned i)
{
	for (unsigned k = 0; k < d->n; k++)
		if (d->i[k] == i)
			return 0;
	if (d->n == FAKE_DEPS) {
		fprintf(stderr, "fake driver: more than %d dependencies\n", FAKE_DEPS);
		return -1;
	}
	d->type[d->n] = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;
	d->i[d->n++] = i;
	return 0;
}

/* Adds every node of from to d: -1 when d is full. */
static int depset_merge(struct depset *d, const struct depset *from)
{
	for (unsigned k = 0; k < from->n; k++)
		if (depset_add(d, from->i[k]))
			return -1;
	return 0;
}

#include <time.h>
/* An event: the host time of its record (first, for cuEventElapsedTime),
 * and the capture and stream that recorded it, if any, with the stream's
 * dependencies then (what a stream that waits for it depends on). */
struct fake_event {
	double t;
	unsigned long long cap;
	CUstream stream;
	unsigned long at;       /* ops captured on stream when recorded */
	struct depset deps;
};
API CUresult cuEventCreate(CUevent *e, unsigned f)
{
	(void)f;
	*e = calloc(1, sizeof(struct fake_event));
	return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
static int capturing(CUstream s);
static void joined(CUstream s, int on);
static unsigned long long capture_id(void);
static unsigned long joined_ops(CUstream s);
static void origin_waited(CUstream w, CUstream s, unsigned long at);
static struct depset *stream_deps(CUstream s);
API CUresult cuEventRecord(CUevent e, CUstream s)
{
	INJECT("cuEventRecord");
	struct fake_event *ev = (struct fake_event *)e;
	ev->t = now_ms();
	ev->cap = capturing(s) ? capture_id() : 0;
	ev->stream = s;
	ev->at = joined_ops(s);
	ev->deps.n = 0;
	if (ev->cap)
		ev->deps = *stream_deps(s);
	return CUDA_SUCCESS;
}
API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }
static CUresult record_node(CUevent e, CUstream s);
/* An external record in a capture becomes a node recorded at each replay. */
API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags)
{
	INJECT("cuEventRecordWithFlags");
	if ((flags & CU_EVENT_RECORD_EXTERNAL) && capturing(s))
		return record_node(e, s);
	return cuEventRecord(e, s);
}
API CUresult cuEventQuery(CUevent e) { (void)e; return CUDA_SUCCESS; }
API CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
/* Every call completes before it returns: ordering holds by itself.  In a
 * capture, a stream that waits on an event recorded in it joins it, and the
 * origin waiting on a joined stream's event joins that stream's work so far
 * back (at the end, every joined stream's work must be).  The waiting
 * stream's next node depends on what the event's stream had captured when
 * it was recorded: a stream that joins starts from that, one in the capture
 * adds it to its own dependencies. */
API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f)
{
	INJECT("cuStreamWaitEvent");
	(void)f;
	struct fake_event *ev = (struct fake_event *)e;
	if (ev->cap && ev->cap != capture_id()) {
		/* as the driver: an event last recorded in a capture that is
		 * over cannot be waited on (no ordering results) */
		fprintf(stderr, "fake driver: cuStreamWaitEvent: CUDA_ERROR_CAPTURED_EVENT (the "
				"event was last recorded in capture %llu)\n", ev->cap);
		return CUDA_ERROR_CAPTURED_EVENT;
	}
	if (ev->cap && ev->cap == capture_id()) {
		if (!capturing(s)) {
			joined(s, 1);
			if (stream_deps(s))
				*stream_deps(s) = ev->deps;
		} else {
			origin_waited(s, ev->stream, ev->at);
			if (depset_merge(stream_deps(s), &ev->deps))
				return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	return CUDA_SUCCESS;
}
API CUresult cuEventDestroy_v2(CUevent e) { (void)e; return CUDA_SUCCESS; }
API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
	*ms = (float)(*(double *)b - *(double *)a);
	return CUDA_SUCCESS;
}
API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	(void)d;
	snprintf(name, (size_t)len, "Fake GPU");
	return CUDA_SUCCESS;
}
API CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { (void)d; *b = (size_t)ARENA; return CUDA_SUCCESS; }
API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	(void)d;
	if (a != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 4;
	return CUDA_SUCCESS;
}

/* ---- launches, streams, capture, graphs ---- */
static unsigned long launches;
API unsigned long fake_launch_count(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }

/* A graph node.  Its handle (CUgraphNode) is its address in its graph's
 * array, so that its index is its offset there. */
enum node_kind { NODE_KERNEL, NODE_COPY, NODE_EVENT, NODE_MEMSET };
struct fake_graph;
struct recorded {
	enum node_kind kind;
	const struct kdesc *k;  /* a kernel: its layout and body */
	CUfunction f;           /* the handle it was launched with */
	unsigned char buf[4096]; /* its packed parameters */
	void *pp[4];            /* into buf at each parameter's offset */
	CUevent ev;             /* an external event: recorded at replay */
	void *dst;              /* a host-to-device copy, or a memset */
	const void *src;
	size_t n;
	unsigned char value;    /* a memset's byte */
	struct fake_graph *g;   /* the graph it belongs to */
	struct depset deps;     /* its predecessors, by index */
	int disabled;           /* an executable's node switched off (cuGraphNodeSetEnabled) */
};
#define FAKE_NODES 1024
/* A graph, and an executable too (an independent copy). */
struct fake_graph {
	unsigned n;
	struct recorded r[FAKE_NODES];
};

static struct {
	CUstream stream;
	unsigned long long id;
	int active;
	struct fake_graph *g;   /* what it captures into */
	int own;                /* g was made for it (not cuStreamBeginCaptureToGraph) */
	struct depset deps;     /* the origin's current dependencies */
	CUgraphNode out[FAKE_DEPS]; /* the last dependencies cuStreamGetCaptureInfo_v3 gave */
	struct {
		CUstream s;
		unsigned long ops;       /* captured on it so far */
		unsigned long joined_at; /* ops the origin has waited for */
		struct depset deps;      /* its current dependencies */
	} joined[8];            /* other streams in the capture */
	unsigned njoined;
} cap;
static unsigned long long next_capture = 1;

static struct fake_graph *graph_new(void)
{
	return calloc(1, sizeof(struct fake_graph));
}

/* An independent copy of g (its nodes know their new graph). */
static struct fake_graph *graph_dup(const struct fake_graph *g)
{
	struct fake_graph *c = graph_new();
	if (!c)
		return NULL;
	c->n = g->n;
	memcpy(c->r, g->r, g->n * sizeof(g->r[0]));
	for (unsigned i = 0; i < c->n; i++)
		c->r[i].g = c;
	return c;
}

static unsigned node_index(const struct recorded *r)
{
	return (unsigned)(r - r->g->r);
}

/* Node h if it is one of g's, else NULL. */
static struct recorded *node_in(CUgraphNode h, const struct fake_graph *g)
{
	struct recorded *r = (struct recorded *)h;
	return r && r->g == g && node_index(r) < g->n ? r : NULL;
}

static int joined_index(CUstream s)
{
	for (unsigned i = 0; i < cap.njoined; i++)
		if (cap.joined[i].s == s)
			return (int)i;
	return -1;
}

static int capturing(CUstream s)
{
	return cap.active && (s == cap.stream || joined_index(s) >= 0);
}

/* The current dependencies of a stream in the capture, else NULL. */
static struct depset *stream_deps(CUstream s)
{
	if (!cap.active)
		return NULL;
	if (s == cap.stream)
		return &cap.deps;
	int i = joined_index(s);
	return i >= 0 ? &cap.joined[i].deps : NULL;
}

/* A stream joins (waited on an event of the capture); an op recorded on a
 * joined stream counts until the origin waits for it. */
static void joined(CUstream s, int on)
{
	if (on && joined_index(s) < 0 && cap.njoined < 8)
		cap.joined[cap.njoined++].s = s, cap.joined[cap.njoined - 1].ops = 0,
					   cap.joined[cap.njoined - 1].joined_at = 0;
}

static void captured_op(CUstream s)
{
	int i = joined_index(s);
	if (i >= 0)
		cap.joined[i].ops++;
}

static unsigned long joined_ops(CUstream s)
{
	int i = cap.active ? joined_index(s) : -1;
	return i >= 0 ? cap.joined[i].ops : 0;
}

/* w waited for stream s's captured ops up to at: joined back if w is the
 * origin */
static void origin_waited(CUstream w, CUstream s, unsigned long at)
{
	int i = joined_index(s);
	if (w == cap.stream && i >= 0 && at > cap.joined[i].joined_at)
		cap.joined[i].joined_at = at;
}

static unsigned long long capture_id(void)
{
	return cap.active ? cap.id : 0;
}

/* A new node of the capture on stream s (capturing): it depends on what s
 * depends on, and s from now on on it alone.  NULL when the graph is full. */
static struct recorded *captured_node(CUstream s, enum node_kind kind)
{
	struct fake_graph *g = cap.g;
	struct depset *d = stream_deps(s);
	if (g->n == FAKE_NODES)
		return NULL;
	captured_op(s);
	struct recorded *r = &g->r[g->n];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->g = g;
	r->deps = *d;
	d->n = 1;
	d->i[0] = g->n++;
	d->type[0] = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;
	return r;
}

static CUresult record_node(CUevent e, CUstream s)
{
	struct recorded *r = captured_node(s, NODE_EVENT);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->ev = e;
	return CUDA_SUCCESS;
}

/* host-to-device copies on a capturing stream become graph nodes */
static CUresult htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
	in_bounds(H(d), n, "cuMemcpyHtoDAsync");
	if (capturing(st)) {
		struct recorded *r = captured_node(st, NODE_COPY);
		if (!r)
			return CUDA_ERROR_OUT_OF_MEMORY;
		r->dst = H(d);
		r->src = s;
		r->n = n;
		return CUDA_SUCCESS;
	}
	memcpy(H(d), s, n);
	return CUDA_SUCCESS;
}

/* so do memsets */
static CUresult memset_async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
	if (capturing(s)) {
		struct recorded *r = captured_node(s, NODE_MEMSET);
		if (!r)
			return CUDA_ERROR_OUT_OF_MEMORY;
		r->dst = H(d);
		r->n = n;
		r->value = v;
		return CUDA_SUCCESS;
	}
	memset(H(d), v, n);
	return CUDA_SUCCESS;
}

/* Packs a launch's parameters (kernelParams, else an extra buffer) into
 * buf (zeroed, 4096 bytes) with k's layout. */
static CUresult pack(const struct kdesc *k, void **params, void **extra, unsigned char *buf)
{
	if (params) {
		for (unsigned i = 0; i < k->nparams; i++)
			memcpy(buf + k->p[i].off, params[i], k->p[i].size);
		return CUDA_SUCCESS;
	}
	if (!extra)
		return CUDA_ERROR_INVALID_VALUE;
	const void *b = NULL;
	size_t n = 0;
	for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			b = extra[i + 1];
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
			n = *(size_t *)extra[i + 1];
	}
	if (!b || n > 4096)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(buf, b, n);
	return CUDA_SUCCESS;
}

static CUresult do_launch(CUfunction f, CUstream s, void **params, void **extra)
{
	const struct kdesc *k = desc_of(f);
	unsigned char buf[4096] = { 0 };
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!strcmp(k->name, "ft_z_code"))
		INJECT("ft_z_code"); /* FAKE_FAIL=ft_z_code:n: its n-th launch refused */
	CUresult rc = pack(k, params, extra, buf);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (capturing(s)) {
		struct recorded *r = captured_node(s, NODE_KERNEL);
		if (!r)
			return CUDA_ERROR_OUT_OF_MEMORY;
		r->k = k;
		r->f = f;
		memcpy(r->buf, buf, sizeof(buf));
		return CUDA_SUCCESS;
	}
	k->run(buf);
	__atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

#define LAUNCH(sym)                                                            \
	API CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz,  \
			 unsigned bx, unsigned by, unsigned bz, unsigned sm,   \
			 CUstream s, void **p, void **e)                       \
	{                                                                      \
		(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm; \
		return do_launch(f, s, p, e);                                  \
	}
LAUNCH(cuLaunchKernel)
LAUNCH(cuLaunchKernel_ptsz)

#define LAUNCH_EX(sym)                                                         \
	API CUresult sym(const CUlaunchConfig *c, CUfunction f, void **p, void **e) \
	{                                                                      \
		return do_launch(f, c->hStream, p, e);                         \
	}
LAUNCH_EX(cuLaunchKernelEx)
LAUNCH_EX(cuLaunchKernelEx_ptsz)

API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				       unsigned bx, unsigned by, unsigned bz, unsigned sm,
				       CUstream s, void **p)
{
	(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm;
	return do_launch(f, s, p, NULL);
}

/* A capture on s begins into g (own: made for it), s depending on deps. */
static void begin_capture(CUstream s, struct fake_graph *g, int own, const struct depset *deps)
{
	cap.active = 1;
	cap.stream = s;
	cap.g = g;
	cap.own = own;
	cap.deps = *deps;
	cap.njoined = 0;
	cap.id = next_capture++;
}

API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
	(void)m;
	if (cap.active)
		return CUDA_ERROR_ILLEGAL_STATE;
	struct fake_graph *g = graph_new();
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	begin_capture(s, g, 1, &(struct depset){ 0 });
	return CUDA_SUCCESS;
}

/* The nodes deps (n of them) of g as a dependency set: -1 if one is not
 * g's or there are too many. */
static int depset_of(struct depset *d, const struct fake_graph *g, const CUgraphNode *deps,
		     size_t n)
{
	d->n = 0;
	for (size_t i = 0; i < n; i++) {
		const struct recorded *r = node_in(deps[i], g);
		if (!r || depset_add(d, node_index(r)))
			return -1;
	}
	return 0;
}

/* As cuStreamBeginCapture, but the nodes go into hGraph, after deps. */
API CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph hGraph, const CUgraphNode *deps,
					 const CUgraphEdgeData *data, size_t n,
					 CUstreamCaptureMode m)
{
	(void)data; (void)m;
	INJECT("cuStreamBeginCaptureToGraph");
	struct fake_graph *g = (struct fake_graph *)hGraph;
	struct depset d;
	if (cap.active)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (!g || depset_of(&d, g, deps, n))
		return CUDA_ERROR_INVALID_VALUE;
	begin_capture(s, g, 0, &d);
	return CUDA_SUCCESS;
}

/* Only the origin reports the capture (joined streams report none); its
 * dependencies are valid until the next call. */
API CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st,
				       cuuint64_t *id, CUgraph *g, const CUgraphNode **d,
				       const CUgraphEdgeData **e, size_t *n)
{
	/* a stream joined to the capture (it waited on an event recorded in
	 * it) is capturing too, as the driver says */
	int on = cap.active && s == cap.stream, joined = 0;
	for (unsigned k = 0; cap.active && k < cap.njoined; k++)
		joined |= cap.joined[k].s == s;
	if (st)
		*st = on || joined ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	if (id)
		*id = on || joined ? cap.id : 0;
	/* the graph and dependencies: the origin stream's only */
	if (g)
		*g = on ? (CUgraph)cap.g : NULL;
	if (e)
		*e = NULL;
	for (unsigned i = 0; on && i < cap.deps.n; i++)
		cap.out[i] = (CUgraphNode)&cap.g->r[cap.deps.i[i]];
	if (d)
		*d = on ? cap.out : NULL;
	if (n)
		*n = on ? cap.deps.n : 0;
	return CUDA_SUCCESS;
}

API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
						  const CUgraphEdgeData *data, size_t n,
						  unsigned flags)
{
	INJECT("cuStreamUpdateCaptureDependencies");
	struct depset *cur = stream_deps(s), d;
	if (!cur)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES &&
	    flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES)
		return CUDA_ERROR_INVALID_VALUE;
	if (depset_of(&d, cap.g, deps, n))
		return CUDA_ERROR_INVALID_VALUE;
	/* the edges the next node gets from them: programmatic ones too */
	for (size_t k = 0; data && k < n; k++)
		for (unsigned j = 0; j < d.n; j++)
			if (&cap.g->r[d.i[j]] == (const struct recorded *)deps[k])
				d.type[j] = data[k].type;
	if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
		*cur = d;
	else if (depset_merge(cur, &d))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

API CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
	if (!cap.active || s != cap.stream)
		return CUDA_ERROR_ILLEGAL_STATE;
	for (unsigned i = 0; i < cap.njoined; i++)
		if (cap.joined[i].ops > cap.joined[i].joined_at) {
			/* as the driver: work forked into the capture that the
			 * origin does not wait for invalidates it */
			cap.active = 0;
			if (cap.own)
				free(cap.g);
			return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
		}
	cap.active = 0;
	*g = (CUgraph)cap.g;
	return CUDA_SUCCESS;
}

/* ---- graphs: nodes, edges ---- */
API CUresult cuGraphClone(CUgraph *out, CUgraph g)
{
	INJECT("cuGraphClone");
	struct fake_graph *c = graph_dup((const struct fake_graph *)g);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = (CUgraph)c;
	return CUDA_SUCCESS;
}

/* The clone's node of the same index. */
API CUresult cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode orig, CUgraph clone)
{
	const struct fake_graph *c = (const struct fake_graph *)clone;
	unsigned i = node_index((const struct recorded *)orig);
	if (i >= c->n)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (CUgraphNode)&c->r[i];
	return CUDA_SUCCESS;
}

/* nodes NULL: *n = how many; else up to *n of them, *n = how many given,
 * the rest of the *n entries NULL. */
API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *n)
{
	struct fake_graph *g = (struct fake_graph *)hGraph;
	if (!nodes) {
		*n = g->n;
		return CUDA_SUCCESS;
	}
	size_t k = 0;
	for (; k < *n && k < g->n; k++)
		nodes[k] = (CUgraphNode)&g->r[k];
	for (size_t i = k; i < *n; i++)
		nodes[i] = NULL;
	*n = k;
	return CUDA_SUCCESS;
}

/* As cuGraphGetNodes, for edges: each node's predecessors, by index. */
API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				CUgraphEdgeData *data, size_t *n)
{
	struct fake_graph *g = (struct fake_graph *)hGraph;
	size_t k = 0;
	for (unsigned i = 0; i < g->n; i++)
		for (unsigned j = 0; j < g->r[i].deps.n; j++, k++) {
			if (!from || !to || k >= *n)
				continue;
			from[k] = (CUgraphNode)&g->r[g->r[i].deps.i[j]];
			to[k] = (CUgraphNode)&g->r[i];
			if (data) {
				memset(&data[k], 0, sizeof(data[k]));
				data[k].type = g->r[i].deps.type[j];
			}
		}
	if (!from || !to) {
		*n = k;
		return CUDA_SUCCESS;
	}
	for (size_t i = k; i < *n; i++) {
		from[i] = to[i] = NULL;
		if (data)
			memset(&data[i], 0, sizeof(data[i]));
	}
	if (k < *n)
		*n = k;
	return CUDA_SUCCESS;
}

API CUresult cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *type)
{
	static const CUgraphNodeType t[] = {
		[NODE_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL,
		[NODE_COPY] = CU_GRAPH_NODE_TYPE_MEMCPY,
		[NODE_EVENT] = CU_GRAPH_NODE_TYPE_EVENT_RECORD,
		[NODE_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
	};
	*type = t[((const struct recorded *)h)->kind];
	return CUDA_SUCCESS;
}

/* The launch as captured: grid and block 1, parameters in place (pp). */
API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
	struct recorded *r = (struct recorded *)h;
	if (r->kind != NODE_KERNEL)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < r->k->nparams; i++)
		r->pp[i] = r->buf + r->k->p[i].off;
	memset(p, 0, sizeof(*p));
	p->func = r->f;
	p->gridDimX = p->gridDimY = p->gridDimZ = 1;
	p->blockDimX = p->blockDimY = p->blockDimZ = 1;
	p->kernelParams = r->pp;
	return CUDA_SUCCESS;
}

/* New parameters for kernel node r, of the same function. */
static CUresult set_kernel_params(struct recorded *r, const CUDA_KERNEL_NODE_PARAMS *p)
{
	unsigned char buf[4096] = { 0 };
	const void *f = p->func ? (const void *)p->func : (const void *)p->kern;
	if (r->kind != NODE_KERNEL || f != (const void *)r->f)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = pack(r->k, p->kernelParams, p->extra, buf);
	if (rc == CUDA_SUCCESS)
		memcpy(r->buf, buf, sizeof(buf));
	return rc;
}

API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
	return set_kernel_params((struct recorded *)h, p);
}

/* The CUDA 10-11 ABI's setters (no kern, no ctx). */
static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *k)
{
	return (CUDA_KERNEL_NODE_PARAMS){ .func = k->func, .gridDimX = k->gridDimX,
					  .gridDimY = k->gridDimY, .gridDimZ = k->gridDimZ,
					  .blockDimX = k->blockDimX, .blockDimY = k->blockDimY,
					  .blockDimZ = k->blockDimZ,
					  .sharedMemBytes = k->sharedMemBytes,
					  .kernelParams = k->kernelParams, .extra = k->extra };
}

API CUresult cuGraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS kp = from_v1(p);
	return cuGraphKernelNodeSetParams_v2(h, &kp);
}

API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *p)
{
	const struct recorded *r = (const struct recorded *)h;
	if (r->kind != NODE_COPY)
		return CUDA_ERROR_INVALID_VALUE;
	memset(p, 0, sizeof(*p));
	p->srcMemoryType = CU_MEMORYTYPE_HOST;
	p->srcHost = r->src;
	p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
	p->dstDevice = (CUdeviceptr)(uintptr_t)r->dst;
	p->WidthInBytes = r->n;
	p->Height = 1;
	p->Depth = 1;
	return CUDA_SUCCESS;
}

API CUresult cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p)
{
	const struct recorded *r = (const struct recorded *)h;
	if (r->kind != NODE_MEMSET)
		return CUDA_ERROR_INVALID_VALUE;
	memset(p, 0, sizeof(*p));
	p->dst = (CUdeviceptr)(uintptr_t)r->dst;
	p->value = r->value;
	p->elementSize = 1;
	p->width = r->n;
	p->height = 1;
	return CUDA_SUCCESS;
}

/* Edges from[i] -> to[i]: both g's, not there yet. */
API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
				       const CUgraphNode *to, const CUgraphEdgeData *data,
				       size_t n)
{
	INJECT("cuGraphAddDependencies");
	(void)data;
	struct fake_graph *g = (struct fake_graph *)hGraph;
	for (size_t i = 0; i < n; i++) {
		struct recorded *a = node_in(from[i], g), *b = node_in(to[i], g);
		if (!a || !b || a == b)
			return CUDA_ERROR_INVALID_VALUE;
		unsigned ai = node_index(a);
		for (unsigned j = 0; j < b->deps.n; j++)
			if (b->deps.i[j] == ai)
				return CUDA_ERROR_INVALID_VALUE;
		if (depset_add(&b->deps, ai))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

API CUresult cuGraphDestroy(CUgraph g)
{
	free(g);
	return CUDA_SUCCESS;
}

/* ---- executables: copies of their graphs ---- */

/* A topological order of g's nodes into order: among the ready nodes the
 * lowest index first, or with FAKE_GRAPH_ORDER=lifo the highest.  -1 when
 * the edges make a cycle. */
static int graph_order(const struct fake_graph *g, unsigned *order)
{
	const char *e = getenv("FAKE_GRAPH_ORDER");
	int lifo = e && !strcmp(e, "lifo");
	unsigned pending[FAKE_NODES], at[FAKE_NODES + 1] = { 0 }, fill[FAKE_NODES] = { 0 };
	unsigned char done[FAKE_NODES] = { 0 };
	/* successors, counted then placed */
	for (unsigned i = 0; i < g->n; i++) {
		pending[i] = g->r[i].deps.n;
		for (unsigned j = 0; j < g->r[i].deps.n; j++)
			at[g->r[i].deps.i[j] + 1]++;
	}
	for (unsigned i = 0; i < g->n; i++)
		at[i + 1] += at[i];
	unsigned *succ = malloc((at[g->n] + 1) * sizeof(*succ));
	if (!succ)
		return -1;
	for (unsigned i = 0; i < g->n; i++)
		for (unsigned j = 0; j < g->r[i].deps.n; j++) {
			unsigned p = g->r[i].deps.i[j];
			succ[at[p] + fill[p]++] = i;
		}
	unsigned k = 0;
	for (; k < g->n; k++) {
		unsigned pick = g->n;
		for (unsigned c = 0; c < g->n && pick == g->n; c++) {
			unsigned i = lifo ? g->n - 1 - c : c;
			if (!done[i] && !pending[i])
				pick = i;
		}
		if (pick == g->n)
			break;
		done[pick] = 1;
		order[k] = pick;
		for (unsigned s = at[pick]; s < at[pick + 1]; s++)
			pending[succ[s]]--;
	}
	free(succ);
	return k == g->n ? 0 : -1;
}

API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f)
{
	(void)f;
	INJECT("cuGraphInstantiate");
	unsigned order[FAKE_NODES];
	if (graph_order((const struct fake_graph *)g, order)) {
		fprintf(stderr, "fake driver: cuGraphInstantiate: the graph's edges make a cycle\n");
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct fake_graph *x = graph_dup((const struct fake_graph *)g);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*e = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

/* The CUDA 10 and 11 ABIs (an error node and a log buffer, no flags). */
API CUresult cuGraphInstantiate_v2(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log,
				   size_t n)
{
	if (err)
		*err = NULL;
	if (log && n)
		log[0] = 0;
	return cuGraphInstantiateWithFlags(e, g, 0);
}

API CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
	return cuGraphInstantiate_v2(e, g, err, log, n);
}

API CUresult cuGraphExecDestroy(CUgraphExec e)
{
	free(e);
	return CUDA_SUCCESS;
}

/* Whether nodes a and b have the same kind and predecessors. */
static int same_place(const struct recorded *a, const struct recorded *b)
{
	return a->kind == b->kind && a->deps.n == b->deps.n &&
	       !memcmp(a->deps.i, b->deps.i, a->deps.n * sizeof(a->deps.i[0]));
}

/* The exec takes graph's parameters if it has the exec's topology: the same
 * nodes (kinds, in order) and edges. */
API CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph hGraph, CUgraphExecUpdateResultInfo *info)
{
	struct fake_graph *x = (struct fake_graph *)e;
	const struct fake_graph *g = (const struct fake_graph *)hGraph;
	int same = x->n == g->n;
	for (unsigned i = 0; same && i < g->n; i++)
		same = same_place(&x->r[i], &g->r[i]);
	if (info)
		*info = (CUgraphExecUpdateResultInfo){
			same ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED,
			NULL, NULL
		};
	if (!same)
		return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	for (unsigned i = 0; i < g->n; i++) {
		struct recorded *r = &x->r[i];
		const struct recorded *s = &g->r[i];
		r->k = s->k;
		r->f = s->f;
		memcpy(r->buf, s->buf, sizeof(r->buf));
		r->ev = s->ev;
		r->dst = s->dst;
		r->src = s->src;
		r->n = s->n;
	}
	return CUDA_SUCCESS;
}

/* The CUDA 10.2-11 ABI of the same. */
API CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err,
			       CUgraphExecUpdateResult *result)
{
	CUgraphExecUpdateResultInfo info;
	CUresult rc = cuGraphExecUpdate_v2(e, g, &info);
	if (err)
		*err = NULL;
	if (result)
		*result = info.result;
	return rc;
}

/* The exec's node of the same index as h (a node of its graph). */
API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode h,
					       const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct fake_graph *x = (struct fake_graph *)e;
	unsigned i = node_index((const struct recorded *)h);
	if (i >= x->n)
		return CUDA_ERROR_INVALID_VALUE;
	return set_kernel_params(&x->r[i], p);
}

/* The generic setter: kernel nodes only here. */
API CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode h, CUgraphNodeParams *p)
{
	if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return CUDA_ERROR_NOT_SUPPORTED;
	const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
	CUDA_KERNEL_NODE_PARAMS kp = { .func = k->func, .gridDimX = k->gridDimX,
				       .gridDimY = k->gridDimY, .gridDimZ = k->gridDimZ,
				       .blockDimX = k->blockDimX, .blockDimY = k->blockDimY,
				       .blockDimZ = k->blockDimZ, .sharedMemBytes = k->sharedMemBytes,
				       .kernelParams = k->kernelParams, .extra = k->extra,
				       .kern = k->kern, .ctx = k->ctx };
	return cuGraphExecKernelNodeSetParams_v2(e, h, &kp);
}

API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode h,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS kp = from_v1(p);
	return cuGraphExecKernelNodeSetParams_v2(e, h, &kp);
}

/* An executable's node (named by its graph's node) on or off. */
API CUresult cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode h, unsigned on)
{
	struct fake_graph *x = (struct fake_graph *)e;
	unsigned i = node_index((const struct recorded *)h);
	if (i >= x->n)
		return CUDA_ERROR_INVALID_VALUE;
	x->r[i].disabled = !on;
	return CUDA_SUCCESS;
}

/* The nodes run in a topological order (graph_order). */
API CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	(void)s;
	struct fake_graph *fg = (struct fake_graph *)e;
	unsigned order[FAKE_NODES];
	if (graph_order(fg, order))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned o = 0; o < fg->n; o++) {
		struct recorded *r = &fg->r[order[o]];
		if (r->disabled)
			continue;
		if (r->kind == NODE_EVENT) {
			cuEventRecord(r->ev, NULL);
			continue;
		}
		if (r->kind == NODE_COPY) {
			memcpy(r->dst, r->src, r->n);
			continue;
		}
		if (r->kind == NODE_MEMSET) {
			memset(r->dst, r->value, r->n);
			continue;
		}
		r->k->run(r->buf);
		__atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
	}
	return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress: exact-version, per-thread-aware lookup ---- */
API CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);
API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *st);

struct row {
	const char *base;
	int version;
	int per_thread;
	void *fn;
};
#define R(base, ver, pt, fn) { base, ver, pt, (void *)fn }
static const struct row rows[] = {
	R("cuGetProcAddress", 11030, 0, cuGetProcAddress),
	R("cuGetProcAddress", 12000, 0, cuGetProcAddress_v2),
	R("cuInit", 2000, 0, cuInit),
	R("cuDriverGetVersion", 2020, 0, cuDriverGetVersion),
	R("cuCtxGetDevice", 2000, 0, cuCtxGetDevice),
	R("cuCtxGetCurrent", 4000, 0, cuCtxGetCurrent),
	R("cuCtxSetCurrent", 4000, 0, cuCtxSetCurrent),
	R("cuMemAlloc", 3020, 0, cuMemAlloc_v2),
	R("cuMemAllocPitch", 3020, 0, cuMemAllocPitch_v2),
	R("cuMemAllocManaged", 6000, 0, cuMemAllocManaged),
	R("cuMemFree", 3020, 0, cuMemFree_v2),
	R("cuMemAllocAsync", 11020, 0, cuMemAllocAsync),
	R("cuMemAllocAsync", 11020, 1, cuMemAllocAsync_ptsz),
	R("cuMemFreeAsync", 11020, 0, cuMemFreeAsync),
	R("cuMemFreeAsync", 11020, 1, cuMemFreeAsync_ptsz),
	R("cuMemHostAlloc", 2020, 0, cuMemHostAlloc),
	R("cuMemFreeHost", 2000, 0, cuMemFreeHost),
	R("cuMemAddressReserve", 10020, 0, cuMemAddressReserve),
	R("cuMemCreate", 10020, 0, cuMemCreate),
	R("cuMemMap", 10020, 0, cuMemMap),
	R("cuMemUnmap", 10020, 0, cuMemUnmap),
	R("cuMemRelease", 10020, 0, cuMemRelease),
	R("cuMemAddressFree", 10020, 0, cuMemAddressFree),
	R("cuMemcpyHtoD", 3020, 0, cuMemcpyHtoD_v2),
	R("cuMemcpyHtoD", 7000, 1, cuMemcpyHtoD_v2_ptds),
	R("cuMemcpyHtoDAsync", 3020, 0, cuMemcpyHtoDAsync_v2),
	R("cuMemcpyHtoDAsync", 7000, 1, cuMemcpyHtoDAsync_v2_ptsz),
	R("cuMemcpyDtoH", 3020, 0, cuMemcpyDtoH_v2),
	R("cuMemcpyDtoH", 7000, 1, cuMemcpyDtoH_v2_ptds),
	R("cuMemcpyDtoDAsync", 3020, 0, cuMemcpyDtoDAsync_v2),
	R("cuMemcpyDtoD", 3020, 0, cuMemcpyDtoD_v2),
	R("cuMemcpyAsync", 4000, 0, cuMemcpyAsync),
	R("cuMemcpyAsync", 7000, 1, cuMemcpyAsync_ptsz),
	R("cuMemsetD32", 3020, 0, cuMemsetD32_v2),
	R("cuMemsetD32", 7000, 1, cuMemsetD32_v2_ptds),
	R("cuMemsetD8Async", 3020, 0, cuMemsetD8Async),
	R("cuMemsetD8Async", 7000, 1, cuMemsetD8Async_ptsz),
	R("cuFuncGetParamInfo", 12040, 0, cuFuncGetParamInfo),
	R("cuKernelGetParamInfo", 12040, 0, cuKernelGetParamInfo),
	R("cuFuncGetName", 12030, 0, cuFuncGetName),
	R("cuKernelGetName", 12030, 0, cuKernelGetName),
	R("cuTensorMapEncodeTiled", 12000, 0, cuTensorMapEncodeTiled),
	R("cuLaunchKernel", 4000, 0, cuLaunchKernel),
	R("cuLaunchKernel", 7000, 1, cuLaunchKernel_ptsz),
	R("cuLaunchKernelEx", 11060, 0, cuLaunchKernelEx),
	R("cuLaunchKernelEx", 11060, 1, cuLaunchKernelEx_ptsz),
	R("cuLaunchCooperativeKernel", 9000, 0, cuLaunchCooperativeKernel),
	R("cuStreamBeginCapture", 10010, 0, cuStreamBeginCapture_v2),
	R("cuStreamEndCapture", 10000, 0, cuStreamEndCapture),
	R("cuStreamGetCaptureInfo", 12030, 0, cuStreamGetCaptureInfo_v3),
	R("cuGraphInstantiate", 10000, 0, cuGraphInstantiate),
	R("cuGraphInstantiate", 11000, 0, cuGraphInstantiate_v2),
	R("cuGraphInstantiate", 12000, 0, cuGraphInstantiateWithFlags),
	R("cuGraphInstantiateWithFlags", 11040, 0, cuGraphInstantiateWithFlags),
	R("cuGraphLaunch", 10000, 0, cuGraphLaunch),
	R("cuStreamBeginCaptureToGraph", 12030, 0, cuStreamBeginCaptureToGraph),
	R("cuStreamUpdateCaptureDependencies", 12030, 0, cuStreamUpdateCaptureDependencies_v2),
	R("cuStreamDestroy", 4000, 0, cuStreamDestroy_v2),
	R("cuGraphClone", 10000, 0, cuGraphClone),
	R("cuGraphNodeFindInClone", 10000, 0, cuGraphNodeFindInClone),
	R("cuGraphGetNodes", 10000, 0, cuGraphGetNodes),
	R("cuGraphGetEdges", 12030, 0, cuGraphGetEdges_v2),
	R("cuGraphNodeGetType", 10000, 0, cuGraphNodeGetType),
	R("cuGraphKernelNodeGetParams", 12000, 0, cuGraphKernelNodeGetParams_v2),
	R("cuGraphKernelNodeSetParams", 12000, 0, cuGraphKernelNodeSetParams_v2),
	R("cuGraphKernelNodeSetParams", 10000, 0, cuGraphKernelNodeSetParams),
	R("cuGraphMemcpyNodeGetParams", 10000, 0, cuGraphMemcpyNodeGetParams),
	R("cuGraphMemsetNodeGetParams", 10000, 0, cuGraphMemsetNodeGetParams),
	R("cuGraphAddDependencies", 12030, 0, cuGraphAddDependencies_v2),
	R("cuGraphDestroy", 10000, 0, cuGraphDestroy),
	R("cuGraphExecDestroy", 10000, 0, cuGraphExecDestroy),
	R("cuGraphExecUpdate", 10020, 0, cuGraphExecUpdate),
	R("cuGraphExecUpdate", 12000, 0, cuGraphExecUpdate_v2),
	R("cuGraphExecKernelNodeSetParams", 12000, 0, cuGraphExecKernelNodeSetParams_v2),
	R("cuGraphExecKernelNodeSetParams", 10010, 0, cuGraphExecKernelNodeSetParams),
	R("cuGraphExecNodeSetParams", 12020, 0, cuGraphExecNodeSetParams),
	R("cuGraphNodeSetEnabled", 11060, 0, cuGraphNodeSetEnabled),
};

static void *lookup(const char *sym, int ver, cuuint64_t flags)
{
	const struct row *best = NULL;
	int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		if (strcmp(r->base, sym) || r->version > ver)
			continue;
		if (r->per_thread && !want_pt)
			continue;
		if (!best || r->version > best->version ||
		    (r->per_thread && !best->per_thread && r->version >= best->version))
			best = r;
	}
	return best ? best->fn : NULL;
}

API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *st)
{
	if (ver > 13000)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = lookup(sym, ver, flags);
	if (st)
		*st = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_SUCCESS;
}

API CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
