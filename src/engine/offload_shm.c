/*
 * One host store for the processes of a host that plan the same weights
 * (FT_SHM_ENABLED; the segment: include/ft/shm.h).  Its key is the
 * contents, not addresses: the offloaded traps in order with their runs'
 * sizes and checksums (computed on the GPU from the weights about to leave
 * it), the chunk size, the transfer mode and whether the store is coded.
 * The first process fills the segment as its private store would be
 * filled, and publishes it; the others compare every trap's run checksums
 * with their own before they map it, and register the mapping themselves.
 * What a process's own key's segment does not hold (another plan, or a
 * discovery that found other weights or extents: another key) it maps,
 * checked the same way, from the other published segments of the
 * namespace that hold those traps, and fills only the rest (into its own
 * segment when it creates one).
 * Nothing writes the store once filled (a write into an offloaded weight
 * brings its trap back to the GPU from the store), so no process's writes
 * reach another's weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ft/log.h"
#include "offload_int.h"

/* Checksums of n ranges on the GPU (malloc'd), or NULL. */
static uint64_t *gpu_sums(struct ft_offload *o, const uint64_t *addr, const uint64_t *bytes,
			  uint32_t n)
{
	uint64_t *sums = malloc((n + 1) * sizeof(*sums));
	if (sums && (!n || !o->sums_gpu || ft_gpu_checksums(o->sums_gpu, addr, bytes, n, sums))) {
		free(sums);
		sums = NULL;
	}
	return sums;
}

/* The offloaded traps' run checksums, in trap and run order (o->shm_sums). */
static int run_sums(struct ft_offload *o)
{
	uint32_t m = 0;
	for (uint32_t t = 0; t < o->ntraps; t++)
		m += o->t[t].block >= 0 ? o->t[t].nruns : 0;
	uint64_t *addr = malloc((m + 1) * sizeof(*addr)), *bytes = malloc((m + 1) * sizeof(*bytes));
	for (uint32_t t = 0, k = 0; addr && bytes && t < o->ntraps; t++)
		if (o->t[t].block >= 0)
			k += ft_off_spans(&o->t[t], addr + k, bytes + k);
	o->shm_sums = addr && bytes ? gpu_sums(o, addr, bytes, m) : NULL;
	o->nsums = m;
	free(addr);
	free(bytes);
	return o->shm_sums ? 0 : -1;
}

static int by_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] != y[1] ? (x[1] < y[1] ? -1 : 1) : 0;
}

/* The segment's key: the model (every weight of a trap, offloaded or not:
 * its size and checksum, as a set), the chunk size and the settings the
 * plan depends on; not the plan itself, which timings may make differ
 * from process to process (a follower maps the traps both offload). */
static int key_of(struct ft_offload *o, uint64_t key[2])
{
	uint32_t n = 0;
	uint64_t *addr = malloc((o->nw + 1) * sizeof(*addr));
	uint64_t *w = malloc((4 + 2 * (size_t)o->nw) * sizeof(*w));
	for (uint32_t i = 0; addr && w && i < o->nw; i++)
		if (o->w[i].trap < o->ntraps) {
			addr[n] = o->w[i].lo;
			w[4 + 2 * n++] = o->w[i].hi - o->w[i].lo;
		}
	uint64_t *bytes = malloc((n + 1) * sizeof(*bytes));
	for (uint32_t i = 0; bytes && w && i < n; i++)
		bytes[i] = w[4 + 2 * i];
	uint64_t *sums = addr && bytes && w ? gpu_sums(o, addr, bytes, n) : NULL;
	if (sums) {
		for (uint32_t i = 0; i < n; i++)
			w[4 + 2 * i + 1] = sums[i];
		qsort(w + 4, n, 2 * sizeof(*w), by_pair);
		w[0] = FT_SHM_VERSION;
		w[1] = o->chunk;
		w[2] = o->shm_settings;
		w[3] = n;
		ft_shm_key(w, 4 + 2 * (size_t)n, key);
	}
	free(addr);
	free(bytes);
	free(w);
	free(sums);
	return sums ? 0 : -1;
}

/* Checksums of traps[0..n)'s stores (the bytes held: an image, or raw),
 * on the GPU through their device mappings (the host's where the store is
 * not registered): 0, or -1. */
