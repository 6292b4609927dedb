/* Offloading: chunk coverage and applying a plan (the host store, blocks,
 * aliases, links) (include/ft/offload.h).  The executor is executor.c, its
 * timing offload_timing.c, graphs offload_graphs.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/checksum.h"
#include "ft/offload.h"
#include "offload_int.h"
#include "ft/log.h"

static int by_lo(const void *a, const void *b)
{
	const struct ft_span *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

uint32_t ft_cover(const struct ft_span *spans, uint32_t n, const struct ft_span *allocs,
		  uint32_t nallocs, uint64_t chunk, struct ft_span *out, uint32_t cap)
{
	struct ft_span *s = malloc((n + 1) * sizeof(*s));
	if (!s || !chunk)
		return free(s), 0;
	memcpy(s, spans, n * sizeof(*s));
	qsort(s, n, sizeof(*s), by_lo);
	uint32_t runs = 0;
	for (uint32_t i = 0; i < n;) {
		/* one union of touching spans */
		uint64_t lo = s[i].lo, hi = s[i].hi;
		for (i++; i < n && s[i].lo <= hi; i++)
			if (s[i].hi > hi)
				hi = s[i].hi;
		/* the allocations it meets (allocs sorted, disjoint) */
		uint32_t a = 0, b = nallocs;
		while (a < b) {
			uint32_t m = (a + b) / 2;
			if (allocs[m].hi <= lo)
				a = m + 1;
			else
				b = m;
		}
		for (; a < nallocs && allocs[a].lo < hi; a++) {
			uint64_t clo = lo > allocs[a].lo ? lo : allocs[a].lo;
			uint64_t chi = hi < allocs[a].hi ? hi : allocs[a].hi;
			uint64_t c0 = allocs[a].lo + (clo - allocs[a].lo + chunk - 1) / chunk * chunk;
			uint64_t c1 = allocs[a].lo + (chi - allocs[a].lo) / chunk * chunk;
			if (c1 <= c0)
				continue;
			if (runs < cap)
				out[runs] = (struct ft_span){ c0, c1 };
			runs++;
		}
	}
	free(s);
	return runs;
}

/* Whether weight b begins in weight a's VMM allocation: one tensor lies in
 * one allocation, weights that only abut across allocations (VMM places
 * them side by side) are two. */
static int same_allocation(struct ft_offload *o, const struct ft_off_weight *a,
			   const struct ft_off_weight *b)
{
	CUdeviceptr base;
	size_t size;
	return ft_vmm_range(o->vmm, a->lo, &base, &size) && b->lo < base + size;
}

/* A weight kept on the GPU out of any trap (shared across the pass) that
 * runs on into the next weight of its allocation keeps that one too: one
 * tensor seen through two pointers, whose reads of the second part no
 * reference shows.  On the H200 (PIECEWISE start-up harness) a word 4
 * bytes past a row near the embedding's end split it in two weights: the
 * first stayed on the GPU, the last 9.9 MiB went with trap 0, and a lookup
 * of a token there read another trap's bytes (NaN under FT_VERIFY in 9 of
 * 16 requests).  Linking them instead loaded trap 0 at every launch that
 * pointed at the table (2.2x the step there).  Only a tail of at most an
 * eighth of the kept weight's size, and only the next weight: extents run
 * to the next region of their allocation, so every weight abuts the next,
 * and a shared bias in a small segment would otherwise keep the layer's
 * projections after it (bytes the plan counts as offloaded).  The
 * misaligned word that split the embedding is a part since 3ee02c8. */
static void kept_runs_on(struct ft_offload *o)
{
	uint64_t bytes = 0;
	for (uint32_t i = 0; i + 1 < o->nw; i++) {
		struct ft_off_weight *a = &o->w[i], *b = &o->w[i + 1];
		if (a->trap < o->ntraps || b->trap >= o->ntraps || a->hi != b->lo ||
		    (b->hi - b->lo) * 8 > a->hi - a->lo || !same_allocation(o, a, b))
			continue;
		b->trap = UINT32_MAX;
		bytes += b->hi - b->lo;
		i++; /* not on from b */
	}
	if (bytes)
		ft_info("%.1f MiB of weights stay on the GPU: each is the tail of a weight kept there "
			"(shared across the pass) in one allocation, perhaps a part of it",
			(double)bytes / 1048576.0);
}

