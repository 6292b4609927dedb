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

static uint32_t chunk_vals(size_t raw_bytes, uint32_t c)
{
	size_t left = raw_bytes / 2 - (size_t)c * FT_Z_VALS;
	return left < FT_Z_VALS ? (uint32_t)left : FT_Z_VALS;
}

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* Where a coded chunk of n words in mode (bf16, fp16) has its escapes:
 * after the table, the codes, the rest (or low) bytes and fp16's high
 * bits (4-aligned, 16-aligned for bf16: n % 32 == 0). */
static size_t esc_at(uint32_t n, unsigned mode)
{
	return 16 + (size_t)n / 2 + n + (mode == FT_Z_FP16 ? (size_t)n / 8 * 3 : 0);
}

static size_t coded_size(uint32_t n, const struct ft_z_meta *c)
{
	return c->mode == FT_Z_RAW ? align16((size_t)n * 2)
				   : align16(esc_at(n, c->mode) + (size_t)c->nesc * 4);
}

/* The (up to) 15 fullest of h's nbins bins, ties to the lower, into
 * table: how many; *covered their counts.  h is spent. */
static uint32_t pick(uint32_t *h, int nbins, uint8_t *table, uint32_t *covered)
{
	uint32_t used = 0;
	*covered = 0;
	for (; used < 15; used++) {
		int best = -1;
		for (int e = 0; e < nbins; e++)
			if (h[e] && (best < 0 || h[e] > h[best]))
				best = e;
		if (best < 0)
			break;
		table[used] = (uint8_t)best;
		*covered += h[best];
		h[best] = 0;
	}
	return used;
}

/* The chunk's mode: bf16's 15 most frequent exponents (bits 7-14) or
 * fp16's (bits 10-14: the bf16 bins eight at a time), whichever codes
 * smaller, and whether that saves at least 3 % of the chunk. */
void ft_z_analyse(const uint16_t *v, uint32_t n, struct ft_z_meta *c)
{
	uint32_t h[4][256], h16[32] = { 0 };
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
	for (int e = 0; e < 256; e++) {
		h[0][e] += h[1][e] + h[2][e] + h[3][e];
		h16[e >> 3] += h[0][e];
	}
	struct ft_z_meta b = { .mode = FT_Z_BF16 }, f = { .mode = FT_Z_FP16 };
	uint32_t covered;
	b.nused = pick(h[0], 256, b.table, &covered);
	b.nesc = n - covered;
	f.nused = pick(h16, 32, f.table, &covered);
	f.nesc = n - covered;
	*c = coded_size(n, &f) < coded_size(n, &b) ? f : b;
	if (n % 32 || coded_size(n, c) * 100 > (size_t)n * 2 * 97)
		*c = (struct ft_z_meta){ .mode = FT_Z_RAW };
}

/* Sign and mantissa bytes of the four bf16 words of x, packed. */
static uint32_t rest4(uint64_t x)
{
	uint64_t r = ((x >> 8) & 0x0080008000800080ULL) | (x & 0x007f007f007f007fULL);
	r = (r | r >> 8) & 0x0000ffff0000ffffULL;
	return (uint32_t)((r | r >> 16) & 0xffffffffULL);
}

/* An fp16 word's sign and mantissa bits 9-8 (its 3 high bits). */
static uint32_t high3(uint16_t w)
{
	return (uint32_t)(w >> 15) << 2 | ((w >> 8) & 3u);
}

void ft_z_code(const uint16_t *v, uint32_t n, const struct ft_z_meta *c, unsigned char *out)
{
	if (c->mode == FT_Z_RAW) {
		memcpy(out, v, (size_t)n * 2);
		return;
	}
	int fp16 = c->mode == FT_Z_FP16;
	unsigned shift = fp16 ? 10 : 7, mask = fp16 ? 31 : 255;
	uint8_t lut[256];
	memset(lut, 15, sizeof(lut));
	for (uint32_t k = 0; k < c->nused; k++)
		lut[c->table[k]] = (uint8_t)k;
	memcpy(out, c->table, 16);
	unsigned char *codes = out + 16, *rest = codes + n / 2, *high = rest + n;
	uint32_t *esc = (uint32_t *)(void *)(out + esc_at(n, c->mode));
	uint32_t e = 0;
	/* eight words a step: one 32-bit store of their codes, one 64-bit
	 * store of their rest (or low) bytes; escapes (a code of 15) are rare */
	for (uint32_t i = 0; i < n; i += 8) {
		uint64_t x[2];
		memcpy(x, v + i, 16);
		uint32_t cw = 0;
		for (int j = 0; j < 8; j++)
			cw |= (uint32_t)lut[(x[j >> 2] >> ((j & 3) * 16 + shift)) & mask] << (4 * j);
		memcpy(codes + i / 2, &cw, 4);
		if (fp16) {
			uint32_t hb = 0;
			for (int j = 0; j < 8; j++) {
				rest[i + j] = (unsigned char)v[i + j];
				hb |= high3(v[i + j]) << (3 * j);
			}
			unsigned char *h = high + i / 8 * 3;
			h[0] = (unsigned char)hb;
			h[1] = (unsigned char)(hb >> 8);
			h[2] = (unsigned char)(hb >> 16);
		} else {
			uint64_t rw = rest4(x[0]) | (uint64_t)rest4(x[1]) << 32;
			memcpy(rest + i, &rw, 8);
		}
		if (cw & (cw >> 1) & (cw >> 2) & (cw >> 3) & 0x11111111u)
			for (uint32_t j = 0; j < 8; j++)
				if (((cw >> (4 * j)) & 15) == 15)
					esc[e++] = (i + j) << 16 | v[i + j];
	}
	size_t used = (size_t)((unsigned char *)(esc + e) - out);
	memset(out + used, 0, align16(used) - used);
}

