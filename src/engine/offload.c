/* Offloading: applying a plan, the host store, blocks, and the executor
 * (include/ft/engine.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/engine.h"
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

static void release_all(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	for (uint32_t t = 0; o->t && t < o->ntraps; t++) {
		free(o->t[t].runs);
		free(o->t[t].dead);
		free(o->t[t].sums);
		if (o->t[t].host) {
			if (!o->pageable)
				r->cuMemHostUnregister(o->t[t].host);
			free(o->t[t].host);
		}
	}
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
	free(o->saved);
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

/* The GPU checksum kernel's sum (gpu.c): word i of the range times 2i + 1,
 * modulo 2^64, over the aligned 8-byte words (p is page aligned here). */
static uint64_t ft_host_checksum(const unsigned char *p, size_t n)
{
	uint64_t sum = 0;
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < n / 8; i++)
		sum += w[i] * (2 * i + 1);
	return sum;
}

#define FAIL(...) do { snprintf(why, len, __VA_ARGS__); goto fail; } while (0)

int ft_off_apply(struct ft_offload *o, const struct ft_real *real, struct ft_vmm *vmm,
		 struct ft_stats *stats, struct ft_gpu *verify, int mode, int pinned,
		 const int *block, uint32_t ntraps, uint32_t nblocks, const struct ft_off_weight *w,
		 uint32_t nw, char *why, uint32_t len)
{
	const struct ft_real *r = real;
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	o->real = real;
	o->vmm = vmm;
	o->stats = stats;
	o->gpu = verify;
	o->mode = mode;
	o->pageable = !pinned;
	o->chunk = vmm->chunk;
	o->cur = -1;
	if (!nblocks || vmm->state <= 0)
		FAIL("no VMM-backed allocations (FT_VMM_MIN_BYTES=0, or VMM unusable)");
	if (mode == FT_OFF_STRATEGY)
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

	/* which chunks each offloaded trap gives up */
	for (uint32_t t = 0; t < ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		x->block = block[t] < 0 ? -1 : mode == FT_OFF_STRATEGY ? 0 : block[t] % (int)nblocks;
		if (x->block < 0)
			continue;
		x->nruns = trap_runs(vmm, w, nw, t, &x->runs);
		x->dead = calloc(x->nruns + 1, 1);
		if (!x->dead)
			FAIL("out of memory");
		for (uint32_t i = 0; i < x->nruns; i++)
			x->nchunks += (uint32_t)((x->runs[i].hi - x->runs[i].lo) / o->chunk);
		if (!x->nchunks)
			x->block = -1;
	}
	ft_off_links(o);
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
		if (mode == FT_OFF_RAW && ft_vmm_map_block(vmm, b->h, b->nchunks, &b->va))
			FAIL("cannot map block %u contiguously", k);
		if (r->cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING))
			FAIL("cannot create events");
		for (uint32_t i = 0; i < FT_OFF_READERS; i++)
			if (r->cuEventCreate(&b->release[i], CU_EVENT_DISABLE_TIMING))
				FAIL("cannot create events");
		o->block_bytes += b->nchunks * o->chunk;
	}
	if (mode != FT_OFF_STRATEGY && r->cuStreamCreate(&o->copy, CU_STREAM_NON_BLOCKING))
		FAIL("cannot create the copy stream");
	o->saved = calloc(nblocks, sizeof(*o->saved));
	if (!o->saved || r->cuEventCreate(&o->fork, CU_EVENT_DISABLE_TIMING) ||
	    r->cuEventCreate(&o->join, CU_EVENT_DISABLE_TIMING))
		FAIL("out of memory");
	/* the host store: touched, registered, filled */
	if (r->cuCtxSynchronize())
		FAIL("the device reported an error before offloading");
	for (uint32_t t = 0; t < ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (x->block < 0)
			continue;
		size_t bytes = x->nchunks * o->chunk;
		if (posix_memalign((void **)&x->host, 4096, bytes))
			FAIL("cannot allocate %zu MiB of host memory for trap %u", bytes >> 20, t);
		memset(x->host, 0, bytes);
		if (pinned && r->cuMemHostRegister_v2(x->host, bytes, 0)) {
			free(x->host);
			x->host = NULL;
			FAIL("cannot pin %zu MiB of host memory for trap %u", bytes >> 20, t);
		}
		size_t off = 0;
		if (o->gpu && !(x->sums = calloc(x->nruns + 1, sizeof(*x->sums))))
			FAIL("out of memory");
		for (uint32_t i = 0; i < x->nruns; i++) {
			size_t n = x->runs[i].hi - x->runs[i].lo;
			if (r->cuMemcpyDtoH_v2(x->host + off, x->runs[i].lo, n))
				FAIL("cannot copy trap %u to the host", t);
			if (x->sums)
				x->sums[i] = ft_host_checksum(x->host + off, n);
			off += n;
		}
	}
	/* re-back: chunk j of a trap onto chunk j of its block */
	for (uint32_t t = 0; t < ntraps; t++) {
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

uint32_t ft_off_links(struct ft_offload *o)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i + 1 < o->nw; i++) {
		const struct ft_off_weight *a = &o->w[i], *b = &o->w[i + 1];
		if (a->hi != b->lo || a->trap == b->trap || a->trap >= o->ntraps ||
		    b->trap >= o->ntraps)
			continue;
		struct ft_off_trap *x = &o->t[a->trap], *y = &o->t[b->trap];
		if (y->block < 0)
			continue;
		if (x->block == y->block) {
			y->block = -1; /* one block cannot hold both */
			kept++;
			continue;
		}
		int known = 0;
		for (uint32_t k = 0; k < x->nlink; k++)
			known |= x->link[k] == (int)b->trap;
		if (!known && x->nlink < 4)
			x->link[x->nlink++] = (int)b->trap;
	}
	return kept;
}