/* The trap's weight spans and the VMM allocations, for ft_cover. */
static uint32_t trap_runs(struct ft_vmm *vmm, const struct ft_off_weight *w, uint32_t nw,
			  uint32_t trap, struct ft_span **out)
{
	*out = NULL;
	struct ft_span *s = malloc((nw + 1) * sizeof(*s));
	uint32_t n = 0;
	for (uint32_t i = 0; s && i < nw; i++)
		if (w[i].trap == trap)
			s[n++] = (struct ft_span){ w[i].lo, w[i].hi };
	pthread_mutex_lock(&vmm->lock);
	struct ft_span *a = malloc((vmm->n + 1) * sizeof(*a));
	for (uint32_t i = 0; a && i < vmm->n; i++)
		a[i] = (struct ft_span){ vmm->a[i].base, vmm->a[i].base + vmm->a[i].size };
	uint32_t na = vmm->n;
	uint64_t chunk = vmm->chunk;
	pthread_mutex_unlock(&vmm->lock);
	uint32_t runs = 0;
	if (s && a && n && na) {
		runs = ft_cover(s, n, a, na, chunk, NULL, 0);
		*out = malloc((runs + 1) * sizeof(**out));
		if (*out)
			ft_cover(s, n, a, na, chunk, *out, runs);
		else
			runs = 0;
	}
	free(s);
	free(a);
	return runs;
}

uint64_t ft_off_coverable(struct ft_vmm *vmm, const struct ft_off_weight *w, uint32_t nw,
			  uint32_t trap)
{
	struct ft_span *r;
	uint32_t n = trap_runs(vmm, w, nw, trap, &r);
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++)
		bytes += r[i].hi - r[i].lo;
	free(r);
	return bytes;
}

void ft_off_movable(struct ft_vmm *vmm, const struct ft_off_weight *w, uint32_t nw,
		    uint8_t *movable)
{
	uint32_t ntraps = 0;
	memset(movable, 0, nw);
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap != UINT32_MAX && w[i].trap + 1 > ntraps)
			ntraps = w[i].trap + 1;
	for (uint32_t t = 0; t < ntraps; t++) {
		struct ft_span *r;
		uint32_t n = trap_runs(vmm, w, nw, t, &r);
		for (uint32_t i = 0; n && i < nw; i++)
			for (uint32_t k = 0; w[i].trap == t && k < n; k++)
				if (r[k].lo < w[i].hi && r[k].hi > w[i].lo) {
					movable[i] = 1;
					break;
				}
		free(r);
	}
}

static void release_all(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	ft_off_disk_release(o); /* its reader reads the traps */
	ft_off_codec_release(o);
	ft_off_slices_release(o);
	for (uint32_t t = 0; o->t && t < o->ntraps; t++) {
		free(o->t[t].runs);
		free(o->t[t].dead);
		free(o->t[t].sums);
		free(o->t[t].vsums);
		if (o->t[t].host) {
			if (!o->pageable)
				r->cuMemHostUnregister(o->t[t].host);
			ft_off_store_free(o, &o->t[t], o->t[t].host);
		}
	}
	ft_off_shm_leave(o, 0);
	free(o->shm_sums);
	o->shm_sums = NULL;
	for (uint32_t k = 0; o->b && k < o->nblocks; k++) {
		struct ft_off_block *b = &o->b[k];
		if (b->va) {
			for (uint32_t i = 0; i < b->nchunks; i++)
				r->cuMemUnmap(b->va + i * o->chunk, o->chunk);
			r->cuMemAddressFree(b->va, b->nchunks * o->chunk);
		}
		for (uint32_t i = 0; b->h && i < b->nchunks; i++)
			if (b->h[i])
				ft_vmm_chunk_release(o->vmm, b->h[i]);
		free(b->h);
	}
	free(o->t);
	free(o->b);
	free(o->w);
	free(o->zcopy);
	free(o->zdec);
	o->zcopy = o->zdec = NULL;
	o->nzcopy = o->nzdec = 0;
	free(o->saved);
	free(o->seen);
	o->seen = NULL;
	o->saved = NULL;
	o->t = NULL;
	o->b = NULL;
	o->w = NULL;
}

