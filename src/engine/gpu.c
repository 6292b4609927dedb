/*
 * The library's own GPU work (include/ft/gpu.h).  The kernels are PTX text
 * loaded with cuModuleLoadData, so the library needs no nvcc and runs on
 * any GPU the driver can JIT for.  The checksum kernel: each thread walks
 * the range with a grid stride, sums each word mixed with its index
 * (include/ft/checksum.h: position-dependent, so a moved word changes the
 * sum; non-linear) and adds its part atomically.  The copy kernel (FT_GRAPH_COPY=kernel): each thread copies
 * 16-byte vectors with a grid stride, reading the pinned host store through
 * its device mapping.
 */
#include "ft/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "codec_ptx.h"
#include "ft/checksum.h"
#include "ft/codec.h"

/* Both kernels' grid stride: the thread's first index in %d4, the stride
 * (threads in the grid) in %d6 (uses %r1-%r4, %d5). */
#define GRID_STRIDE                                                            \
	"	mov.u32 %r1, %ctaid.x;\n"                                      \
	"	mov.u32 %r2, %ntid.x;\n"                                       \
	"	mov.u32 %r3, %tid.x;\n"                                        \
	"	mov.u32 %r4, %nctaid.x;\n"                                     \
	"	mul.wide.u32 %d4, %r1, %r2;\n"                                 \
	"	cvt.u64.u32 %d5, %r3;\n"                                       \
	"	add.u64 %d4, %d4, %d5;\n"                                      \
	"	mul.wide.u32 %d6, %r4, %r2;\n"

static const char checksum_ptx[] =
	".version 7.0\n"
	".target sm_70\n"
	".address_size 64\n"
	".visible .entry ft_checksum(.param .u64 p, .param .u64 n, .param .u64 out)\n"
	"{\n"
	"	.reg .pred %q;\n"
	"	.reg .b32 %r<5>;\n"
	"	.reg .b64 %d<12>;\n"
	"	ld.param.u64 %d1, [p];\n"
	"	ld.param.u64 %d2, [n];\n"
	"	ld.param.u64 %d3, [out];\n"
	"	cvta.to.global.u64 %d1, %d1;\n"
	"	cvta.to.global.u64 %d3, %d3;\n"
	GRID_STRIDE
	"	mov.u64 %d7, 0;\n"
	"LOOP:\n"
	"	setp.ge.u64 %q, %d4, %d2;\n"
	"	@%q bra DONE;\n"
	"	shl.b64 %d8, %d4, 3;\n"
	"	add.u64 %d8, %d1, %d8;\n"
	"	ld.global.nc.u64 %d9, [%d8];\n"
	"	mul.lo.u64 %d10, %d4, " FT_CHECKSUM_XSTR(FT_CHECKSUM_K1) ";\n"
	"	xor.b64 %d9, %d9, %d10;\n"
	"	mul.lo.u64 %d9, %d9, " FT_CHECKSUM_XSTR(FT_CHECKSUM_K2) ";\n"
	"	shr.u64 %d10, %d9, 32;\n"
	"	xor.b64 %d9, %d9, %d10;\n"
	"	add.u64 %d7, %d7, %d9;\n"
	"	add.u64 %d4, %d4, %d6;\n"
	"	bra LOOP;\n"
	"DONE:\n"
	"	atom.global.add.u64 %d11, [%d3], %d7;\n"
	"	ret;\n"
	"}\n"
	".visible .entry ft_copy16(.param .u64 dst, .param .u64 src, .param .u64 n)\n"
	"{\n"
	"	.reg .pred %q;\n"
	"	.reg .b32 %r<9>;\n"
	"	.reg .b64 %d<10>;\n"
	"	ld.param.u64 %d1, [dst];\n"
	"	ld.param.u64 %d2, [src];\n"
	"	ld.param.u64 %d3, [n];\n"
	"	cvta.to.global.u64 %d1, %d1;\n"
	"	cvta.to.global.u64 %d2, %d2;\n"
	GRID_STRIDE
	"COPY:\n"
	"	setp.ge.u64 %q, %d4, %d3;\n"
	"	@%q bra END;\n"
	"	shl.b64 %d7, %d4, 4;\n"
	"	add.u64 %d8, %d2, %d7;\n"
	"	ld.global.nc.v4.u32 {%r5, %r6, %r7, %r8}, [%d8];\n"
	"	add.u64 %d9, %d1, %d7;\n"
	"	st.global.v4.u32 [%d9], {%r5, %r6, %r7, %r8};\n"
	"	add.u64 %d4, %d4, %d6;\n"
	"	bra COPY;\n"
	"END:\n"
	"	ret;\n"
	"}\n";

