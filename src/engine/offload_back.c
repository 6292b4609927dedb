/* Weights that come back to the GPU: whole traps, and the tails of weights
 * where the allocator placed other tensors (include/ft/offload.h; the
 * executor's, under o->lock). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/offload.h"
#include "ft/log.h"
#include "offload_int.h"

/* Gives the chunks of trap x's live runs in [lo, hi) memory of their own,
 * all or none: when one cannot have it, those this call moved go back onto
 * the block's chunks (chunk j of the trap's runs is chunk j of its block;
 * a chunk that kept its own memory at staging is left as it was).  0 or
 * -1; nothing is copied. */
static int own_chunks(struct ft_offload *o, const struct ft_off_trap *x, uint64_t lo,
		      uint64_t hi)
{
	const CUmemGenericAllocationHandle *h = o->b[x->block].h;
	/* which chunks this call moved, one bit each: on the stack up to 64 GiB
	 * of 2 MiB chunks (no host allocation is needed to bring a trap back
	 * when host memory ran out) */
	unsigned char local[4096];
	size_t nbytes = x->nchunks / 8 + 1;
	unsigned char *moved = nbytes <= sizeof(local) ? local : calloc(nbytes, 1);
	if (!moved)
		return -1;
	if (moved == local)
		memset(local, 0, nbytes);
	int rc = 0;
	uint32_t j = 0;
	for (uint32_t i = 0; i < x->nruns && !rc; i++)
		for (uint64_t c = x->runs[i].lo; c < x->runs[i].hi && !rc; c += o->chunk, j++)
			if (!x->dead[i] && c >= lo && c < hi) {
				int got = ft_vmm_own(o->vmm, c, h[j]);
				if (got < 0)
					rc = -1;
				else if (got == 0)
					moved[j / 8] |= (unsigned char)(1u << (j % 8));
			}
	j = 0;
	for (uint32_t i = 0; i < x->nruns && rc; i++)
		for (uint64_t c = x->runs[i].lo; c < x->runs[i].hi; c += o->chunk, j++)
			if (moved[j / 8] & (1u << (j % 8)))
				ft_vmm_rebind(o->vmm, c, h[j]);
	if (moved != local)
		free(moved);
	return rc;
}

/* The bytes [lo, hi) of trap t's chunks as its block holds them (a
 * malloc'd copy), taken before those chunks get memory of their own: a
 * tensor the allocator placed in a weight's free tail there may have been
 * written since the plan through an address no launch showed (a pointer
 * array's GEMM, a word judged stale), into the block, and the store holds
 * the tail as it was at the plan.  NULL where the block holds another
 * trap's bytes or none, or a copy cannot be made: the store's stand then
 * (a tensor placed after the plan has no bytes of its own in it, so a
 * wrong guess here costs nothing the store would have given). */
static unsigned char *tail_save(struct ft_offload *o, int t, uint64_t lo, uint64_t hi)
{
	const struct ft_off_trap *x = &o->t[t];
	const struct ft_real *r = o->real;
	if (hi <= lo || !r->cuMemcpyDtoH_v2 || !r->cuMemcpyHtoD_v2 ||
	    o->b[x->block].occupant != t || !ft_off_slices_in(x, lo, hi))
		return NULL;
	unsigned char *keep = malloc(hi - lo);
	if (keep && r->cuMemcpyDtoH_v2(keep, lo, hi - lo)) {
		free(keep);
		keep = NULL;
	}
	return keep;
}

/* Trap t must come back to the GPU while a capture is under way, where the
 * device cannot be waited for: it does when none is (ft_off_demote_pending,
 * before any replay).  The capture in progress, when it is the executor's,
 * leaves the trap out of its loads: its graph reads the trap's own memory
 * then.  An eager launch while another thread captures cannot be served
 * right: an error says so. */
static void defer(struct ft_offload *o, int t, const char *why)
{
	struct ft_off_trap *x = &o->t[t];
	if (!x->pending) {
		x->pending = 1;
		o->npending++;
		FT_LOG(o->all_kept || o->quiet ? FT_LOG_INFO : FT_LOG_WARN, "trap %d comes back to "
		       "the GPU for good (%zu MiB) when the CUDA graph capture under way ends: %s",
		       t, (size_t)(x->nchunks * o->chunk) >> 20, why);
	}
	if (!o->cap_id) {
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("trap %d must come back to the GPU (%s) while another thread "
			      "captures a CUDA graph: launches until the capture ends may read "
			      "another trap's bytes", t, why);
	}
}