static int by_weight(const void *a, const void *b)
{
	const struct ft_off_weight *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The GPU checksum kernel's sum (include/ft/checksum.h) over the aligned
 * 8-byte words (p is page aligned here). */
uint64_t ft_off_host_checksum(const unsigned char *p, size_t n)
{
	uint64_t sum = 0;
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < n / 8; i++)
		sum += ft_checksum_word(w[i], i);
	return sum;
}

#define FAIL(...) do { snprintf(why, len, __VA_ARGS__); goto fail; } while (0)

struct ft_offload *ft_off_new(void)
{
	struct ft_offload *o = calloc(1, sizeof(*o));
	if (o) {
		pthread_mutex_init(&o->lock, NULL);
		o->shm.fd = -1;
	}
	return o;
}

int ft_off_active(const struct ft_offload *o)
{
	return o && o->active;
}

int ft_off_verifying(const struct ft_offload *o)
{
	return o && o->active && o->gpu;
}

int ft_off_timed(const struct ft_offload *o)
{
	return o && o->timing;
}

void ft_off_sizes(const struct ft_offload *o, uint64_t *offloaded, uint64_t *blocks,
		  uint32_t *nblocks)
{
	*offloaded = o->offloaded_bytes;
	*blocks = o->block_bytes;
	*nblocks = o->nblocks;
}

void ft_off_fork(struct ft_offload *o, int done)
{
	if (o && !done) {
		ft_off_lock(o);
		ft_off_disk_lock(o, 1); /* (the reader's, which it may hold) */
	} else if (o) {
		ft_off_disk_lock(o, 0);
		pthread_mutex_unlock(&o->lock);
	}
}

void ft_off_after_fork(struct ft_offload *o)
{
	if (o) {
		o->active = 0;
		ft_off_shm_leave(o, 1); /* the parent's: its locks stay the parent's */
		ft_off_disk_after_fork(o);
	}
}

void ft_off_exit(struct ft_offload *o)
{
	if (!o)
		return;
	ft_off_shm_leave(o, 0);
	ft_off_disk_stop(o); /* (loads read the file themselves from here on) */
}

void ft_off_destroy(struct ft_offload *o)
{
	if (!o)
		return;
	ft_off_launched(o); /* a launch of this thread's that kept its lock */
	release_all(o);
	free(o);
}

/* FT_EXPERT_PAGING's stream for the slices launches wait for (see
 * offload_int.h), where a trap is sliced; else, or where it cannot be
 * made, the copy stream. */
static void demand_stream(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	int least = 0, greatest = 0, sliced = 0;
	o->demand = o->copy;
	for (uint32_t t = 0; t < o->ntraps && !sliced; t++)
		sliced = o->t[t].nsl > 0;
	if (!sliced || o->mode == FT_TM_STRATEGY)
		return;
	if (r->cuCtxGetStreamPriorityRange && r->cuStreamCreateWithPriority &&
	    !r->cuCtxGetStreamPriorityRange(&least, &greatest) &&
	    !r->cuStreamCreateWithPriority(&o->demand, CU_STREAM_NON_BLOCKING, greatest))
		return;
	if (r->cuStreamCreate(&o->demand, CU_STREAM_NON_BLOCKING))
		o->demand = o->copy;
}

