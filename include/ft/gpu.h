/*
 * The library's own GPU work, through the real driver table only (nothing
 * here is observed or registered): content checksums of device ranges (a
 * PTX kernel loaded at first use), the host-to-device copy curve, device
 * facts for profile.json, and the copy kernel of FT_GRAPH_COPY=kernel.
 * Every function returns 0 or -1 and fails open: the caller logs once and
 * carries on without the result.  Not thread-safe (ft_gpu_copy excepted):
 * callers serialise (the learning lock).
 */
#ifndef FT_GPU_H
#define FT_GPU_H

#include <stdint.h>

#include "ft/profile.h"
#include "ft/real.h"

struct ft_gpu {
	const struct ft_real *real;
	int state;                /* 0 not started, 1 ready, -1 unusable */
	CUmodule mod;
	CUfunction checksum;
	CUfunction copy;          /* NULL: not loaded (the checksums work) */
	CUmodule zmod;
	CUfunction decode;        /* the codec's decoder; NULL: not loaded */
	CUfunction zanalyse;      /* its encoder's two passes; NULL: not */
	CUfunction zcode;         /* loaded (stores are coded on the host) */
	unsigned sms;             /* the device's multiprocessors: the copy's grid */
	CUstream stream;
	CUdeviceptr sums;
	uint64_t *host_sums;
	uint32_t cap;
};

/* Loads the kernel, creates the stream (at first use). */
int ft_gpu_start(struct ft_gpu *g, const struct ft_real *real);
/* Waits for all device work, then checksums n ranges [addr[i], addr[i] +
 * bytes[i]) (the aligned 8-byte words inside each; up to 7 bytes at either
 * end are not covered). */
int ft_gpu_checksums(struct ft_gpu *g, const uint64_t *addr, const uint64_t *bytes, uint32_t n,
		     uint64_t *out);
/* Launches on s a copy of n bytes from src (device memory, or pinned host
 * memory through its device mapping) to dst, on the multiprocessors: in a
 * capture, a kernel node, whose launch costs the host less than a memcpy
 * node's.  0, or -1 (nothing done) when the kernel is not loaded, an
 * address or n is not a multiple of 16, or the driver refuses.  Thread-safe
 * once started. */
int ft_gpu_copy(const struct ft_gpu *g, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
/* Launches on s the decode of nchunks coded chunks (include/ft/codec.h)
 * whose image bytes from offset bias on are at src (device memory), with
 * their descriptors at desc (device memory), into dst (the raw bytes of
 * the first; nvals 16-bit words from there to the end of the store).  0,
 * or -1 when the decoder is not loaded or the driver refuses.  Thread-safe
 * once started. */
int ft_gpu_decode(const struct ft_gpu *g, CUdeviceptr src, uint64_t bias, CUdeviceptr desc,
		  CUdeviceptr dst, uint64_t nvals, uint32_t nchunks, CUstream s);
/* Launch on s the GPU encoder's passes over nchunks chunks of raw words
 * at src (device memory; nvals words from there to the end of the run):
 * their analyses (struct ft_z_meta) into meta, then their coded bytes at
 * their descriptors' offsets (desc, device memory) less bias into dst.
 * The image is ft_z_encode's byte for byte.  0, or -1 when the encoder is
 * not loaded or the driver refuses.  Thread-safe once started. */
int ft_gpu_z_analyse(const struct ft_gpu *g, CUdeviceptr src, CUdeviceptr meta, uint64_t nvals,
		     uint32_t nchunks, CUstream s);
int ft_gpu_z_code(const struct ft_gpu *g, CUdeviceptr src, CUdeviceptr meta, CUdeviceptr desc,
		  uint64_t bias, CUdeviceptr dst, uint64_t nvals, uint32_t nchunks, CUstream s);
/* Times pinned host-to-device copies of n sizes (median of 5), into pts. */
int ft_gpu_copy_curve(struct ft_gpu *g, struct ft_curve_point *pts, uint32_t n);
/* Times the decoder on n sizes of raw output (multiples of the codec's
 * chunk; median of 5) into pts: the image of weights shaped like trained
 * bf16 weights, in device memory.  0, or -1 (no decoder, or the driver
 * refused). */
int ft_gpu_decode_curve(struct ft_gpu *g, struct ft_curve_point *pts, uint32_t n);
/* Name, memory and driver version of the current device. */
int ft_gpu_device(struct ft_gpu *g, char *name, int len, uint64_t *total, int *driver);

#endif
