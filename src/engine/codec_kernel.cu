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
#include "ft/codec_huff.h"

#define FT_Z_VALS 32768u
#define META_WORDS 40u  /* struct ft_z_meta's 160 bytes */
#define ROUND 8192u     /* mode 3: words whose exponents a block stages at a time */

/* The block's exclusive prefix sum of x (256 threads), its total in
 * *total; every thread calls it. */
static __device__ unsigned block_scan(unsigned x, unsigned *total)
{
	__shared__ unsigned wsum[8];
	unsigned lane = threadIdx.x & 31, wid = threadIdx.x >> 5, v = x;
	for (int o = 1; o < 32; o <<= 1) {
		unsigned y = __shfl_up_sync(0xffffffffu, v, o);
		if (lane >= (unsigned)o)
			v += y;
	}
	if (lane == 31)
		wsum[wid] = v;
	__syncthreads();
	unsigned before = 0, all = 0;
	for (unsigned k = 0; k < 8; k++) {
		before += k < wid ? wsum[k] : 0;
		all += wsum[k];
	}
	__syncthreads(); /* (wsum is the next call's) */
	*total = all;
	return before + v - x;
}

/* Mode 3: thread s's symbol in the canonical code of header head, what
 * ft_zh_canon finds one symbol after the other, found by the block's
 * threads at once: its length *nib (0 absent), its place *p in (length,
 * value) order (per length, the symbols of the warps and lanes before
 * it, after all those of shorter lengths), its first table entry *start
 * (the ranges before it), its length in the code *l (0 in a code of one
 * symbol).  The code's symbols. */
static __device__ unsigned canon(const unsigned char *head, unsigned *nib, unsigned *p,
				 unsigned *start, unsigned *l)
{
	__shared__ unsigned cnt[8][FT_ZH_L + 1], tot[FT_ZH_L + 1];
	unsigned t = threadIdx.x, lane = t & 31, wid = t >> 5, b = ft_zh_nib(head, t);
	if (t < 8 * (FT_ZH_L + 1))
		(&cnt[0][0])[t] = 0;
	unsigned n = __syncthreads_count(b != 0);
	unsigned same = __match_any_sync(0xffffffffu, b), within = __popc(same & ((1u << lane) - 1));
	if (!within)
		cnt[wid][b] = __popc(same);
	__syncthreads();
	if (t >= 1 && t <= FT_ZH_L) { /* per length: the warps' counts before each */
		unsigned run = 0;
		for (unsigned w = 0; w < 8; w++) {
			unsigned c = cnt[w][t];
			cnt[w][t] = run;
			run += c;
		}
		tot[t] = run;
	}
	__syncthreads();
	unsigned pos = cnt[wid][b] + within, kraft = pos << (FT_ZH_L - b);
	for (unsigned k = 1; k < b; k++) {
		pos += tot[k];
		kraft += tot[k] << (FT_ZH_L - k);
	}
	*nib = b;
	*p = pos;
	*start = kraft & 0xffffu; /* (as ft_zh_canon's 16-bit entries) */
	*l = n == 1 ? 0 : b;
	return n;
}

/* Mode 3's chunk at in of n words into out (ft_z_decode_at's
 * huff_decode): the decode table from the header, then the pair table
 * from it (the decode table lies in ex, which the pair table frees), each
 * thread's sub-stream from the sum of the sizes before it, its exponents
 * staged ROUND words at a time, one or two a lookup (a second one past
 * the round's waits in pend for the next), then joined with their rest
 * bytes 8 words a thread a step (16-byte stores, as mode 1's). */
