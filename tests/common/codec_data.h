/*
 * Data classes for the codec's tests (CPU: tests/unit/test_codec.c; GPU:
 * tests/gpu/codec.c): bf16 weights as trained models' look (normal, and
 * rows with lognormal scales: heavier-tailed exponents), every special
 * value (+-0, subnormals, +-Inf, NaNs with payloads), random bits,
 * constants, fp16 weights (their exponent is not where bf16's is), fp16's
 * special values, alone and among fp16 weights; for mode 3's code: heavier
 * tails (Student's t with 3 degrees of freedom, Laplace), every exponent in
 * each chunk, a Fibonacci histogram (plain Huffman's codes would be 21
 * bits long), and the data where modes 1 and 2 code smaller (15 exponents
 * in equal shares; fp16 words of 15 exponents and random mantissas).
 * Deterministic: a fixed xorshift generator per class.
 */
#ifndef FT_TEST_CODEC_DATA_H
#define FT_TEST_CODEC_DATA_H

#include <math.h>
#include <stdint.h>
#include <string.h>

enum codec_class {
	CD_NORMAL, CD_LOGNORMAL, CD_SPECIALS, CD_RANDOM, CD_CONSTANT, CD_ZEROS, CD_FP16,
	CD_MIXED, CD_FP16_SPECIALS, CD_FP16_MIXED, CD_STUDENT_T3, CD_LAPLACE, CD_ALL_EXPONENTS,
	CD_FIBONACCI, CD_FIFTEEN, CD_FP16_WIDE, CD_NCLASSES
};

static const char *const codec_class_name[CD_NCLASSES] = {
	"bf16 N(0,0.02)", "bf16 lognormal rows", "bf16 specials", "random bits", "constant",
	"zeros", "fp16 N(0,0.02)", "mixed (specials in normal)", "fp16 specials",
	"fp16 mixed (specials in normal)", "bf16 Student-t3", "bf16 Laplace",
	"all 256 exponents (1 in 64)", "Fibonacci exponent counts", "15 exponents, equal shares",
	"fp16, 15 exponents, random mantissas",
};

