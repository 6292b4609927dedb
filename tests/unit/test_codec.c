/* The store's codec on the host (include/ft/codec.h): every class of value
 * round-trips bit for bit, whole and by ranges; bf16 weights shrink to
 * about 67 % (their exponents Huffman-coded, within 2 % of what their
 * entropy allows), fp16 weights to about 85 %; each chunk takes the mode
 * that codes it smallest; data that does not shrink is stored raw. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/codec.h"
#include "ft/codec_huff.h"
#include "../common/codec_data.h"

/* 40 chunks and a short last one (not a multiple of 64 KiB) */
#define N_VALS (40u * FT_Z_VALS + 4096u + 32u)

static double round_trip(enum codec_class c, size_t nvals, unsigned threads)
{
	uint16_t *v = malloc(nvals * 2), *out = malloc(nvals * 2);
	assert_non_null(v);
	assert_non_null(out);
	codec_fill(c, v, nvals);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, nvals * 2, threads, &z), 0);
	assert_int_equal(z.raw_bytes, nvals * 2);
	assert_int_equal(z.nchunks, (nvals + FT_Z_VALS - 1) / FT_Z_VALS);
	for (uint32_t k = 0; k <= z.nchunks; k++)
		assert_int_equal(FT_Z_OFF(z.desc[k]) % 16, 0);
	memset(out, 0xa5, nvals * 2);
	ft_z_read(&z, 0, nvals * 2, out);
	if (memcmp(v, out, nvals * 2)) {
		for (size_t i = 0; i < nvals; i++)
			if (v[i] != out[i])
				fail_msg("%s: word %zu is 0x%04x, decoded 0x%04x", codec_class_name[c],
					 i, v[i], out[i]);
	}
	/* a range in the middle, as bringing part of a trap back reads it */
	memset(out, 0, nvals * 2);
	ft_z_read(&z, 3 * FT_Z_CHUNK, 5 * FT_Z_CHUNK, out);
	assert_memory_equal(out, v + 3 * FT_Z_VALS, 5 * FT_Z_CHUNK);
	/* ranges off the chunks' grid, as a raw-mode trap's weights lie in
	 * its store: each within a chunk, across chunks, to the end */
	const size_t at[][2] = { { 2 * FT_Z_CHUNK + 4096, 1000 }, { FT_Z_CHUNK - 6, 12 },
				 { 7 * FT_Z_CHUNK + 2, 3 * FT_Z_CHUNK + 62 },
				 { nvals * 2 - FT_Z_CHUNK - 10, FT_Z_CHUNK + 10 } };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		assert_true(at[i][0] + at[i][1] <= nvals * 2);
		memset(out, 0x5a, nvals * 2);
		assert_int_equal(ft_z_read(&z, at[i][0], at[i][1], out), 0);
		assert_memory_equal(out, (const unsigned char *)v + at[i][0], at[i][1]);
		assert_int_equal(((const unsigned char *)out)[at[i][1]], 0x5a); /* no more */
	}
	double ratio = (double)z.raw_bytes / (double)z.bytes;
	ft_z_free(&z);
	free(v);
	free(out);
	return ratio;
}

/* The ratio the exponents' entropy allows for the whole chunks of v (n
 * words): 16 bits over 8 and their mean entropy, each chunk's own. */
static double entropy_bound(const uint16_t *v, size_t n)
{
	double h = 0;
	size_t chunks = n / FT_Z_VALS;
	for (size_t c = 0; c < chunks; c++) {
		uint32_t cnt[256] = { 0 };
		for (uint32_t i = 0; i < FT_Z_VALS; i++)
			cnt[(v[c * FT_Z_VALS + i] >> 7) & 255]++;
		for (int e = 0; e < 256; e++)
			if (cnt[e])
				h -= cnt[e] * log2((double)cnt[e] / FT_Z_VALS) / FT_Z_VALS;
	}
	return 16 / (8 + h / (double)chunks);
}

/* Each chunk's mode in z, counted. */
static uint32_t count_mode(const struct ft_z_image *z, unsigned mode)
{
	uint32_t k = 0;
	for (uint32_t c = 0; c < z->nchunks; c++)
		k += FT_Z_MODE(z->desc[c]) == mode;
	return k;
}