static __device__ void huff_decode(const unsigned char *in, unsigned long long d,
				   unsigned short *out, unsigned n)
{
	__shared__ unsigned short start[FT_ZH_SYMS], ent[FT_ZH_SYMS];
	__shared__ unsigned pair[1u << FT_ZH_L];
	__shared__ __align__(16) unsigned char ex[ROUND];
	unsigned short *tab = (unsigned short *)ex; /* (2 << FT_ZH_L bytes <= ROUND) */
	unsigned t = threadIdx.x, nib, p, st, l, total;
	unsigned np = canon(in, &nib, &p, &st, &l);
	if (nib) {
		start[p] = (unsigned short)st;
		ent[p] = (unsigned short)(t | l << 8);
	}
	const unsigned char *rest = in + FT_ZH_HEAD, *streams = rest + n;
	unsigned size = __ldg(&in[FT_ZH_HEAD - FT_ZH_STREAMS + t]);
	unsigned o = block_scan(size, &total); /* (its barrier: start and ent are written) */
	const unsigned per = (1u << FT_ZH_L) / 256;
	ft_zh_fill(start, ent, np, t * per, t * per + per, tab);
	__syncthreads();
	ft_zh_pairs(tab, t * per, t * per + per, pair);
	struct ft_zh_bits b;
	ft_zh_open(&b, streams, o, size, (unsigned)(d >> 42));
	__syncthreads(); /* (tab is read no more: ex is the rounds') */
	const uint2 *r2 = (const uint2 *)rest;
	uint4 *o4 = (uint4 *)out;
	unsigned pend = 256; /* none */
	for (unsigned w0 = 0; w0 < n; w0 += ROUND) {
		unsigned w1 = n - w0 < ROUND ? n : w0 + ROUND;
		/* this thread's words of the round: w0 + t + 256 q, q < nr */
		unsigned nr = w1 - w0 > t ? (w1 - w0 - t + 255) / 256 : 0, q = 0;
		if (pend < 256 && nr) {
			ex[t] = (unsigned char)pend;
			q = 1;
		}
		pend = 256;
		while (q < nr) {
			unsigned c;
			ft_zh_refill(&b, streams);
			unsigned s = ft_zh_take2(&b, pair, &c);
			ex[q * 256 + t] = (unsigned char)s;
			if (c == 2) {
				if (q + 1 < nr)
					ex[(q + 1) * 256 + t] = (unsigned char)(s >> 8);
				else
					pend = s >> 8;
			}
			q += c;
		}
		__syncthreads();
		for (unsigned g = w0 / 8 + t; g < w1 / 8; g += 256) {
			uint2 e = *(const uint2 *)&ex[8 * g - w0], r = __ldg(&r2[g]);
			unsigned w[4];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				unsigned rb = j < 2 ? r.x : r.y, eb = j < 2 ? e.x : e.y, sh = (j & 1) * 16;
				unsigned b0 = (rb >> sh) & 0xff, b1 = (rb >> (sh + 8)) & 0xff;
				unsigned e0 = (eb >> sh) & 0xff, e1 = (eb >> (sh + 8)) & 0xff;
				unsigned v0 = (b0 & 0x80) << 8 | e0 << 7 | (b0 & 0x7f);
				unsigned v1 = (b1 & 0x80) << 8 | e1 << 7 | (b1 & 0x7f);
				w[j] = v0 | v1 << 16;
			}
			o4[g] = make_uint4(w[0], w[1], w[2], w[3]);
		}
		__syncthreads(); /* (ex is the next round's) */
	}
}

/* At least 8 blocks an SM: its 2048 threads on sm_80 and sm_90 at 32
 * registers, as mode 1 had them alone (mode 3's reader would take more; it
 * does not spill at 32), and 8 x 17.9 KB of shared memory.  Where an SM
 * holds fewer threads (sm_75, sm_86, sm_89) ptxas says the minimum is
 * ignored; there mode 3's shared memory (with the pair table's 8 KB)
 * bounds the blocks an SM: 3 of 4 on sm_75, 5 of 6 on sm_86 and sm_89. */
