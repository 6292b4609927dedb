/*
 * The weights' checksum, one definition for the GPU kernel's PTX
 * (src/engine/gpu.c), the host store's (ft_off_host_checksum) and the fake
 * driver's: the sum, modulo 2^64, of every aligned 8-byte word mixed with
 * its index (xor with the index times an odd constant, a multiply, a fold
 * of the high half into the low).  Non-linear: a sum of word * (2i + 1),
 * its first form, was blind to a change that adds the same value to every
 * word of a range of 2^k words (it adds that value times 2^2k, nothing
 * modulo 2^64 once k >= 22): an activation buffer changed so between two
 * passes looked unchanged, and was taken for a weight.
 */
#ifndef FT_CHECKSUM_H
#define FT_CHECKSUM_H

#include <stdint.h>

/* odd, under 2^63: written as they are into the kernel's PTX
 * (FT_CHECKSUM_XSTR), with ull in C (FT_CHECKSUM_U64) */
#define FT_CHECKSUM_K1 0x1E3779B97F4A7C15
#define FT_CHECKSUM_K2 0x2545F4914F6CDD1D
#define FT_CHECKSUM_STR(x) #x
#define FT_CHECKSUM_XSTR(x) FT_CHECKSUM_STR(x)
#define FT_CHECKSUM_U64_(x) x##ull
#define FT_CHECKSUM_U64(x) FT_CHECKSUM_U64_(x)

static inline uint64_t ft_checksum_word(uint64_t w, uint64_t i)
{
	uint64_t x = (w ^ (i * FT_CHECKSUM_U64(FT_CHECKSUM_K1))) * FT_CHECKSUM_U64(FT_CHECKSUM_K2);
	return x ^ (x >> 32);
}

#endif
