/*
 * The store's codec on the GPU (issue 19): the decoder's PTX (the string the
 * library loads, src/engine/codec_ptx.h) decodes every class of data
 * (tests/common/codec_data.h) bit for bit, whole and in pieces staged at an
 * offset as the engine stages them; then its speed: the encoder on all CPUs
 * (GB/s of raw bytes), the decoder alone (GB/s of raw output, one launch per
 * 16 MiB piece), and the pipeline the engine runs (pieces of the image
 * copied into two slots on one stream and decoded on another) against raw
 * copies of the same bytes (effective bandwidth).  Exits 1 on a mismatch,
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

#define SLOT (16u << 20) /* the engine's FT_OFF_SLOT_BYTES */

static CUfunction dec;

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
	printf("| %s | %zu | %.4f | %u of %u | %s |\n", codec_class_name[c], nvals * 2,
	       (double)z.raw_bytes / (double)z.bytes, z.coded, z.nchunks, bad ? "NO" : "yes");
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
	printf("| %s | %zu | %.4f | %.2f | %.1f | %.1f | %.2f | %.2f | %.3f | %.1f %% | %s |\n",
	       codec_class_name[c], mib, (double)z.raw_bytes / (double)z.bytes,
	       (double)bytes / enc / 1e9, (double)bytes / dms[3] / 1e6, (double)bytes / rms[3] / 1e6,
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
	printf("| data | bytes | ratio | coded chunks | bit-exact (whole, staged) |\n|---|---|---|---|---|\n");
	int bad = 0;
	for (int c = 0; c < CD_NCLASSES; c++)
		bad |= check((enum codec_class)c, 40u * FT_Z_VALS + 4096 + 32);
	printf("\n| data | MiB | ratio | encode GB/s (all CPUs) | decode GB/s (raw out) | raw H2D GB/s | "
	       "raw H2D ms | coded H2D + decode ms | effective speed-up | decoder busy | bit-exact |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|\n");
	speed(CD_NORMAL, mib);
	speed(CD_LOGNORMAL, mib);
	speed(CD_RANDOM, mib / 4 ? mib / 4 : 1);
	return bad;
}