/* ------------------------------------------------------------------ timing */

int ft_off_timing(struct ft_offload *o, struct ft_timing_store *st,
		  struct ft_timing_store *window)
{
	const struct ft_real *r = o->real;
	if (!r->cuEventElapsedTime_v2)
		return -1;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		CUevent *ev[] = { &e->cs, &e->ce, &e->ws, &e->we,
				  &e->ts[0], &e->ts[1], &e->te[0], &e->te[1] };
		for (unsigned k = 0; k < sizeof(ev) / sizeof(ev[0]); k++)
			if (r->cuEventCreate(ev[k], CU_EVENT_DEFAULT))
				return -1;
		e->served = -1;
	}
	o->timing = st;
	o->window = window;
	return 0;
}

static float elapsed(const struct ft_real *r, CUevent a, CUevent b)
{
	float ms;
	return r->cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS ? ms : NAN;
}

/* A pass ended (the launches went back to an earlier trap): its events are
 * read (after the device is idle) into the store; every
 * FT_TIMING_LOG_EVERY passes the window is logged as a table. */
static void timing_pass(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	float *v = malloc((size_t)o->ntraps * FT_T_COLS * sizeof(*v) + 1);
	if (!v)
		return;
	r->cuCtxSynchronize();
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		float *x = v + (size_t)t * FT_T_COLS;
		x[FT_T_COMPUTE] = x[FT_T_TRANSFER] = x[FT_T_WAIT] = NAN;
		if (e->entered && e->ended) {
			x[FT_T_COMPUTE] = elapsed(r, e->waited ? e->we : e->cs, e->ce);
			if (e->waited)
				x[FT_T_WAIT] = elapsed(r, e->ws, e->we);
			if (e->served >= 0)
				x[FT_T_TRANSFER] = elapsed(r, e->ts[e->served], e->te[e->served]);
		}
		e->entered = e->waited = e->ended = 0;
		e->served = -1;
	}
	ft_timing_add(o->timing, v);
	ft_timing_add(o->window, v);
	free(v);
	if (o->window->count < FT_TIMING_LOG_EVERY)
		return;
	struct ft_timing_report rep;
	if (ft_timing_report(o->window, 1, &rep))
		return;
	size_t n = ft_timing_format(&rep, NULL, 0) + 1;
	char *text = malloc(n);
	if (text) {
		ft_timing_format(&rep, text, n);
		ft_info("offload timing, the last %u passes:", rep.passes);
		char *save = NULL;
		for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			ft_info("%s", line);
		free(text);
	}
	ft_timing_report_free(&rep);
}

