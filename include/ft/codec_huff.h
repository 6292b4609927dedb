/*
 * The canonical Huffman code of the codec's mode 3 (FT_Z_BF16H, the format
 * in include/ft/codec.h), written once for the host (src/engine/codec.c)
 * and the GPU (src/engine/codec_kernel.cu, which includes this file): the
 * code lengths from a chunk's exponent counts, the code in its canonical
 * order, the decode table, the bit writer and the bit reader.  Integer
 * only, ties broken by symbol value: both encoders must make the same
 * image byte for byte, and both decoders read it.
 *
 * Codes are at most FT_ZH_L bits, so the decoder looks each one up in a
 * table of 2^FT_ZH_L entries indexed by the next FT_ZH_L bits of its
 * stream (MSB first): a symbol of length l owns the 2^(FT_ZH_L - l)
 * entries that start with its code.  In canonical order ((length, value)
 * ascending) the symbols' ranges tile the table from 0 up, so a symbol's
 * first entry is the sum of the ranges before it and its code is that
 * entry's top l bits.  A code of one symbol takes 0 bits (its length in
 * the header says 1): a chunk of one exponent stores no stream.  Both
 * decoders read through a pair table made from that one: an entry gives
 * the symbol the prefix starts with and, where the next code fits in the
 * prefix's remaining bits too (bf16 weights' codes are 2-4 bits, so most
 * do), the symbol after it, so one lookup takes two symbols.
 */
#ifndef FT_CODEC_HUFF_H
#define FT_CODEC_HUFF_H

#include <stdint.h>

#ifdef __CUDACC__
#define FT_ZH_FN static __host__ __device__ __forceinline__
#else
#include <string.h>
#define FT_ZH_FN static inline
#endif

#define FT_ZH_L 11u                            /* the longest code, bits */
#define FT_ZH_SYMS 256u                        /* exponent values */
#define FT_ZH_STREAMS 256u                     /* sub-streams per chunk: one a thread */
#define FT_ZH_HEAD (FT_ZH_SYMS / 2 + FT_ZH_STREAMS) /* lengths, then sizes: 384 bytes */
#define FT_ZH_MAX (32768u / FT_ZH_STREAMS * FT_ZH_L / 8) /* a sub-stream's most bytes: 176 */

/* Symbol s's code length in header head (a nibble a symbol, low first),
 * 0 absent; damaged lengths are clamped so that no shift is undefined. */
FT_ZH_FN unsigned ft_zh_nib(const unsigned char *head, unsigned s)
{
	unsigned l = (head[s >> 1] >> ((s & 1) * 4)) & 15u;
	return l < FT_ZH_L ? l : FT_ZH_L;
}

/* Symbol s's place among the present symbols of counts h in ascending
 * (count, value) order: the order ft_zh_lengths takes them in.  The GPU's
 * threads each find their own; the host sorts by the same key (codec.c's
 * order), which is the same order (no two symbols have the same key). */
FT_ZH_FN unsigned ft_zh_rank(const uint32_t *h, unsigned s)
{
	unsigned r = 0;
	for (unsigned u = 0; u < FT_ZH_SYMS; u++)
		r += h[u] && (h[u] < h[s] || (h[u] == h[s] && u < s));
	return r;
}

/* Huffman code lengths of the n weights a[0..n) in ascending order, into
 * a (Moffat and Katajainen's in-place algorithm, as miniz has it: a holds
 * parents, then depths; ties to the leaf): a[0] gets the longest. */
FT_ZH_FN void ft_zh_moffat(uint32_t *a, int n)
{
	int root = 0, leaf = 2, next, avbl = 1, used = 0, dpth = 0;
	if (n == 1) {
		a[0] = 1;
		return;
	}
	a[0] += a[1];
	for (next = 1; next < n - 1; next++) {
		if (leaf >= n || a[root] < a[leaf]) {
			a[next] = a[root];
			a[root++] = (uint32_t)next;
		} else {
			a[next] = a[leaf++];
		}
		if (leaf >= n || (root < next && a[root] < a[leaf])) {
			a[next] += a[root];
			a[root++] = (uint32_t)next;
		} else {
			a[next] += a[leaf++];
		}
	}
	a[n - 2] = 0;
	for (next = n - 3; next >= 0; next--)
		a[next] = a[a[next]] + 1;
	root = n - 2;
	next = n - 1;
	while (avbl > 0) {
		while (root >= 0 && (int)a[root] == dpth) {
			used++;
			root--;
		}
		while (avbl > used) {
			a[next--] = (uint32_t)dpth;
			avbl--;
		}
		avbl = 2 * used;
		dpth++;
		used = 0;
	}
}

