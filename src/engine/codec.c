/*
 * The host side of the store's codec (include/ft/codec.h): the encoder,
 * two passes over the chunks on many threads (first each chunk's table,
 * escapes and coded size, then, at offsets known from their sum, the
 * coded chunks), and the reference decoder.
 */
#include "ft/codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One chunk's analysis (the first pass). */
struct zc {
	uint8_t table[16];
	uint32_t nesc;
	uint32_t mode;
	uint32_t nused;                    /* table entries in use */
};

static uint32_t chunk_vals(size_t raw_bytes, uint32_t c)
{
	size_t left = raw_bytes / 2 - (size_t)c * FT_Z_VALS;
	return left < FT_Z_VALS ? (uint32_t)left : FT_Z_VALS;
}

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static size_t coded_size(uint32_t n, const struct zc *c)
{
	return c->mode == FT_Z_RAW ? align16((size_t)n * 2)
				   : align16(16 + (size_t)n / 2 + n + (size_t)c->nesc * 4);
}

/* The 15 most frequent exponents, the escapes they leave, and whether
 * coding them saves at least 3 % of the chunk. */
static void analyse(const uint16_t *v, uint32_t n, struct zc *c)
{
	uint32_t h[4][256];
	memset(h, 0, sizeof(h));
	memset(c, 0, sizeof(*c));
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4) {
		h[0][(v[i] >> 7) & 255]++;
		h[1][(v[i + 1] >> 7) & 255]++;
		h[2][(v[i + 2] >> 7) & 255]++;
		h[3][(v[i + 3] >> 7) & 255]++;
	}
	for (; i < n; i++)
		h[0][(v[i] >> 7) & 255]++;
	for (int e = 0; e < 256; e++)
		h[0][e] += h[1][e] + h[2][e] + h[3][e];
	uint32_t covered = 0;
	for (; c->nused < 15; c->nused++) {
		int best = -1;
		for (int e = 0; e < 256; e++)
			if (h[0][e] && (best < 0 || h[0][e] > h[0][best]))
				best = e;
		if (best < 0)
			break;
		c->table[c->nused] = (uint8_t)best;
		covered += h[0][best];
		h[0][best] = 0;
	}
	c->nesc = n - covered;
	c->mode = FT_Z_BF16;
	if (n % 32 || coded_size(n, c) * 100 > (size_t)n * 2 * 97) {
		c->mode = FT_Z_RAW;
		c->nesc = 0;
	}
}

/* Sign and mantissa bytes of the four bf16 words of x, packed. */
static uint32_t rest4(uint64_t x)
{
	uint64_t r = ((x >> 8) & 0x0080008000800080ULL) | (x & 0x007f007f007f007fULL);
	r = (r | r >> 8) & 0x0000ffff0000ffffULL;
	return (uint32_t)((r | r >> 16) & 0xffffffffULL);
}

static void code(const uint16_t *v, uint32_t n, const struct zc *c, unsigned char *out)
{
	if (c->mode == FT_Z_RAW) {
		memcpy(out, v, (size_t)n * 2);
		return;
	}
	uint8_t lut[256];
	memset(lut, 15, sizeof(lut));
	for (uint32_t k = 0; k < c->nused; k++)
		lut[c->table[k]] = (uint8_t)k;
	memcpy(out, c->table, 16);
	unsigned char *codes = out + 16, *rest = codes + n / 2;
	uint32_t *esc = (uint32_t *)(void *)(rest + n); /* 16-aligned: n % 32 == 0 */
	uint32_t e = 0;
	/* eight words a step: one 32-bit store of their codes, one 64-bit
	 * store of their rest bytes; escapes (a code of 15) are rare */
	for (uint32_t i = 0; i < n; i += 8) {
		uint64_t x[2];
		memcpy(x, v + i, 16);
		uint32_t cw = 0;
		for (int j = 0; j < 8; j++)
			cw |= (uint32_t)lut[(x[j >> 2] >> ((j & 3) * 16 + 7)) & 255] << (4 * j);
		uint64_t rw = rest4(x[0]) | (uint64_t)rest4(x[1]) << 32;
		memcpy(codes + i / 2, &cw, 4);
		memcpy(rest + i, &rw, 8);
		if (cw & (cw >> 1) & (cw >> 2) & (cw >> 3) & 0x11111111u)
			for (uint32_t j = 0; j < 8; j++)
				if (((cw >> (4 * j)) & 15) == 15)
					esc[e++] = (i + j) << 16 | v[i + j];
	}
	size_t used = 16 + n / 2 + n + (size_t)e * 4;
	memset(out + used, 0, align16(used) - used);
}

struct job {
	const uint16_t *raw;
	struct ft_z_image *z;
	struct zc *zc;
	uint32_t a, b;                     /* chunks [a, b) */
	int pass;
};

static void *work(void *arg)
{
	struct job *j = arg;
	struct ft_z_image *z = j->z;
	for (uint32_t c = j->a; c < j->b; c++) {
		const uint16_t *v = j->raw + (size_t)c * FT_Z_VALS;
		uint32_t n = chunk_vals(z->raw_bytes, c);
		if (j->pass == 0)
			analyse(v, n, &j->zc[c]);
		else
			code(v, n, &j->zc[c], z->data + FT_Z_OFF(z->desc[c]));
	}
	return NULL;
}