struct job {
	const uint16_t *raw;
	struct ft_z_image *z;
	struct ft_z_meta *zc;
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
			ft_z_analyse(v, n, &j->zc[c]);
		else
			ft_z_code(v, n, &j->zc[c], z->data + FT_Z_OFF(z->desc[c]));
	}
	return NULL;
}

/* Runs pass on chunks split over threads (the last part on this one). */
static void run_pass(const void *raw, struct ft_z_image *z, struct ft_z_meta *zc, unsigned threads,
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

int ft_z_layout(struct ft_z_image *z, size_t bytes, const struct ft_z_meta *m)
{
	memset(z, 0, sizeof(*z));
	if (bytes % 64)
		return -EINVAL;
	z->raw_bytes = bytes;
	z->nchunks = (uint32_t)((bytes + FT_Z_CHUNK - 1) / FT_Z_CHUNK);
	if (!(z->desc = malloc((z->nchunks + 1) * sizeof(*z->desc))))
		return -ENOMEM;
	size_t off = 0;
	for (uint32_t c = 0; c < z->nchunks; c++) {
		z->desc[c] = off | (uint64_t)m[c].mode << 40 | (uint64_t)m[c].nesc << 42;
		off += coded_size(chunk_vals(bytes, c), &m[c]);
		z->coded += m[c].mode != FT_Z_RAW;
	}
	z->desc[z->nchunks] = off;
	z->bytes = off;
	return 0;
}

int ft_z_encode_in(const void *raw, size_t bytes, unsigned threads, struct ft_z_image *z,
		   void *(*alloc)(void *ctx, size_t n), void *ctx)
{
	memset(z, 0, sizeof(*z));
	if (bytes % 64)
		return -EINVAL;
	uint32_t nchunks = (uint32_t)((bytes + FT_Z_CHUNK - 1) / FT_Z_CHUNK);
	if (!threads) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		threads = cpus > 0 ? (unsigned)cpus : 1;
	}
	if (threads > 64)
		threads = 64;
	if (threads > nchunks)
		threads = nchunks ? nchunks : 1;
	struct ft_z_meta *zc = malloc((nchunks + 1) * sizeof(*zc));
	if (!zc)
		return -ENOMEM;
	z->raw_bytes = bytes;
	z->nchunks = nchunks;
	run_pass(raw, z, zc, threads, 0);
	if (ft_z_layout(z, bytes, zc))
		goto nomem;
	/* in huge pages where the kernel gives them (the image is written
	 * once, right away: fewer faults), else in 4 KiB ones */
	size_t held = (z->bytes + 4095) & ~(size_t)4095;
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
	int fp16 = FT_Z_MODE(d) == FT_Z_FP16;
	const unsigned char *table = in, *codes = in + 16, *rest = codes + n / 2, *high = rest + n;
	const uint32_t *esc = (const uint32_t *)(const void *)(in + esc_at(n, FT_Z_MODE(d)));
	uint16_t *o = out;
	for (uint32_t i = 0; i < n; i++) {
		unsigned k = (codes[i >> 1] >> ((i & 1) * 4)) & 15, b = rest[i];
		if (fp16) {
			const unsigned char *h = high + i / 8 * 3;
			unsigned hb = ((unsigned)h[0] | (unsigned)h[1] << 8 | (unsigned)h[2] << 16) >>
				      (i % 8 * 3);
			o[i] = (uint16_t)((hb & 4) << 13 | (unsigned)table[k] << 10 | (hb & 3) << 8 | b);
		} else {
			o[i] = (uint16_t)((b & 0x80) << 8 | (unsigned)table[k] << 7 | (b & 0x7f));
		}
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
