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

#include "fake.h"

#undef cuGetProcAddress
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
API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n)
{
	void *p;
	ALLOC_OR_FAIL(p, n);
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
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy(H(d), s, n); return CUDA_SUCCESS; }
API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n) { return cuMemcpyHtoD_v2(d, s, n); }
static CUresult htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st);
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { INJECT("cuMemcpyHtoDAsync"); return htod_async(d, s, n, st); }
API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st) { return htod_async(d, s, n, st); }
API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove(H(d), H(s), n); return CUDA_SUCCESS; }
API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, H(s), n); return CUDA_SUCCESS; }
API CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH_v2(d, s, n); }
API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; memmove(H(d), H(s), n); return CUDA_SUCCESS; }
API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyAsync(d, s, n, st); }
API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { memset(H(d), v, n); return CUDA_SUCCESS; }
API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((unsigned *)H(d))[i] = v;
	return CUDA_SUCCESS;
}
API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned v, size_t n) { return cuMemsetD32_v2(d, v, n); }
API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { (void)s; memset(H(d), v, n); return CUDA_SUCCESS; }
API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return cuMemsetD8Async(d, v, n, s); }

/* ---- kernels ---- */
struct kdesc {
	const char *name;
	unsigned nparams;
	struct { unsigned off, size; } p[4];
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
		acc += p[i] * (2 * i + 1);
	*out += acc;
}

static void run_nothing(const unsigned char *b)
{
	(void)b;
}

static const struct kdesc kernels[] = {
	{ "vec_add", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, run_vec_add },
	{ "scale", 1, { { 0, sizeof(struct fake_scale_args) } }, run_scale },
	{ "tma_sum", 3, { { 0, 128 }, { 128, 8 }, { 136, 4 } }, run_tma_sum },
	{ "ft_checksum", 3, { { 0, 8 }, { 8, 8 }, { 16, 8 } }, run_checksum },
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
	if (!strstr((const char *)image, ".entry ft_checksum"))
		return CUDA_ERROR_INVALID_IMAGE;
	*m = (CUmodule)&module_tag;
	return CUDA_SUCCESS;
}
API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	(void)m;
	*f = fake_function(name);
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
API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { (void)st; memcpy(d, H(s), n); return CUDA_SUCCESS; }

#include <time.h>
/* An event: the host time of its record (first, for cuEventElapsedTime),
 * and the capture and stream that recorded it, if any. */
struct fake_event {
	double t;
	unsigned long long cap;
	CUstream stream;
	unsigned long at;       /* ops captured on stream when recorded */
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
API CUresult cuEventRecord(CUevent e, CUstream s)
{
	INJECT("cuEventRecord");
	struct fake_event *ev = (struct fake_event *)e;
	ev->t = now_ms();
	ev->cap = capturing(s) ? capture_id() : 0;
	ev->stream = s;
	ev->at = joined_ops(s);
	return CUDA_SUCCESS;
}
API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }
static CUresult record_node(CUevent e, CUstream s);
/* An external record in a capture becomes a node recorded at each replay. */
API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags)
{
	if ((flags & CU_EVENT_RECORD_EXTERNAL) && capturing(s))
		return record_node(e, s);
	return cuEventRecord(e, s);
}
API CUresult cuEventQuery(CUevent e) { (void)e; return CUDA_SUCCESS; }
API CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
/* Every call completes before it returns: ordering holds by itself.  In a
 * capture, a stream that waits on an event recorded in it joins it, and the
 * origin waiting on a joined stream's event joins that stream's work so far
 * back (at the end, every joined stream's work must be). */