void ft_off_timing_flush(struct ft_offload *o)
{
	if (!o->active || !o->timing)
		return;
	pthread_mutex_lock(&o->lock);
	int any = 0;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		if (e->entered && !e->ended) {
			o->real->cuEventRecord(e->ce, o->last_stream);
			e->ended = 1;
		}
		any |= e->entered;
	}
	if (any)
		timing_pass(o);
	o->cur = -1; /* the next launch begins a pass */
	pthread_mutex_unlock(&o->lock);
}

/* Timing around the launch about to run on stream s: the traps it reads
 * for the first time this pass (touched[0..nt), cur the latest) begin
 * their windows; the one the launches leave ends its window. */
static void timing_before(struct ft_offload *o, CUstream s, const int *touched, int nt, int cur)
{
	const struct ft_real *r = o->real;
	if (cur == o->cur)
		return;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		int now = 0;
		for (int k = 0; k < nt; k++)
			now |= touched[k] == (int)t;
		if (e->entered && !e->ended && !now) {
			r->cuEventRecord(e->ce, o->last_stream ? o->last_stream : s);
			e->ended = 1;
		}
	}
	if (o->cur >= 0 && cur < o->cur)
		timing_pass(o);
}

/* ---------------------------------------------------------------- executor */

static int trap_of(const struct ft_offload *o, uint64_t a)
{
	uint32_t lo = 0, hi = o->nw;
	while (lo < hi) {
		uint32_t m = (lo + hi) / 2;
		if (o->w[m].lo <= a)
			lo = m + 1;
		else
			hi = m;
	}
	if (!lo || a >= o->w[lo - 1].hi || o->w[lo - 1].trap >= o->ntraps)
		return -1;
	return (int)o->w[lo - 1].trap;
}

/* Trap t leaves its block for good: its chunks get memory of their own,
 * filled from the host store (the device is idle first: the block may be
 * in use).  Under o->lock. */
/* Synchronising calls would invalidate a capture in progress (any
 * thread's, in global mode): the steps that need one wait for none. */
static int capturing(const struct ft_offload *o)
{
	return o->cap_id || (o->captures && atomic_load(o->captures) > 0);
}

static void demote(struct ft_offload *o, int t, const char *why)
{
	struct ft_off_trap *x = &o->t[t];
	if (x->block < 0)
		return;
	if (capturing(o)) {
		ft_warn_once("trap %d should come back to the GPU (%s) during a CUDA graph "
			     "capture, where the device cannot be waited for: it stays offloaded",
			     t, why);
		return;
	}
	const struct ft_real *r = o->real;
	struct ft_off_block *b = &o->b[x->block];
	r->cuCtxSynchronize();
	size_t off = 0;
	int lost = 0;
	for (uint32_t i = 0; i < x->nruns; i++) {
		size_t n = x->runs[i].hi - x->runs[i].lo;
		if (!x->dead[i]) {
			for (uint64_t c = x->runs[i].lo; c < x->runs[i].hi; c += o->chunk)
				lost |= ft_vmm_own(o->vmm, c) != 0;
			r->cuMemcpyHtoD_v2(x->runs[i].lo, x->host + off, n);
		}
		off += n;
	}
	if (b->occupant == t) {
		b->occupant = -1;
		b->nreaders = 0;
	}
	x->block = -1;
	FT_STAT_INC(o->stats, offload_demoted);
	FT_STAT_ADD(o->stats, offloaded_bytes, -(uint64_t)(x->nchunks * o->chunk));
	if (lost)
		ft_error("trap %d must come back to the GPU (%s) but device memory ran out: its "
			 "weights are unreadable now", t, why);
	else
		ft_warn("trap %d is back on the GPU for good (%zu MiB): %s", t,
			(size_t)(x->nchunks * o->chunk) >> 20, why);
}