int ft_off_init(struct ft_offload *o, const struct ft_off_config *c, const int *block,
		uint32_t ntraps, uint32_t nblocks, const struct ft_off_weight *w, uint32_t nw,
		char *why, uint32_t len)
{
	const struct ft_real *r = c->real;
	struct ft_vmm *vmm = c->vmm;
	int mode = c->mode;
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	o->real = c->real;
	o->vmm = vmm;
	o->stats = c->stats;
	o->gpu = c->verify;
	o->copier = c->pinned ? c->copier : NULL;
	o->codec = mode == FT_TM_STRATEGY ? NULL : c->codec;
	o->zauto = c->codec_auto;
	if (c->decode_curve && c->copy_curve && c->ndecode && c->ncopy) {
		o->zcopy = malloc(c->ncopy * sizeof(*o->zcopy));
		o->zdec = malloc(c->ndecode * sizeof(*o->zdec));
		if (!o->zcopy || !o->zdec)
			FAIL("out of memory");
		memcpy(o->zcopy, c->copy_curve, c->ncopy * sizeof(*o->zcopy));
		memcpy(o->zdec, c->decode_curve, c->ndecode * sizeof(*o->zdec));
		o->nzcopy = c->ncopy;
		o->nzdec = c->ndecode;
	}
	o->mode = mode;
	o->pageable = !c->pinned;
	o->hold = c->hold_ignored;
	o->captures = c->captures;
	o->shm.fd = -1;
	o->shm_dir = c->shm_dir;
	o->shm_ns = c->shm_ns;
	o->shm_wait = c->shm_wait;
	o->shm_settings = ft_off_text_key(c->shm_settings);
	o->nvme_dir = c->nvme_dir;
	o->nvme_align = c->nvme_align ? c->nvme_align : 4096;
	o->nvme_host_bytes = c->nvme_host_bytes;
	o->nvme_cufile = c->nvme_cufile;
	o->dlsym = c->dlsym;
	o->pass_ms = c->pass_ms;
	o->sums_gpu = c->sums;
	o->chunk = vmm->chunk;
	o->cur = -1;
	o->alt = -1;
	o->gcur = -1;
	if (!nblocks || vmm->state <= 0)
		FAIL("no VMM-backed allocations (FT_VMM_MIN_BYTES=0, or VMM unusable)");
	if (mode == FT_TM_STRATEGY)
		nblocks = 1; /* one staging block, loaded at first use */
	o->ntraps = ntraps;
	o->nblocks = nblocks;
	o->t = calloc(ntraps, sizeof(*o->t));
	o->b = calloc(nblocks, sizeof(*o->b));
	o->w = malloc((nw + 1) * sizeof(*o->w));
	if (!o->t || !o->b || !o->w)
		FAIL("out of memory");
	memcpy(o->w, w, nw * sizeof(*w));
	qsort(o->w, nw, sizeof(*w), by_weight);
	o->nw = nw;
	kept_runs_on(o);

	/* which chunks each offloaded trap gives up */
	for (uint32_t t = 0; t < ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		x->block = block[t] < 0 ? -1 : mode == FT_TM_STRATEGY ? 0 : block[t] % (int)nblocks;
		if (x->block < 0)
			continue;
		x->nruns = trap_runs(vmm, o->w, nw, t, &x->runs);
		x->dead = calloc(x->nruns + 1, 1);
		if (!x->dead)
			FAIL("out of memory");
		for (uint32_t i = 0; i < x->nruns; i++)
			x->nchunks += (uint32_t)((x->runs[i].hi - x->runs[i].lo) / o->chunk);
		if (!x->nchunks)
			x->block = -1;
	}
	ft_off_links(o);
	if (ft_off_slices_init(o))
		FAIL("out of memory");
	for (uint32_t t = 0; t < ntraps; t++)
		if (o->t[t].block >= 0 && o->t[t].nchunks > o->b[o->t[t].block].nchunks)
			o->b[o->t[t].block].nchunks = o->t[t].nchunks;
	/* blocks: chunk handles, and one contiguous address for raw copies */
	for (uint32_t k = 0; k < nblocks; k++) {
		struct ft_off_block *b = &o->b[k];
		b->occupant = -1;
		if (!b->nchunks)
			continue;
		b->h = calloc(b->nchunks, sizeof(*b->h));
		if (!b->h)
			FAIL("out of memory");
		for (uint32_t i = 0; i < b->nchunks; i++)
			if (ft_vmm_chunk_handle(vmm, &b->h[i]))
				FAIL("cannot create block %u's memory (%u MiB)", k,
				     (unsigned)(b->nchunks * o->chunk >> 20));
		if (mode == FT_TM_RAW_BLOCK && ft_vmm_map_block(vmm, b->h, b->nchunks, &b->va))
			FAIL("cannot map block %u contiguously", k);
		if (r->cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING) ||
		    r->cuEventCreate(&b->ready_cap, CU_EVENT_DISABLE_TIMING))
			FAIL("cannot create events");
		for (uint32_t i = 0; i < FT_OFF_READERS; i++)
			if (r->cuEventCreate(&b->release[i], CU_EVENT_DISABLE_TIMING))
				FAIL("cannot create events");
		o->block_bytes += b->nchunks * o->chunk;
	}
	if (mode != FT_TM_STRATEGY && r->cuStreamCreate(&o->copy, CU_STREAM_NON_BLOCKING))
		FAIL("cannot create the copy stream");
	demand_stream(o);
	ft_off_codec_init(o);
	o->seen = calloc(ntraps + 1, 1); /* (NULL: passes are not checked) */
	o->saved = calloc(nblocks, sizeof(*o->saved));
	if (!o->saved || r->cuEventCreate(&o->fork, CU_EVENT_DISABLE_TIMING) ||
	    r->cuEventCreate(&o->join, CU_EVENT_DISABLE_TIMING))
		FAIL("out of memory");
	return 0;
