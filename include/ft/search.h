/* Binary search over arrays sorted by a uint64_t member (the engine's
 * tables: weights by address, VMM allocations by base; learning's weights
 * by allocation), the qsort order of plain uint64_t arrays, and the
 * greatest common divisor of offsets (slices' strides). */
#ifndef FT_SEARCH_H
#define FT_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The index of the first of n elements (stride bytes each, the key at byte
 * off) whose key is greater than key (n when none). */
static inline uint32_t ft_upper_bound(const void *base, uint32_t n, size_t stride, size_t off,
				      uint64_t key)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t m = (lo + hi) / 2;
		uint64_t k;
		memcpy(&k, (const char *)base + (size_t)m * stride + off, sizeof(k));
		if (k <= key)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* qsort comparator: uint64_t values, ascending. */
static inline int ft_cmp_u64(const void *a, const void *b)
{
	uint64_t x, y;
	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	return x < y ? -1 : x > y;
}

/* The greatest common divisor of a and b (gcd(0, b) = b). */
static inline uint64_t ft_gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

#endif