/* Every chunk of class c's image codes in mode m. */
static void all_in_mode(enum codec_class c, unsigned m)
{
	uint16_t *v = malloc(N_VALS * 2);
	assert_non_null(v);
	codec_fill(c, v, N_VALS);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, N_VALS * 2, 0, &z), 0);
	assert_int_equal(count_mode(&z, m), z.nchunks);
	ft_z_free(&z);
	free(v);
}

/* Class c round-trips, every chunk in mode 3, its ratio within 2 % of
 * what the exponents' entropy allows (the header, sub-stream padding and
 * Huffman's whole bits cost 1.4-1.6 %), and at least min. */
static void near_entropy(enum codec_class c, double min)
{
	all_in_mode(c, FT_Z_BF16H);
	uint16_t *v = malloc(N_VALS * 2);
	assert_non_null(v);
	codec_fill(c, v, N_VALS);
	double r = round_trip(c, N_VALS, 3), bound = entropy_bound(v, N_VALS);
	if (r < 0.98 * bound || r < min)
		fail_msg("%s: ratio %.4f, its entropy's %.4f, at least %.4f", codec_class_name[c], r,
			 bound, min);
	free(v);
}

/* bf16 weights Huffman-code their exponents: 16 bits -> about 10.7
 * (1.333x with the 4-bit code of mode 1), for every shape of weights. */
static void bf16_weights_shrink(void **state)
{
	(void)state;
	near_entropy(CD_NORMAL, 1.485);
	near_entropy(CD_LOGNORMAL, 1.465);
	near_entropy(CD_STUDENT_T3, 1.46);
	near_entropy(CD_LAPLACE, 1.45);
	/* every exponent has a code: 1 word in 64 of another exponent, each
	 * of those about 2^-14 of the chunk, codes of 11 bits at most take
	 * 11 % of the code space from the rest (1.49x by the entropy) */
	double r = round_trip(CD_ALL_EXPONENTS, N_VALS, 2);
	assert_true(r > 1.42);
	r = round_trip(CD_MIXED, N_VALS, 1);
	assert_true(r > 1.45); /* 1 in 64 specials: 22 more exponents */
}

/* fp16 weights: their 5-bit exponent and the mantissa's top 3 bits, read
 * as a bf16 exponent, carry about 5.6 bits, which mode 3 codes (13.6 bits a
 * word, 1.17x) better than fp16's own mode (15 bits, 1.067x); fp16 words
 * whose exponents spread over 15 values with random mantissas keep fp16's
 * mode; with fp16's specials among them, still coded; the specials alone
 * round-trip. */
static void fp16_weights_shrink(void **state)
{
	(void)state;
	double r = round_trip(CD_FP16, N_VALS, 2);
	assert_true(r > 1.17);
	r = round_trip(CD_FP16_MIXED, N_VALS, 3);
	assert_true(r > 1.16);
	r = round_trip(CD_FP16_WIDE, N_VALS, 3);
	assert_true(r > 1.06 && r <= 16.0 / 15.0);
	round_trip(CD_FP16_SPECIALS, N_VALS, 1);
	all_in_mode(CD_FP16, FT_Z_BF16H);
	all_in_mode(CD_FP16_WIDE, FT_Z_FP16);
}

static void specials_round_trip(void **state)
{
	(void)state;
	round_trip(CD_SPECIALS, N_VALS, 2);
	/* every 16-bit pattern, in order and shuffled */
	uint16_t *v = malloc(65536 * 2 * 2), *out = malloc(65536 * 2 * 2);
	assert_non_null(v);
	assert_non_null(out);
	for (uint32_t i = 0; i < 65536; i++)
		v[i] = v[65536 + i] = (uint16_t)i;
	uint64_t s = 7;
	for (uint32_t i = 65535; i > 0; i--) {
		uint32_t j = (uint32_t)(cd_next(&s) % (i + 1));
		uint16_t t = v[65536 + i];
		v[65536 + i] = v[65536 + j];
		v[65536 + j] = t;
	}
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, 65536 * 4, 0, &z), 0);
	ft_z_read(&z, 0, z.raw_bytes, out);
	assert_memory_equal(v, out, 65536 * 4);
	ft_z_free(&z);
	free(v);
	free(out);
}