#define OK(call) ((call) == CUDA_SUCCESS)

int ft_gpu_start(struct ft_gpu *g, const struct ft_real *real)
{
	if (g->state)
		return g->state > 0 ? 0 : -1;
	g->real = real;
	g->state = -1;
	if (!real->cuModuleLoadData || !real->cuModuleGetFunction || !real->cuStreamCreate ||
	    !real->cuLaunchKernel || !real->cuCtxSynchronize || !real->cuStreamSynchronize ||
	    !real->cuMemAlloc_v2 || !real->cuMemAllocHost_v2 || !real->cuMemsetD8Async ||
	    !real->cuMemcpyDtoHAsync_v2)
		return -1;
	if (!OK(real->cuModuleLoadData(&g->mod, checksum_ptx)) ||
	    !OK(real->cuModuleGetFunction(&g->checksum, g->mod, "ft_checksum")) ||
	    !OK(real->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING)))
		return -1;
	/* the copy kernel is optional: without it, graphs copy with memcpy
	 * nodes */
	CUdevice dev;
	int sms = 0;
	if (OK(real->cuModuleGetFunction(&g->copy, g->mod, "ft_copy16")) && real->cuDeviceGetAttribute &&
	    OK(real->cuCtxGetDevice(&dev)) &&
	    OK(real->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) &&
	    sms > 0)
		g->sms = (unsigned)sms;
	else
		g->copy = NULL;
	/* the decoder is optional too: without it, stores are not coded */
	if (!OK(real->cuModuleLoadData(&g->zmod, codec_ptx)) ||
	    !OK(real->cuModuleGetFunction(&g->decode, g->zmod, "ft_z_decode")))
		g->decode = NULL;
	/* and its encoder: without it, the host's CPUs code the stores */
	if (!g->decode || !OK(real->cuModuleGetFunction(&g->zanalyse, g->zmod, "ft_z_analyse")) ||
	    !OK(real->cuModuleGetFunction(&g->zcode, g->zmod, "ft_z_code")))
		g->zanalyse = g->zcode = NULL;
	g->state = 1;
	return 0;
}

/* Threads per block of the copy kernel. */
#define COPY_THREADS 512u

int ft_gpu_copy(const struct ft_gpu *g, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	if (g->state != 1 || !g->copy || ((dst | src | n) & 15) || !n)
		return -1;
	uint64_t vectors = n / 16;
	uint64_t blocks = (vectors + COPY_THREADS - 1) / COPY_THREADS;
	unsigned grid = blocks < g->sms ? (unsigned)blocks : g->sms;
	void *params[] = { &dst, &src, &vectors };
	return OK(g->real->cuLaunchKernel(g->copy, grid, 1, 1, COPY_THREADS, 1, 1, 0, s, params,
					  NULL)) ? 0 : -1;
}

int ft_gpu_decode(const struct ft_gpu *g, CUdeviceptr src, uint64_t bias, CUdeviceptr desc,
		  CUdeviceptr dst, uint64_t nvals, uint32_t nchunks, CUstream s)
{
	if (g->state != 1 || !g->decode || !nchunks)
		return -1;
	void *params[] = { &src, &bias, &desc, &dst, &nvals, &nchunks };
	return OK(g->real->cuLaunchKernel(g->decode, nchunks, 1, 1, 256, 1, 1, 0, s, params, NULL))
		       ? 0 : -1;
}

int ft_gpu_z_analyse(const struct ft_gpu *g, CUdeviceptr src, CUdeviceptr meta, uint64_t nvals,
		     uint32_t nchunks, CUstream s)
{
	if (g->state != 1 || !g->zanalyse || !nchunks)
		return -1;
	void *params[] = { &src, &meta, &nvals, &nchunks };
	return OK(g->real->cuLaunchKernel(g->zanalyse, nchunks, 1, 1, 256, 1, 1, 0, s, params,
					  NULL)) ? 0 : -1;
}