static int store_sums(struct ft_offload *o, const uint32_t *traps, uint32_t n, uint64_t *out)
{
	const struct ft_real *r = o->real;
	uint64_t *addr = malloc((n + 1) * sizeof(*addr)), *bytes = malloc((n + 1) * sizeof(*bytes));
	uint32_t m = 0, *at = malloc((n + 1) * sizeof(*at));
	int rc = addr && bytes && at ? 0 : -1;
	for (uint32_t k = 0; !rc && k < n; k++) {
		const struct ft_off_trap *x = &o->t[traps[k]];
		size_t held = x->z.data ? x->z.bytes : (size_t)x->nchunks * o->chunk;
		CUdeviceptr d = 0;
		if (o->pageable || !r->cuMemHostGetDevicePointer_v2 ||
		    r->cuMemHostGetDevicePointer_v2(&d, x->host, 0)) {
			out[k] = ft_off_host_checksum(x->host, held);
			continue;
		}
		addr[m] = d;
		bytes[m] = held;
		at[m++] = k;
	}
	uint64_t *sums = !rc && m ? gpu_sums(o, addr, bytes, m) : NULL;
	if (m && !sums)
		rc = -1;
	for (uint32_t i = 0; !rc && i < m; i++)
		out[at[i]] = sums[i];
	free(sums);
	free(addr);
	free(bytes);
	free(at);
	return rc;
}

/* Segment s's run checksums, entry after entry (first[k]: entry k's
 * first), or NULL (one outside the file). */
static uint64_t *table_sums(struct ft_shm *s, uint32_t *first)
{
	const struct ft_shm_entry *e = s->ent;
	uint32_t ne = s->head->nent;
	uint64_t total = 0;
	for (uint32_t k = 0; k < ne; k++) {
		first[k] = (uint32_t)total;
		total += e[k].nruns;
		if (total > s->end / sizeof(uint64_t))
			return NULL;
	}
	uint64_t *sums = malloc((total + 1) * sizeof(*sums));
	for (uint32_t k = 0; sums && k < ne; k++)
		if (ft_shm_read(s, e[k].sums, sums + first[k], e[k].nruns * sizeof(*sums))) {
			free(sums);
			return NULL;
		}
	return sums;
}

/* A hash of trap x's runs' lengths, in order: a store holds x's weights
 * only if its runs had the same lengths (a checksum, sum of words times
 * 2i + 1, is the same for a run and the run with zero words after it, so
 * runs that split the same bytes otherwise could pass for each other). */
static uint64_t shape_of(const struct ft_off_trap *x)
{
	uint64_t key[2] = { 0, 0 }, *w = malloc((x->nruns + 1) * sizeof(*w));
	if (!w)
		return 0; /* (entries are written with a shape: none matches 0 but by chance) */
	for (uint32_t i = 0; i < x->nruns; i++)
		w[i] = x->runs[i].hi - x->runs[i].lo;
	ft_shm_key(w, x->nruns, key);
	free(w);
	return key[0];
}

/* The entry (not used yet) that holds trap x's weights: the same runs'
 * lengths and checksums and bytes, a store this process can load (coded
 * only where it decodes), whole inside the file; -1 none. */
static int entry_for(struct ft_offload *o, struct ft_shm *s, const struct ft_off_trap *x,
		     const uint64_t *xs, const uint64_t *es, const uint32_t *first,
		     const unsigned char *used)
{
	uint64_t xshape = shape_of(x);
	const struct ft_shm_entry *e = s->ent;
	uint64_t raw = (uint64_t)x->nchunks * o->chunk;
	for (uint32_t k = 0; k < s->head->nent; k++) {
		const struct ft_shm_entry *y = &e[k];
		int shape = y->desc ? o->codec && y->bytes < raw &&
					      y->znchunks == (raw + FT_Z_CHUNK - 1) / FT_Z_CHUNK
				    : y->bytes == raw;
		if (!used[k] && shape && y->nruns == x->nruns && y->raw_bytes == raw &&
		    y->shape == xshape &&
		    y->off + y->bytes <= s->end &&
		    !memcmp(es + first[k], xs, x->nruns * sizeof(*xs)))
			return (int)k;
	}
	return -1;
}