/* A reference inside an offloaded weight's extent but not at a weight
 * discovery saw: perhaps a tensor the allocator later placed in the
 * extent's tail, which a block must not hold.  Returns 1 then. */
static int foreign(const struct ft_offload *o, uint64_t a, int t)
{
	uint32_t lo = 0, hi = o->nw;
	while (lo < hi) {
		uint32_t m = (lo + hi) / 2;
		if (o->w[m].lo < a)
			lo = m + 1;
		else
			hi = m;
	}
	if (lo < o->nw && o->w[lo].lo == a)
		return 0;
	/* only chunks that left the GPU matter */
	const struct ft_off_trap *x = &o->t[t];
	for (uint32_t i = 0; i < x->nruns; i++)
		if (!x->dead[i] && a >= x->runs[i].lo && a < x->runs[i].hi) {
			FT_STAT_INC(o->stats, offload_foreign_refs);
			return 1;
		}
	return 0;
}

/* Copies trap t into its block on stream cs, after the block's previous
 * occupant's readers are done. */
static void load(struct ft_offload *o, int t, CUstream cs)
{
	const struct ft_real *r = o->real;
	struct ft_off_trap *x = &o->t[t];
	struct ft_off_block *b = &o->b[x->block];
	for (uint32_t k = 0; k < b->nreaders; k++) {
		if (b->readers[k] == cs)
			continue;
		r->cuEventRecord(b->release[k], b->readers[k]);
		r->cuStreamWaitEvent(cs, b->release[k], 0);
	}
	b->nreaders = 0;
	struct ft_off_tev *e = &x->tev;
	int timing = o->timing && !o->cap_id;
	if (timing) {
		e->slot ^= 1;
		r->cuEventRecord(e->ts[e->slot], cs);
	}
	if (o->mode == FT_OFF_RAW) {
		r->cuMemcpyHtoDAsync_v2(b->va, x->host, x->nchunks * o->chunk, cs);
	} else {
		size_t off = 0;
		for (uint32_t i = 0; i < x->nruns; i++) {
			size_t n = x->runs[i].hi - x->runs[i].lo;
			if (!x->dead[i])
				r->cuMemcpyHtoDAsync_v2(x->runs[i].lo, x->host + off, n, cs);
			off += n;
		}
	}
	r->cuEventRecord(b->ready, cs);
	if (timing)
		r->cuEventRecord(e->te[e->slot], cs);
	b->occupant = t;
	x->loads++;
	o->loads++;
	FT_STAT_INC(o->stats, offload_copies);
	FT_STAT_ADD(o->stats, offload_copy_bytes, x->nchunks * o->chunk);
}

/* Trap t is read by a launch on stream s: its bytes are in its block before
 * the launch runs, and the block is not reloaded before the launch is done. */
static void ensure(struct ft_offload *o, int t, CUstream s)
{
	struct ft_off_block *b = &o->b[o->t[t].block];
	if (b->occupant != t) {
		load(o, t, o->mode == FT_OFF_STRATEGY ? s : o->copy);
		FT_STAT_INC(o->stats, offload_misses);
	}
	for (uint32_t k = 0; k < b->nreaders; k++)
		if (b->readers[k] == s)
			return;
	if (b->nreaders == FT_OFF_READERS) {
		/* more streams than tracked: the oldest one's work is made to
		 * precede s's from here on, and s takes its place */
		o->real->cuEventRecord(b->release[0], b->readers[0]);
		o->real->cuStreamWaitEvent(s, b->release[0], 0);
		memmove(b->readers, b->readers + 1, (FT_OFF_READERS - 1) * sizeof(*b->readers));
		b->nreaders--;
	}
	o->real->cuStreamWaitEvent(s, b->ready, 0);
	b->readers[b->nreaders++] = s;
}

