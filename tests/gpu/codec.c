/*
 * The store's codec on the GPU (issue 19): the decoder's PTX (the string the
 * library loads, src/engine/codec_ptx.h) decodes every class of data
 * (tests/common/codec_data.h) bit for bit, whole and in pieces staged at an
 * offset as the engine stages them; then its speed: the encoder on all CPUs
 * (GB/s of raw bytes), the decoder alone (GB/s of raw output, one launch per
 * 16 MiB piece), and the pipeline the engine ran before run72 (pieces of
 * the image copied into two slots on one stream and decoded on another;
 * now four slots of 64 MiB) against raw
 * copies of the same bytes (effective bandwidth).  The GPU encoder (the
 * same PTX) makes the host encoder's image byte for byte, for every class
 * of data, and its speed is taken as the engine runs it (the first pass,
 * the layout on the host, the second pass a slot at a time copied into a
 * pinned image).  The tables give each chunk mode's count (raw/bf16/fp16/
 * bf16 Huffman); the speeds are taken on data each mode codes (bf16
 * weights: mode 3; 15 exponents in equal shares: mode 1; fp16 words of 15
 * exponents: mode 2).  Exits 1 on a mismatch,
 * 77 without a GPU.  usage: codec [MiB of weights, default 1024]
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft/codec.h"
#include "../../src/engine/codec_ptx.h"
#include "../common/codec_data.h"

#define CK(call)                                                                    \
	do {                                                                        \
		CUresult rc_ = (call);                                              \
		if (rc_ != CUDA_SUCCESS) {                                          \
			const char *s_ = NULL;                                      \
			cuGetErrorString(rc_, &s_);                                 \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
				s_ ? s_ : "?");                                     \
			exit(2);                                                    \
		}                                                                   \
	} while (0)

#define SLOT (16u << 20) /* the engine's FT_OFF_SLOT_BYTES before run72 (now 64 MiB):
			   * kept, so that speeds compare across sessions */

static CUfunction dec, zan, zco;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void launch(CUdeviceptr src, unsigned long long bias, CUdeviceptr desc, CUdeviceptr dst,
		   unsigned long long nvals, unsigned nchunks, CUstream s)
{
	void *p[] = { &src, &bias, &desc, &dst, &nvals, &nchunks };
	CK(cuLaunchKernel(dec, nchunks, 1, 1, 256, 1, 1, 0, s, p, NULL));
}

/* The GPU encoder's image of nvals words at src (device memory) as the
 * engine makes it: analysed, laid out, coded a slot at a time into the
 * pinned image at img (pinned already, as the engine pins it before, of
 * the raw bytes at least; NULL: pinned here); desc its descriptors on the
 * GPU (the caller frees them, and z->data when img was NULL). */
static void gpu_encode(CUdeviceptr src, size_t nvals, struct ft_z_image *z, CUdeviceptr *desc,
		       unsigned char *img)
{
	uint32_t n = (uint32_t)((nvals + FT_Z_VALS - 1) / FT_Z_VALS);
	struct ft_z_meta *m = malloc(n * sizeof(*m));
	CUdeviceptr dm, slot;
	CK(cuMemAlloc(&dm, n * sizeof(*m)));
	CK(cuMemAlloc(&slot, SLOT));
	unsigned long long nv = nvals;
	void *pa[] = { &src, &dm, &nv, &n };
	CK(cuLaunchKernel(zan, n, 1, 1, 256, 1, 1, 0, NULL, pa, NULL));
	CK(cuMemcpyDtoH(m, dm, n * sizeof(*m)));
	if (!m || ft_z_layout(z, nvals * 2, m))
		exit(2);
	size_t db = (z->nchunks + 1) * 8;
	CK(cuMemAlloc(desc, db));
	CK(cuMemcpyHtoD(*desc, z->desc, db));
	if (img)
		z->data = img;
	else
		CK(cuMemAllocHost((void **)&z->data, z->bytes + 1));
	for (uint32_t a = 0, b; a < n; a = b) {
		b = ft_z_piece_end(z, a, n, SLOT);
		CUdeviceptr s0 = src + (CUdeviceptr)a * FT_Z_CHUNK, m0 = dm + a * sizeof(*m);
		CUdeviceptr d0 = *desc + a * 8;
		unsigned long long bias = FT_Z_OFF(z->desc[a]), left = nvals - (size_t)a * FT_Z_VALS;
		unsigned k = b - a;
		void *pc[] = { &s0, &m0, &d0, &bias, &slot, &left, &k };
		CK(cuLaunchKernel(zco, k, 1, 1, 256, 1, 1, 0, NULL, pc, NULL));
		CK(cuMemcpyDtoH(z->data + bias, slot, ft_z_span(z, a, b)));
	}
	cuMemFree(dm);
	cuMemFree(slot);
	free(m);
}