fail:
	release_all(o);
	return -1;
}

#define NO(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

/* Trap t's bytes from the GPU into raw, and FT_VERIFY's sums of them: 0,
 * or -1 with why. */
static int read_runs(struct ft_offload *o, uint32_t t, unsigned char *raw, char *why, uint32_t len)
{
	struct ft_off_trap *x = &o->t[t];
	if (o->gpu && !x->sums && !(x->sums = calloc(x->nruns + 1, sizeof(*x->sums))))
		NO("out of memory");
	size_t off = 0;
	for (uint32_t i = 0; i < x->nruns; i++) {
		size_t n = x->runs[i].hi - x->runs[i].lo;
		if (o->real->cuMemcpyDtoH_v2(raw + off, x->runs[i].lo, n))
			NO("cannot copy trap %u to the host", t);
		if (x->sums)
			x->sums[i] = ft_off_host_checksum(raw + off, n);
		off += n;
	}
	return 0;
}

int ft_off_register(struct ft_offload *o, struct ft_off_trap *x, void *p, size_t n,
		    unsigned flags)
{
	const struct ft_real *r = o->real;
	if (o->copier) /* the copy kernel reads the store through its device mapping */
		flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
	if (!o->pageable && r->cuMemHostRegister_v2(p, n, flags))
		return -1;
	if (o->copier && (!r->cuMemHostGetDevicePointer_v2 ||
			  r->cuMemHostGetDevicePointer_v2(&x->dhost, p, 0)))
		x->dhost = 0; /* its copies in graphs are memcpy nodes */
	return 0;
}

/* The pinned buffer a trap is read into to be coded on the host (made at
 * first use: the GPU encoder needs none), of the largest trap's bytes. */
struct bounce {
	unsigned char *p;
	size_t most;
};

/* Trap t's host store: allocated (ft_off_store_alloc), registered,
 * filled; coded where b is given and coding saves: on the GPU, else on
 * the host from b's buffer.  1 coded, 0 raw, -1 with why. */
