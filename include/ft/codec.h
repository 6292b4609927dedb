/*
 * Lossless compression of the host store (FT_TRANSFER_COMPRESSION).
 *
 * A trap's store is coded in chunks of FT_Z_VALS 16-bit words (64 KiB)
 * that decode independently, so copies of pieces and their decodes
 * pipeline.  A chunk is stored raw, or as bf16 or fp16 with its exponent
 * coded.  bf16 (mode 1):
 *
 *   table[16]       the chunk's 15 most frequent exponents (table[15] unused)
 *   codes[n / 2]    a 4-bit code per word, two per byte, low nibble first:
 *                   0-14 index table, 15 = escape
 *   rest[n]         per word its sign and 7 mantissa bits (sign << 7 | m)
 *   esc[nesc]       per escaped word (index << 16 | word), any order
 *
 * padded to 16 bytes: 1.5 bytes a word plus the escapes (bf16 weights, whose
 * exponents carry about 2.6 bits, escape 0.01-0.04 % of their words).
 * fp16 (mode 2; its exponent is 5 bits, 10-14, and its mantissa 10):
 *
 *   table[16]       the 15 most frequent 5-bit exponents
 *   codes[n / 2]    as bf16's
 *   low[n]          per word its mantissa's low 8 bits
 *   high[3 n / 8]   per 8 words 24 bits, 3 a word from bit 3 j on: sign << 2
 *                   and the mantissa's bits 9-8
 *   esc[nesc]       as bf16's
 *
 * 1.875 bytes a word (1.067x: the mantissa is 10 bits wide).  bf16 with
 * its exponent Huffman-coded (mode 3; the code: include/ft/codec_huff.h):
 *
 *   lens[128]       per exponent value e its code length (0: absent, 1-11),
 *                   a nibble, byte e / 2, the low nibble for even e
 *   sizes[256]      the bytes of each of the 256 sub-streams (at most 176)
 *   rest[n]         as bf16's (at byte 384, 16-aligned)
 *   streams         the sub-streams back to back (at byte 384 + n), each
 *                   from a byte: sub-stream k holds the codes of the
 *                   exponents of words k, k + 256, k + 512, ... (so n / 256
 *                   of them, or one more), MSB first, its last byte's low
 *                   bits zero
 *
 * padded to 16 bytes: a thread of the decoder's block decodes each
 * sub-stream (its start is the sum of the sizes before it), through a
 * table of the 2048 codes' 11-bit prefixes.  The code is the chunk's own,
 * canonical ((length, value) order), its lengths Huffman's cut to 11
 * bits; a chunk of one exponent codes it in 0 bits (its length says 1, its
 * sub-streams are empty).  1 byte a word plus the exponents' entropy and
 * about 0.8 % (bf16 weights: 1.45-1.5x, 1.5-2 % short of their entropy).
 *
 * Each chunk takes the smallest of the three modes (an fp16 word read as
 * bf16 has 3 mantissa bits in its exponent field: wide tables and many
 * escapes in mode 1, and more bits in mode 3; ties to the lower mode); one
 * whose coded form is not smaller than 0.97 of its raw bytes (random bits,
 * fp8, int8) is stored raw.  Each chunk has one 64-bit descriptor: its
 * byte offset in the image (bits 0-39), its mode (40-41), its escapes
 * (modes 1 and 2) or its streams' bytes (mode 3; bits 42-63).
 *
 * The GPU decoder (src/engine/codec_kernel.cu, loaded as PTX by gpu.c) and
 * ft_z_decode_at below are the same algorithm; tests compare both with
 * the input bit for bit.  So are the GPU encoder there (used when the
 * plan is applied: the weights are on the GPU) and ft_z_analyse and
 * ft_z_code below: both make the same image, byte for byte.
 */
#ifndef FT_CODEC_H
#define FT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define FT_Z_VALS 32768u                       /* 16-bit words per chunk */
#define FT_Z_CHUNK (FT_Z_VALS * 2u)            /* raw bytes per chunk */
#define FT_Z_RAW 0u
#define FT_Z_BF16 1u
#define FT_Z_FP16 2u
#define FT_Z_BF16H 3u

#define FT_Z_OFF(d) ((d) & ((1ull << 40) - 1))
#define FT_Z_MODE(d) ((unsigned)((d) >> 40) & 3u)
#define FT_Z_NESC(d) ((uint32_t)((d) >> 42))     /* modes 1, 2 */
#define FT_Z_SBYTES(d) ((uint32_t)((d) >> 42))   /* mode 3 */