/* FT_VERIFY: block k gives up its occupant now.  Its contents must still
 * be the host store's (else a kernel wrote to an offloaded weight), then
 * they are poisoned. */
static void verify_release(struct ft_offload *o, uint32_t k)
{
	struct ft_off_block *b = &o->b[k];
	struct ft_off_trap *x = &o->t[b->occupant];
	uint64_t addr[64], bytes[64], sums[64];
	for (uint32_t i = 0; i < x->nruns; i += 64) {
		uint32_t n = 0;
		for (uint32_t j = i; j < x->nruns && n < 64; j++)
			if (!x->dead[j]) {
				addr[n] = x->runs[j].lo;
				bytes[n++] = x->runs[j].hi - x->runs[j].lo;
			}
		if (!n)
			continue;
		if (ft_gpu_checksums(o->gpu, addr, bytes, n, sums)) {
			ft_warn_once("FT_VERIFY: cannot checksum blocks; contents are not checked");
		} else {
			for (uint32_t j = i, m = 0; j < x->nruns && m < n; j++) {
				if (x->dead[j])
					continue;
				if (sums[m] != x->sums[j]) {
					FT_STAT_INC(o->stats, verify_failures);
					ft_error("FT_VERIFY: offloaded trap %d changed in its block: the "
						 "weight bytes at 0x%llx..0x%llx differ from the host store; "
						 "a kernel wrote to an offloaded weight (the last kernel that "
						 "read it: %s). Such weights must stay resident",
						 b->occupant, (unsigned long long)x->runs[j].lo,
						 (unsigned long long)x->runs[j].hi,
						 b->last_kernel ? b->last_kernel : "?");
				}
				m++;
			}
		}
		for (uint32_t m = 0; m < n && o->real->cuMemsetD8_v2; m++)
			o->real->cuMemsetD8_v2(addr[m], 0xff, bytes[m]);
	}
	b->occupant = -1;
	b->nreaders = 0;
}

/* Loads the next offloaded traps after cur whose blocks are free: their
 * previous occupants come later than they do, cyclically (done), and are
 * not read by the launch about to run (touched[0..nt): the release events
 * cover only the work enqueued before it). */
static void prefetch(struct ft_offload *o, int cur, const int *touched, int nt)
{
	uint32_t n = o->ntraps, ahead = 0;
	for (uint32_t step = 1; step < n && ahead + 1 < o->nblocks; step++) {
		int t = (int)((cur + step) % n);
		if (o->t[t].block < 0)
			continue;
		ahead++;
		int occ = o->b[o->t[t].block].occupant;
		if (occ == t)
			continue;
		if (occ >= 0 && (uint32_t)(occ - cur + (int)n) % n < step)
			break; /* its block still serves a trap before it */
		int busy = 0;
		for (int k = 0; k < nt; k++)
			busy |= occ == touched[k];
		if (busy)
			break;
		load(o, t, o->copy);
	}
}