extern "C" __global__ void __launch_bounds__(256, 8)
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
	if (((d >> 40) & 3) == 3) {
		huff_decode(in, d, out, n);
		return;
	}
	unsigned fp16 = ((d >> 40) & 3) == 2, shift = fp16 ? 10 : 7;
	if (threadIdx.x < 16)
		table[threadIdx.x] = (unsigned)in[threadIdx.x] << shift;
	__syncthreads();
	const unsigned *codes = (const unsigned *)(in + 16);
	const uint2 *rest = (const uint2 *)(in + 16 + n / 2);
	const unsigned char *high = in + 16 + n / 2 + n;
	uint4 *o4 = (uint4 *)out;
	for (unsigned g = threadIdx.x; g < n / 8; g += blockDim.x) {
		unsigned cw = __ldg(&codes[g]);
		uint2 r = __ldg(&rest[g]);
		unsigned w[4];
		if (fp16) {
			/* low[8 g .. 8 g + 7] in r, the 3 high bits of each in hb */
			unsigned hb = (unsigned)__ldg(&high[3 * g]) | (unsigned)__ldg(&high[3 * g + 1]) << 8 |
				      (unsigned)__ldg(&high[3 * g + 2]) << 16;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				unsigned rb = j < 2 ? r.x : r.y;
				unsigned b0 = (rb >> ((j & 1) * 16)) & 0xff, b1 = (rb >> ((j & 1) * 16 + 8)) & 0xff;
				unsigned c0 = (cw >> (j * 8)) & 15, c1 = (cw >> (j * 8 + 4)) & 15;
				unsigned h0 = hb >> (6 * j), h1 = hb >> (6 * j + 3);
				unsigned v0 = (h0 & 4) << 13 | table[c0] | (h0 & 3) << 8 | b0;
				unsigned v1 = (h1 & 4) << 13 | table[c1] | (h1 & 3) << 8 | b1;
				w[j] = v0 | v1 << 16;
			}
		} else {
#pragma unroll
			for (int j = 0; j < 4; j++) {
				unsigned rb = j < 2 ? r.x : r.y;
				unsigned b0 = (rb >> ((j & 1) * 16)) & 0xff, b1 = (rb >> ((j & 1) * 16 + 8)) & 0xff;
				unsigned c0 = (cw >> (j * 8)) & 15, c1 = (cw >> (j * 8 + 4)) & 15;
				unsigned v0 = (b0 & 0x80) << 8 | table[c0] | (b0 & 0x7f);
				unsigned v1 = (b1 & 0x80) << 8 | table[c1] | (b1 & 0x7f);
				w[j] = v0 | v1 << 16;
			}
		}
		o4[g] = make_uint4(w[0], w[1], w[2], w[3]);
	}
	unsigned nesc = (unsigned)(d >> 42);
	if (!nesc)
		return;
	__syncthreads();
	const unsigned *esc = (const unsigned *)(high + (fp16 ? n / 8 * 3 : 0));
	for (unsigned k = threadIdx.x; k < nesc; k += blockDim.x) {
		unsigned e = __ldg(&esc[k]);
		if (e >> 16 < n) /* (a damaged image's: none written outside) */
			out[e >> 16] = (unsigned short)e;
	}
}

/*
 * The GPU encoder: the same two passes as the host's (codec.c), so that
 * its image is the host encoder's byte for byte.  ft_z_analyse: one block
 * per chunk counts the exponents and writes the chunk's struct ft_z_meta
 * (160 bytes: the 15 most frequent exponents, ties to the lower, of bf16
 * or of fp16, the escapes, or mode 3's code lengths and streams' bytes,
 * whichever codes smallest, the mode); ft_z_code: one block per chunk
 * writes the coded chunk at its descriptor's offset less bias into dst,
 * the escapes in word order (a block-wide scan of each round's counts),
 * or mode 3's sub-streams, one a thread, at offsets from a scan of their
 * sizes.
 *
 * src: the raw words of the launch's first chunk; meta: its meta; nvals:
 * 16-bit words from src to the end of the run (a multiple of 32).
 */
/* The largest of the warp's keys, on every lane. */
static __device__ unsigned long long warp_max(unsigned long long key)
{
	for (int o = 16; o; o >>= 1) {
		unsigned long long k2 = __shfl_xor_sync(0xffffffffu, key, o);
		key = k2 > key ? k2 : key;
	}
	return key;
}