static void incompressible_is_raw(void **state)
{
	(void)state;
	uint16_t *v = malloc(N_VALS * 2);
	assert_non_null(v);
	enum codec_class raw[] = { CD_RANDOM };
	for (size_t k = 0; k < sizeof(raw) / sizeof(raw[0]); k++) {
		codec_fill(raw[k], v, N_VALS);
		struct ft_z_image z;
		assert_int_equal(ft_z_encode(v, N_VALS * 2, 0, &z), 0);
		assert_int_equal(z.coded, 0);
		for (uint32_t c = 0; c < z.nchunks; c++)
			assert_int_equal(FT_Z_MODE(z.desc[c]), FT_Z_RAW);
		assert_int_equal(z.bytes, N_VALS * 2); /* no overhead */
		ft_z_free(&z);
		assert_true(round_trip(raw[k], N_VALS, 2) == 1.0);
	}
	free(v);
}

/* One exponent: a code of 0 bits, no streams (the header's 384 bytes and
 * the rest bytes: 1.976x). */
static void constants_shrink(void **state)
{
	(void)state;
	double r = round_trip(CD_CONSTANT, N_VALS, 2);
	assert_true(r > 1.97);
	r = round_trip(CD_ZEROS, N_VALS, 2);
	assert_true(r > 1.97);
}

static void escapes_everywhere(void **state)
{
	(void)state;
	/* 17 exponents in equal shares: 2 of them escape in every chunk */
	size_t n = 8 * FT_Z_VALS;
	uint16_t *v = malloc(n * 2), *out = malloc(n * 2);
	assert_non_null(v);
	assert_non_null(out);
	uint64_t s = 3;
	for (size_t i = 0; i < n; i++)
		v[i] = (uint16_t)((100 + cd_next(&s) % 17) << 7 | (cd_next(&s) & 0x807f));
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, n * 2, 0, &z), 0);
	ft_z_read(&z, 0, n * 2, out);
	assert_memory_equal(v, out, n * 2);
	ft_z_free(&z);
	free(v);
	free(out);
}

/* The passes one chunk at a time (what the GPU encoder runs per block)
 * and the layout make ft_z_encode's image, byte for byte, for every class
 * of data; unused table entries and the padding are zero. */
static void chunk_passes_make_the_image(void **state)
{
	(void)state;
	for (int c = 0; c < CD_NCLASSES; c++) {
		uint16_t *v = malloc(N_VALS * 2);
		assert_non_null(v);
		codec_fill((enum codec_class)c, v, N_VALS);
		struct ft_z_image z, l;
		assert_int_equal(ft_z_encode(v, N_VALS * 2, 2, &z), 0);
		struct ft_z_meta *m = malloc(z.nchunks * sizeof(*m));
		assert_non_null(m);
		for (uint32_t k = 0; k < z.nchunks; k++) {
			uint32_t n = k + 1 < z.nchunks ? FT_Z_VALS : N_VALS - k * FT_Z_VALS;
			ft_z_analyse(v + (size_t)k * FT_Z_VALS, n, &m[k]);
			for (uint32_t e = m[k].nused; e < 16; e++)
				assert_int_equal(m[k].table[e], 0);
			/* each mode's fields, the others' zero (the GPU's too) */
			int huff = m[k].mode == FT_Z_BF16H;
			uint8_t zero[sizeof(m[k].lens)] = { 0 };
			assert_true(huff || !m[k].sbytes);
			assert_true(!huff || (!m[k].nesc && !m[k].nused));
			assert_int_equal(!huff, !memcmp(m[k].lens, zero, sizeof(zero)));
		}
		assert_int_equal(ft_z_layout(&l, N_VALS * 2, m), 0);
		assert_int_equal(l.bytes, z.bytes);
		assert_int_equal(l.coded, z.coded);
		assert_memory_equal(l.desc, z.desc, (z.nchunks + 1) * sizeof(*z.desc));
		unsigned char *img = malloc(z.bytes);
		assert_non_null(img);
		memset(img, 0xa5, z.bytes);
		for (uint32_t k = 0; k < z.nchunks; k++) {
			uint32_t n = k + 1 < z.nchunks ? FT_Z_VALS : N_VALS - k * FT_Z_VALS;
			ft_z_code(v + (size_t)k * FT_Z_VALS, n, &m[k], img + FT_Z_OFF(l.desc[k]));
		}
		assert_memory_equal(img, z.data, z.bytes);
		struct ft_z_image bad;
		assert_int_equal(ft_z_layout(&bad, 70, m), -EINVAL);
		assert_null(bad.desc);
		free(img);
		free(m);
		ft_z_free(&l);
		ft_z_free(&z);
		free(v);
	}
}