static int fill(struct ft_offload *o, uint32_t t, struct bounce *b, char *why, uint32_t len)
{
	struct ft_off_trap *x = &o->t[t];
	int coded = 0;
	size_t bytes = x->nchunks * o->chunk;
	unsigned char *bounce = NULL; /* set: it holds the trap's bytes */
	/* the checksums of a shared store read it through its device mapping */
	unsigned flags = o->shm.role ? CU_MEMHOSTREGISTER_DEVICEMAP : 0;
	if (b && (coded = ft_off_code_gpu(o, (int)t, flags)) > 0)
		return 1;
	if (b && coded < 0) {
		if (!b->p && o->real->cuMemAllocHost_v2((void **)&b->p, b->most))
			NO("cannot allocate %zu MiB of pinned host memory to code the store: free "
			   "host memory, or set FT_TRANSFER_COMPRESSION=none", b->most >> 20);
		bounce = b->p;
		if (read_runs(o, t, bounce, why, len))
			return -1;
		coded = ft_off_code_trap(o, (int)t, bounce, bytes, 0);
		if (coded < 0) {
			ft_warn_once("out of host memory while coding the store: the traps it could "
				     "not code stay raw");
			coded = 0;
		}
	}
	size_t held = coded ? (x->z.bytes + 4095) & ~(size_t)4095 : bytes;
	if (!coded && !(x->host = ft_off_store_alloc(o, x, bytes)))
		NO("cannot allocate %zu MiB of host memory for trap %u (the host's "
		     "RAM, or the process's address-space limit, ulimit -v, is reached): "
		     "free host memory, or set a larger FT_MAX_GPU_MEM_FRACTION (less to "
		     "offload)", bytes >> 20, t);
	if (!coded)
		memset(x->host, 0, bytes);
	if (ft_off_register(o, x, x->host, held, flags)) {
		if (!coded) {
			ft_off_store_free(o, x, x->host); /* (a coded image is freed as the store) */
			x->host = NULL;
		}
		NO("cannot pin %zu MiB of host memory for trap %u (the locked-memory "
		     "limit, ulimit -l, or the host's RAM is reached): raise the limit, or "
		     "set FT_PINNED_MEMORY=0 (pageable copies, slower), or a larger "
		     "FT_MAX_GPU_MEM_FRACTION (less to offload)", held >> 20, t);
	}
	if (bounce) {
		if (!coded)
			memcpy(x->host, bounce, bytes);
	} else if (read_runs(o, t, x->host, why, len)) {
		return -1;
	}
	return coded;
}

/* FT_NVME_OFFLOAD_ENABLED: on[t] for the traps (offloaded, not mapped
 * from a shared store) whose store goes to the file, so that the host
 * holds at most nvme_host_bytes of store; spread over the pass (the reader
 * reads one while the copies of the traps between run).  Returns the
 * largest one's bytes, 0 for none. */
static size_t disk_traps(struct ft_offload *o, unsigned char *on)
{
	uint64_t total = 0, held = 0, want, done = 0, sofar = 0;
	size_t most = 0;
	for (uint32_t t = 0; t < o->ntraps; t++)
		if (o->t[t].block >= 0 && !o->t[t].host)
			total += (uint64_t)o->t[t].nchunks * o->chunk;
	want = total > o->nvme_host_bytes ? total - o->nvme_host_bytes : 0;
	for (uint32_t t = 0; want && t < o->ntraps; t++) {
		const struct ft_off_trap *x = &o->t[t];
		if (x->block < 0 || x->host)
			continue;
		uint64_t b = (uint64_t)x->nchunks * o->chunk;
		sofar += b;
		/* the disk's share of the traps so far, rounded to whole traps */
		if ((double)done + (double)b / 2 <= (double)want * (double)sofar / (double)total) {
			on[t] = 1;
			done += b;
		} else {
			held += b;
		}
	}
	for (uint32_t t = o->ntraps; t-- > 0 && held > o->nvme_host_bytes;)
		if (o->t[t].block >= 0 && !o->t[t].host && !on[t]) {
			on[t] = 1;
			held -= (uint64_t)o->t[t].nchunks * o->chunk;
		}
	for (uint32_t t = 0; t < o->ntraps; t++)
		if (on[t] && o->t[t].nchunks * o->chunk > most)
			most = o->t[t].nchunks * o->chunk;
	return most;
}

/* The NVMe tier said: where the store is, and the disk's rate (read back
 * from the file) against the plan's pass: the pass reads the file's bytes
 * once, and cannot be shorter than that takes. */