void ft_off_launch(struct ft_offload *o, CUstream s, const uint64_t *addr, unsigned n,
		   const char *kernel)
{
	if (!o->active)
		return;
	int touched[8], nt = 0;
	for (unsigned i = 0; i < n; i++) {
		int t = trap_of(o, addr[i]);
		if (t < 0)
			continue;
		if (o->t[t].block >= 0 && foreign(o, addr[i], t)) {
			pthread_mutex_lock(&o->lock);
			demote(o, t, "a launch refers into its chunks at an address that is not a "
				     "weight (a tensor placed in a weight's free tail)");
			pthread_mutex_unlock(&o->lock);
		}
		int seen = 0;
		for (int k = 0; k < nt; k++)
			seen |= touched[k] == t;
		if (!seen && nt < 8)
			touched[nt++] = t;
	}
	if (!nt)
		return;
	int cur = touched[0];
	for (int k = 1; k < nt; k++)
		if (touched[k] > cur)
			cur = touched[k];
	/* traps linked to those read (engine.h, ft_off_links); the position
	 * in the pass stays that of the traps read */
	for (int k = 0, n0 = nt; k < n0; k++)
		for (uint32_t j = 0; j < o->t[touched[k]].nlink; j++) {
			int l = o->t[touched[k]].link[j], seen = 0;
			for (int m = 0; m < nt; m++)
				seen |= touched[m] == l;
			if (!seen && nt < 8)
				touched[nt++] = l;
		}
	pthread_mutex_lock(&o->lock);
	if (o->gpu && cur != o->cur && !capturing(o))
		for (uint32_t k = 0; k < o->nblocks; k++) {
			int occ = o->b[k].occupant, keep = occ < 0;
			for (int j = 0; j < nt; j++)
				keep |= occ == touched[j];
			if (!keep)
				verify_release(o, k);
		}
	int timing = o->timing && !capturing(o);
	if (timing)
		timing_before(o, s, touched, nt, cur);
	for (int k = 0; k < nt; k++) {
		int t = touched[k];
		struct ft_off_tev *e = &o->t[t].tev;
		int enter = timing && !e->entered;
		if (enter && o->t[t].block < 0)
			o->real->cuEventRecord(e->cs, s);
		if (o->t[t].block >= 0) {
			if (enter)
				o->real->cuEventRecord(e->ws, s);
			ensure(o, t, s);
			if (enter) {
				o->real->cuEventRecord(e->we, s);
				e->waited = 1;
				if (o->t[t].loads != e->reported) {
					e->served = e->slot;
					e->reported = o->t[t].loads;
				}
			}
			o->b[o->t[t].block].last_kernel = kernel;
		}
		e->entered |= enter;
	}
	o->last_stream = s;
	for (int k = 0; k < nt; k++)
		if (o->t[touched[k]].block >= 0 &&
		    o->b[o->t[touched[k]].block].occupant != touched[k]) {
			o->stalls_conflict++;
			ft_warn_once("one kernel reads two offloaded traps that share a block: "
				      "its results are wrong; report this with FT_TRACE");
		}
	if (o->mode != FT_OFF_STRATEGY && (!o->gpu || o->cap_id) && cur != o->cur)
		prefetch(o, cur, touched, nt);
	o->cur = cur;
	pthread_mutex_unlock(&o->lock);
}

void ft_off_freed(struct ft_offload *o, uint64_t base, uint64_t size)
{
	if (!o->active)
		return;
	pthread_mutex_lock(&o->lock);
	for (uint32_t i = 0; i < o->nw; i++)
		if (o->w[i].lo >= base && o->w[i].lo < base + size)
			o->w[i].trap = UINT32_MAX;
	for (uint32_t t = 0; t < o->ntraps; t++)
		for (uint32_t i = 0; i < o->t[t].nruns; i++) {
			struct ft_span *x = &o->t[t].runs[i];
			if (x->lo >= base && x->lo < base + size)
				o->t[t].dead[i] = 1; /* no more copies there */
		}
	pthread_mutex_unlock(&o->lock);
}

int ft_off_offloaded(struct ft_offload *o, const uint64_t *addr, unsigned n, int *trap,
		     uint64_t *weight)
{
	if (!o->active)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		int t = trap_of(o, addr[i]);
		if (t >= 0 && o->t[t].block >= 0) {
			*trap = t;
			*weight = addr[i];
			return 1;
		}
	}
	return 0;
}

void ft_off_copy(struct ft_offload *o, CUstream s, uint64_t dst, uint64_t dbytes, uint64_t src,
		 uint64_t sbytes)
{
	if (!o->active)
		return;
	pthread_mutex_lock(&o->lock);
	for (uint32_t t = 0; dbytes && t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		for (uint32_t i = 0; x->block >= 0 && i < x->nruns; i++)
			if (!x->dead[i] && dst < x->runs[i].hi && dst + dbytes > x->runs[i].lo) {
				demote(o, (int)t, "a copy or memset writes into its chunks");
				break;
			}
	}
	/* weights the copy reads: their traps are loaded first */
	for (uint32_t i = 0; sbytes && i < o->nw; i++) {
		const struct ft_off_weight *w = &o->w[i];
		if (w->trap < o->ntraps && src < w->hi && src + sbytes > w->lo &&
		    o->t[w->trap].block >= 0)
			ensure(o, (int)w->trap, s);
	}
	pthread_mutex_unlock(&o->lock);
}