/* Each chunk takes the smallest mode: a store of one chunk of each class
 * below, short last chunk included. */
static void modes_chosen_per_chunk(void **state)
{
	(void)state;
	static const struct {
		enum codec_class c;
		unsigned mode;
	} chunk[] = {
		{ CD_NORMAL, FT_Z_BF16H },   { CD_RANDOM, FT_Z_RAW },
		{ CD_FIFTEEN, FT_Z_BF16 },   /* 4 bits a word in both: mode 1 has no header */
		{ CD_FP16_WIDE, FT_Z_FP16 }, /* 6.9 bits an "exponent" in mode 3 */
		{ CD_ZEROS, FT_Z_BF16H },    { CD_FP16, FT_Z_BF16H },
		{ CD_FIBONACCI, FT_Z_BF16H }, { CD_NORMAL, FT_Z_BF16H }, /* (4128 words) */
	};
	size_t nc = sizeof(chunk) / sizeof(chunk[0]), n = (nc - 1) * FT_Z_VALS + 4128;
	uint16_t *v = malloc(n * 2), *out = malloc(n * 2);
	assert_non_null(v);
	assert_non_null(out);
	for (size_t k = 0; k < nc; k++)
		codec_fill(chunk[k].c, v + k * FT_Z_VALS, k + 1 < nc ? FT_Z_VALS : 4128);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, n * 2, 0, &z), 0);
	for (uint32_t k = 0; k < z.nchunks; k++) {
		uint64_t d = z.desc[k];
		uint32_t words = k + 1 < nc ? FT_Z_VALS : 4128;
		if (FT_Z_MODE(d) != chunk[k].mode)
			fail_msg("chunk %u (%s): mode %u, not %u", k, codec_class_name[chunk[k].c],
				 FT_Z_MODE(d), chunk[k].mode);
		/* its size: its coded parts padded to 16 bytes */
		assert_int_equal(ft_z_span(&z, k, k + 1), (ft_z_min_span(d, words) + 15) & ~15ull);
	}
	assert_int_equal(ft_z_read(&z, 0, n * 2, out), 0);
	assert_memory_equal(v, out, n * 2);
	ft_z_free(&z);
	free(v);
	free(out);
}

/* Lengths' Kraft sum in units of the longest code's share. */
static uint32_t kraft(const unsigned char *len)
{
	uint32_t k = 0;
	for (unsigned e = 0; e < 256; e++)
		k += len[e] ? 1u << (FT_ZH_L - len[e]) : 0;
	return k;
}

/* ft_zh_lengths of counts h (256 of them) into len, as the encoder calls
 * it (present symbols in (count, value) order); how many present. */
static unsigned lengths_of(const uint32_t *h, unsigned char *len)
{
	uint32_t w[256];
	unsigned char sym[256];
	unsigned np = 0;
	memset(len, 0, 256);
	for (unsigned e = 0; e < 256; e++)
		if (h[e]) {
			unsigned r = ft_zh_rank(h, e);
			sym[r] = (unsigned char)e;
			w[r] = h[e];
			np++;
		}
	ft_zh_lengths(w, sym, np, len);
	return np;
}

/* The cost in bits of an optimal (unlimited) prefix code for counts h,
 * by merging the two lightest (a reference: O(n^2)). */
static uint64_t huffman_cost(const uint32_t *h)
{
	uint64_t q[256], cost = 0;
	unsigned n = 0;
	for (unsigned e = 0; e < 256; e++)
		if (h[e])
			q[n++] = h[e];
	while (n > 1) {
		for (unsigned pass = 0; pass < 2; pass++) /* the two lightest to the end */
			for (unsigned i = 0; i + 1 + pass < n; i++)
				if (q[i] < q[n - 1 - pass]) {
					uint64_t t = q[i];
					q[i] = q[n - 1 - pass];
					q[n - 1 - pass] = t;
				}
		q[n - 2] += q[n - 1];
		cost += q[n - 2];
		n--;
	}
	return cost;
}

/* The code lengths: optimal where no code passes 11 bits, complete
 * (Kraft's sum 1), never over 11 bits, shorter or equal for the more
 * frequent, ties by value; one symbol gets 1. */