/* The GPU encoder's image of v against the host's z: 0 the same. */
static int same_image(enum codec_class c, const uint16_t *v, size_t nvals,
		      const struct ft_z_image *z)
{
	CUdeviceptr src, desc;
	struct ft_z_image g;
	CK(cuMemAlloc(&src, nvals * 2));
	CK(cuMemcpyHtoD(src, v, nvals * 2));
	gpu_encode(src, nvals, &g, &desc, NULL);
	int bad = g.bytes != z->bytes ||
		  memcmp(g.desc, z->desc, (z->nchunks + 1) * sizeof(*z->desc)) ||
		  memcmp(g.data, z->data, z->bytes);
	if (bad)
		fprintf(stderr, "MISMATCH %s: the GPU encoder's image (%zu bytes) is not the "
			"host's (%zu bytes)\n", codec_class_name[c], g.bytes, z->bytes);
	cuMemFreeHost(g.data);
	g.data = NULL;
	ft_z_free(&g);
	cuMemFree(src);
	cuMemFree(desc);
	return bad;
}

/* z's chunks per mode, "raw/1/2/3", into buf. */
static const char *modes(const struct ft_z_image *z, char *buf, size_t len)
{
	uint32_t k[4] = { 0, 0, 0, 0 };
	for (uint32_t c = 0; c < z->nchunks; c++)
		k[FT_Z_MODE(z->desc[c])]++;
	snprintf(buf, len, "%u/%u/%u/%u", k[0], k[1], k[2], k[3]);
	return buf;
}

/* Decodes z on the GPU whole (one launch) and in staged pieces; compares. */
static int check(enum codec_class c, size_t nvals)
{
	uint16_t *v = malloc(nvals * 2), *out = malloc(nvals * 2);
	codec_fill(c, v, nvals);
	struct ft_z_image z;
	if (!v || !out || ft_z_encode(v, nvals * 2, 0, &z))
		return 1;
	CUdeviceptr img, desc, dst, slot;
	size_t db = (z.nchunks + 1) * 8;
	CK(cuMemAlloc(&img, z.bytes));
	CK(cuMemAlloc(&desc, db));
	CK(cuMemAlloc(&dst, nvals * 2));
	CK(cuMemAlloc(&slot, SLOT));
	CK(cuMemcpyHtoD(img, z.data, z.bytes));
	CK(cuMemcpyHtoD(desc, z.desc, db));
	int bad = 0;
	for (int staged = 0; staged < 2; staged++) {
		CK(cuMemsetD8(dst, 0xa5, nvals * 2));
		if (!staged) {
			launch(img, 0, desc, dst, nvals, z.nchunks, NULL);
		} else {
			for (uint32_t a = 0, b; a < z.nchunks; a = b) {
				b = ft_z_piece_end(&z, a, z.nchunks, SLOT);
				uint64_t off = FT_Z_OFF(z.desc[a]);
				CK(cuMemcpyDtoD(slot, img + off, ft_z_span(&z, a, b)));
				launch(slot, off, desc + a * 8, dst + (CUdeviceptr)a * FT_Z_CHUNK,
				       nvals - (size_t)a * FT_Z_VALS, b - a, NULL);
			}
		}
		CK(cuCtxSynchronize());
		CK(cuMemcpyDtoH(out, dst, nvals * 2));
		for (size_t i = 0; i < nvals; i++)
			if (v[i] != out[i]) {
				fprintf(stderr, "MISMATCH %s (%s): word %zu is 0x%04x, decoded 0x%04x\n",
					codec_class_name[c], staged ? "staged" : "whole", i, v[i], out[i]);
				bad = 1;
				break;
			}
	}
	int enc = same_image(c, v, nvals, &z);
	char mb[64];
	printf("| %s | %zu | %.4f | %u of %u | %s | %s | %s |\n", codec_class_name[c], nvals * 2,
	       (double)z.raw_bytes / (double)z.bytes, z.coded, z.nchunks, modes(&z, mb, sizeof(mb)),
	       bad ? "NO" : "yes", enc ? "NO" : "yes");
	bad |= enc;
	cuMemFree(img);
	cuMemFree(desc);
	cuMemFree(dst);
	cuMemFree(slot);
	ft_z_free(&z);
	free(v);
	free(out);
	return bad;
}