int ft_gpu_z_code(const struct ft_gpu *g, CUdeviceptr src, CUdeviceptr meta, CUdeviceptr desc,
		  uint64_t bias, CUdeviceptr dst, uint64_t nvals, uint32_t nchunks, CUstream s)
{
	if (g->state != 1 || !g->zcode || !nchunks)
		return -1;
	void *params[] = { &src, &meta, &desc, &bias, &dst, &nvals, &nchunks };
	return OK(g->real->cuLaunchKernel(g->zcode, nchunks, 1, 1, 256, 1, 1, 0, s, params, NULL))
		       ? 0 : -1;
}

static int reserve(struct ft_gpu *g, uint32_t n)
{
	if (n <= g->cap)
		return 0;
	uint32_t cap = n < 1024 ? 1024 : n;
	CUdeviceptr d;
	void *h;
	if (!OK(g->real->cuMemAlloc_v2(&d, cap * sizeof(uint64_t))))
		return -1;
	if (!OK(g->real->cuMemAllocHost_v2(&h, cap * sizeof(uint64_t)))) {
		g->real->cuMemFree_v2(d);
		return -1;
	}
	if (g->cap) {
		g->real->cuMemFree_v2(g->sums);
		g->real->cuMemFreeHost(g->host_sums);
	}
	g->sums = d;
	g->host_sums = h;
	g->cap = cap;
	return 0;
}

int ft_gpu_checksums(struct ft_gpu *g, const uint64_t *addr, const uint64_t *bytes, uint32_t n,
		     uint64_t *out)
{
	const struct ft_real *r = g->real;
	if (g->state != 1 || reserve(g, n))
		return -1;
	/* All earlier work, on every stream, has finished writing. */
	if (!OK(r->cuCtxSynchronize()) ||
	    !OK(r->cuMemsetD8Async(g->sums, 0, n * sizeof(uint64_t), g->stream)))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		/* 8-byte loads must be aligned: the words that lie wholly
		 * inside the range (a tensor may start at any element) */
		CUdeviceptr p = (addr[i] + 7) & ~(CUdeviceptr)7, slot = g->sums + i * sizeof(uint64_t);
		uint64_t words = addr[i] + bytes[i] > p ? (addr[i] + bytes[i] - p) / 8 : 0;
		unsigned blocks = (unsigned)(words / 256 + 1);
		if (blocks > 1024)
			blocks = 1024;
		void *params[] = { &p, &words, &slot };
		if (!OK(r->cuLaunchKernel(g->checksum, blocks, 1, 1, 256, 1, 1, 0, g->stream, params,
					  NULL)))
			return -1;
	}
	if (!OK(r->cuMemcpyDtoHAsync_v2(g->host_sums, g->sums, n * sizeof(uint64_t), g->stream)) ||
	    !OK(r->cuStreamSynchronize(g->stream)))
		return -1;
	memcpy(out, g->host_sums, n * sizeof(uint64_t));
	return 0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* One timed operation of a curve: a copy of n bytes from host h to d, or
 * the decode of n raw bytes of the image at d (descriptors at desc) into
 * out. */
struct timed_op {
	CUdeviceptr d, desc, out;
	const void *h;
};

static int run_op(struct ft_gpu *g, const struct timed_op *op, uint64_t n)
{
	if (op->h)
		return OK(g->real->cuMemcpyHtoDAsync_v2(op->d, op->h, n, g->stream)) ? 0 : -1;
	return ft_gpu_decode(g, op->d, 0, op->desc, op->out, n / 2,
			     (uint32_t)((n + FT_Z_CHUNK - 1) / FT_Z_CHUNK), g->stream);
}

/* pts[i].ms: op's time for pts[i].bytes on the stream, the median of 5
 * (after a warm-up). */