static uint64_t cd_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static double cd_normal(uint64_t *s)
{
	double u = ((cd_next(s) >> 11) + 1) * (1.0 / 9007199254740993.0);
	double v = (cd_next(s) >> 11) * (1.0 / 9007199254740992.0);
	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* bf16 of x, rounded to nearest even. */
static uint16_t cd_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static uint16_t cd_fp16(float x)
{
	/* normal range only (|x| < 65504, no subnormals needed for N(0,0.02)
	 * beyond flushing): enough for a weight-like fp16 distribution */
	uint32_t u;
	memcpy(&u, &x, 4);
	uint32_t sign = (u >> 16) & 0x8000;
	int e = (int)((u >> 23) & 0xff) - 127 + 15;
	uint32_t m = u & 0x7fffff;
	if (e <= 0)
		return (uint16_t)sign;
	return (uint16_t)(sign | (uint32_t)e << 10 | (m >> 13));
}

static const uint16_t cd_specials[] = {
	0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0040, 0x7f80, 0xff80, 0x7fc0,
	0xffc0, 0x7f81, 0xff81, 0x7fff, 0xffff, 0x7fa5, 0x0080, 0x8080, 0x7f7f, 0xff7f,
	0x3f80, 0xbf80,
};

/* fp16's: +-0, subnormals, the smallest and largest normals, +-Inf, quiet
 * and signalling NaNs with payloads, +-1 */
static const uint16_t cd_fp16_specials[] = {
	0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0200, 0x0400, 0x8400, 0x7bff,
	0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7fff, 0xffff, 0x7d55,
	0x3c00, 0xbc00,
};

static double cd_student_t3(uint64_t *s)
{
	double z = cd_normal(s), c = 0;
	for (int k = 0; k < 3; k++) {
		double x = cd_normal(s);
		c += x * x;
	}
	return z / sqrt(c / 3);
}

static double cd_laplace(uint64_t *s)
{
	double u = ((cd_next(s) >> 11) + 1) * (1.0 / 9007199254740993.0);
	return (cd_next(s) & 1 ? -1 : 1) * log(u);
}

/* The exponent of word i of a chunk whose exponents 100 + k (k = 1..21)
 * come Fibonacci(k) times each (1, 1, 2, 3, 5, ...; 121 the rest of the
 * chunk too), in an order that spreads them (an odd multiplier permutes
 * the chunk's places). */
static unsigned cd_fibonacci(size_t i)
{
	uint32_t q = (uint32_t)(i * 20071u) % 32768u, a = 1, b = 1, sum = 0;
	for (unsigned k = 1; k < 21; k++) {
		sum += a;
		if (q < sum)
			return 100 + k;
		uint32_t c = a + b;
		a = b;
		b = c;
	}
	return 121;
}

/* n 16-bit words of class c into v (row length 4096 for lognormal). */
static void codec_fill(enum codec_class c, uint16_t *v, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(c + 1) * 0x1234567ULL;
	double scale = 1;
	size_t ns = sizeof(cd_specials) / sizeof(cd_specials[0]);
	size_t nf = sizeof(cd_fp16_specials) / sizeof(cd_fp16_specials[0]);
	for (size_t i = 0; i < n; i++) {
		switch (c) {
		case CD_NORMAL:
			v[i] = cd_bf16((float)(0.02 * cd_normal(&s)));
			break;
		case CD_LOGNORMAL:
			if (i % 4096 == 0)
				scale = exp(0.5 * cd_normal(&s));
			v[i] = cd_bf16((float)(0.02 * scale * cd_normal(&s)));
			break;
		case CD_SPECIALS:
			v[i] = cd_specials[cd_next(&s) % ns];
			break;
		case CD_RANDOM:
			v[i] = (uint16_t)cd_next(&s);
			break;
		case CD_CONSTANT:
			v[i] = 0x3c23;
			break;
		case CD_ZEROS:
			v[i] = 0;
			break;
		case CD_FP16:
			v[i] = cd_fp16((float)(0.02 * cd_normal(&s)));
			break;
		case CD_MIXED:
			v[i] = cd_next(&s) % 64 ? cd_bf16((float)(0.02 * cd_normal(&s)))
						: cd_specials[cd_next(&s) % ns];
			break;
		case CD_FP16_SPECIALS:
			v[i] = cd_fp16_specials[cd_next(&s) % nf];
			break;
		case CD_FP16_MIXED:
			v[i] = cd_next(&s) % 64 ? cd_fp16((float)(0.02 * cd_normal(&s)))
						: cd_fp16_specials[cd_next(&s) % nf];
			break;
		case CD_STUDENT_T3:
			v[i] = cd_bf16((float)(0.02 * cd_student_t3(&s)));
			break;
		case CD_LAPLACE:
			v[i] = cd_bf16((float)(0.02 * cd_laplace(&s)));
			break;
		case CD_ALL_EXPONENTS:
			v[i] = i % 64 ? cd_bf16((float)(0.02 * cd_normal(&s)))
				      : (uint16_t)((i / 64 % 256) << 7 | (cd_next(&s) & 0x807f));
			break;
		case CD_FIBONACCI:
			v[i] = (uint16_t)(cd_fibonacci(i) << 7 | (cd_next(&s) & 0x807f));
			break;
		case CD_FIFTEEN:
			v[i] = (uint16_t)((100 + cd_next(&s) % 15) << 7 | (cd_next(&s) & 0x807f));
			break;
		case CD_FP16_WIDE:
			v[i] = (uint16_t)((1 + cd_next(&s) % 15) << 10 | (cd_next(&s) & 0x83ff));
			break;
		default:
			v[i] = 0;
		}
	}
}

#endif
