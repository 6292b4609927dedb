/* The store's codec on the host (include/ft/codec.h): every class of value
 * round-trips bit for bit, whole and by ranges; bf16 weights shrink to
 * about 75 %, fp16 weights to about 94 %; data that does not shrink is
 * stored raw. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/codec.h"
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

static void bf16_weights_shrink(void **state)
{
	(void)state;
	double r = round_trip(CD_NORMAL, N_VALS, 4);
	assert_true(r > 1.32 && r <= 4.0 / 3.0); /* 16 bits -> 12, a few escapes */
	r = round_trip(CD_LOGNORMAL, N_VALS, 3);
	assert_true(r > 1.31 && r <= 4.0 / 3.0);
	r = round_trip(CD_MIXED, N_VALS, 1);
	assert_true(r > 1.05); /* 1 in 64 escapes: still coded */
}

/* fp16 weights code their 5-bit exponent: 15 bits a word (16 / 15 =
 * 1.067x, a few escapes), every chunk in fp16's mode; with fp16's specials
 * among them, still coded; the specials alone round-trip. */
static void fp16_weights_shrink(void **state)
{
	(void)state;
	double r = round_trip(CD_FP16, N_VALS, 2);
	assert_true(r > 1.06 && r <= 16.0 / 15.0);
	r = round_trip(CD_FP16_MIXED, N_VALS, 3);
	assert_true(r > 1.03);
	round_trip(CD_FP16_SPECIALS, N_VALS, 1);
	uint16_t *v = malloc(N_VALS * 2);
	assert_non_null(v);
	codec_fill(CD_FP16, v, N_VALS);
	struct ft_z_image z;
	assert_int_equal(ft_z_encode(v, N_VALS * 2, 0, &z), 0);
	assert_int_equal(z.coded, z.nchunks);
	for (uint32_t c = 0; c < z.nchunks; c++)
		assert_int_equal(FT_Z_MODE(z.desc[c]), FT_Z_FP16);
	ft_z_free(&z);
	/* bf16 weights keep bf16's mode (12 bits a word, not 15) */
	codec_fill(CD_NORMAL, v, N_VALS);
	assert_int_equal(ft_z_encode(v, N_VALS * 2, 0, &z), 0);
	for (uint32_t c = 0; c < z.nchunks; c++)
		assert_int_equal(FT_Z_MODE(z.desc[c]), FT_Z_BF16);
	ft_z_free(&z);
	free(v);
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

static void constants_shrink(void **state)
{
	(void)state;
	double r = round_trip(CD_CONSTANT, N_VALS, 2);
	assert_true(r > 1.33);
	r = round_trip(CD_ZEROS, N_VALS, 2);
	assert_true(r > 1.33);
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
			assert_int_equal(m[k].pad, 0);
			for (uint32_t e = m[k].nused; e < 16; e++)
				assert_int_equal(m[k].table[e], 0);
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
		cmocka_unit_test(bad_sizes_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