API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f)
{
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
		if (!capturing(s))
			joined(s, 1);
		else
			origin_waited(s, ev->stream, ev->at);
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

/* ---- launches, streams, capture, graphs ---- */
static unsigned long launches;
API unsigned long fake_launch_count(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }

struct recorded {
	const struct kdesc *k;  /* NULL: a host-to-device copy, or ev's record */
	CUevent ev;             /* an external event node: recorded at replay */
	unsigned char buf[4096];
	void *dst;
	const void *src;
	size_t n;
};
#define FAKE_NODES 512
static struct {
	CUstream stream;
	unsigned long long id;
	int active;
	struct recorded r[FAKE_NODES];
	unsigned n;
	struct {
		CUstream s;
		unsigned long ops;       /* captured on it so far */
		unsigned long joined_at; /* ops the origin has waited for */
	} joined[8];            /* other streams in the capture */
	unsigned njoined;
} cap;
static unsigned long long next_capture = 1;

struct fake_graph {
	struct recorded r[FAKE_NODES];
	unsigned n;
};

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

static CUresult record_node(CUevent e, CUstream s)
{
	if (cap.n == FAKE_NODES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	captured_op(s);
	cap.r[cap.n++] = (struct recorded){ .ev = e };
	return CUDA_SUCCESS;
}

/* host-to-device copies on a capturing stream become graph nodes */
static CUresult htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
	if (capturing(st)) {
		if (cap.n == FAKE_NODES)
			return CUDA_ERROR_OUT_OF_MEMORY;
		captured_op(st);
		cap.r[cap.n++] = (struct recorded){ .dst = H(d), .src = s, .n = n };
		return CUDA_SUCCESS;
	}
	memcpy(H(d), s, n);
	return CUDA_SUCCESS;
}

static CUresult do_launch(CUfunction f, CUstream s, void **params, void **extra)
{
	const struct kdesc *k = desc_of(f);
	unsigned char buf[4096] = { 0 };
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (params) {
		for (unsigned i = 0; i < k->nparams; i++)
			memcpy(buf + k->p[i].off, params[i], k->p[i].size);
	} else if (extra) {
		const void *b = NULL;
		size_t n = 0;
		for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				b = extra[i + 1];
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				n = *(size_t *)extra[i + 1];
		}
		if (!b || n > sizeof(buf))
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(buf, b, n);
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (capturing(s)) {
		if (cap.n == FAKE_NODES)
			return CUDA_ERROR_OUT_OF_MEMORY;
		captured_op(s);
		cap.r[cap.n].k = k;
		memcpy(cap.r[cap.n++].buf, buf, sizeof(buf));
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

API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
	(void)m;
	if (cap.active)
		return CUDA_ERROR_ILLEGAL_STATE;
	cap.active = 1;
	cap.stream = s;
	cap.n = 0;
	cap.njoined = 0;
	cap.id = next_capture++;
	return CUDA_SUCCESS;
}

API CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st,
				       cuuint64_t *id, CUgraph *g, const CUgraphNode **d,
				       const CUgraphEdgeData **e, size_t *n)
{
	(void)g; (void)d; (void)e; (void)n;
	int on = cap.active && s == cap.stream;
	*st = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	if (id)
		*id = on ? cap.id : 0;
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
			return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
		}
	struct fake_graph *fg = calloc(1, sizeof(*fg));
	memcpy(fg->r, cap.r, sizeof(cap.r));
	fg->n = cap.n;
	cap.active = 0;
	*g = (CUgraph)fg;
	return CUDA_SUCCESS;
}

API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f)
{
	(void)f;
	INJECT("cuGraphInstantiate");
	*e = (CUgraphExec)g;
	return CUDA_SUCCESS;
}

API CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	(void)s;
	struct fake_graph *fg = (struct fake_graph *)e;
	for (unsigned i = 0; i < fg->n; i++) {
		if (fg->r[i].ev) {
			cuEventRecord(fg->r[i].ev, NULL);
			continue;
		}
		if (!fg->r[i].k) {
			memcpy(fg->r[i].dst, fg->r[i].src, fg->r[i].n);
			continue;
		}
		fg->r[i].k->run(fg->r[i].buf);
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
	R("cuGraphInstantiate", 11040, 0, cuGraphInstantiateWithFlags),
	R("cuGraphInstantiateWithFlags", 11040, 0, cuGraphInstantiateWithFlags),
	R("cuGraphLaunch", 10000, 0, cuGraphLaunch),
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