/* Mode 3's analysis of the chunk of n words at v with exponent counts h
 * (huff_analyse in codec.c): the code's lengths by thread 0 (each thread
 * places its symbol in (count, value) order first), then each thread's
 * sub-stream's bits.  Its streams' bytes; *word, for lanes of warp 0, the
 * header's lengths 4 bytes (8 symbols) a lane. */
static __device__ unsigned huff_analyse(const unsigned short *v, unsigned n, const unsigned *h,
					unsigned *word)
{
	__shared__ unsigned w[FT_ZH_SYMS];
	__shared__ unsigned char sym[FT_ZH_SYMS], len[FT_ZH_SYMS];
	unsigned t = threadIdx.x, bits = 0, total;
	len[t] = 0;
	if (h[t]) {
		unsigned r = ft_zh_rank(h, t);
		sym[r] = (unsigned char)t;
		w[r] = h[t];
	}
	unsigned np = __syncthreads_count(h[t] != 0);
	if (t == 0)
		ft_zh_lengths(w, sym, np, len);
	__syncthreads();
	for (unsigned i = t; np > 1 && i < n; i += 256) /* (one symbol: 0 bits) */
		bits += len[(__ldg(&v[i]) >> 7) & 255];
	block_scan((bits + 7) / 8, &total);
	*word = 0;
	for (unsigned k = 0; t < 32 && k < 8; k++)
		*word |= (unsigned)len[8 * t + k] << (4 * k);
	return total;
}

extern "C" __global__ void __launch_bounds__(256)
ft_z_analyse(const unsigned short *src, unsigned *meta, unsigned long long nvals,
	     unsigned nchunks)
{
	__shared__ unsigned h[256];
	unsigned c = blockIdx.x;
	if (c >= nchunks)
		return;
	unsigned long long first = (unsigned long long)c * FT_Z_VALS;
	unsigned long long left = nvals - first;
	unsigned n = left < FT_Z_VALS ? (unsigned)left : FT_Z_VALS;
	h[threadIdx.x] = 0;
	__syncthreads();
	const uint4 *in = (const uint4 *)(src + first);
	for (unsigned k = threadIdx.x; k < n / 8; k += blockDim.x) {
		uint4 q = __ldg(&in[k]);
		unsigned w[4] = { q.x, q.y, q.z, q.w };
#pragma unroll
		for (int j = 0; j < 4; j++) {
			atomicAdd(&h[(w[j] >> 7) & 255], 1u);
			atomicAdd(&h[(w[j] >> 23) & 255], 1u);
		}
	}
	__syncthreads();
	unsigned lens, sbytes = huff_analyse(src + first, n, h, &lens);
	if (threadIdx.x >= 32)
		return;
	/* the first warp picks: each lane holds bins 8 lane .. 8 lane + 7,
	 * which are fp16's bin lane */
	unsigned lane = threadIdx.x, covered = 0, nused = 0, table[4] = { 0, 0, 0, 0 };
	unsigned c16 = 0, covered16 = 0, nused16 = 0, table16[4] = { 0, 0, 0, 0 };
	for (unsigned b = lane * 8; b < lane * 8 + 8; b++)
		c16 += h[b];
	for (; nused < 15; nused++) {
		unsigned best = 0, bi = 0;
		for (unsigned b = lane * 8; b < lane * 8 + 8; b++)
			if (h[b] > best) {
				best = h[b];
				bi = b;
			}
		/* the highest count, then the lowest exponent */
		unsigned long long key = warp_max((unsigned long long)best << 32 | (255u - bi));
		if (!(key >> 32))
			break;
		unsigned e = 255u - (unsigned)(key & 255u);
		covered += (unsigned)(key >> 32);
		table[nused / 4] |= e << (nused % 4 * 8);
		if (lane == e / 8)
			h[e] = 0;
		__syncwarp();
	}
	for (; nused16 < 15; nused16++) {
		unsigned long long key = warp_max((unsigned long long)c16 << 32 | (31u - lane));
		if (!(key >> 32))
			break;
		unsigned e = 31u - (unsigned)(key & 31u);
		covered16 += (unsigned)(key >> 32);
		table16[nused16 / 4] |= e << (nused16 % 4 * 8);
		if (lane == e)
			c16 = 0;
	}
	/* (every lane decides alike: their tables and counts are the warp's) */
	unsigned nesc = n - covered, mode = 1;
	unsigned long long coded = (16ull + n / 2 + n + 4ull * nesc + 15) & ~15ull;
	unsigned long long coded16 = (16ull + n / 2 + n + n / 8 * 3 + 4ull * (n - covered16) + 15) & ~15ull;
	unsigned long long coded3 = (FT_ZH_HEAD + (unsigned long long)n + sbytes + 15) & ~15ull;
	if (coded16 < coded) {
		mode = 2;
		nesc = n - covered16;
		nused = nused16;
		coded = coded16;
		for (int k = 0; k < 4; k++)
			table[k] = table16[k];
	}
	if (coded3 < coded) {
		mode = 3;
		nesc = 0;
		nused = 0;
		coded = coded3;
		for (int k = 0; k < 4; k++)
			table[k] = 0;
	}
	if (n % 32 || coded * 100 > (unsigned long long)n * 2 * 97) {
		mode = 0;
		nesc = 0;
		nused = 0;
		for (int k = 0; k < 4; k++)
			table[k] = 0;
	}
	unsigned *mc = meta + (size_t)c * META_WORDS;
	mc[8 + lane] = mode == 3 ? lens : 0;
	if (lane)
		return;
	uint4 *m = (uint4 *)mc;
	m[0] = make_uint4(table[0], table[1], table[2], table[3]);
	m[1] = make_uint4(nesc, mode, nused, mode == 3 ? sbytes : 0);
}