/* Whether n descriptors describe an image of bytes bytes for raw bytes:
 * offsets from 0 to bytes, each chunk within its bounds (a damaged or
 * forged table would make the decoder read outside the image). */
static int descs_ok(const uint64_t *d, uint32_t n, uint64_t bytes, uint64_t raw)
{
	if (FT_Z_OFF(d[0]) || FT_Z_OFF(d[n]) != bytes)
		return 0;
	for (uint32_t c = 0; c < n; c++) {
		uint64_t vals = raw / 2 - (uint64_t)c * FT_Z_VALS, span;
		if (vals > FT_Z_VALS)
			vals = FT_Z_VALS;
		/* (the decoders load 8 and 16 bytes at a time from a chunk's
		 * start, which the encoder places on 16) */
		if (FT_Z_OFF(d[c + 1]) < FT_Z_OFF(d[c]) || FT_Z_OFF(d[c]) % 16)
			return 0;
		span = FT_Z_OFF(d[c + 1]) - FT_Z_OFF(d[c]);
		unsigned mode = FT_Z_MODE(d[c]);
		if (span < ft_z_min_span(d[c], (uint32_t)vals) ||
		    ((mode == FT_Z_BF16 || mode == FT_Z_FP16) && FT_Z_NESC(d[c]) > vals))
			return 0;
	}
	return 1;
}

/* Trap x's store mapped from entry y of segment seg (s) and registered:
 * 0, -2 when its descriptors are not the ones stored, or -1. */
static int map_trap(struct ft_offload *o, struct ft_shm *s, uint8_t seg, struct ft_off_trap *x,
		    const struct ft_shm_entry *y, const uint64_t *sums)
{
	const struct ft_real *r = o->real;
	size_t len = (y->bytes + 4095) & ~(size_t)4095;
	/* read-only: a stray write in this process must not reach the
	 * others' weights (where the driver registers read-only memory);
	 * mapped for the device: the check of its bytes */
	unsigned flags = CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY;
	unsigned char *p = ft_shm_map(s, y->off, len, 0);
	if (p && ft_off_register(o, x, p, len, flags)) {
		munmap(p, len);
		flags &= ~(unsigned)CU_MEMHOSTREGISTER_READ_ONLY;
		if ((p = ft_shm_map(s, y->off, len, 1)) && ft_off_register(o, x, p, len, flags)) {
			munmap(p, len);
			p = NULL;
		}
		if (p)
			ft_info_once("FT_SHM_ENABLED: the driver cannot register read-only host memory: "
				     "the shared store is mapped writable");
	}
	if (!p)
		return -1;
	x->host = p;
	x->shm_len = len;
	x->shm_off = y->off;
	x->shm_seg = seg;
	if (o->gpu) { /* FT_VERIFY's */
		if (!(x->sums = malloc((x->nruns + 1) * sizeof(*x->sums))))
			return -1;
		memcpy(x->sums, sums, x->nruns * sizeof(*sums));
	}
	if (!y->desc)
		return 0;
	struct ft_z_image *z = &x->z;
	size_t db = (y->znchunks + 1) * sizeof(*z->desc);
	z->desc = malloc(db);
	if (!z->desc || ft_shm_read(s, y->desc, z->desc, db))
		return -1; /* (undone by the caller) */
	if (ft_off_host_checksum((const unsigned char *)z->desc, db) != y->desc_sum ||
	    !descs_ok(z->desc, y->znchunks, y->bytes, y->raw_bytes))
		return -2; /* damaged */
	if (r->cuMemAlloc_v2(&x->zdesc, db) || r->cuMemcpyHtoD_v2(x->zdesc, z->desc, db))
		return -1;
	z->data = p;
	z->bytes = y->bytes;
	z->raw_bytes = y->raw_bytes;
	z->nchunks = y->znchunks;
	z->coded = y->zcoded;
	return 0;
}