/* The code lengths of the n present symbols sym[0..n) of counts w[0..n)
 * (ascending (count, value); w is spent) into len[sym[k]], each at most
 * FT_ZH_L: Huffman's lengths, those too long cut to FT_ZH_L and the
 * excess of Kraft's sum paid back by lengthening the longest codes below
 * it (miniz's rule); the shortest lengths to the most frequent. */
FT_ZH_FN void ft_zh_lengths(uint32_t *w, const unsigned char *sym, unsigned n, unsigned char *len)
{
	uint32_t num[FT_ZH_L + 1], total = 0;
	for (unsigned l = 0; l <= FT_ZH_L; l++)
		num[l] = 0;
	if (!n)
		return;
	ft_zh_moffat(w, (int)n);
	for (unsigned k = 0; k < n; k++)
		num[w[k] < FT_ZH_L ? w[k] : FT_ZH_L]++;
	for (unsigned l = 1; l <= FT_ZH_L; l++)
		total += num[l] << (FT_ZH_L - l);
	while (total > (1u << FT_ZH_L)) {
		num[FT_ZH_L]--;
		for (unsigned l = FT_ZH_L - 1; l > 0; l--)
			if (num[l]) {
				num[l]--;
				num[l + 1] += 2;
				break;
			}
		total--;
	}
	for (unsigned l = 1, k = n; l <= FT_ZH_L; l++)
		for (uint32_t j = 0; j < num[l]; j++)
			len[sym[--k]] = (unsigned char)l;
}

/* The code of header head in canonical order: for its p-th symbol the
 * first table entry it owns, start[p], and its table entry, ent[p] (value
 * | length << 8, the length 0 in a code of one symbol); how many symbols.
 * (The GPU finds the same with its threads: codec_kernel.cu's canon.) */
FT_ZH_FN unsigned ft_zh_canon(const unsigned char *head, uint16_t *start, uint16_t *ent)
{
	uint32_t num[FT_ZH_L + 1], first[FT_ZH_L + 1], at[FT_ZH_L + 1], p = 0, kraft = 0;
	for (unsigned l = 0; l <= FT_ZH_L; l++)
		num[l] = 0;
	for (unsigned s = 0; s < FT_ZH_SYMS; s++)
		num[ft_zh_nib(head, s)]++;
	unsigned n = FT_ZH_SYMS - num[0];
	for (unsigned l = 1; l <= FT_ZH_L; l++) {
		first[l] = p;
		at[l] = kraft;
		p += num[l];
		kraft += num[l] << (FT_ZH_L - l);
	}
	for (unsigned s = 0; s < FT_ZH_SYMS; s++) {
		unsigned l = ft_zh_nib(head, s);
		if (!l)
			continue;
		start[first[l]] = (uint16_t)at[l];
		ent[first[l]++] = (uint16_t)(s | (n == 1 ? 0 : l) << 8);
		at[l] += 1u << (FT_ZH_L - l);
	}
	return n;
}

/* Decode table entries [x0, x1) from the canonical code's n symbols: the
 * entry of the last symbol whose range starts at or before each.  (No
 * symbol, a damaged header: symbol 0 of no bits.) */
FT_ZH_FN void ft_zh_fill(const uint16_t *start, const uint16_t *ent, unsigned n, unsigned x0,
			 unsigned x1, uint16_t *tab)
{
	unsigned lo = 0, hi = n;
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (start[mid] <= x0)
			lo = mid;
		else
			hi = mid;
	}
	for (unsigned x = x0; x < x1; x++) {
		while (lo + 1 < n && start[lo + 1] <= x)
			lo++;
		tab[x] = n ? ent[lo] : 0;
	}
}

/* A sub-stream's writer: codes MSB first, 4 bytes out as soon as they
 * are full; the last byte's low bits zero. */
struct ft_zh_put {
	uint64_t acc;
	uint32_t cnt;
	unsigned char *out;
};

/* x's 4 bytes at p, the most significant first (any alignment). */
FT_ZH_FN void ft_zh_store(unsigned char *p, uint32_t x)
{
#ifdef __CUDA_ARCH__
	p[0] = (unsigned char)(x >> 24);
	p[1] = (unsigned char)(x >> 16);
	p[2] = (unsigned char)(x >> 8);
	p[3] = (unsigned char)x;
#else
	x = __builtin_bswap32(x);
	memcpy(p, &x, 4);
#endif
}