static int time_points(struct ft_gpu *g, const struct timed_op *op, struct ft_curve_point *pts,
		       uint32_t n)
{
	const struct ft_real *r = g->real;
	CUevent e0 = NULL, e1 = NULL;
	int rc = -1;
	if (!r->cuEventCreate || !r->cuEventRecord || !r->cuEventSynchronize ||
	    !r->cuEventElapsedTime_v2 || !OK(r->cuEventCreate(&e0, CU_EVENT_DEFAULT)) ||
	    !OK(r->cuEventCreate(&e1, CU_EVENT_DEFAULT)))
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		float ms[5];
		for (int k = 0; k < 6; k++) { /* the first is a warm-up */
			if (!OK(r->cuEventRecord(e0, g->stream)) || run_op(g, op, pts[i].bytes) ||
			    !OK(r->cuEventRecord(e1, g->stream)) || !OK(r->cuEventSynchronize(e1)))
				goto out;
			if (k && !OK(r->cuEventElapsedTime_v2(&ms[k - 1], e0, e1)))
				goto out;
		}
		qsort(ms, 5, sizeof(ms[0]), cmp_float);
		pts[i].ms = ms[2];
	}
	rc = 0;
out:
	if (e0 && r->cuEventDestroy_v2)
		r->cuEventDestroy_v2(e0);
	if (e1 && r->cuEventDestroy_v2)
		r->cuEventDestroy_v2(e1);
	return rc;
}

int ft_gpu_copy_curve(struct ft_gpu *g, struct ft_curve_point *pts, uint32_t n)
{
	const struct ft_real *r = g->real;
	if (g->state != 1 || !n || !r->cuMemcpyHtoDAsync_v2)
		return -1;
	uint64_t max = pts[n - 1].bytes;
	struct timed_op op = { 0 };
	void *h = NULL;
	int rc = -1;
	if (!OK(r->cuMemAlloc_v2(&op.d, max)))
		return -1;
	if (OK(r->cuMemAllocHost_v2(&h, max))) {
		memset(h, 0x5a, max);
		op.h = h;
		rc = time_points(g, &op, pts, n);
		r->cuMemFreeHost(h);
	}
	r->cuMemFree_v2(op.d);
	return rc;
}

/* n bf16 words shaped as trained weights are (normal, sd 0.02: their
 * exponents as concentrated), from a fixed seed. */
static void weights_like(uint16_t *w, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		double u = 0;
		for (int k = 0; k < 4; k++) { /* about normal: the sum of four uniforms */
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			u += (double)(x >> 11) / 9007199254740992.0;
		}
		float f = (float)((u - 2.0) * 0.02 * 1.7320508);
		uint32_t b;
		memcpy(&b, &f, sizeof(b));
		w[i] = (uint16_t)(b >> 16);
	}
}

int ft_gpu_decode_curve(struct ft_gpu *g, struct ft_curve_point *pts, uint32_t n)
{
	const struct ft_real *r = g->real;
	if (g->state != 1 || !g->decode || !n)
		return -1;
	uint64_t max = pts[n - 1].bytes;
	uint16_t *w = malloc(max);
	struct ft_z_image z = { 0 };
	struct timed_op op = { 0 };
	int rc = -1;
	if (!w)
		return -1;
	weights_like(w, max / 2);
	size_t db = 0;
	if (ft_z_encode(w, max, 0, &z))
		goto out;
	db = (z.nchunks + 1) * sizeof(*z.desc);
	if (OK(r->cuMemAlloc_v2(&op.d, z.bytes)) && OK(r->cuMemAlloc_v2(&op.desc, db)) &&
	    OK(r->cuMemAlloc_v2(&op.out, max)) && OK(r->cuMemcpyHtoD_v2(op.d, z.data, z.bytes)) &&
	    OK(r->cuMemcpyHtoD_v2(op.desc, z.desc, db)))
		rc = time_points(g, &op, pts, n);
out:
	if (op.d)
		r->cuMemFree_v2(op.d);
	if (op.desc)
		r->cuMemFree_v2(op.desc);
	if (op.out)
		r->cuMemFree_v2(op.out);
	ft_z_free(&z);
	free(w);
	return rc;
}

int ft_gpu_device(struct ft_gpu *g, char *name, int len, uint64_t *total, int *driver)
{
	const struct ft_real *r = g->real;
	CUdevice dev;
	size_t bytes = 0;
	if (!r || !r->cuCtxGetDevice || !r->cuDeviceGetName || !r->cuDeviceTotalMem_v2 ||
	    !OK(r->cuCtxGetDevice(&dev)) || !OK(r->cuDeviceGetName(name, len, dev)) ||
	    !OK(r->cuDeviceTotalMem_v2(&bytes, dev)))
		return -1;
	*total = bytes;
	*driver = 0;
	if (r->cuDriverGetVersion)
		r->cuDriverGetVersion(driver);
	return 0;
}
