/*
 * The host side of the store's codec (include/ft/codec.h): the encoder,
 * two passes over the chunks on many threads (first each chunk's table or
 * code, escapes and coded size, then, at offsets known from their sum, the
 * coded chunks), and the reference decoder.
 */
#include "ft/codec.h"
#include "ft/codec_huff.h"

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

/* A chunk's descriptor bits above its offset: its mode and the mode's
 * count (escapes, or mode 3's streams' bytes). */
static uint64_t desc_of(const struct ft_z_meta *c)
{
	uint64_t arg = c->mode == FT_Z_BF16H ? c->sbytes : c->nesc;
	return (uint64_t)c->mode << 40 | arg << 42;
}

/* A chunk's image bytes: its coded parts (ft_z_min_span, what a stored
 * descriptor table is checked against), padded to 16. */
static size_t coded_size(uint32_t n, const struct ft_z_meta *c)
{
	return align16(ft_z_min_span(desc_of(c), n));
}

/* A bf16 word from its rest byte (sign << 7 | mantissa) and exponent. */
static uint16_t bf16_word(unsigned r, unsigned e)
{
	return (uint16_t)((r & 0x80) << 8 | e << 7 | (r & 0x7f));
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

/* Sub-stream k's bits (words k, k + 256, ... of v) into bits[k], by the
 * code lengths len. */
static void stream_bits(const uint16_t *v, uint32_t n, const unsigned char *len, uint32_t *bits)
{
	memset(bits, 0, FT_ZH_STREAMS * sizeof(*bits));
	/* four words a load (n % 32 == 0, or the chunk is raw whatever its
	 * size) */
	for (uint32_t i = 0; i + 4 <= n; i += 4) {
		uint64_t x;
		memcpy(&x, v + i, 8);
		uint32_t *b = bits + i % FT_ZH_STREAMS;
		b[0] += len[(x >> 7) & 255];
		b[1] += len[(x >> 23) & 255];
		b[2] += len[(x >> 39) & 255];
		b[3] += len[(x >> 55) & 255];
	}
}

/* The present symbols of counts h (at most 32768 each) into sym, their
 * counts into w, in ascending (count, value) order (ft_zh_rank's): from
 * value order, stable by the counts' low byte, then their high byte
 * (ft_zh_rank's O(256) per symbol is the GPU's, one a thread).  How many. */
static unsigned order(const uint32_t *h, unsigned char *sym, uint32_t *w)
{
	unsigned char tmp[FT_ZH_SYMS];
	unsigned np = 0;
	for (unsigned e = 0; e < FT_ZH_SYMS; e++)
		if (h[e])
			tmp[np++] = (unsigned char)e;
	for (unsigned pass = 0; pass < 2; pass++) {
		const unsigned char *from = pass ? sym : tmp;
		unsigned char *to = pass ? tmp : sym;
		uint32_t at[257] = { 0 };
		for (unsigned k = 0; k < np; k++)
			at[((h[from[k]] >> (8 * pass)) & 255) + 1]++;
		for (unsigned b = 0; b < 256; b++)
			at[b + 1] += at[b];
		for (unsigned k = 0; k < np; k++)
			to[at[(h[from[k]] >> (8 * pass)) & 255]++] = from[k];
	}
	for (unsigned k = 0; k < np; k++)
		w[k] = h[sym[k] = tmp[k]];
	return np;
}

/* Mode 3's analysis of the chunk of n words v with exponent counts h
 * into *c: the code's lengths (as the header has them) and the streams'
 * bytes (each sub-stream rounded up to a byte).  0, or -1 when its size
 * cannot be below beat (the streams take all their codes' bits at
 * least; then the words need not be read again: mode 3 would not be
 * chosen, as it is not on the GPU, which reads them anyway). */
static int huff_analyse(const uint16_t *v, uint32_t n, const uint32_t *h, size_t beat,
			struct ft_z_meta *c)
{
	uint32_t w[FT_ZH_SYMS], bits[FT_ZH_STREAMS];
	unsigned char sym[FT_ZH_SYMS], len[FT_ZH_SYMS] = { 0 };
	unsigned np = order(h, sym, w);
	ft_zh_lengths(w, sym, np, len);
	*c = (struct ft_z_meta){ .mode = FT_Z_BF16H };
	uint64_t all = 0;
	for (unsigned e = 0; e < FT_ZH_SYMS; e++) {
		c->lens[e / 2] |= (uint8_t)(len[e] << (e & 1) * 4);
		all += (uint64_t)h[e] * len[e];
	}
	if (np == 1)
		return 0; /* 0 bits a word: no streams */
	if (align16(FT_ZH_HEAD + (size_t)n + (size_t)(all + 7) / 8) >= beat)
		return -1;
	stream_bits(v, n, len, bits);
	for (unsigned k = 0; k < FT_ZH_STREAMS; k++)
		c->sbytes += (bits[k] + 7) / 8;
	return 0;
}

/* The chunk's mode: bf16's 15 most frequent exponents (bits 7-14) or
 * fp16's (bits 10-14: the bf16 bins eight at a time) or bf16's exponents
 * Huffman-coded, whichever codes smallest (ties to the lower mode), and
 * whether that saves at least 3 % of the chunk. */
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
	struct ft_z_meta b = { .mode = FT_Z_BF16 }, f = { .mode = FT_Z_FP16 }, hc;
	uint32_t covered, hb[256];
	memcpy(hb, h[0], sizeof(hb)); /* (pick spends h) */
	b.nused = pick(h[0], 256, b.table, &covered);
	b.nesc = n - covered;
	f.nused = pick(h16, 32, f.table, &covered);
	f.nesc = n - covered;
	*c = coded_size(n, &f) < coded_size(n, &b) ? f : b;
	/* mode 3 where smaller, if that can pass the test below */
	size_t beat = coded_size(n, c), most = (size_t)n * 2 * 97 / 100 + 1;
	if (n % 32 == 0 && !huff_analyse(v, n, hb, beat < most ? beat : most, &hc) &&
	    coded_size(n, &hc) < beat)
		*c = hc;
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

/* Sub-streams the host codes or decodes side by side: 32 words of a row
 * of 256 are a cache line (so the chunk is still read or written once),
 * their states and slots a few KiB of stack (an application's thread
 * runs the encoder's last part). */
#define GROUP 32u

/* Mode 3's sub-streams [k0, k0 + GROUP) of v by the code (code, len) into
 * out, their sizes into sizes: two codes of each at a time (words i + k
 * and i + 256 + k), each into a slot of its longest, then moved up behind
 * the one before (no pass to count their bits first).  Their bytes. */
static uint32_t code_group(const uint16_t *v, uint32_t n, uint32_t k0, const uint16_t *code,
			   const unsigned char *len, unsigned char *sizes, unsigned char *out)
{
	unsigned char slot[GROUP][FT_ZH_MAX];
	struct ft_zh_put b[GROUP];
	uint32_t o = 0;
	for (unsigned q = 0; q < GROUP; q++)
		b[q] = (struct ft_zh_put){ .out = slot[q] };
	for (uint32_t i = k0; i < n; i += 2 * FT_ZH_STREAMS)
		for (uint32_t q = 0; q < GROUP && i + q < n; q++) {
			unsigned e = (v[i + q] >> 7) & 255;
			uint32_t c = code[e], l = len[e];
			if (i + FT_ZH_STREAMS + q < n) {
				unsigned f = (v[i + FT_ZH_STREAMS + q] >> 7) & 255;
				c = c << len[f] | code[f];
				l += len[f];
			}
			ft_zh_put(&b[q], c, l);
		}
	for (unsigned q = 0; q < GROUP; q++) {
		ft_zh_flush(&b[q]);
		sizes[k0 + q] = (unsigned char)(b[q].out - slot[q]);
		memcpy(out + o, slot[q], sizes[k0 + q]);
		o += sizes[k0 + q];
	}
	return o;
}

/* Mode 3's coded chunk: the header, the rest bytes, the sub-streams by
 * the canonical code of the lengths in c (on the GPU one a thread). */
static void huff_code(const uint16_t *v, uint32_t n, const struct ft_z_meta *c,
		      unsigned char *out)
{
	uint16_t start[FT_ZH_SYMS], ent[FT_ZH_SYMS], code[FT_ZH_SYMS] = { 0 };
	unsigned char len[FT_ZH_SYMS] = { 0 };
	unsigned np = ft_zh_canon(c->lens, start, ent);
	for (unsigned p = 0; p < np; p++) {
		unsigned e = ent[p] & 255, l = ent[p] >> 8;
		len[e] = (unsigned char)l;
		code[e] = (uint16_t)(start[p] >> (FT_ZH_L - l));
	}
	memcpy(out, c->lens, sizeof(c->lens));
	unsigned char *sizes = out + sizeof(c->lens), *rest = out + FT_ZH_HEAD, *streams = rest + n;
	for (uint32_t i = 0; i < n; i += 8) {
		uint64_t x[2];
		memcpy(x, v + i, 16);
		uint64_t rw = rest4(x[0]) | (uint64_t)rest4(x[1]) << 32;
		memcpy(rest + i, &rw, 8);
	}
	uint32_t o = 0;
	for (uint32_t k0 = 0; k0 < FT_ZH_STREAMS; k0 += GROUP)
		o += code_group(v, n, k0, code, len, sizes, streams + o);
	memset(streams + o, 0, align16(FT_ZH_HEAD + n + o) - (FT_ZH_HEAD + n + o));
}

void ft_z_code(const uint16_t *v, uint32_t n, const struct ft_z_meta *c, unsigned char *out)
{
	if (c->mode == FT_Z_RAW) {
		memcpy(out, v, (size_t)n * 2);
		return;
	}
	if (c->mode == FT_Z_BF16H) {
		huff_code(v, n, c, out);
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
	uint32_t *esc = (uint32_t *)(void *)(out + ft_z_esc_at(n, c->mode));
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
		z->desc[c] = off | desc_of(&m[c]);
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

/* Mode 3's chunk at in (what a block of the GPU decoder does, one
 * sub-stream after the other): the decode and pair tables from the
 * header, each sub-stream k from the sum of the sizes before it, one or
 * two symbols a lookup (words j, j + 256), each joined with its word's
 * rest byte. */
static void huff_decode(const unsigned char *in, uint64_t d, uint32_t n, uint16_t *o)
{
	uint16_t start[FT_ZH_SYMS], ent[FT_ZH_SYMS], tab[1u << FT_ZH_L];
	uint32_t pair[1u << FT_ZH_L];
	unsigned np = ft_zh_canon(in, start, ent);
	ft_zh_fill(start, ent, np, 0, 1u << FT_ZH_L, tab);
	ft_zh_pairs(tab, 0, 1u << FT_ZH_L, pair);
	const unsigned char *sizes = in + FT_ZH_HEAD - FT_ZH_STREAMS, *rest = in + FT_ZH_HEAD;
	const unsigned char *streams = rest + n;
	for (uint32_t k = 0, o0 = 0; k < FT_ZH_STREAMS; o0 += sizes[k++]) {
		struct ft_zh_bits b;
		ft_zh_open(&b, streams, o0, sizes[k], FT_Z_SBYTES(d));
		for (uint32_t j = k; j < n;) {
			unsigned c, s;
			ft_zh_refill(&b, streams);
			s = ft_zh_take2(&b, pair, &c);
			o[j] = bf16_word(rest[j], s & 255u);
			if (c == 2 && j + FT_ZH_STREAMS < n)
				o[j + FT_ZH_STREAMS] = bf16_word(rest[j + FT_ZH_STREAMS], s >> 8);
			j += c * FT_ZH_STREAMS;
		}
	}
}

void ft_z_decode_at(const unsigned char *in, uint64_t d, uint32_t n, void *out)
{
	if (FT_Z_MODE(d) == FT_Z_RAW) {
		memcpy(out, in, (size_t)n * 2);
		return;
	}
	if (FT_Z_MODE(d) == FT_Z_BF16H) {
		huff_decode(in, d, n, out);
		return;
	}
	int fp16 = FT_Z_MODE(d) == FT_Z_FP16;
	const unsigned char *table = in, *codes = in + 16, *rest = codes + n / 2, *high = rest + n;
	const uint32_t *esc = (const uint32_t *)(const void *)(in + ft_z_esc_at(n, FT_Z_MODE(d)));
	uint16_t *o = out;
	for (uint32_t i = 0; i < n; i++) {
		unsigned k = (codes[i >> 1] >> ((i & 1) * 4)) & 15, b = rest[i];
		if (fp16) {
			const unsigned char *h = high + i / 8 * 3;
			unsigned hb = ((unsigned)h[0] | (unsigned)h[1] << 8 | (unsigned)h[2] << 16) >>
				      (i % 8 * 3);
			o[i] = (uint16_t)((hb & 4) << 13 | (unsigned)table[k] << 10 | (hb & 3) << 8 | b);
		} else {
			o[i] = bf16_word(b, table[k]);
		}
	}
	for (uint32_t k = 0; k < FT_Z_NESC(d); k++)
		if (esc[k] >> 16 < n) /* (a damaged image's: none written outside) */
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