/* Mode 3's coded chunk of n words at v by the code of meta m into out
 * (huff_code in codec.c): the header, the rest bytes, then each thread's
 * sub-stream at the sum of the sizes before it. */
static __device__ void huff_code(const unsigned short *v, const unsigned *m, unsigned char *out,
				 unsigned n)
{
	__shared__ unsigned short code[FT_ZH_SYMS]; /* the code | its length << 12 */
	unsigned t = threadIdx.x, nib, p, st, l, total, bits = 0;
	canon((const unsigned char *)(m + 8), &nib, &p, &st, &l);
	code[t] = (unsigned short)(st >> (FT_ZH_L - l) | l << 12);
	if (t < 32)
		((unsigned *)out)[t] = m[8 + t];
	const uint4 *in = (const uint4 *)v;
	uint2 *rest = (uint2 *)(out + FT_ZH_HEAD);
	for (unsigned g = t; g < n / 8; g += 256) {
		uint4 q = __ldg(&in[g]);
		unsigned w[4] = { q.x, q.y, q.z, q.w }, r[2] = { 0, 0 };
#pragma unroll
		for (int j = 0; j < 8; j++) {
			unsigned x = (w[j / 2] >> (j % 2 * 16)) & 0xffff;
			r[j / 4] |= ((x >> 8 & 0x80) | (x & 0x7f)) << (j % 4 * 8);
		}
		rest[g] = make_uint2(r[0], r[1]);
	}
	__syncthreads();
	for (unsigned i = t; i < n; i += 256)
		bits += code[(__ldg(&v[i]) >> 7) & 255] >> 12;
	unsigned bytes = (bits + 7) / 8, o = block_scan(bytes, &total);
	out[FT_ZH_HEAD - FT_ZH_STREAMS + t] = (unsigned char)bytes;
	struct ft_zh_put b = { 0, 0, out + FT_ZH_HEAD + n + o };
	for (unsigned i = t; i < n; i += 256) {
		unsigned e = code[(__ldg(&v[i]) >> 7) & 255];
		ft_zh_put(&b, e & 0xfffu, e >> 12);
	}
	ft_zh_flush(&b);
	/* the padding to 16 bytes, zero as the host's */
	if (t == 0)
		for (unsigned k = FT_ZH_HEAD + n + total; k & 15; k++)
			out[k] = 0;
}