void ft_off_demote_pending(struct ft_offload *o)
{
	/* a capture may begin meanwhile (another thread): the traps left
	 * stay pending */
	for (uint32_t t = 0; t < o->ntraps && o->npending && !ft_off_capturing(o); t++)
		if (o->t[t].pending) {
			o->t[t].pending = 0;
			o->npending--;
			ft_off_demote(o, (int)t, "as said when a capture was under way");
		}
}

void ft_off_demote(struct ft_offload *o, int t, const char *why)
{
	struct ft_off_trap *x = &o->t[t];
	if (x->block < 0)
		return;
	if (ft_off_capturing(o)) {
		defer(o, t, why);
		return;
	}
	const struct ft_real *r = o->real;
	struct ft_off_block *b = &o->b[x->block];
	r->cuCtxSynchronize();
	if (own_chunks(o, x, 0, UINT64_MAX)) {
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("trap %d must come back to the GPU (%s) but device memory ran out: "
			      "it stays offloaded, and results may be wrong", t, why);
		return;
	}
	size_t off = 0;
	for (uint32_t i = 0; i < x->nruns; i++) {
		size_t n = x->runs[i].hi - x->runs[i].lo;
		if (!x->dead[i])
			ft_off_store_put(o, t, off, n, x->runs[i].lo);
		off += n;
	}
	if (b->occupant == t) {
		b->occupant = -1;
		b->nreaders = 0;
	}
	x->block = -1;
	if (x->disk_bytes)
		ft_off_disk_forget(o, t); /* not read ahead any more */
	if (x->pending) {
		x->pending = 0;
		o->npending--;
	}
	ft_off_journal(o, "M t=%d %s", t, why);
	FT_STAT_INC(o->stats, offload_demoted);
	FT_STAT_ADD(o->stats, offloaded_bytes, -(uint64_t)(x->nchunks * o->chunk));
	/* (when offloading stops, or a graph's traps come back, the caller
	 * has said why once) */
	FT_LOG(o->all_kept || o->quiet ? FT_LOG_INFO : FT_LOG_WARN, "trap %d is back on the GPU for good "
	       "(%zu MiB): %s", t, (size_t)(x->nchunks * o->chunk) >> 20, why);
}

/* A reference inside an offloaded weight's extent but not at a weight
 * discovery saw: perhaps a tensor the allocator later placed in the
 * extent's tail, which a block must not hold.  Returns 1 then. */
int ft_off_foreign(const struct ft_offload *o, uint64_t a, int k)
{
	if (o->w[k].lo == a)
		return 0;
	/* only chunks that left the GPU matter */
	if (!ft_off_live(&o->t[o->w[k].trap], a, a + 1))
		return 0;
	FT_STAT_INC(o->stats, offload_foreign_refs);
	return 1;
}

int ft_off_live(const struct ft_off_trap *x, uint64_t lo, uint64_t hi)
{
	for (uint32_t i = 0; i < x->nruns; i++)
		if (!x->dead[i] && lo < x->runs[i].hi && hi > x->runs[i].lo)
			return 1;
	return 0;
}

int ft_off_weight_offloaded(const struct ft_offload *o, int k, uint64_t from)
{
	const struct ft_off_weight *w = &o->w[k];
	return w->trap < o->ntraps && ft_off_live(&o->t[w->trap], from, w->hi);
}

/* FT_VERIFY's sum of the store's raw bytes [at, at + n) of trap t (a coded
 * store is decoded for it, one in the NVMe tier's file read; 0 when memory
 * runs out: a false alarm later). */
uint64_t ft_off_store_sum(const struct ft_offload *o, int t, size_t at, size_t n)
{
	const struct ft_off_trap *x = &o->t[t];
	if (!x->z.desc && !x->disk_bytes)
		return ft_off_host_checksum(x->host + at, n);
	unsigned char *raw = malloc(n);
	uint64_t sum = 0;
	if (raw) {
		ft_off_store_read(o, t, at, n, raw);
		sum = ft_off_host_checksum(raw, n);
	}
	free(raw);
	return sum;
}

/* A launch refers to a, inside weight k's extent past its start, in chunks
 * trap t gives up: a tensor the caching allocator placed in the free tail
 * of the weight's segment after discovery, so the weight ends before a.
 * The chunks from a's to the end of the extent get memory of their own,
 * filled from the store (the weight's last bytes may share a's chunk), and
 * leave the trap's copies; the rest of the trap stays offloaded (said,
 * with the kernel that referred to it, by).  Under o->lock. */