/* ------------------------------------------------------------------ graphs */

int ft_off_capture_launch(struct ft_offload *o, CUstream s, uint64_t cap, const uint64_t *addr,
			  unsigned n, const char *kernel)
{
	int trap;
	uint64_t w;
	if (!o->active || !ft_off_offloaded(o, addr, n, &trap, &w))
		return 0;
	if (o->pageable) {
		/* a graph cannot copy from pageable memory */
		ft_warn_once("FT_PINNED_MEMORY=0: CUDA graphs cannot copy from a pageable host "
			     "store, so captured launches that read offloaded weights are not paged");
		return -1;
	}
	const struct ft_real *r = o->real;
	pthread_mutex_lock(&o->lock);
	if (o->cap_id && o->cap_id != cap) {
		pthread_mutex_unlock(&o->lock);
		return -1;
	}
	if (!o->cap_id) {
		for (uint32_t k = 0; k < o->nblocks; k++) {
			struct ft_off_block *b = &o->b[k];
			o->saved[k].occupant = b->occupant;
			o->saved[k].nreaders = b->nreaders;
			memcpy(o->saved[k].readers, b->readers, sizeof(b->readers));
			b->occupant = -1;
			b->nreaders = 0;
		}
		o->saved_cur = o->cur;
		o->cur = -1;
		if (o->mode != FT_OFF_STRATEGY) {
			/* fork: the copy stream joins the capture */
			r->cuEventRecord(o->fork, s);
			r->cuStreamWaitEvent(o->copy, o->fork, 0);
		}
		o->cap_id = cap;
	}
	pthread_mutex_unlock(&o->lock);
	ft_off_launch(o, s, addr, n, kernel);
	return 1;
}

void ft_off_capture_end(struct ft_offload *o, CUstream origin, uint64_t cap)
{
	if (!o->active)
		return;
	const struct ft_real *r = o->real;
	pthread_mutex_lock(&o->lock);
	if (o->cap_id && o->cap_id == cap) {
		if (o->mode != FT_OFF_STRATEGY) {
			/* join: the capture ends with the copy stream's work */
			r->cuEventRecord(o->join, o->copy);
			r->cuStreamWaitEvent(origin, o->join, 0);
		}
		for (uint32_t k = 0; k < o->nblocks; k++) {
			struct ft_off_block *b = &o->b[k];
			b->occupant = o->saved[k].occupant;
			b->nreaders = o->saved[k].nreaders;
			memcpy(b->readers, o->saved[k].readers, sizeof(b->readers));
		}
		o->cur = o->saved_cur;
		o->cap_id = 0;
	}
	pthread_mutex_unlock(&o->lock);
}

void ft_off_replay(struct ft_offload *o, CUstream s, int after)
{
	if (!o->active)
		return;
	const struct ft_real *r = o->real;
	pthread_mutex_lock(&o->lock);
	for (uint32_t k = 0; k < o->nblocks; k++) {
		struct ft_off_block *b = &o->b[k];
		if (!after) {
			/* the replay's copies must not overwrite what eager
			 * launches on other streams still read */
			for (uint32_t i = 0; i < b->nreaders; i++)
				if (b->readers[i] != s) {
					r->cuEventRecord(b->release[i], b->readers[i]);
					r->cuStreamWaitEvent(s, b->release[i], 0);
				}
			continue;
		}
		/* the blocks hold what the replay left; the next load into
		 * each waits for the replay (s is its reader) */
		b->occupant = -1;
		b->readers[0] = s;
		b->nreaders = 1;
	}
	if (after)
		o->cur = -1;
	pthread_mutex_unlock(&o->lock);
}