extern "C" __global__ void __launch_bounds__(256)
ft_z_code(const unsigned short *src, const unsigned *meta, const unsigned long long *desc,
	  unsigned long long bias, unsigned char *dst, unsigned long long nvals, unsigned nchunks)
{
	__shared__ unsigned char lut[256];
	unsigned c = blockIdx.x;
	if (c >= nchunks)
		return;
	unsigned long long first = (unsigned long long)c * FT_Z_VALS;
	unsigned long long left = nvals - first;
	unsigned n = left < FT_Z_VALS ? (unsigned)left : FT_Z_VALS;
	const unsigned *m = meta + (size_t)c * META_WORDS;
	unsigned char *out = dst + ((desc[c] & ((1ull << 40) - 1)) - bias);
	const uint4 *in = (const uint4 *)(src + first);
	if (!m[5]) {
		uint4 *o4 = (uint4 *)out;
		for (unsigned k = threadIdx.x; k < n / 8; k += blockDim.x)
			o4[k] = __ldg(&in[k]);
		return;
	}
	if (m[5] == 3) {
		huff_code(src + first, m, out, n);
		return;
	}
	unsigned t = threadIdx.x;
	lut[t] = 15;
	__syncthreads();
	if (t < m[6])
		lut[(m[t / 4] >> (t % 4 * 8)) & 255] = (unsigned char)t;
	if (t < 4)
		((unsigned *)out)[t] = m[t];
	__syncthreads();
	unsigned fp16 = m[5] == 2, shift = fp16 ? 10 : 7, mask = fp16 ? 31 : 255;
	unsigned *codes = (unsigned *)(out + 16);
	uint2 *rest = (uint2 *)(out + 16 + n / 2);
	unsigned char *high = out + 16 + n / 2 + n;
	unsigned *esc = (unsigned *)(high + (fp16 ? n / 8 * 3 : 0));
	unsigned base = 0;
	for (unsigned g0 = 0; g0 < n / 8; g0 += blockDim.x) {
		unsigned g = g0 + t, cw = 0, ne = 0, w[4] = { 0, 0, 0, 0 };
		if (g < n / 8) {
			uint4 q = __ldg(&in[g]);
			w[0] = q.x;
			w[1] = q.y;
			w[2] = q.z;
			w[3] = q.w;
			unsigned r[2] = { 0, 0 }, hb = 0;
#pragma unroll
			for (int j = 0; j < 8; j++) {
				unsigned v = (w[j / 2] >> (j % 2 * 16)) & 0xffff;
				unsigned k = lut[(v >> shift) & mask];
				cw |= k << (4 * j);
				ne += k == 15;
				if (fp16) {
					r[j / 4] |= (v & 0xff) << (j % 4 * 8);
					hb |= ((v >> 15) << 2 | ((v >> 8) & 3)) << (3 * j);
				} else {
					r[j / 4] |= ((v >> 8 & 0x80) | (v & 0x7f)) << (j % 4 * 8);
				}
			}
			codes[g] = cw;
			rest[g] = make_uint2(r[0], r[1]);
			if (fp16) {
				high[3 * g] = (unsigned char)hb;
				high[3 * g + 1] = (unsigned char)(hb >> 8);
				high[3 * g + 2] = (unsigned char)(hb >> 16);
			}
		}
		/* this round's escapes before this thread's */
		unsigned total, at = base + block_scan(ne, &total);
		for (int j = 0; ne && j < 8; j++)
			if (((cw >> (4 * j)) & 15) == 15)
				esc[at++] = (g * 8 + j) << 16 | ((w[j / 2] >> (j % 2 * 16)) & 0xffff);
		base += total;
	}
	/* the padding to 16 bytes, zero as the host's */
	if (t == 0)
		for (unsigned k = 16 + n / 2 + n + (fp16 ? n / 8 * 3 : 0) + 4 * base; k & 15; k++)
			out[k] = 0;
}