void ft_off_return_tail(struct ft_offload *o, int t, int k, uint64_t a, const char *by)
{
	struct ft_off_trap *x = &o->t[t];
	uint64_t mask = ~(uint64_t)(o->chunk - 1);
	uint32_t i = 0;
	size_t off = 0;
	for (; i < x->nruns && !(a >= x->runs[i].lo && a < x->runs[i].hi); i++)
		off += x->runs[i].hi - x->runs[i].lo;
	if (i == x->nruns || x->dead[i])
		return;
	if (ft_off_capturing(o)) {
		/* its tail cannot come back alone now: the whole trap does */
		ft_off_demote(o, t, "a tensor was placed in a weight's free tail");
		return;
	}
	struct ft_span r = x->runs[i];
	uint64_t c0 = a & mask, c1 = (o->w[k].hi + o->chunk - 1) & mask;
	if (c1 > r.hi)
		c1 = r.hi;
	/* [r.lo, c0) stays, [c0, c1) leaves, [c1, r.hi) stays */
	uint32_t extra = (c0 > r.lo) + (c1 < r.hi), m = x->nruns + extra;
	struct ft_span *runs = realloc(x->runs, (m + 1) * sizeof(*runs));
	if (runs)
		x->runs = runs;
	unsigned char *dead = runs ? realloc(x->dead, m + 1) : NULL;
	if (dead)
		x->dead = dead;
	uint64_t *sums = x->sums && dead ? realloc(x->sums, (m + 1) * sizeof(*sums)) : NULL;
	if (sums)
		x->sums = sums;
	if (!dead || (x->sums && !sums)) {
		ft_off_demote(o, t, "a tensor was placed in a weight's free tail (and memory ran out)");
		return;
	}
	o->real->cuCtxSynchronize();
	/* the tensor's bytes: from a to the extent's end (the next region of
	 * the allocation) or the chunk's; the weight's, and what follows it
	 * in its last chunk, come from the store */
	uint64_t end = o->w[k].hi < c1 ? o->w[k].hi : c1;
	unsigned char *keep = tail_save(o, t, a, end);
	if (own_chunks(o, x, c0, c1)) {
		free(keep);
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("trap %d: a tensor was placed in a weight's free tail, but device "
			      "memory ran out for it: it shares the block's memory, and results "
			      "may be wrong", t);
		o->w[k].hi = a; /* tried once */
		return;
	}
	memmove(&x->runs[i + 1 + extra], &x->runs[i + 1], (x->nruns - i - 1) * sizeof(*x->runs));
	memmove(&x->dead[i + 1 + extra], &x->dead[i + 1], x->nruns - i - 1);
	if (x->sums)
		memmove(&x->sums[i + 1 + extra], &x->sums[i + 1],
			(x->nruns - i - 1) * sizeof(*x->sums));
	uint32_t j = i;
	struct ft_span part[3] = { { r.lo, c0 }, { c0, c1 }, { c1, r.hi } };
	size_t at = off;
	for (int p = 0; p < 3; p++) {
		if (part[p].hi <= part[p].lo)
			continue;
		x->runs[j] = part[p];
		x->dead[j] = p == 1;
		if (x->sums)
			x->sums[j] = p == 1 ? 0 : ft_off_store_sum(o, t, at, part[p].hi - part[p].lo);
		at += part[p].hi - part[p].lo;
		j++;
	}
	x->nruns = m;
	/* the tensor's bytes from keep (pageable: landed before the launch
	 * that referred to it), the rest of the chunks from the store */
	int kept = keep && !o->real->cuMemcpyHtoD_v2(a, keep, end - a) &&
		   !o->real->cuCtxSynchronize();
	free(keep);
	if (!kept) {
		ft_off_store_put(o, t, off + (c0 - r.lo), c1 - c0, c0);
	} else {
		if (a > c0)
			ft_off_store_put(o, t, off + (c0 - r.lo), a - c0, c0);
		if (c1 > end)
			ft_off_store_put(o, t, off + (end - r.lo), c1 - end, end);
	}
	o->w[k].hi = a; /* references from a on are the tensor's */
	ft_off_journal(o, "T t=%d w=%d a=%llx [%llx,%llx) kept=%d", t, k, (unsigned long long)a,
		       (unsigned long long)c0, (unsigned long long)c1, kept);
	FT_STAT_INC(o->stats, offload_tails);
	FT_STAT_ADD(o->stats, offloaded_bytes, -(c1 - c0));
	ft_info("trap %d: %llu KiB at the end of a weight's extent are back on the GPU: the "
		"allocator placed a tensor there (%llu bytes into the weight; first referred to by "
		"%.80s)", t, (unsigned long long)((c1 - c0) >> 10),
		(unsigned long long)(a - o->w[k].lo), by ? by : "?");
}