/* Traps traps[0..n) unmapped (those mapped). */
static void unmap(struct ft_offload *o, const uint32_t *traps, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		struct ft_off_trap *x = &o->t[traps[k]];
		if (x->zdesc)
			o->real->cuMemFree_v2(x->zdesc);
		x->zdesc = 0;
		x->z.data = NULL;
		ft_z_free(&x->z);
		free(x->sums);
		x->sums = NULL;
		if (x->host) {
			if (!o->pageable)
				o->real->cuMemHostUnregister(x->host);
			ft_off_store_free(o, x, x->host);
			x->host = NULL;
		}
	}
}

/* The offloaded traps not mapped yet that segment seg (s) holds, mapped
 * from it: how many, with their bytes of store; -1 when the segment is
 * refused: a mapping or its registration failed, or the bytes mapped are
 * not the ones stored (-2; nothing stays mapped from it). */
static int attach(struct ft_offload *o, struct ft_shm *s, uint8_t seg, uint64_t *bytes)
{
	uint32_t ne = s->head->nent, *first = malloc((ne + 1) * sizeof(*first));
	uint32_t *mine = malloc((o->ntraps + 1) * sizeof(*mine)), *theirs = malloc((ne + 1) * sizeof(*theirs));
	unsigned char *used = calloc(ne + 1, 1);
	uint64_t *es = first ? table_sums(s, first) : NULL, *held = NULL;
	int n = 0, rc = es && mine && theirs && used ? 0 : -1;
	for (uint32_t t = 0, r = 0; !rc && t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (x->block < 0)
			continue;
		int k = x->host ? -1 : entry_for(o, s, x, o->shm_sums + r, es, first, used);
		if (k >= 0) {
			used[k] = 1;
			mine[n] = t;
			theirs[n++] = (uint32_t)k;
			rc = map_trap(o, s, seg, x, &s->ent[k], o->shm_sums + r);
		}
		r += x->nruns;
	}
	/* the bytes mapped are the ones the creator stored from those
	 * weights (not a store cut short or changed since) */
	if (!rc && n && (!(held = malloc(n * sizeof(*held))) || store_sums(o, mine, (uint32_t)n, held)))
		rc = -1;
	*bytes = 0;
	for (int i = 0; !rc && i < n; i++) {
		rc = held[i] == s->ent[theirs[i]].store_sum ? 0 : -2;
		*bytes += s->ent[theirs[i]].bytes;
	}
	if (rc && mine)
		unmap(o, mine, (uint32_t)n);
	if (rc)
		*bytes = 0;
	free(first);
	free(mine);
	free(theirs);
	free(used);
	free(es);
	free(held);
	return rc ? rc : n;
}

uint64_t ft_off_text_key(const char *text)
{
	uint64_t w[64] = { 0 }, key[2] = { 0, 0 };
	size_t n = text ? strlen(text) : 0;
	memcpy(w, text ? text : "", n < sizeof(w) ? n : sizeof(w));
	ft_shm_key(w, 64, key);
	return key[0];
}

/* How many offloaded traps have no store yet. */
static uint32_t unmapped(const struct ft_offload *o)
{
	uint32_t n = 0;
	for (uint32_t t = 0; t < o->ntraps; t++)
		n += o->t[t].block >= 0 && !o->t[t].host;
	return n;
}

struct scan {
	struct ft_offload *o;
	uint32_t traps, segs;
	uint64_t bytes;
};

/* ft_shm_each's: the traps not mapped yet that segment s holds, mapped
 * from it (s kept); else s closed. */
static int scan_one(struct ft_shm *s, void *ctx)
{
	struct scan *c = ctx;
	struct ft_offload *o = c->o;
	if (o->nshm_more >= FT_OFF_SHM_MORE || !unmapped(o))
		return -1;
	uint64_t bytes;
	int n = attach(o, s, (uint8_t)(o->nshm_more + 1), &bytes);
	if (n == -2)
		ft_warn("FT_SHM_ENABLED: %s: its bytes differ from what was stored from weights "
			"like this process's (a damaged copy): not used", s->path);
	if (n <= 0)
		return 0;
	o->shm_more[o->nshm_more++] = *s;
	c->traps += (uint32_t)n;
	c->segs++;
	c->bytes += bytes;
	return 1;
}