static void disk_said(struct ft_offload *o, uint64_t disk, size_t most)
{
	int first = -1;
	for (uint32_t t = 0; t < o->ntraps && first < 0; t++)
		if (o->t[t].disk_bytes)
			first = (int)t;
	double rate = first >= 0 ? ft_off_disk_rate(o, first) : 0;
	ft_info("FT_NVME_OFFLOAD_ENABLED: %.1f MiB of the store in a file in %s, %.1f MiB in host "
		"memory (FT_NVME_HOST_BYTES=%llu) and a ring of 3 x %.1f MiB %s%s",
		(double)disk / 1048576.0, o->nvme_dir, (double)o->store_bytes / 1048576.0,
		(unsigned long long)o->nvme_host_bytes, (double)most / 1048576.0,
		ft_off_disk_gds(o) ? "in GPU memory, read by cuFile (GPUDirect Storage)"
				   : "of pinned host memory",
		rate ? "" : "; the file is read through the page cache (the disk's rate is not measured)");
	if (!rate)
		return;
	double ms = (double)disk / rate * 1e3;
	ft_info("FT_NVME_OFFLOAD_ENABLED: the disk read %.2f GB/s: the file's traps take %.1f ms "
		"a pass to read (the plan's pass: %.1f ms)", rate / 1e9, ms, o->pass_ms);
	if (o->pass_ms > 0 && ms > o->pass_ms * 1.05)
		ft_warn("FT_NVME_OFFLOAD_ENABLED: reading the file's %.1f MiB takes %.1f ms a pass at "
			"the %.2f GB/s the disk read, longer than the plan's pass (%.1f ms): passes run "
			"at the disk's pace; a larger FT_NVME_HOST_BYTES keeps more in host memory",
			(double)disk / 1048576.0, ms, rate / 1e9, o->pass_ms);
}

/* Trap t's store into the NVMe tier's file, through its first ring
 * buffer: coded where the store is (fewer bytes to read), else raw. */
static int spill(struct ft_offload *o, uint32_t t, char *why, uint32_t len)
{
	struct ft_off_trap *x = &o->t[t];
	unsigned char *bounce = ft_off_disk_bounce(o);
	size_t bytes = x->nchunks * o->chunk;
	if (read_runs(o, t, bounce, why, len))
		return -1;
	/* (a trap of the file loads whole: auto may code it) */
	if (o->codec && ft_off_code_trap(o, (int)t, bounce, bytes, 1) == 1) {
		/* the image (smaller) over the raw bytes, and only it kept */
		memcpy(bounce, x->z.data, x->z.bytes);
		bytes = x->z.bytes;
		ft_off_store_free(o, x, x->z.data);
		x->z.data = NULL;
		x->host = NULL;
	}
	return ft_off_disk_spill(o, (int)t, bounce, bytes, why, len);
}