/* Puts a code of len bits (two codes' at most: 2 FT_ZH_L). */
FT_ZH_FN void ft_zh_put(struct ft_zh_put *b, uint32_t code, uint32_t len)
{
	b->acc = b->acc << len | code;
	b->cnt += len;
	if (b->cnt >= 32) {
		b->cnt -= 32;
		ft_zh_store(b->out, (uint32_t)(b->acc >> b->cnt));
		b->out += 4;
	}
}

FT_ZH_FN void ft_zh_flush(struct ft_zh_put *b)
{
	for (; b->cnt >= 8; b->cnt -= 8)
		*b->out++ = (unsigned char)(b->acc >> (b->cnt - 8));
	if (b->cnt)
		*b->out++ = (unsigned char)(b->acc << (8 - b->cnt));
	b->cnt = 0;
}

/* A sub-stream's reader: the next bits at the top of buf (cnt of them),
 * the word after them in nxt (loaded one refill ahead, so that a load's
 * latency is not on the path from one symbol to the next); words k on are
 * loaded as needed, 4-aligned, none at or past end (the sub-stream's last
 * word, or the streams' end if sooner: never a byte outside the chunk's
 * image), zero bits past it. */
struct ft_zh_bits {
	uint64_t buf;
	uint32_t cnt, k, end, nxt;
};

/* Stream word k (the stream's bytes 4 k .. 4 k + 3, the first the most
 * significant), 0 at or past end. */
FT_ZH_FN uint32_t ft_zh_word(const unsigned char *p, uint32_t k, uint32_t end)
{
	if (k >= end)
		return 0;
#ifdef __CUDA_ARCH__
	return __byte_perm(__ldg((const unsigned *)(p + 4 * (size_t)k)), 0, 0x0123);
#else
	uint32_t x;
	memcpy(&x, p + 4 * (size_t)k, 4);
	return __builtin_bswap32(x);
#endif
}

/* The sub-stream of bytes [o, o + s) of the streams at p, of total bytes. */
FT_ZH_FN void ft_zh_open(struct ft_zh_bits *b, const unsigned char *p, uint32_t o, uint32_t s,
			 uint32_t total)
{
	uint32_t end = (o + s + 3) >> 2, lim = (total + 3) >> 2;
	b->end = end < lim ? end : lim;
	b->k = o >> 2;
	b->buf = (uint64_t)ft_zh_word(p, b->k++, b->end) << 32 << (o & 3) * 8;
	b->cnt = 32 - (o & 3) * 8;
	b->nxt = ft_zh_word(p, b->k++, b->end);
}

/* At least two codes' bits in buf (a word more where fewer: at most 53);
 * a lookup of the pair table takes at most FT_ZH_L of them. */
FT_ZH_FN void ft_zh_refill(struct ft_zh_bits *b, const unsigned char *p)
{
	if (b->cnt < 2 * FT_ZH_L) {
		b->buf |= (uint64_t)b->nxt << (32 - b->cnt);
		b->cnt += 32;
		b->nxt = ft_zh_word(p, b->k++, b->end);
	}
}

/* Pair table entries [x0, x1) from the decode table tab: for each FT_ZH_L
 * bit prefix x, the symbol its first code gives (bits 0-7), the bits its
 * symbols take (16-23) and how many (24-31): two, the second in bits 8-15,
 * where the code after the first lies within x too (its length at most
 * the bits left: the zeros x << l1 ends with do not reach it). */
FT_ZH_FN void ft_zh_pairs(const uint16_t *tab, unsigned x0, unsigned x1, uint32_t *pair)
{
	for (unsigned x = x0; x < x1; x++) {
		unsigned e1 = tab[x], l1 = e1 >> 8;
		unsigned e2 = tab[(x << l1) & ((1u << FT_ZH_L) - 1)], l2 = e2 >> 8;
		pair[x] = l1 + l2 <= FT_ZH_L ? (e1 & 255u) | (e2 & 255u) << 8 | (l1 + l2) << 16 | 2u << 24
					   : (e1 & 255u) | l1 << 16 | 1u << 24;
	}
}

/* The next one or two symbols (after a refill), their codes in buf: the
 * first in bits 0-7, the second in 8-15; how many in *n. */
FT_ZH_FN unsigned ft_zh_take2(struct ft_zh_bits *b, const uint32_t *pair, unsigned *n)
{
	uint32_t e = pair[b->buf >> (64 - FT_ZH_L)], len = (e >> 16) & 255u;
	b->buf <<= len;
	b->cnt -= len;
	*n = e >> 24;
	return e & 0xffffu;
}

#endif