void ft_off_shm_begin(struct ft_offload *o)
{
	if (!o->shm_dir)
		return;
	uint64_t key[2];
	if (run_sums(o) || key_of(o, key)) {
		ft_warn("FT_SHM_ENABLED: the weights cannot be checksummed on the GPU (the shared "
			"store's key and check): this process keeps a private store");
		return;
	}
	char why[512];
	uint32_t off = 0;
	for (uint32_t t = 0; t < o->ntraps; t++)
		off += o->t[t].block >= 0;
	uint64_t bytes = 0;
	int n = 0, role = ft_shm_open(&o->shm, o->shm_dir, o->shm_ns, key, o->shm_wait, why,
				       sizeof(why));
	if (role < 0)
		ft_warn("FT_SHM_ENABLED: %s; the store is this process's but for what other "
			"processes' segments hold", why);
	if (role == FT_SHM_FOLLOWER && (n = attach(o, &o->shm, 0, &bytes)) > 0)
		ft_info("FT_SHM_ENABLED: %d of the %u offloaded traps (%.1f MiB of store) mapped from "
			"%s, filled by process %u", n, off, (double)bytes / 1048576.0, o->shm.path,
			o->shm.head->creator);
	if (role == FT_SHM_FOLLOWER && n < 0)
		ft_warn("FT_SHM_ENABLED: %s: %s", o->shm.path,
			n == -2 ? "its bytes differ from what was stored from weights like this "
				  "process's (a damaged copy): not used"
				: "cannot map or register it (host memory, or the locked-memory limit, "
				  "ulimit -l): not used");
	if (role == FT_SHM_FOLLOWER && n <= 0)
		ft_shm_close(&o->shm);
	/* the traps this model's segment does not hold (none, another plan
	 * of it, or its discovery found other weights: another key), from
	 * the segments of the namespace that do; each checked as above */
	struct scan c = { .o = o };
	if (unmapped(o) && (o->shm_more = calloc(FT_OFF_SHM_MORE, sizeof(*o->shm_more)))) {
		/* (not this model's again, refused or not) */
		ft_shm_each(o->shm_dir, o->shm_ns, o->shm.path[0] ? o->shm.path : NULL, scan_one,
			    &c, why, sizeof(why));
		if (why[0])
			ft_info("FT_SHM_ENABLED: %s", why);
	}
	if (c.traps)
		ft_info("FT_SHM_ENABLED: %u of the %u offloaded traps (%.1f MiB of store) mapped from "
			"%u segment%s that processes whose weights were found otherwise filled",
			c.traps, off, (double)c.bytes / 1048576.0, c.segs, c.segs > 1 ? "s" : "");
	FT_STAT_ADD(o->stats, shm_attached_bytes, bytes + c.bytes);
	uint32_t left = unmapped(o);
	if (o->shm.role == FT_SHM_CREATOR && !left) {
		ft_info("FT_SHM_ENABLED: every offloaded trap is mapped from other processes' "
			"segments: this process fills none of its own");
		ft_shm_close(&o->shm);
	} else if (o->shm.role == FT_SHM_CREATOR) {
		ft_info("FT_SHM_ENABLED: this process fills the shared store %s (%u of the %u "
			"offloaded traps)", o->shm.path, left, off);
	} else if (left && (n > 0 || c.traps)) {
		ft_info("FT_SHM_ENABLED: %u of the offloaded traps are in no segment (the others "
			"are not in it: other plans): this process keeps them", left);
	} else if (left && role == FT_SHM_FOLLOWER && !n) {
		ft_warn("FT_SHM_ENABLED: no segment holds any of this process's offloaded traps "
			"(another plan): this process keeps a private store");
	}
}

void ft_off_shm_leave(struct ft_offload *o, int drop)
{
	void (*leave)(struct ft_shm *) = drop ? ft_shm_drop : ft_shm_close;
	leave(&o->shm);
	for (uint32_t k = 0; k < o->nshm_more; k++)
		leave(&o->shm_more[k]);
	o->nshm_more = 0;
	free(o->shm_more);
	o->shm_more = NULL;
}