static void huff_lengths(void **state)
{
	(void)state;
	uint32_t h[256];
	unsigned char len[256];
	uint64_t s = 11;
	for (int round = 0; round < 200; round++) {
		memset(h, 0, sizeof(h));
		unsigned syms = 2 + (unsigned)(cd_next(&s) % 255);
		for (unsigned k = 0; k < syms; k++) /* geometric-ish, as exponents are */
			h[cd_next(&s) % 256] += 1 + (uint32_t)(cd_next(&s) % (1u << (cd_next(&s) % 12)));
		unsigned np = lengths_of(h, len), longest = 0;
		uint64_t bits = 0;
		for (unsigned e = 0; e < 256; e++) {
			assert_true(!h[e] == !len[e]);
			bits += (uint64_t)h[e] * len[e];
			longest = len[e] > longest ? len[e] : longest;
			for (unsigned u = 0; u < 256; u++)
				assert_true(!h[u] || !h[e] || h[u] <= h[e] || len[u] <= len[e]);
		}
		assert_true(longest <= FT_ZH_L);
		assert_int_equal(kraft(len), np > 1 ? 1u << FT_ZH_L : 1u << (FT_ZH_L - 1));
		if (longest < FT_ZH_L)
			assert_int_equal(bits, huffman_cost(h));
	}
	/* Fibonacci counts: plain Huffman's longest code is 20 bits */
	memset(h, 0, sizeof(h));
	for (unsigned k = 0, a = 1, b = 1; k < 21; k++, b += a, a = b - a)
		h[100 + k] = a;
	lengths_of(h, len);
	assert_int_equal(len[120], 1);
	assert_int_equal(len[100], FT_ZH_L);
	assert_int_equal(len[101], FT_ZH_L);
	assert_int_equal(kraft(len), 1u << FT_ZH_L);
	/* 256 equal counts: 8 bits each; ties by value (the higher counts
	 * as the more frequent: it gets the shorter length) */
	for (unsigned e = 0; e < 256; e++)
		h[e] = 7;
	lengths_of(h, len);
	for (unsigned e = 0; e < 256; e++)
		assert_int_equal(len[e], 8);
	memset(h, 0, sizeof(h));
	h[3] = h[9] = h[200] = 5;
	lengths_of(h, len);
	assert_int_equal(len[3], 2);
	assert_int_equal(len[9], 2);
	assert_int_equal(len[200], 1);
	memset(h, 0, sizeof(h));
	h[77] = 32768;
	assert_int_equal(lengths_of(h, len), 1);
	assert_int_equal(len[77], 1);
	/* the encoder sorts the symbols its own way (the GPU ranks them a
	 * thread each): the same lengths, ties (many here) included */
	uint16_t *v = malloc(FT_Z_CHUNK);
	assert_non_null(v);
	for (int round = 0; round < 20; round++) {
		memset(h, 0, sizeof(h));
		uint32_t i = 0;
		while (i < FT_Z_VALS / 2) {
			unsigned e = (unsigned)(cd_next(&s) % 256), c = 1 + (unsigned)(cd_next(&s) % 4) * 64;
			for (unsigned k = 0; k < c && i < FT_Z_VALS / 2; k++, h[e]++)
				v[i++] = (uint16_t)(e << 7 | (cd_next(&s) & 0x807f));
		}
		for (; i < FT_Z_VALS; i++, h[126]++) /* one half one exponent: mode 3 */
			v[i] = (uint16_t)(126 << 7 | (cd_next(&s) & 0x807f));
		struct ft_z_meta m;
		ft_z_analyse(v, FT_Z_VALS, &m);
		assert_int_equal(m.mode, FT_Z_BF16H);
		lengths_of(h, len);
		for (unsigned e = 0; e < 256; e++)
			assert_int_equal(ft_zh_nib(m.lens, e), len[e]);
	}
	free(v);
}

/* A chunk of Fibonacci exponent counts (plain Huffman: codes of up to
 * 20 bits) codes in mode 3 with its lengths cut to 11, a complete code. */
