/*
 * The GPU decoder of the store's codec (include/ft/codec.h).  This file is
 * compiled to PTX by scripts/gen-codec-ptx.sh into codec_ptx.h, which is
 * committed: the library itself needs no nvcc (gpu.c loads the PTX with
 * cuModuleLoadData).  One block of 256 threads decodes one chunk.
 *
 * src: image bytes from offset bias on (a piece copied into a staging
 * slot); desc: the descriptors of the piece's chunks; dst: the raw bytes of
 * its first chunk; nvals: 16-bit words from dst to the end of the store;
 * nchunks: the piece's chunks (the grid: blocks past it do nothing).
 */
#define FT_Z_VALS 32768u

extern "C" __global__ void __launch_bounds__(256)
ft_z_decode(const unsigned char *src, unsigned long long bias, const unsigned long long *desc,
	    unsigned short *dst, unsigned long long nvals, unsigned nchunks)
{
	__shared__ unsigned table[16];
	unsigned c = blockIdx.x;
	if (c >= nchunks)
		return;
	unsigned long long d = desc[c];
	const unsigned char *in = src + ((d & ((1ull << 40) - 1)) - bias);
	unsigned long long first = (unsigned long long)c * FT_Z_VALS;
	unsigned long long left = nvals - first;
	unsigned n = left < FT_Z_VALS ? (unsigned)left : FT_Z_VALS;
	unsigned short *out = dst + first;
	if (((d >> 40) & 3) == 0) {
		const uint4 *i4 = (const uint4 *)in;
		uint4 *o4 = (uint4 *)out;
		for (unsigned k = threadIdx.x; k < n / 8; k += blockDim.x)
			o4[k] = __ldg(&i4[k]);
		return;
	}
	if (threadIdx.x < 16)
		table[threadIdx.x] = (unsigned)in[threadIdx.x] << 7;
	__syncthreads();
	const unsigned *codes = (const unsigned *)(in + 16);
	const uint2 *rest = (const uint2 *)(in + 16 + n / 2);
	uint4 *o4 = (uint4 *)out;
	for (unsigned g = threadIdx.x; g < n / 8; g += blockDim.x) {
		unsigned cw = __ldg(&codes[g]);
		uint2 r = __ldg(&rest[g]);
		unsigned w[4];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			unsigned rb = j < 2 ? r.x : r.y;
			unsigned b0 = (rb >> ((j & 1) * 16)) & 0xff, b1 = (rb >> ((j & 1) * 16 + 8)) & 0xff;
			unsigned c0 = (cw >> (j * 8)) & 15, c1 = (cw >> (j * 8 + 4)) & 15;
			unsigned v0 = (b0 & 0x80) << 8 | table[c0] | (b0 & 0x7f);
			unsigned v1 = (b1 & 0x80) << 8 | table[c1] | (b1 & 0x7f);
			w[j] = v0 | v1 << 16;
		}
		o4[g] = make_uint4(w[0], w[1], w[2], w[3]);
	}
	unsigned nesc = (unsigned)(d >> 42);
	if (!nesc)
		return;
	__syncthreads();
	const unsigned *esc = (const unsigned *)(in + 16 + n / 2 + n);
	for (unsigned k = threadIdx.x; k < nesc; k += blockDim.x) {
		unsigned e = __ldg(&esc[k]);
		out[e >> 16] = (unsigned short)e;
	}
}