/* A coded store: the image, and one descriptor per chunk. */
struct ft_z_image {
	unsigned char *data;                   /* 4096-aligned; NULL: none */
	size_t bytes;                          /* of the image */
	size_t raw_bytes;                      /* of the store it codes */
	uint64_t *desc;                        /* nchunks + 1 (the last: the end) */
	uint32_t nchunks;
	uint32_t coded;                        /* chunks not stored raw */
};

/* One chunk's analysis, the encoder's first pass (160 bytes: the GPU
 * encoder's layout too, 40 32-bit words). */
struct ft_z_meta {
	uint8_t table[16];                     /* modes 1, 2; unused entries 0 */
	uint32_t nesc;                         /* modes 1, 2 */
	uint32_t mode;
	uint32_t nused;                        /* table entries in use */
	uint32_t sbytes;                       /* mode 3: its streams' bytes */
	uint8_t lens[128];                     /* mode 3: its header's lengths; else 0 */
};

/* The two passes for one chunk of n words (n % 32 == 0 to be coded):
 * its analysis into *m, then its coded bytes (of the size its descriptor
 * gives, padding zero) into out. */
void ft_z_analyse(const uint16_t *v, uint32_t n, struct ft_z_meta *m);
void ft_z_code(const uint16_t *v, uint32_t n, const struct ft_z_meta *m, unsigned char *out);
/* z's descriptors, sizes and count of coded chunks for a store of bytes
 * from its chunks' analyses m (z->data NULL: the caller writes the image
 * from its offsets).  0, -EINVAL (bytes % 64), -ENOMEM. */
int ft_z_layout(struct ft_z_image *z, size_t bytes, const struct ft_z_meta *m);

/* Codes raw[0..bytes) (bytes a multiple of 64) into z on up to threads
 * threads (0: the online CPUs).  0, or -ENOMEM (z empty). */
int ft_z_encode(const void *raw, size_t bytes, unsigned threads, struct ft_z_image *z);
/* The same with the image's memory (4096-aligned, of n bytes) from
 * alloc(ctx, n) (NULL: out of memory); ft_z_free does not free it: the
 * caller sets z->data to NULL first. */
int ft_z_encode_in(const void *raw, size_t bytes, unsigned threads, struct ft_z_image *z,
		   void *(*alloc)(void *ctx, size_t n), void *ctx);
void ft_z_free(struct ft_z_image *z);
/* Decodes the chunk at in, of descriptor d and n words, into out (what
 * the GPU decoder does for one chunk). */
void ft_z_decode_at(const unsigned char *in, uint64_t d, uint32_t n, void *out);
/* Decodes the raw bytes [off, off + n) of z's store into out (clipped to
 * the store's end), any range; one on the chunks' grid (off and n
 * multiples of FT_Z_CHUNK, or n reaching the end) needs no memory.  0, or
 * -ENOMEM (no memory to decode a chunk in part: out not all written). */
int ft_z_read(const struct ft_z_image *z, size_t off, size_t n, void *out);
/* Where a coded chunk of n words in mode (bf16, fp16) has its escapes:
 * after the table, the codes, the rest (or low) bytes and fp16's high
 * bits (4-aligned, 16-aligned for bf16: n % 32 == 0). */
static inline size_t ft_z_esc_at(uint32_t n, unsigned mode)
{
	return 16 + (size_t)n / 2 + n + (mode == FT_Z_FP16 ? (size_t)n / 8 * 3 : 0);
}
/* The fewest image bytes a chunk of n words with descriptor d can take
 * (its coded parts, without padding): what a stored descriptor table is
 * checked against before the decoder trusts it. */
static inline uint64_t ft_z_min_span(uint64_t d, uint32_t n)
{
	switch (FT_Z_MODE(d)) {
	case FT_Z_RAW:
		return (uint64_t)n * 2;
	case FT_Z_BF16:
	case FT_Z_FP16:
		return ft_z_esc_at(n, FT_Z_MODE(d)) + (uint64_t)FT_Z_NESC(d) * 4;
	default: /* (its reader loads the streams 4 bytes at a time) */
		return 384 + (uint64_t)n + ((FT_Z_SBYTES(d) + 3u) & ~3u);
	}
}
/* Image bytes of chunks [a, b). */
static inline size_t ft_z_span(const struct ft_z_image *z, uint32_t a, uint32_t b)
{
	return FT_Z_OFF(z->desc[b]) - FT_Z_OFF(z->desc[a]);
}
/* The end of the piece that starts at chunk a and ends before chunk end:
 * the chunks whose image bytes fit in max (one at least). */
static inline uint32_t ft_z_piece_end(const struct ft_z_image *z, uint32_t a, uint32_t end,
				      size_t max)
{
	uint32_t b = a + 1;
	while (b < end && ft_z_span(z, a, b + 1) <= max)
		b++;
	return b;
}

#endif