int ft_off_stage(struct ft_offload *o, char *why, uint32_t len)
{
	const struct ft_real *r = o->real;
	struct ft_vmm *vmm = o->vmm;
	/* the host store: touched, registered, filled */
	if (r->cuCtxSynchronize())
		FAIL("the device reported an error before offloading");
	struct bounce bounce = { NULL, 0 };
	uint64_t t0 = ft_off_now_ns();
	uint32_t coded = 0;
	uint64_t raw = 0, disk = 0; /* offloaded bytes the store codes; in the file */
	/* FT_SHM_ENABLED: traps mapped from the segment another process filled */
	ft_off_shm_begin(o);
	/* FT_NVME_OFFLOAD_ENABLED: the traps beyond the host's share go to a file */
	unsigned char *on = o->nvme_dir ? calloc(o->ntraps + 1, 1) : NULL;
	size_t most_disk = on ? disk_traps(o, on) : 0;
	if (o->nvme_dir && !on)
		FAIL("out of memory");
	if (most_disk && ft_off_disk_init(o, most_disk, why, len)) {
		free(on);
		goto fail;
	}
	/* coded stores: each trap filled here (not mapped from a shared
	 * store, not in the NVMe tier's file, which has its own buffer) is
	 * coded on the GPU, or read into one pinned buffer and coded from it
	 * on the host; only the image is kept */
	for (uint32_t t = 0; o->codec && t < o->ntraps; t++)
		if (o->t[t].block >= 0 && !o->t[t].host && !(on && on[t]) &&
		    o->t[t].nchunks * o->chunk > bounce.most)
			bounce.most = o->t[t].nchunks * o->chunk;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		int rc = x->block < 0 || x->host ? 0
			 : on && on[t]		 ? spill(o, t, why, len)
						 : fill(o, t, bounce.most ? &bounce : NULL, why, len);
		if (rc < 0) {
			if (bounce.p)
				r->cuMemFreeHost(bounce.p);
			free(on);
			goto fail;
		}
		if (x->block < 0)
			continue;
		coded += x->z.desc != NULL;
		raw += x->nchunks * o->chunk;
		if (x->disk_bytes)
			disk += x->disk_bytes;
		else
			o->store_bytes += x->z.data ? x->z.bytes : x->nchunks * o->chunk;
	}
	free(on);
	if (disk) {
		FT_STAT_ADD(o->stats, nvme_bytes, disk);
		disk_said(o, disk, most_disk);
		if (ft_off_disk_start(o)) {
			if (bounce.p)
				r->cuMemFreeHost(bounce.p);
			FAIL("cannot start the NVMe tier's reader thread");
		}
	}
	ft_off_shm_end(o);
	if (o->codec && !coded)
		ft_off_codec_release(o); /* no trap decodes: the slots go */
	if (bounce.p)
		r->cuMemFreeHost(bounce.p);
	if (bounce.most) {
		ft_info("FT_TRANSFER_COMPRESSION: %u of the offloaded traps coded (%u on the GPU, "
			"%u on the host's CPUs), the store holds %.1f MiB for %.1f MiB of weights "
			"(%.3fx), staged in %.2f s, of which the encoder %.2f s (%.1f GB/s)", coded,
			o->zgpu, coded - o->zgpu,
			(double)o->store_bytes / 1048576.0,
			(double)raw / 1048576.0,
			o->store_bytes ? (double)raw / (double)o->store_bytes : 0.0,
			(double)(ft_off_now_ns() - t0) / 1e9, (double)o->zenc_ns / 1e9,
			o->zenc_ns ? (double)o->zenc_bytes / (double)o->zenc_ns : 0.0);
		if (o->zslow)
			ft_info("FT_TRANSFER_COMPRESSION: %u traps kept raw: by the measured curves "
				"their decode would take longer than the copy it saves", o->zslow);
		if (o->zsliced)
			ft_info("FT_TRANSFER_COMPRESSION=auto: %u traps kept raw: their stacked "
				"experts are paged per expert (FT_EXPERT_PAGING), which moves only "
				"the routed ones; a coded trap loads whole", o->zsliced);
		if (o->nzdec)
			ft_info("FT_TRANSFER_COMPRESSION: by the copy and decode curves the loads of "
				"the traps filled here take %.2f ms a pass as stored, %.2f ms raw "
				"(%.3fx)", o->zpred_ms, o->zpred_raw_ms,
				o->zpred_ms > 0 ? o->zpred_raw_ms / o->zpred_ms : 0.0);
	}
	FT_STAT_ADD(o->stats, offload_store_bytes, o->store_bytes);
	FT_STAT_ADD(o->stats, offload_coded_traps, coded);
	ft_off_slices_staged(o);
	/* re-back: chunk j of a trap onto chunk j of its block */
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (x->block < 0)
			continue;
		uint32_t j = 0;
		for (uint32_t i = 0; i < x->nruns; i++)
			for (uint64_t c = x->runs[i].lo; c < x->runs[i].hi; c += o->chunk, j++)
				if (!ft_vmm_rebind(vmm, c, o->b[x->block].h[j]))
					o->offloaded_bytes += o->chunk;
	}
	o->active = 1;
	return 0;
fail:
	release_all(o);
	return -1;
}

int ft_off_runs_on(struct ft_offload *o, uint32_t k)
{
	const struct ft_off_weight *a = &o->w[k], *b = &o->w[k + 1];
	return k + 1 < o->nw && a->hi == b->lo && same_allocation(o, a, b);
}

uint32_t ft_off_links(struct ft_offload *o)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i + 1 < o->nw; i++) {
		const struct ft_off_weight *a = &o->w[i], *b = &o->w[i + 1];
		if (a->trap == b->trap || a->trap >= o->ntraps || b->trap >= o->ntraps ||
		    !ft_off_runs_on(o, i))
			continue;
		struct ft_off_trap *x = &o->t[a->trap], *y = &o->t[b->trap];
		o->w[i].link = b->trap + 1;
		if (y->block >= 0 && x->block == y->block) {
			y->block = -1; /* one block cannot hold both */
			kept++;
		}
	}
	return kept;
}