/* Runs pass on chunks split over threads (the last part on this one). */
static void run_pass(const void *raw, struct ft_z_image *z, struct zc *zc, unsigned threads,
		     int pass)
{
	struct job jobs[64];
	pthread_t tid[64];
	int started[64] = { 0 };
	for (unsigned k = 0; k < threads; k++) {
		jobs[k] = (struct job){ raw, z, zc, (uint32_t)((uint64_t)z->nchunks * k / threads),
					(uint32_t)((uint64_t)z->nchunks * (k + 1) / threads), pass };
		if (k + 1 < threads)
			started[k] = !pthread_create(&tid[k], NULL, work, &jobs[k]);
		if (!started[k] && k + 1 < threads)
			work(&jobs[k]); /* no thread: done here */
	}
	work(&jobs[threads - 1]);
	for (unsigned k = 0; k + 1 < threads; k++)
		if (started[k])
			pthread_join(tid[k], NULL);
}

int ft_z_encode(const void *raw, size_t bytes, unsigned threads, struct ft_z_image *z)
{
	return ft_z_encode_in(raw, bytes, threads, z, NULL, NULL);
}

int ft_z_encode_in(const void *raw, size_t bytes, unsigned threads, struct ft_z_image *z,
		   void *(*alloc)(void *ctx, size_t n), void *ctx)
{
	memset(z, 0, sizeof(*z));
	if (bytes % 64)
		return -EINVAL;
	z->raw_bytes = bytes;
	z->nchunks = (uint32_t)((bytes + FT_Z_CHUNK - 1) / FT_Z_CHUNK);
	if (!threads) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		threads = cpus > 0 ? (unsigned)cpus : 1;
	}
	if (threads > 64)
		threads = 64;
	if (threads > z->nchunks)
		threads = z->nchunks ? z->nchunks : 1;
	struct zc *zc = malloc((z->nchunks + 1) * sizeof(*zc));
	z->desc = malloc((z->nchunks + 1) * sizeof(*z->desc));
	if (!zc || !z->desc)
		goto nomem;
	run_pass(raw, z, zc, threads, 0);
	size_t off = 0;
	for (uint32_t c = 0; c < z->nchunks; c++) {
		z->desc[c] = off | (uint64_t)zc[c].mode << 40 | (uint64_t)zc[c].nesc << 42;
		off += coded_size(chunk_vals(bytes, c), &zc[c]);
		z->coded += zc[c].mode != FT_Z_RAW;
	}
	z->desc[z->nchunks] = off;
	z->bytes = off;
	/* in huge pages where the kernel gives them (the image is written
	 * once, right away: fewer faults), else in 4 KiB ones */
	size_t held = (off + 4095) & ~(size_t)4095;
	if (alloc) {
		if (!(z->data = alloc(ctx, held)))
			goto nomem;
	} else if (posix_memalign((void **)&z->data, held >= (8u << 20) ? 2u << 20 : 4096, held)) {
		z->data = NULL;
		goto nomem;
	} else if (held >= (8u << 20)) {
		madvise(z->data, held, MADV_HUGEPAGE);
	}
	run_pass(raw, z, zc, threads, 1);
	free(zc);
	return 0;
nomem:
	free(zc);
	ft_z_free(z); /* (no image was made) */
	return -ENOMEM;
}

void ft_z_free(struct ft_z_image *z)
{
	free(z->data);
	free(z->desc);
	memset(z, 0, sizeof(*z));
}

void ft_z_decode_at(const unsigned char *in, uint64_t d, uint32_t n, void *out)
{
	if (FT_Z_MODE(d) == FT_Z_RAW) {
		memcpy(out, in, (size_t)n * 2);
		return;
	}
	const unsigned char *table = in, *codes = in + 16, *rest = codes + n / 2;
	const uint32_t *esc = (const uint32_t *)(const void *)(rest + n);
	uint16_t *o = out;
	for (uint32_t i = 0; i < n; i++) {
		unsigned k = (codes[i >> 1] >> ((i & 1) * 4)) & 15, b = rest[i];
		o[i] = (uint16_t)((b & 0x80) << 8 | (unsigned)table[k] << 7 | (b & 0x7f));
	}
	for (uint32_t k = 0; k < FT_Z_NESC(d); k++)
		o[esc[k] >> 16] = (uint16_t)esc[k];
}

static void decode_chunk(const struct ft_z_image *z, uint32_t c, void *out)
{
	ft_z_decode_at(z->data + FT_Z_OFF(z->desc[c]), z->desc[c], chunk_vals(z->raw_bytes, c), out);
}

int ft_z_read(const struct ft_z_image *z, size_t off, size_t n, void *out)
{
	unsigned char *o = out, *part = NULL;
	if (off >= z->raw_bytes)
		return 0;
	if (n > z->raw_bytes - off)
		n = z->raw_bytes - off;
	for (uint32_t c = (uint32_t)(off / FT_Z_CHUNK); n && c < z->nchunks; c++) {
		size_t m = (size_t)chunk_vals(z->raw_bytes, c) * 2, skip = off % FT_Z_CHUNK;
		size_t take = m - skip < n ? m - skip : n;
		if (!skip && take == m) {
			decode_chunk(z, c, o);
		} else {
			/* a chunk in part (a range that does not begin or end on
			 * the chunks' grid: a weight's bytes in a raw-mode
			 * trap's store), decoded aside */
			if (!part && !(part = malloc(FT_Z_CHUNK)))
				return -ENOMEM;
			decode_chunk(z, c, part);
			memcpy(o, part + skip, take);
		}
		o += take;
		off += take;
		n -= take;
	}
	free(part);
	return 0;
}