static float elapsed(CUevent a, CUevent b)
{
	float ms = 0;
	CK(cuEventSynchronize(b));
	CK(cuEventElapsedTime(&ms, a, b));
	return ms;
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* Speeds on mib MiB of class c. */
static void speed(enum codec_class c, size_t mib)
{
	size_t bytes = mib << 20, nvals = bytes / 2;
	uint16_t *v;
	CK(cuMemAllocHost((void **)&v, bytes));
	codec_fill(c, v, nvals);
	struct ft_z_image z;
	double t0 = now();
	if (ft_z_encode(v, bytes, 0, &z))
		exit(2);
	double enc = now() - t0;
	/* the GPU encoder from the weights on the GPU, as the engine runs it */
	CUdeviceptr gsrc, gdesc;
	struct ft_z_image g;
	unsigned char *pinned;
	CK(cuMemAllocHost((void **)&pinned, bytes));
	CK(cuMemAlloc(&gsrc, bytes));
	CK(cuMemcpyHtoD(gsrc, v, bytes));
	double genc = 1e30;
	for (int r = 0; r < 3; r++) {
		CK(cuCtxSynchronize());
		t0 = now();
		gpu_encode(gsrc, nvals, &g, &gdesc, pinned);
		double t = now() - t0;
		genc = t < genc ? t : genc;
		if (g.bytes != z.bytes || memcmp(g.data, z.data, z.bytes)) {
			fprintf(stderr, "MISMATCH in the GPU encoder's image of %s\n",
				codec_class_name[c]);
			exit(1);
		}
		g.data = NULL;
		ft_z_free(&g);
		cuMemFree(gdesc);
	}
	cuMemFreeHost(pinned);
	cuMemFree(gsrc);
	unsigned char *himg;
	CK(cuMemAllocHost((void **)&himg, z.bytes));
	memcpy(himg, z.data, z.bytes);
	CUdeviceptr img, desc, dst, slot[2];
	size_t db = (z.nchunks + 1) * 8;
	CK(cuMemAlloc(&img, z.bytes));
	CK(cuMemAlloc(&desc, db));
	CK(cuMemAlloc(&dst, bytes));
	CK(cuMemAlloc(&slot[0], SLOT));
	CK(cuMemAlloc(&slot[1], SLOT));
	CK(cuMemcpyHtoD(img, z.data, z.bytes));
	CK(cuMemcpyHtoD(desc, z.desc, db));
	CUstream cs, ds;
	CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&ds, CU_STREAM_NON_BLOCKING));
	CUevent e0, e1, full[2], freed[2];
	CK(cuEventCreate(&e0, 0));
	CK(cuEventCreate(&e1, 0));
	for (int k = 0; k < 2; k++) {
		CK(cuEventCreate(&full[k], CU_EVENT_DISABLE_TIMING));
		CK(cuEventCreate(&freed[k], CU_EVENT_DISABLE_TIMING));
	}
	float dms[7], rms[7], pms[7];
	for (int r = 0; r < 7; r++) {
		/* decode alone, device to device, in the engine's pieces */
		CK(cuEventRecord(e0, ds));
		for (uint32_t a = 0, b; a < z.nchunks; a = b) {
			b = ft_z_piece_end(&z, a, z.nchunks, SLOT);
			launch(img + FT_Z_OFF(z.desc[a]), FT_Z_OFF(z.desc[a]), desc + a * 8,
			       dst + (CUdeviceptr)a * FT_Z_CHUNK, nvals - (size_t)a * FT_Z_VALS, b - a,
			       ds);
		}
		CK(cuEventRecord(e1, ds));
		dms[r] = elapsed(e0, e1);
		/* raw copies of the same bytes */
		CK(cuEventRecord(e0, cs));
		CK(cuMemcpyHtoDAsync(dst, v, bytes, cs));
		CK(cuEventRecord(e1, cs));
		rms[r] = elapsed(e0, e1);
		/* the engine's pipeline */
		int used[2] = { 0, 0 }, next = 0;
		CK(cuEventRecord(e0, cs));
		for (uint32_t a = 0, b; a < z.nchunks; a = b) {
			b = ft_z_piece_end(&z, a, z.nchunks, SLOT);
			int s = next;
			next ^= 1;
			if (used[s])
				CK(cuStreamWaitEvent(cs, freed[s], 0));
			uint64_t off = FT_Z_OFF(z.desc[a]);
			CK(cuMemcpyHtoDAsync(slot[s], himg + off, ft_z_span(&z, a, b), cs));
			CK(cuEventRecord(full[s], cs));
			CK(cuStreamWaitEvent(ds, full[s], 0));
			launch(slot[s], off, desc + a * 8, dst + (CUdeviceptr)a * FT_Z_CHUNK,
			       nvals - (size_t)a * FT_Z_VALS, b - a, ds);
			CK(cuEventRecord(freed[s], ds));
			used[s] = 1;
		}
		CK(cuEventRecord(e1, ds));
		pms[r] = elapsed(e0, e1);
	}
	qsort(dms, 7, sizeof(float), cmpf);
	qsort(rms, 7, sizeof(float), cmpf);
	qsort(pms, 7, sizeof(float), cmpf);
	/* the pipeline's result is the data */
	uint16_t *out = malloc(bytes);
	CK(cuMemcpyDtoH(out, dst, bytes));
	int same = out && !memcmp(out, v, bytes);
	char mb[64];
	printf("| %s | %zu | %s | %.4f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f | %.3f | %.1f %% | %s |\n",
	       codec_class_name[c], mib, modes(&z, mb, sizeof(mb)),
	       (double)z.raw_bytes / (double)z.bytes,
	       (double)bytes / enc / 1e9, (double)bytes / genc / 1e9, (double)bytes / dms[3] / 1e6, (double)bytes / rms[3] / 1e6,
	       rms[3], pms[3], rms[3] / pms[3], 100.0 * dms[3] / pms[3], same ? "yes" : "NO");
	free(out);
	ft_z_free(&z);
	cuMemFreeHost(v);
	cuMemFreeHost(himg);
	cuMemFree(img);
	cuMemFree(desc);
	cuMemFree(dst);
	cuMemFree(slot[0]);
	cuMemFree(slot[1]);
	if (!same) {
		fprintf(stderr, "MISMATCH in the pipelined decode of %s\n", codec_class_name[c]);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	int n = 0;
	if (cuInit(0) || cuDeviceGetCount(&n) || !n) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, codec_ptx));
	CK(cuModuleGetFunction(&dec, mod, "ft_z_decode"));
	CK(cuModuleGetFunction(&zan, mod, "ft_z_analyse"));
	CK(cuModuleGetFunction(&zco, mod, "ft_z_code"));
	printf("| data | bytes | ratio | coded chunks | modes raw/1/2/3 | bit-exact (whole, staged) | "
	       "GPU encoder's image = host's |\n|---|---|---|---|---|---|---|\n");
	int bad = 0;
	/* 40 chunks and a short one; a chunk of 32 words; one of 2080 */
	static const size_t sizes[] = { 40u * FT_Z_VALS + 4096 + 32, 32, 2080 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int c = 0; c < CD_NCLASSES; c++)
			bad |= check((enum codec_class)c, sizes[k]);
	printf("\n| data | MiB | modes raw/1/2/3 | ratio | encode GB/s (all CPUs) | encode GB/s (GPU, to "
	       "pinned host) | decode GB/s (raw out) | raw H2D GB/s | raw H2D ms | coded H2D + decode "
	       "ms | effective speed-up | decoder busy | bit-exact |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	speed(CD_NORMAL, mib);
	speed(CD_LOGNORMAL, mib);
	speed(CD_STUDENT_T3, mib);
	speed(CD_FP16, mib);
	speed(CD_FIFTEEN, mib);
	speed(CD_FP16_WIDE, mib);
	speed(CD_RANDOM, mib / 4 ? mib / 4 : 1);
	return bad;
}