unsigned char *ft_off_store_alloc(struct ft_offload *o, struct ft_off_trap *x, size_t n)
{
	if (o->shm.role == FT_SHM_CREATOR && !o->shm_full) {
		uint64_t off;
		unsigned char *p = ft_shm_add(&o->shm, n, &off);
		if (p) {
			x->shm_off = off;
			x->shm_len = (n + 4095) & ~(size_t)4095;
			return p;
		}
		o->shm_full = 1;
		ft_warn("FT_SHM_ENABLED: cannot add %zu MiB to the shared store %s (is FT_SHM_DIR "
			"full? a tmpfs holds at most its size): the rest of this process's store is "
			"private and the segment is not shared", n >> 20, o->shm.path);
	}
	/* in huge pages where the kernel gives them, as the host encoder's
	 * images are: the store is touched (or pinned) whole right away, and
	 * first touches of 2 MiB pages cost less than of 4 KiB ones */
	void *p;
	int huge = n >= (8u << 20);
	if (posix_memalign(&p, huge ? 2u << 20 : 4096, n))
		return NULL;
	if (huge)
		madvise(p, n, MADV_HUGEPAGE);
	return p;
}

void ft_off_store_free(struct ft_offload *o, struct ft_off_trap *x, void *p)
{
	if (!x->shm_len) {
		free(p);
		return;
	}
	munmap(p, x->shm_len);
	if (!x->shm_seg) /* the last part added: given back */
		ft_shm_trim(&o->shm, x->shm_off, x->shm_len);
	x->shm_len = 0;
	x->shm_seg = 0;
}

void ft_off_shm_end(struct ft_offload *o)
{
	if (o->shm.role != FT_SHM_CREATOR)
		return;
	uint32_t n = 0, r = 0, *traps = calloc(o->ntraps + 1, sizeof(*traps));
	uint32_t *first = calloc(o->ntraps + 1, sizeof(*first)); /* in o->shm_sums */
	struct ft_shm_entry *e = calloc(o->ntraps + 1, sizeof(*e));
	uint64_t *held = calloc(o->ntraps + 1, sizeof(*held));
	uint64_t sums, bytes = 0;
	int ok = traps && first && e && held && !o->shm_full;
	for (uint32_t t = 0; ok && t < o->ntraps; t++) {
		const struct ft_off_trap *x = &o->t[t];
		if (x->block >= 0 && !(x->shm_len && x->shm_seg)) { /* not another's */
			ok = x->shm_len != 0; /* in the segment */
			first[n] = r;
			traps[n++] = t;
		}
		r += x->block >= 0 ? x->nruns : 0;
	}
	ok = ok && traps && !store_sums(o, traps, n, held) &&
	     !ft_shm_write(&o->shm, o->shm_sums, o->nsums * sizeof(*o->shm_sums), &sums);
	for (uint32_t k = 0; ok && k < n; k++) {
		const struct ft_off_trap *x = &o->t[traps[k]];
		struct ft_shm_entry *y = &e[k];
		*y = (struct ft_shm_entry){ .trap = traps[k], .nruns = x->nruns,
					    .raw_bytes = (uint64_t)x->nchunks * o->chunk,
					    .off = x->shm_off,
					    .sums = sums + first[k] * sizeof(uint64_t),
					    .store_sum = held[k], .shape = shape_of(x) };
		y->bytes = x->z.data ? x->z.bytes : y->raw_bytes;
		if (x->z.data) {
			y->znchunks = x->z.nchunks;
			y->zcoded = x->z.coded;
			size_t db = (x->z.nchunks + 1) * sizeof(uint64_t);
			y->desc_sum = ft_off_host_checksum((const unsigned char *)x->z.desc, db);
			ok = !ft_shm_write(&o->shm, x->z.desc, db, &y->desc);
		}
		bytes += y->bytes;
	}
	if (ok && !ft_shm_publish(&o->shm, e, n)) {
		ft_info("FT_SHM_ENABLED: the store (%.1f MiB) is shared as %s",
			(double)bytes / 1048576.0, o->shm.path);
		FT_STAT_ADD(o->stats, shm_created_bytes, bytes);
	} else {
		if (!o->shm_full)
			ft_warn("FT_SHM_ENABLED: cannot publish the shared store %s: the store stays "
				"this process's", o->shm.path);
		ft_shm_close(&o->shm); /* its name goes; the mappings stay */
	}
	free(traps);
	free(first);
	free(held);
	free(e);
}