static void huff_limits_lengths(void **state)
{
	(void)state;
	uint16_t *v = malloc(4 * FT_Z_CHUNK);
	assert_non_null(v);
	codec_fill(CD_FIBONACCI, v, 4 * FT_Z_VALS);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, 4 * FT_Z_CHUNK, 0, &z), 0);
	for (uint32_t c = 0; c < z.nchunks; c++) {
		assert_int_equal(FT_Z_MODE(z.desc[c]), FT_Z_BF16H);
		const unsigned char *head = z.data + FT_Z_OFF(z.desc[c]);
		unsigned char len[256];
		unsigned longest = 0;
		for (unsigned e = 0; e < 256; e++) {
			len[e] = (unsigned char)ft_zh_nib(head, e);
			longest = len[e] > longest ? len[e] : longest;
		}
		assert_int_equal(longest, FT_ZH_L);
		assert_int_equal(kraft(len), 1u << FT_ZH_L);
	}
	ft_z_free(&z);
	assert_true(round_trip(CD_FIBONACCI, N_VALS, 2) > 1.5);
	free(v);
}

/* A mode 3 chunk whose header is damaged (its descriptor intact, as the
 * shared store checks) decodes to garbage but reads nothing outside its
 * bytes (under ASan: the chunk alone in a buffer of its size). */
static void huff_damage_stays_inside(void **state)
{
	(void)state;
	uint16_t *v = malloc(FT_Z_CHUNK), *out = malloc(FT_Z_CHUNK);
	assert_non_null(v);
	assert_non_null(out);
	codec_fill(CD_NORMAL, v, FT_Z_VALS);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, FT_Z_CHUNK, 1, &z), 0);
	assert_int_equal(FT_Z_MODE(z.desc[0]), FT_Z_BF16H);
	assert_true(z.bytes >= ft_z_min_span(z.desc[0], FT_Z_VALS));
	static const struct {
		unsigned at, len, byte;
	} harm[] = {
		{ 128, 256, 0xff }, /* every sub-stream 255 bytes */
		{ 0, 128, 0x11 },   /* 256 codes of 1 bit */
		{ 0, 128, 0xff },   /* lengths past 11 */
		{ 0, 128, 0x00 },   /* no symbol */
		{ 0, 384, 0xa5 },
	};
	for (size_t k = 0; k < sizeof(harm) / sizeof(harm[0]); k++) {
		unsigned char *img = malloc(z.bytes);
		assert_non_null(img);
		memcpy(img, z.data, z.bytes);
		memset(img + harm[k].at, (int)harm[k].byte, harm[k].len);
		ft_z_decode_at(img, z.desc[0], FT_Z_VALS, out);
		free(img);
	}
	ft_z_free(&z);
	free(v);
	free(out);
}

/* A damaged mode 1 chunk (a shared store is mapped from another process)
 * whose escape names a word past the chunk writes nothing outside it;
 * a damaged mode 3 one cannot make its reader load past its span. */
static void an_escape_past_the_chunk_writes_nothing(void **state)
{
	(void)state;
	enum { n = 32 };
	unsigned char in[16 + n / 2 + n + 4] = { 0 };
	uint32_t esc = (uint32_t)n << 16 | 0x1234u;
	memcpy(in + 16 + n / 2 + n, &esc, sizeof(esc));
	uint16_t out[n + 1];
	out[n] = 0xabcd;
	ft_z_decode_at(in, (uint64_t)FT_Z_BF16 << 40 | 1ull << 42, n, out);
	assert_int_equal(out[n], 0xabcd);
	/* a mode 3 chunk's span takes in the 4-byte words its reader loads
	 * (the shared store checks a chunk against it) */
	assert_int_equal(ft_z_min_span((uint64_t)FT_Z_BF16H << 40 | 5ull << 42, n), 384 + n + 8);
}

static void bad_sizes_refused(void **state)
{
	(void)state;
	uint16_t v[40] = { 0 };
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, 70, 1, &z), -EINVAL);
	assert_null(z.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bf16_weights_shrink),
		cmocka_unit_test(fp16_weights_shrink),
		cmocka_unit_test(specials_round_trip),
		cmocka_unit_test(incompressible_is_raw),
		cmocka_unit_test(constants_shrink),
		cmocka_unit_test(escapes_everywhere),
		cmocka_unit_test(chunk_passes_make_the_image),
		cmocka_unit_test(modes_chosen_per_chunk),
		cmocka_unit_test(huff_lengths),
		cmocka_unit_test(huff_limits_lengths),
		cmocka_unit_test(huff_damage_stays_inside),
		cmocka_unit_test(an_escape_past_the_chunk_writes_nothing),
		cmocka_unit_test(bad_sizes_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
