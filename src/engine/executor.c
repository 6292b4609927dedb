/* The executor: before each launch or copy, the traps it reads are in
 * their blocks; prefetch; guards; FT_VERIFY (include/ft/offload.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/offload.h"
#include "ft/kernels.h"
#include "ft/log.h"
#include "offload_int.h"
#include "ft/search.h"

int ft_off_weight_of(const struct ft_offload *o, uint64_t a)
{
	uint32_t k = ft_upper_bound(o->w, o->nw, sizeof(*o->w),
				    offsetof(struct ft_off_weight, lo), a);
	if (!k || a >= o->w[k - 1].hi || o->w[k - 1].trap >= o->ntraps)
		return -1;
	return (int)k - 1;
}

/* The weight whose extent holds a, when bytes of it from a on left the GPU
 * (a weight in chunks it shares with something else stays there), or -1. */
static int offloaded_at(const struct ft_offload *o, uint64_t a)
{
	int k = ft_off_weight_of(o, a);
	if (k < 0 || o->t[o->w[k].trap].block < 0 || !ft_off_weight_offloaded(o, k, a))
		return -1;
	return k;
}

/* The first weight whose extent ends after a (o->nw when none): the
 * weights a range [a, ...) overlaps start there (extents are disjoint). */
static uint32_t first_after(const struct ft_offload *o, uint64_t a)
{
	uint32_t k = ft_upper_bound(o->w, o->nw, sizeof(*o->w),
				    offsetof(struct ft_off_weight, lo), a);
	return k && a < o->w[k - 1].hi ? k - 1 : k;
}

/* Whether work on stream cs goes into the capture the executor pages (a
 * load for another thread's launch meanwhile runs at once). */
static int in_capture(const struct ft_offload *o, CUstream cs)
{
	CUstreamCaptureStatus st;
	cuuint64_t id = 0;
	return o->real->cuStreamGetCaptureInfo_v3 &&
	       !o->real->cuStreamGetCaptureInfo_v3(cs, &st, &id, NULL, NULL, NULL, NULL) &&
	       st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id == o->cap_id;
}

/* A driver call of the executor on stream s was refused (counted).  In the
 * capture the executor pages, which cannot be synchronised, nothing can
 * make it good: the capture is broken (ft_off_capture_broken; its caller
 * keeps what the graph reads on the GPU) and 1 is returned.  Else 0: the
 * caller makes the call good on the host. */
int ft_off_refused(struct ft_offload *o, CUstream s)
{
	FT_STAT_INC(o->stats, offload_faults);
	if (!o->cap_id || !in_capture(o, s))
		return 0;
	o->broken_cap = o->cap_id;
	return 1;
}

/* Stream s waits for event e.  Where the driver refuses the wait, the
 * order it stood for is kept another way: in the capture the executor
 * pages, which cannot wait on the host, the capture is broken
 * (ft_off_capture_broken: its graph does not page); elsewhere the host
 * waits for e, slower, said once and counted. */
void ft_off_wait(struct ft_offload *o, CUstream s, CUevent e)
{
	if (!o->real->cuStreamWaitEvent(s, e, 0))
		return;
	if (ft_off_refused(o, s)) {
		ft_warn_once("the driver refused a stream wait in a CUDA graph capture: that "
			     "graph does not page (offload_faults)");
		return;
	}
	ft_warn_once("the driver refused a stream wait: the host waits instead, which costs "
		     "speed, not results (offload_faults)");
	o->real->cuEventSynchronize(e);
}

/* Event e recorded on stream s, which work on other streams will wait for.
 * Where the driver refuses the record (out of resources), the event would
 * stand for older work and the wait would order nothing: s is synchronised
 * instead (everything on it so far is done before anything enqueued later),
 * slower, said once and counted. */
void ft_off_order(struct ft_offload *o, CUevent e, CUstream s)
{
	if (!o->real->cuEventRecord(e, s))
		return;
	if (ft_off_refused(o, s)) {
		ft_warn_once("the driver refused an event record in a CUDA graph capture: that "
			     "graph does not page (offload_faults)");
		return;
	}
	ft_warn_once("the driver refused an event record (out of resources?): streams are "
		     "synchronised instead, which costs speed, not results (offload_faults)");
	o->real->cuStreamSynchronize(s);
}

/* n bytes from trap t's host store at src to dst on stream cs: in a
 * capture with FT_GRAPH_COPY=kernel, a copy kernel (a kernel node costs a
 * graph's launch less host time than a memcpy node); otherwise, or where
 * the kernel cannot make it, the copy engine.  Where the driver refuses
 * the copy, cs's work is waited for and the copy made synchronously; where
 * that fails too, the block cannot hold the trap's bytes: said, counted as
 * stuck (results may be wrong). */
void ft_off_copy_in(struct ft_offload *o, CUdeviceptr dst, const unsigned char *src, size_t n,
		    CUstream cs, int t)
{
	const struct ft_real *r = o->real;
	const struct ft_off_trap *x = &o->t[t];
	if (o->cap_id && o->copier && x->dhost && in_capture(o, cs) &&
	    !ft_gpu_copy(o->copier, dst, x->dhost + (CUdeviceptr)(src - x->host), n, cs)) {
		FT_STAT_INC(o->stats, offload_copy_kernels);
		return;
	}
	if (x->ring_gpu) { /* the NVMe tier's ring in GPU memory (cuFile) */
		if ((r->cuMemcpyDtoDAsync_v2 &&
		     !r->cuMemcpyDtoDAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, n, cs)) ||
		    (!r->cuStreamSynchronize(cs) && !r->cuMemcpyDtoD_v2(dst, (CUdeviceptr)(uintptr_t)src, n)))
			return;
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("cannot copy trap %d into its block from the NVMe tier's GPU buffer: "
			      "launches that read it read whatever the block holds; run with "
			      "FT_NVME_TRANSFER_MODE=posix", t);
		return;
	}
	if (!r->cuMemcpyHtoDAsync_v2(dst, src, n, cs))
		return;
	if (ft_off_refused(o, cs)) {
		ft_warn_once("the driver refused a copy into a block in a CUDA graph capture: "
			     "that graph does not page (offload_faults)");
		return;
	}
	ft_warn_once("the driver refused a copy into a block: copies are made synchronously "
		     "instead, which costs speed, not results (offload_faults)");
	if (!r->cuStreamSynchronize(cs) && !r->cuMemcpyHtoD_v2(dst, src, n))
		return;
	FT_STAT_INC(o->stats, offload_stuck);
	ft_error_once("cannot copy trap %d into its block, even synchronously: launches that "
		      "read it read whatever the block holds; run with FT_ENABLED=0", t);
}

/* Copies trap t into its block on stream cs, after the block's previous
 * occupant's readers are done. */
static void load(struct ft_offload *o, int t, CUstream cs)
{
	struct ft_off_trap *x = &o->t[t];
	struct ft_off_block *b = &o->b[x->block];
	for (uint32_t k = 0; k < b->nreaders; k++) {
		if (b->readers[k] == cs)
			continue;
		ft_off_order(o, b->release[k], b->readers[k]);
		ft_off_wait(o, cs, b->release[k]);
	}
	/* a coded occupant's decode writes the block on the decode stream,
	 * and may still run when nothing read it (a prefetch a miss evicts):
	 * the new bytes come after it */
	if (b->occupant >= 0 && o->t[b->occupant].z.desc)
		ft_off_wait(o, cs, b->ready);
	b->nreaders = 0;
	/* the NVMe tier: the ring buffer the reader filled (in a graph, host
	 * memory for good).  Where neither can be, the block holds nothing (a
	 * later load tries again) */
	unsigned char *ring = x->disk_bytes ? ft_off_disk_take(o, t) : NULL;
	if (!x->host) {
		FT_STAT_INC(o->stats, offload_stuck);
		b->occupant = -1;
		return;
	}
	if (!o->cap_id && !ring)
		ft_off_disk_loaded(o, t); /* the reader reads the file's traps after it */
	int timing = ft_off_timing_now(o, o->cap_id != 0);
	struct ft_off_tev *e = timing ? ft_off_tev(o, t) : NULL;
	if (timing) {
		e->slot ^= 1;
		ft_off_record(o, e->ts[e->slot], cs);
	}
	CUstream rs = cs; /* the stream the block is ready on */
	size_t copied = x->nchunks * o->chunk; /* (raw mode copies the block whole) */
	if (x->z.desc) {
		rs = ft_off_load_coded(o, t, cs);
		if (timing) /* the copies' end: the decode's tail follows */
			ft_off_record(o, e->tc[e->slot], cs);
	} else if (x->nsl && !o->cap_id) {
		/* FT_EXPERT_PAGING: the slices come when launches read them
		 * (or with the trap, where they read most last time); the
		 * load says which are in the block.  Every other load of a
		 * trap with slices is a capture's, which leaves the eager
		 * state's slices as they were */
		copied = ft_off_load_sliced(o, t, cs);
	} else if (o->mode == FT_TM_RAW_BLOCK) {
		ft_off_copy_in(o, b->va, x->host, x->nchunks * o->chunk, cs, t);
	} else {
		size_t off = 0;
		copied = 0; /* (runs back on the GPU for good, tails, are not copied) */
		for (uint32_t i = 0; i < x->nruns; i++) {
			size_t n = x->runs[i].hi - x->runs[i].lo;
			if (!x->dead[i]) {
				ft_off_copy_in(o, x->runs[i].lo, x->host + off, n, cs, t);
				copied += n;
			}
			off += n;
		}
	}
	if (ring)
		ft_off_disk_put(o, t, cs);
	ft_off_order(o, b->ready, rs);
	if (timing) {
		ft_off_record(o, e->te[e->slot], rs);
		e->coded[e->slot] = x->z.desc != NULL;
	}
	ft_off_journal(o, "D t=%d b=%d cs=%p%s", t, x->block, (void *)cs,
		       x->z.desc ? " coded" : "");
	b->occupant = t;
	b->gen = 0;
	x->loads++;
	FT_STAT_INC(o->stats, offload_copies);
	if (!x->z.desc) /* coded loads count the bytes they copy */
		FT_STAT_ADD(o->stats, offload_copy_bytes, copied);
}

/* Trap t is read by a launch on stream s: its bytes are in its block before
 * the launch runs, and the block is not reloaded before the launch is done.
 * A sliced trap (FT_EXPERT_PAGING): its dense part and the slices need
 * names (NULL: all of them) are; a slice copied now makes every stream
 * that reads the trap wait once more before it reads. */
static void ensure(struct ft_offload *o, int t, CUstream s, const struct ft_off_need *need,
		   const char *by)
{
	static const struct ft_off_need all = { .all = FT_SLW_COPY };
	struct ft_off_block *b = &o->b[o->t[t].block];
	if (b->occupant != t) {
		load(o, t, o->mode == FT_TM_STRATEGY ? s : o->copy);
		FT_STAT_INC(o->stats, offload_misses);
	}
	if (o->t[t].nsl && !o->cap_id && need) /* (a launch's, not a copy's) */
		ft_off_slices_asked(o, t);
	if (o->t[t].nsl && !o->cap_id && !ft_off_slices_have(&o->t[t], need ? need : &all)) {
		/* on the demand stream, after the trap's load (and the slices
		 * copied before): not behind the prefetches queued since */
		if (o->demand != o->copy)
			ft_off_wait(o, o->demand, b->ready);
		if (ft_off_load_slices(o, t, need ? need : &all, o->demand, by)) {
			ft_off_order(o, b->ready, o->demand);
			b->gen++;
		}
	}
	for (uint32_t k = 0; k < b->nreaders; k++)
		if (b->readers[k] == s) {
			if (b->reader_gen[k] != b->gen) {
				ft_off_wait(o, s, b->ready);
				b->reader_gen[k] = b->gen;
			}
			return;
		}
	if (b->nreaders == FT_OFF_READERS) {
		/* more streams than tracked: the oldest one's work is made to
		 * precede s's from here on, and s takes its place */
		ft_off_order(o, b->release[0], b->readers[0]);
		ft_off_wait(o, s, b->release[0]);
		memmove(b->readers, b->readers + 1, (FT_OFF_READERS - 1) * sizeof(*b->readers));
		memmove(b->reader_gen, b->reader_gen + 1,
			(FT_OFF_READERS - 1) * sizeof(*b->reader_gen));
		b->nreaders--;
	}
	ft_off_wait(o, s, b->ready);
	b->reader_gen[b->nreaders] = b->gen;
	b->readers[b->nreaders++] = s;
}

/* FT_VERIFY: ranges of block k to check, up to 64 at a time (part: its
 * trap is in its block in part). */
struct vbatch {
	uint64_t addr[64], bytes[64], want[64];
	uint32_t n;
	int part;
};

/* FT_VERIFY: the GPU's sums of batch v's ranges against the store's (want);
 * each that differs is a failure, said.  The sums synchronise the device
 * first, so every reader is done; where they cannot be taken, this does. */
static void check_ranges(struct ft_offload *o, uint32_t k, struct vbatch *v)
{
	const struct ft_off_block *b = &o->b[k];
	uint64_t sums[64];
	uint32_t n = v->n;
	v->n = 0;
	if (!n)
		return;
	if (ft_gpu_checksums(o->gpu, v->addr, v->bytes, n, sums)) {
		ft_warn_once("FT_VERIFY: cannot checksum blocks; contents are not checked");
		if (o->real->cuCtxSynchronize)
			o->real->cuCtxSynchronize();
		return;
	}
	for (uint32_t m = 0; m < n; m++)
		if (sums[m] != v->want[m]) {
			FT_STAT_INC(o->stats, verify_failures);
			ft_error("FT_VERIFY: offloaded trap %d changed in its block%s: the weight "
				 "bytes at 0x%llx..0x%llx differ from the host store; a kernel wrote to "
				 "an offloaded weight (the last kernel that read it: %s). Such weights "
				 "must stay resident",
				 b->occupant, v->part ? " (loaded in part: its dense part and the "
							"experts read)" : "",
				 (unsigned long long)v->addr[m],
				 (unsigned long long)(v->addr[m] + v->bytes[m]),
				 b->last_kernel ? b->last_kernel : "?");
		}
}

/* FT_VERIFY: [lo, hi) of block k, whose store's sum is want, into batch v
 * (checked when it is full). */
static void check_range(struct ft_offload *o, uint32_t k, struct vbatch *v, uint64_t lo,
			uint64_t hi, uint64_t want)
{
	v->addr[v->n] = lo;
	v->bytes[v->n] = hi - lo;
	v->want[v->n++] = want;
	if (v->n == 64)
		check_ranges(o, k, v);
}

/* FT_VERIFY: block k's occupant, loaded whole: its live runs. */
static void check_whole(struct ft_offload *o, uint32_t k)
{
	const struct ft_off_trap *x = &o->t[o->b[k].occupant];
	struct vbatch v = { .n = 0 };
	for (uint32_t j = 0; j < x->nruns; j++)
		if (!x->dead[j])
			check_range(o, k, &v, x->runs[j].lo, x->runs[j].hi, x->sums[j]);
	check_ranges(o, k, &v);
}

/* FT_VERIFY: the store's sum of piece p of trap t, taken once (a 0, what
 * a store that cannot be read gives, is taken again). */
static uint64_t piece_sum(struct ft_offload *o, int t, const struct ft_off_piece *p)
{
	struct ft_off_trap *x = &o->t[t];
	if (!x->vsums) {
		uint32_t cap = 64;
		while (cap < 2 * (x->nruns + 2 * x->nsl + 1) && cap < (1u << 20))
			cap *= 2;
		if ((x->vsums = calloc(cap, sizeof(*x->vsums))))
			x->vcap = cap;
	}
	struct ft_off_vsum *e = NULL;
	for (uint32_t i = 0, h = (uint32_t)(p->lo >> 12) * 2654435761u; x->vsums && i < x->vcap;
	     i++) {
		e = &x->vsums[(h + i) & (x->vcap - 1)];
		if (!e->p.lo)
			break;
		if (e->p.lo == p->lo && e->p.hi == p->hi && e->p.at == p->at && e->sum)
			return e->sum;
		e = NULL; /* (full: summed each time) */
	}
	uint64_t sum = ft_off_store_sum(o, t, p->at, (size_t)(p->hi - p->lo));
	FT_STAT_ADD(o->stats, verify_summed_bytes, p->hi - p->lo);
	if (e && sum)
		*e = (struct ft_off_vsum){ *p, sum };
	return sum;
}

/* FT_VERIFY: block k's occupant, a sliced trap loaded in part (its dense
 * part and the slices launches read since its load; the rest of its runs
 * is another occupant's bytes or poison): those pieces, against the
 * store's sums (piece_sum). */
static void check_parts(struct ft_offload *o, uint32_t k)
{
	int t = o->b[k].occupant;
	uint32_t np = 0;
	struct ft_off_piece *p = ft_off_slices_loaded(&o->t[t], &np);
	struct vbatch v = { .n = 0, .part = 1 };
	if (!p)
		ft_warn_once("FT_VERIFY: out of memory: a trap loaded in part is not checked");
	for (uint32_t j = 0; j < np; j++)
		check_range(o, k, &v, p[j].lo, p[j].hi, piece_sum(o, t, &p[j]));
	check_ranges(o, k, &v);
	free(p);
	if (!np && o->real->cuCtxSynchronize) /* (the poison comes after its readers) */
		o->real->cuCtxSynchronize();
}

/* FT_VERIFY: block k gives up its occupant now.  Its contents must still
 * be the host store's (else a kernel wrote to an offloaded weight), then
 * they are poisoned, and the poison is in place before this returns: a
 * memset on the legacy stream is asynchronous to the host and unordered
 * with the (non-blocking) copy stream, so the load of the next occupant
 * could overtake it and be poisoned in turn.  (Not what made PIECEWISE
 * graphs read NaN on the H200: that was a weight kept on the GPU whose
 * second part was offloaded, offload.c, kept_runs_on.)  Not while a
 * capture is under way (it synchronises). */
void ft_off_verify_release(struct ft_offload *o, uint32_t k)
{
	CUstream ms = o->copy; /* NULL (legacy) in strategy mode: synchronised below too */
	struct ft_off_block *b = &o->b[k];
	const struct ft_off_trap *x = &o->t[b->occupant];
	if (!x->nsl || ft_off_slices_whole(x))
		check_whole(o, k);
	else
		check_parts(o, k);
	for (uint32_t j = 0; j < x->nruns && o->real->cuMemsetD8Async; j++)
		if (!x->dead[j])
			o->real->cuMemsetD8Async(x->runs[j].lo, 0xff, x->runs[j].hi - x->runs[j].lo,
						 ms);
	if (o->real->cuStreamSynchronize)
		o->real->cuStreamSynchronize(ms);
	ft_off_journal(o, "R b=%u t=%d", k, b->occupant);
	b->occupant = -1;
	b->nreaders = 0;
}

/* Where trap t is among touched[0..nt), or -1. */
static int among(const int *touched, int nt, int t)
{
	for (int k = 0; k < nt; k++)
		if (touched[k] == t)
			return k;
	return -1;
}

/* How many traps t is after trap from in the pass, cyclically. */
static uint32_t after(const struct ft_offload *o, int from, int t)
{
	return (uint32_t)(t - from + (int)o->ntraps) % o->ntraps;
}

/* Loads the next offloaded traps after cur whose blocks are free: their
 * previous occupants come later than they do, cyclically (done), and are
 * not read by the launch about to run (touched[0..nt): the release events
 * cover only the work enqueued before it).  A capture stops where it
 * began: the traps from there on are the next replay's, which loads them
 * itself (it assumes nothing about the blocks), so copying them here would
 * only make every replay wait for copies nobody reads. */
static void prefetch(struct ft_offload *o, int cur, const int *touched, int nt)
{
	uint32_t n = o->ntraps, ahead = 0, end = n;
	if (o->cap_id && o->cap_first >= 0 && o->cap_first != cur)
		end = after(o, cur, o->cap_first);
	for (uint32_t step = 1; step < end && ahead + 1 < o->nblocks; step++) {
		int t = (int)((cur + step) % n);
		if (o->t[t].block < 0)
			continue;
		ahead++;
		int occ = o->b[o->t[t].block].occupant;
		if (occ == t)
			continue;
		if (occ >= 0 && after(o, cur, occ) < step)
			break; /* its block still serves a trap before it */
		if (occ >= 0 && among(touched, nt, occ) >= 0)
			break;
		load(o, t, o->copy);
	}
}

/* How far trap t is ahead of the pass's position, cyclically (0 when the
 * position is unknown). */
static uint32_t ahead(const struct ft_offload *o, int t)
{
	return o->cur < 0 ? 0 : after(o, o->cur, t);
}

/* Whether trap t goes on from the shadow position o->alt: at it, or one
 * or two traps after it. */
static int shadowed(const struct ft_offload *o, int t)
{
	return o->alt >= 0 && after(o, o->alt, t) <= 2;
}

/* What the reference from word words[i] of kern to trap t says about the
 * pass (ft_kernel_turn; only references to offloaded traps are counted):
 * -1, nothing (a word that points all over the pass: no read); 1, it is where the
 * pass is (in turn, or a word that reads in turn); 0, a read, but not of the
 * pass's position (an out-of-turn reference from a word not known yet:
 * loaded, the position stays; any reference to a trap read all over the
 * pass, which ATen's cat metadata carries in slots it does not read).
 * While the position is not sure (sure_after), no reference is judged by
 * it or counted: each places it, but for a word already known to roam.
 * An out-of-turn reference to an offloaded trap that goes on from the
 * shadow (the latest such reference's trap) is not counted either, and is
 * loaded whatever its word's verdict: the references of a pass the
 * position has lost go on in order from one another, and judging them by
 * the position would drop its reads (*odd: t is out of turn).  *known
 * says whether the word is known to read in turn (or is not judged: no
 * words, another stream), which a placing reference needs for the pass to
 * move sure of itself (follow_table). */
static int turn(const struct ft_offload *o, CUstream s, struct ft_kernel *kern,
		const uint16_t *words, unsigned i, int t, int *odd, int *known)
{
	/* the position is the latest launch's: of a launch on another stream
	 * (another thread's forward) it says nothing, and a word judged by it
	 * would drop that thread's real reads: in turn, loaded, and nothing
	 * learnt about the word */
	*known = 1;
	if (!kern || !words || (o->cur >= 0 && s != o->cur_stream))
		return 1;
	int off = o->t[t].block >= 0, in = ahead(o, t) <= 2, sure = o->cur >= 0 && o->cur_sure;
	int alt = sure && off && !in && shadowed(o, t);
	int c = ft_kernel_turn(kern, words[i], in, off && sure && !alt);
	/* a word the statistics cannot hold (past FT_KERNEL_WORDS, no
	 * memory for them) is not judged: never known, it would hold at
	 * every move it made */
	*known = c > 0 || words[i] >= FT_KERNEL_WORDS ||
		 !atomic_load_explicit(&kern->turns, memory_order_relaxed);
	if (!sure)
		return c < 0 ? -1 : 1;
	if (in || c > 0)
		return 1;
	*odd = off;
	return alt ? 0 : c < 0 ? -1 : 0;
}

/* The shadow after a launch on the position's stream whose references to
 * offloaded traps out of turn went to odd[0..nodd); moved says whether a
 * reference of it moved the pass on.  A pass whose position was sure but
 * wrong (a stale word to a later trap from a kernel too new to be known
 * placed it; a prefill's new GEMM kernels read where the plan's pass does
 * not begin) reads out of turn in order: when the shadow steps on in two
 * launches with the position not moving meanwhile, the position moves to
 * it.  (Only a move resets the shadow: a stale word that keeps placing the
 * pass where it is must not keep the real reads' stretch from forming.)
 * A launch steps the shadow once at most: one whose words point at
 * several layers (ATen's cat metadata) is no stretch.  References out of
 * turn that do not go on from one another (a roaming word's) only move
 * the shadow.  Returns the position. */
static int shadow(struct ft_offload *o, int cur, int moved, const int *odd, int nodd)
{
	if (moved || cur < 0 || !o->cur_sure) {
		o->alt = -1;
		o->alt_steps = 0;
		return cur;
	}
	/* the furthest trap one or two on from the shadow; else, with none
	 * at it either, the furthest from the position starts a new one */
	int step = -1, far = -1, at = 0;
	uint32_t best = 0, fd = 0;
	for (int k = 0; k < nodd; k++) {
		uint32_t d = o->alt < 0 ? 3 : after(o, o->alt, odd[k]);
		uint32_t a = ahead(o, odd[k]);
		at |= d == 0;
		if (d >= 1 && d <= 2 && d > best)
			best = d, step = odd[k];
		if (a >= fd)
			fd = a, far = odd[k];
	}
	if (step >= 0) {
		o->alt = step;
		o->alt_steps++;
	} else if (!at && far >= 0) {
		o->alt = far;
		o->alt_steps = 0;
	}
	if (o->alt_steps < 2)
		return cur;
	FT_STAT_INC(o->stats, offload_relocations);
	ft_info_once("the pass's position was at trap %d while launches read traps "
		     "out of its turn in order, up to trap %d: it moved there (offload_relocations)",
		     cur, o->alt);
	cur = o->alt;
	o->alt = -1;
	o->alt_steps = 0;
	return cur;
}

/* Whether the position is sure after a launch moved it from o->cur to cur:
 * it was (in turn, or a jump by a word known to read in turn), or it
 * stepped one or two traps on from where it was placed, as a pass goes
 * on.  One placed where the position was unknown (a plan applied mid-run,
 * after a capture or replay) is not sure: with a plan applied once a
 * model's weights were built on the device, before its first forward, the
 * first reference was a stale pointer to the last weight built, from a
 * kernel too new for its statistics to mark it; the pass was placed there,
 * the layers' reads, out of turn by it, were counted until their word was
 * taken for a roaming one, and the later layers were not loaded (the
 * preload case built; on an H100 a process that took another's plan
 * loaded almost nothing and gave wrong logits). */
static int sure_after(const struct ft_offload *o, int cur)
{
	if (o->cur < 0 || cur < 0)
		return 0;
	uint32_t d = ahead(o, cur);
	return o->cur_sure || (d >= 1 && d <= 2);
}

/* Of traps a and b, read by one launch and sharing a block, the one that
 * comes back to the GPU: the smaller (its memory is what that costs), else
 * the one further from the pass's position. */
static int victim(const struct ft_offload *o, int a, int b)
{
	if (o->t[a].nchunks != o->t[b].nchunks)
		return o->t[a].nchunks < o->t[b].nchunks ? a : b;
	return ahead(o, a) > ahead(o, b) ? a : b;
}

/* A launch reads two traps that share a block (read together, which the
 * plan did not know: a kernel new since profiling, or a word never seen
 * holding a pointer): one block cannot hold both, so one comes back to the
 * GPU for good before the launch runs, whatever that costs in memory,
 * rather than the launch reading the other's bytes.  While a capture is
 * under way the device cannot be waited for: the trap is left out of the
 * capture's loads and comes back when the capture is over, before any
 * replay (then its own memory holds it wherever the graph reads it).
 * Returns the traps left. */
static int one_per_block(struct ft_offload *o, int *touched, int *moves,
			 struct ft_off_need *needs, int nt, const char *kernel)
{
	for (int a = 0; a < nt; a++)
		for (int b = a + 1; b < nt; b++) {
			int ta = touched[a], tb = touched[b];
			if (o->t[ta].block < 0 || o->t[ta].block != o->t[tb].block)
				continue;
			int v = victim(o, ta, tb), keep = v == ta ? tb : ta;
			char why[256];
			snprintf(why, sizeof(why), "kernel %s reads it with trap %d, which shares "
				 "its block", kernel ? kernel : "?", keep);
			FT_STAT_INC(o->stats, offload_conflicts);
			ft_off_demote(o, v, why);
			if (o->t[v].block >= 0) {
				/* pending (a capture is under way), or no memory:
				 * the launch waits for the other */
				int drop = v == ta ? a : b;
				touched[drop] = touched[--nt];
				moves[drop] = moves[nt];
				needs[drop] = needs[nt];
			}
			a = -1; /* again, from the start */
			break;
		}
	return nt;
}

/* What a launch's references to a trap say of the pass (moves[k] for
 * touched[k], or-ed over them): one places it (FT_MV_PLACES); one that
 * does is from a word known to read in turn, or one not judged
 * (FT_MV_KNOWN; turn()). */
enum { FT_MV_PLACES = 1, FT_MV_KNOWN = 2 };

/* Adds trap t to touched[0..nt) (moves: FT_MV_*, 0 where it does not
 * place the pass; needs: its slices the launch reads, from slice first
 * on, count of them, or FT_SL_DENSE or FT_SL_ALL(why)). */
static int touch(struct ft_offload *o, int *touched, int *moves, struct ft_off_need *needs,
		 int nt, int t, int move, int first, uint32_t count)
{
	int seen = among(touched, nt, t);
	if (seen >= 0) {
		moves[seen] |= move;
		ft_off_need_add(&needs[seen], o, t, first, count);
	} else if (nt < FT_OFF_TOUCHED) {
		needs[nt] = (struct ft_off_need){ 0 };
		ft_off_need_add(&needs[nt], o, t, first, count);
		touched[nt] = t, moves[nt++] = move;
	} else if (o->t[t].block >= 0) {
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("a launch reads more than %d traps: trap %d is not loaded for it, "
			      "and results may be wrong", FT_OFF_TOUCHED, t);
	}
	return nt;
}

/* The weight that weight k runs on into, of another trap (offload.h,
 * ft_off_links), when bytes of it left the GPU, or -1: a read of k reads
 * its trap too (else its bytes are where they always were: on the H200 a
 * bias packed beside another layer's in one small segment, read by every
 * layer, loaded a 1 GiB trap each time). */
static int linked_offloaded(const struct ft_offload *o, int k)
{
	if (!o->w[k].link || (uint32_t)k + 1 >= o->nw ||
	    !ft_off_weight_offloaded(o, k + 1, o->w[k + 1].lo))
		return -1;
	return k + 1;
}

static int follow_link(struct ft_offload *o, int k, int *touched, int *moves,
		       struct ft_off_need *needs, int nt)
{
	int l = linked_offloaded(o, k);
	int t = l < 0 ? -1 : (int)o->w[l].trap;
	if (t >= 0 && !(o->cap_id && o->t[t].pending)) /* (a read runs on into it) */
		nt = touch(o, touched, moves, needs, nt, t, 0, ft_off_link_need(o, k), 0);
	return nt;
}

/* A reference at a into weight k of offloaded trap t is judged stale or
 * roaming: counted, and t noted in ignored[0..ni) for hold(), with the
 * slices the reference would read if it read (ineeds, FT_EXPERT_PAGING)
 * and how it was judged (roams[j]: 1 roaming, 0 stale; for the log). */
static int ignore(struct ft_offload *o, int *ignored, struct ft_off_need *ineeds, int *roams,
		  int ni, int t, int k, uint64_t a, int roaming)
{
	FT_STAT_INC(o->stats, offload_ignored_refs);
	int j = among(ignored, ni, t);
	if (j < 0 && ni < FT_OFF_TOUCHED) {
		ineeds[ni] = (struct ft_off_need){ 0 };
		roams[ni] = roaming;
		j = ni;
		ignored[ni++] = t;
	}
	uint32_t count = 0;
	if (j >= 0 && o->t[t].nsl) {
		int first = ft_off_slice_of(o, k, a, &count);
		ft_off_need_add(&ineeds[j], o, t, first, count);
	}
	return ni;
}

/* Whether trap t's bytes are in its block with nothing left to wait for
 * on stream s: s waited for its copy already, or the copy is done. */
static int settled(struct ft_offload *o, int t, CUstream s)
{
	const struct ft_off_block *b = &o->b[o->t[t].block];
	if (b->occupant != t)
		return 0;
	for (uint32_t k = 0; k < b->nreaders; k++)
		if (b->readers[k] == s)
			return 1;
	return o->real->cuEventQuery && o->real->cuEventQuery(b->ready) == CUDA_SUCCESS;
}

/* References judged stale or roaming load nothing; a judgement can be
 * wrong.  Their traps whose bytes are in their blocks are held for the
 * launch on s when no trap it reads needs the block: the block is not
 * reloaded before the launch is done, so a wrong judgement costs at most a
 * later reload, not results.  The trap the pass is in always is, while its
 * copy is under way too (harmless if the word is not read, right if it
 * is); the others with FT_HOLD_IGNORED once their copy is done (waiting
 * for a prefetch under way would stall the launch: on the H200's Qwen2 a
 * stale word to lm_head rode along with the last five layers), and not
 * under FT_VERIFY (its poisoned blocks must show such a read) or in a
 * capture (every block is unknown there: a hold would be a copy).  The
 * first traps not held are logged, and those out of their blocks marked
 * for ignored_pass, under FT_VERIFY too (where a poisoned read needs its
 * kernel named: a Mixtral's prefill read NaN, its reader unknown). */
static int hold(struct ft_offload *o, CUstream s, const int *ignored,
		const struct ft_off_need *ineeds, const int *roams, int ni, int *touched,
		int *moves, struct ft_off_need *needs, int nt, const char *kernel)
{
	static _Atomic int reports;
	for (int i = 0; i < ni; i++) {
		int t = ignored[i], b = o->t[t].block, busy = 0;
		if (b < 0 || among(touched, nt, t) >= 0)
			continue;
		if (t != o->cur && o->cap_id)
			continue;
		/* (under FT_VERIFY such a trap is not held, only said) */
		int may = t == o->cur || (o->hold && !o->gpu);
		for (int k = 0; k < nt; k++)
			busy |= o->t[touched[k]].block == b;
		int in = !may ? 0 : t == o->cur ? o->b[b].occupant == t : settled(o, t, s);
		/* a sliced trap's block holds the slices launches read so far:
		 * holding it brings no other, so only when those the words
		 * point to are in (FT_EXPERT_PAGING) */
		in = in && ft_off_slices_have(&o->t[t], &ineeds[i]);
		if (in && !busy && nt < FT_OFF_TOUCHED) {
			needs[nt] = (struct ft_off_need){ 0 }; /* (what is in its block) */
			touched[nt] = t, moves[nt++] = t == o->cur ? FT_MV_PLACES : 0;
			FT_STAT_INC(o->stats, offload_held);
			ft_off_journal(o, "H t=%d", t);
			continue;
		}
		ft_off_journal(o, "I t=%d %s occ=%d", t, roams[i] ? "roaming" : "stale",
			       o->b[b].occupant);
		if (!o->cap_id && o->b[b].occupant != t && o->seen) {
			o->seen[t] |= 2; /* what a wrong judgement would cost: results */
			o->ignored_kernel = kernel;
		}
		if (atomic_fetch_add(&reports, 1) < 8) {
			ft_info("kernel %s carries a reference into offloaded trap %d judged %s "
				"(the pass at trap %d%s): the trap is not settled in its block, so "
				"nothing is loaded or held for it (offload_ignored_refs)",
				kernel ? kernel : "?", t,
				roams[i] ? "roaming (mostly out of the pass's turn)"
					 : "stale (its word seldom holds a pointer)",
				o->cur, o->cur < 0 ? ": unknown" : o->cur_sure ? "" : ", not sure");
		}
	}
	return nt;
}

/* An eager pass ended.  Traps that references judged stale or roaming
 * pointed into while they were not in their blocks, and that no launch of
 * the pass read otherwise, were never loaded: if those kernels read them,
 * they read another trap's bytes (on the H200, a model whose weights were
 * rescaled in place before its first forward had every prefill GEMM's
 * reference ignored, and wrong logits).  Two or more such traps in a pass
 * are said at warn level and counted.  Stale words into traps that the
 * pass reads anyway (ATen's elementwise kernels carry many: 192 a pass in
 * the H200 Qwen2 recording) are not, nor are passes with graph replays
 * (what a graph reads is not seen launch by launch). */
static void ignored_pass(struct ft_offload *o)
{
	static _Atomic int said;
	uint32_t unread = 0;
	for (uint32_t t = 0; o->seen && t < o->ntraps; t++) {
		unread += o->seen[t] == 2;
		o->seen[t] = 0;
	}
	int replayed = o->replayed;
	o->replayed = 0;
	if (unread < 2 || replayed) /* (graphs read traps no launch shows) */
		return;
	FT_STAT_INC(o->stats, offload_ignored_passes);
	if (!atomic_exchange(&said, 1))
		ft_warn("%u offloaded traps were referred to in one pass only by references judged "
			"stale or roaming (the latest from kernel %s), and never loaded: if those "
			"kernels read them, results are wrong; FT_VERIFY=1 shows whether they do "
			"(offload_ignored_passes counts such passes)", unread,
			o->ignored_kernel ? o->ignored_kernel : "?");
}

/* References judged stale or roaming into sliced traps the launch reads
 * anyway (ignored[0..ni), the slices they point to in ineeds): those
 * slices come with it, so that a wrong judgement reads the right bytes, as
 * it would with the trap loaded whole (FT_EXPERT_PAGING). */
static void ignored_slices(struct ft_offload *o, const int *ignored,
			   const struct ft_off_need *ineeds, int ni, const int *touched,
			   struct ft_off_need *needs, int nt)
{
	for (int i = 0; i < ni; i++) {
		int j = among(touched, nt, ignored[i]);
		const struct ft_off_need *n = &ineeds[i];
		if (j < 0 || !o->t[ignored[i]].nsl)
			continue;
		if (n->all)
			ft_off_need_add(&needs[j], o, touched[j], FT_SL_ALL(FT_SLW_IGNORED), 0);
		for (uint32_t r = 0; !n->all && r < n->n; r++)
			ft_off_need_add(&needs[j], o, touched[j], (int)n->first[r], n->count[r]);
	}
}

/* The traps a launch reads, at most FT_OFF_TOUCHED, into touched[0..):
 * moves[k] says whether a reference to touched[k] places the pass
 * (FT_MV_*).  The traps linked to the weights read come last: they cannot
 * crowd out the ones read directly.  The offloaded traps referred to out
 * of the pass's turn go to odd[0..*nodd) (shadow).  Under o->lock. */
static int gather(struct ft_offload *o, CUstream s, const uint64_t *addr, const uint16_t *words,
		  unsigned n, unsigned nstale, struct ft_kernel *kern, const char *kernel,
		  int *touched, int *moves, struct ft_off_need *needs, int *nread, int *odd,
		  int *nodd)
{
	int nt = 0, nl = 0, linked[FT_OFF_TOUCHED], ni = 0, ignored[FT_OFF_TOUCHED];
	int roams[FT_OFF_TOUCHED];
	struct ft_off_need ineeds[FT_OFF_TOUCHED];
	o->nasks = 0;
	for (unsigned i = 0; i < n; i++) {
		int k = ft_off_weight_of(o, addr[i]);
		if (k < 0)
			continue;
		int t = (int)o->w[k].trap;
		if (o->cap_id && o->t[t].pending)
			continue; /* its own memory holds it once the capture ends */
		if (o->t[t].block >= 0 && addr[i] != o->w[k].lo && addr[i] >= o->w[k].views) {
			/* inside an offloaded weight's extent at an address
			 * discovery never saw.  In chunks that left the GPU: a
			 * tensor the allocator placed in the extent's tail, which
			 * comes back (ft_off_return_tail).  In chunks that stayed
			 * (such a tail already back, a chunk shared with other
			 * tensors): resident bytes, nothing to load and nothing
			 * said of the pass (on the H200 a decode GEMM's
			 * workspace in layer 0's q_proj tail loaded a 1 GiB trap
			 * again and again, and made its words look roaming) --
			 * unless bytes of the weight after it left the GPU: a
			 * view into the weight, perhaps, which reads on into
			 * them (a load costs time, not results).  Below
			 * views, where discovery saw the data choose views
			 * into the weight (a token's row, a routed expert),
			 * it is one: read as the weight is, below */
			if (ft_off_foreign(o, addr[i], k)) {
				ft_off_return_tail(o, t, k, addr[i], kernel);
			} else if (ft_off_weight_offloaded(o, k, addr[i])) {
				/* (a weight that is not sliced is in its trap's dense
				 * part, which every load of the trap copies) */
				int first = ft_off_dense_view(o, k) ? FT_SL_DENSE
								   : FT_SL_ALL(FT_SLW_EXTENT);
				if (first != FT_SL_DENSE)
					ft_off_slice_said(o, k, addr[i], FT_SLW_EXTENT, kern,
							  words ? words[i] : 0, s);
				nt = touch(o, touched, moves, needs, nt, t, 0, first, 0);
			}
			continue;
		}
		/* a weight that stayed on the GPU whole (a small one in a
		 * segment shared with activations or other layers' biases,
		 * read all over the pass): nothing to load, and it says
		 * nothing of where the pass is */
		if (o->t[t].block >= 0 && !ft_off_weight_offloaded(o, k, o->w[k].lo)) {
			if (o->w[k].link && nl < FT_OFF_TOUCHED)
				linked[nl++] = k;
			continue;
		}
		int out = 0, known = 1;
		int where = turn(o, s, kern, words, i, t, &out, &known);
		if (out && *nodd < FT_OFF_TOUCHED && among(odd, *nodd, t) < 0)
			odd[(*nodd)++] = t;
		if (where < 0) {
			if (o->t[t].block >= 0) {
				FT_STAT_INC(o->stats, offload_roaming_refs);
				ni = ignore(o, ignored, ineeds, roams, ni, t, k, addr[i], 1);
			}
			continue;
		}
		/* inside a resident weight, not at its start: perhaps a tensor
		 * in its free tail; the pass is not placed by it */
		if (o->t[t].block < 0 && addr[i] != o->w[k].lo)
			where = 0;
		uint32_t count = 0;
		int first = o->t[t].nsl ? ft_off_slice_at(o, k, addr[i], s, kern, words, i, &count)
					: FT_SL_DENSE;
		if (o->w[k].views <= o->w[k].lo && !o->cap_id)
			o->slice_epoch++; /* a weight read whole: the layer's own work */
		nt = touch(o, touched, moves, needs, nt, t,
			   where > 0 ? FT_MV_PLACES | (known ? FT_MV_KNOWN : 0) : 0, first, count);
		if (o->w[k].link && nl < FT_OFF_TOUCHED)
			linked[nl++] = k;
	}
	for (int i = 0; i < nl; i++)
		nt = follow_link(o, linked[i], touched, moves, needs, nt);
	for (unsigned i = n; i < n + nstale; i++) {
		int k = ft_off_weight_of(o, addr[i]);
		if (k >= 0 && o->w[k].trap < o->ntraps && o->t[o->w[k].trap].block >= 0)
			ni = ignore(o, ignored, ineeds, roams, ni, (int)o->w[k].trap, k,
				    addr[i], 0);
	}
	nt = one_per_block(o, touched, moves, needs, nt, kernel);
	if (o->wsl)
		ignored_slices(o, ignored, ineeds, ni, touched, needs, nt);
	*nread = nt; /* the traps read; those held come after them */
	return hold(o, s, ignored, ineeds, roams, ni, touched, moves, needs, nt, kernel);
}

/* A kernel may read weights through a table in device memory that the
 * kernel just before it on its stream wrote from their addresses: PyTorch's
 * grouped GEMM (Mixtral's experts) reads the stacked experts through the
 * pointer array prepare_grouped_gemm_data filled, and shows no reference
 * to them.  The traps that launch read stay in their blocks for this one
 * (held, after touched[0..nt)), so the block is not reloaded under the
 * table's reader.  That it read nothing else kept them there before, and
 * under FT_VERIFY it released (poisoned) them as soon as it carried any
 * reference: on the H100 a grouped GEMM whose parameters held the address
 * of another layer's experts read poison in 11 of 64 Mixtral runs.  Only
 * while the pass stays where it was (the caller's), or where a word not
 * known moved it (below): a launch that moves it on is otherwise done with
 * the traps behind it (at a pass's boundary the last trap's last kernel
 * and the first trap's first may follow one another), and holding them
 * would hold back the prefetch into their blocks.  Where one of the
 * launch's own traps needs such a trap's block, one of the two comes back
 * to the GPU for good (memory, not results), as for a launch that reads
 * two traps sharing a block; where it cannot come back (no
 * memory), the launch's own trap is loaded (said once, offload_stuck); in
 * a capture the one to come back does when it ends, before any replay, and
 * is left out of the capture's loads (one_per_block).  Not in strategy
 * mode: its one block serves every trap in turn.
 *
 * Where the stray address is one or two traps ahead, in turn, it moves
 * the pass, and the move's prefetch would fill the table's trap's block
 * before the launch runs.  When no word known to read in turn placed the
 * pass there (moving: a kernel new to the learning, a word that roams or
 * seldom points into offloaded weights), the traps are held as well, so
 * the prefetch stops at their blocks until the next move (at a first eager
 * pass's boundaries, where words are not known yet, the trap due into the
 * block behind waits for the move after); where the launch's own trap
 * needs such a block, nothing comes back for good (an ordinary pass's
 * boundary may be so early in the learning) and the block is its own.
 * Only a move past an offloaded trap is held (unsure_move): references to
 * traps that stayed on the GPU are not counted, and a word that points at
 * those alone is never known; a move onto one from the trap before it
 * prefetches no further than the last move did.  A word known to read in
 * turn that holds a stray address still moves the pass unheld (README,
 * known limits). */
static int follow_table(struct ft_offload *o, CUstream s, uint64_t seq, int *touched,
			int *moves, struct ft_off_need *needs, int nt, int *nread, const char *kernel,
			int moving)
{
	if (o->mode == FT_TM_STRATEGY || o->prev_seq + 1 != seq || o->prev_stream != s ||
	    !pthread_equal(o->prev_thread, pthread_self()))
		return nt;
	for (int i = 0; i < o->nprev && nt < FT_OFF_TOUCHED; i++) {
		int t = o->prev[i], b = o->t[t].block, busy = -1;
		if (b < 0 || o->t[t].pending || among(touched, nt, t) >= 0 || o->b[b].occupant != t)
			continue;
		for (int k = 0; k < nt && busy < 0; k++)
			if (o->t[touched[k]].block == b)
				busy = k;
		if (busy >= 0 && moving)
			continue;
		if (busy >= 0) {
			char why[256];
			int y = touched[busy], v = victim(o, t, y);
			snprintf(why, sizeof(why), "kernel %s reads trap %d, which shares its block "
				 "with trap %d, read by the launch just before it (through a table "
				 "in device memory, perhaps)", kernel ? kernel : "?", y, t);
			FT_STAT_INC(o->stats, offload_conflicts);
			ft_off_demote(o, v, why);
			if (o->t[v].block >= 0 && !o->t[v].pending) {
				/* no memory for it: the launch's own trap is loaded */
				FT_STAT_INC(o->stats, offload_stuck);
				ft_warn_once("%s, and it cannot come back to the GPU: if the kernel "
					     "reads trap %d through that table, it reads trap %d's "
					     "bytes (offload_stuck)", why, t, y);
				continue;
			}
			if (v == t)
				continue; /* its own memory holds it (after the capture) */
			if (o->t[v].block >= 0) {
				/* pending (a capture is under way): left out of the
				 * capture's loads, as one_per_block leaves it */
				size_t rest = (size_t)(nt - busy - 1);
				memmove(&touched[busy], &touched[busy + 1], rest * sizeof(*touched));
				memmove(&moves[busy], &moves[busy + 1], rest * sizeof(*moves));
				memmove(&needs[busy], &needs[busy + 1], rest * sizeof(*needs));
				nt--;
				*nread -= busy < *nread;
			}
		}
		needs[nt] = (struct ft_off_need){ 0 }; /* (what is in its block) */
		touched[nt] = t, moves[nt++] = 0;
		FT_STAT_INC(o->stats, offload_table_holds);
	}
	return nt;
}

/* Whether a launch moves the pass to trap to with no word known to read in
 * turn placing it there, past an offloaded trap (in (o->cur, to],
 * cyclically; to itself where the position was unknown): only then does
 * the move's prefetch reach further than the last one's (follow_table). */
static int unsure_move(const struct ft_offload *o, const int *touched, const int *moves,
		       int nt, int to)
{
	int k = among(touched, nt, to);
	if (k < 0 || !(moves[k] & FT_MV_PLACES) || (moves[k] & FT_MV_KNOWN))
		return 0;
	uint32_t d = o->cur < 0 ? 1 : after(o, o->cur, to);
	for (uint32_t i = 0; i < d; i++)
		if (o->t[((uint32_t)to + o->ntraps - i) % o->ntraps].block >= 0)
			return 1;
	return 0;
}

/* The pass's position after the launch: the furthest trap a placing
 * reference read; where it was when none did, unknown (-1) included.  A
 * reference that does not place the pass cannot place it when its position
 * is unknown either (after a replay, at an eager pass's start): one into a
 * resident weight's free tail, such as a server's argmax over logits
 * placed there, would put the pass in the wrong trap, and the reads of the
 * traps it really is in would then look out of turn (their words soon
 * taken for roaming ones, and not loaded). */
static int position(const struct ft_offload *o, const int *touched, const int *moves, int nt)
{
	int cur = o->cur;
	for (int k = 0, first = 1; k < nt; k++)
		if (moves[k] && (first || touched[k] > cur)) {
			cur = touched[k];
			first = 0;
		}
	return cur;
}

/* Every offloaded trap read is in its block before the launch on s runs,
 * with the timing events around the waits.  Under o->lock. */
static void serve(struct ft_offload *o, CUstream s, const int *touched,
		  const struct ft_off_need *needs, int nt, const char *kernel, int timing, int nread)
{
	for (int k = 0; k < nt; k++) {
		int t = touched[k];
		/* a trap only held (hold()) is not read: no timing window */
		struct ft_off_tev *e = timing && k < nread ? ft_off_tev(o, t) : NULL;
		int enter = e && !e->entered;
		if (enter && o->t[t].block < 0)
			ft_off_record(o, e->cs, s);
		if (o->t[t].block >= 0) {
			if (enter)
				ft_off_record(o, e->ws, s);
			ensure(o, t, s, &needs[k], kernel);
			if (enter) {
				ft_off_record(o, e->we, s);
				e->waited = 1;
				if (o->t[t].loads != e->reported) {
					e->served = e->slot;
					e->reported = o->t[t].loads;
				}
			}
			o->b[o->t[t].block].last_kernel = kernel;
		}
		if (e)
			e->entered |= enter;
	}
	o->last_stream = s;
}

/* FT_VERIFY in a capture (an application's after the plan, or a
 * substitute's build): block k gives up its occupant inside the graph.
 * Nothing can be checked there, but the occupant's bytes are poisoned on s
 * once the block's readers are done, so that a read in a replay that the
 * executor does not see reads NaN.  The next load into the block waits for
 * s (its reader). */
void ft_off_poison_captured(struct ft_offload *o, uint32_t k, CUstream s)
{
	const struct ft_real *r = o->real;
	struct ft_off_block *b = &o->b[k];
	if (b->occupant < 0)
		return;
	struct ft_off_trap *x = &o->t[b->occupant];
	/* after its copy (a prefetch no launch read yet) and its readers */
	ft_off_wait(o, s, b->ready);
	for (uint32_t i = 0; i < b->nreaders; i++) {
		if (b->readers[i] == s)
			continue;
		ft_off_order(o, b->release[i], b->readers[i]);
		ft_off_wait(o, s, b->release[i]);
	}
	for (uint32_t i = 0; i < x->nruns && r->cuMemsetD8Async; i++)
		if (!x->dead[i] &&
		    r->cuMemsetD8Async(x->runs[i].lo, 0xff, x->runs[i].hi - x->runs[i].lo, s))
			ft_warn_once("FT_VERIFY: the driver refused a memset in a CUDA graph "
				     "capture: blocks are not poisoned in its replays");
	b->occupant = -1;
	b->readers[0] = s;
	b->nreaders = 1;
}

/* FT_VERIFY: every block whose occupant the launch does not read gives it
 * up now (checked, poisoned; in a capture poisoned in the graph): a read
 * the executor does not see reads NaN.  Only at launches that read traps:
 * at one that reads none no block changes without FT_VERIFY either, so the
 * kernel after a reader still finds the reader's traps (a grouped GEMM
 * reads expert weights through the pointer array the kernel before it
 * wrote: on the H200 under FT_VERIFY it read poison). */
static void verify_others(struct ft_offload *o, CUstream s, const int *touched, int nt)
{
	if (!o->gpu)
		return;
	for (uint32_t k = 0; k < o->nblocks; k++) {
		int occ = o->b[k].occupant;
		if (occ < 0 || among(touched, nt, occ) >= 0)
			continue;
		if (o->cap_id)
			ft_off_poison_captured(o, k, s);
		else if (!ft_off_capturing(o)) /* (no synchronising while one is) */
			ft_off_verify_release(o, k);
	}
}

/* FT_VERIFY's journal: the launch as it will run (its traps loaded, the
 * blocks it does not read released), the traps it reads (touched[0..nread),
 * those held after them), and its references (at most 12; a stale one
 * marked '~'; '!', one into a trap out of its block: a read of it reads
 * poison). */
static void journal_launch(const struct ft_offload *o, CUstream s, const uint64_t *addr,
			   unsigned n, unsigned nstale, const char *kernel, const int *touched,
			   int nt, int nread)
{
	if (!o->gpu)
		return;
	char read[96], refs[320], one[48], occ[96];
	size_t at = 0;
	read[0] = refs[0] = 0;
	for (int k = 0; k < nt && at + 1 < sizeof(read); k++)
		at += (size_t)snprintf(read + at, sizeof(read) - at, "%s%s%d", k ? "," : "",
				       k >= nread ? "h" : "", touched[k]);
	at = 0;
	for (unsigned i = 0; i < n + nstale && i < 12 && at + 1 < sizeof(refs); i++)
		at += (size_t)snprintf(refs + at, sizeof(refs) - at, "%s%s%s", i ? " " : "",
				       i >= n ? "~" : "",
				       ft_off_journal_addr(o, addr[i], one, sizeof(one)));
	ft_off_journal(o, "L %.60s s=%p cur=%d read=[%s] occ=[%s] refs=[%s]", kernel ? kernel : "?",
		       (void *)s, o->cur, read, ft_off_journal_occ(o, occ, sizeof(occ)), refs);
}

_Thread_local struct ft_offload *ft_off_held;

void ft_off_launched(struct ft_offload *o)
{
	if (ft_off_held && ft_off_held == o) {
		ft_off_held = NULL;
		pthread_mutex_unlock(&o->lock);
	}
}

void ft_off_launch(struct ft_offload *o, CUstream s, const uint64_t *addr,
		   const uint16_t *words, unsigned n, unsigned nstale, struct ft_kernel *kern,
		   const char *kernel)
{
	if (!o->active || !(n + nstale || o->gpu))
		return;
	int touched[FT_OFF_TOUCHED], moves[FT_OFF_TOUCHED], odd[FT_OFF_TOUCHED], nodd = 0;
	struct ft_off_need needs[FT_OFF_TOUCHED];
	ft_off_lock(o);
	ft_off_demote_pending(o); /* traps that had to come back while a capture was under way */
	int nread;
	uint64_t seq = ft_stats_read(o->stats, FT_STAT_launches);
	int nt = gather(o, s, addr, words, n, nstale, kern, kernel, touched, moves, needs, &nread,
			odd, &nodd);
	int to = nt ? position(o, touched, moves, nt) : o->cur;
	if (nt && (to == o->cur || unsure_move(o, touched, moves, nt, to)))
		nt = follow_table(o, s, seq, touched, moves, needs, nt, &nread, kernel, to != o->cur);
	if (!nt) {
		journal_launch(o, s, addr, n, nstale, kernel, touched, nt, nread);
		if (nodd && !o->cap_id)
			o->cur = shadow(o, o->cur, 0, odd, nodd);
		pthread_mutex_unlock(&o->lock);
		return;
	}
	verify_others(o, s, touched, nt);
	int cur = position(o, touched, moves, nt);
	if (!o->cap_id && o->cur >= 0 && cur < o->cur)
		ignored_pass(o); /* a pass begins */
	if (!o->cap_id && (cur != o->cur || nodd))
		cur = shadow(o, cur, cur != o->cur, odd, nodd);
	for (int k = 0; !o->cap_id && o->seen && k < nread; k++)
		o->seen[touched[k]] |= 1;
	if (o->cap_id && o->cap_first < 0)
		o->cap_first = cur;
	int timing = ft_off_timing_now(o, ft_off_capturing(o));
	if (timing)
		ft_off_timing_before(o, s, touched, nread, cur);
	serve(o, s, touched, needs, nt, kernel, timing, nread);
	memcpy(o->prev, touched, (size_t)nread * sizeof(*touched));
	o->nprev = nread;
	o->prev_seq = seq;
	o->prev_stream = s;
	o->prev_thread = pthread_self();
	journal_launch(o, s, addr, n, nstale, kernel, touched, nt, nread);
	if (o->mode != FT_TM_STRATEGY && (!o->gpu || o->cap_id) && cur != o->cur)
		prefetch(o, cur, touched, nt);
	o->cur_sure = sure_after(o, cur);
	o->cur = cur;
	o->cur_stream = s;
	/* The blocks it reads are its own until the launch is on its stream:
	 * another thread's load into one records its release events there
	 * only after it (ft_off_launched). */
	ft_off_held = o;
}

void ft_off_freed(struct ft_offload *o, uint64_t base, uint64_t size)
{
	if (!o->active)
		return;
	ft_off_lock(o);
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

int ft_off_reads_trap(struct ft_offload *o, const uint64_t *addr, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int k = ft_off_weight_of(o, addr[i]);
		if (k >= 0 && o->w[k].trap < o->ntraps)
			return 1;
	}
	return 0;
}

int ft_off_offloaded(struct ft_offload *o, const uint64_t *addr, unsigned n, int *trap,
		     uint64_t *weight)
{
	if (!o->active)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		int k = offloaded_at(o, addr[i]);
		if (k >= 0) {
			*trap = (int)o->w[k].trap;
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
	ft_off_lock(o);
	if (o->gpu) {
		char d[48], r[48];
		ft_off_journal(o, "C s=%p dst=%s n=%llu src=%s n=%llu", (void *)s,
			       ft_off_journal_addr(o, dst, d, sizeof(d)), (unsigned long long)dbytes,
			       ft_off_journal_addr(o, src, r, sizeof(r)), (unsigned long long)sbytes);
	}
	/* traps with chunks the copy writes into (a run lies within its
	 * trap's weights, so only the weights the range meets are looked at) */
	for (uint32_t k = first_after(o, dst); dbytes && k < o->nw && o->w[k].lo < dst + dbytes;
	     k++) {
		if (o->w[k].trap >= o->ntraps)
			continue;
		const struct ft_off_trap *x = &o->t[o->w[k].trap];
		if (x->block >= 0 && ft_off_live(x, dst, dst + dbytes))
			ft_off_demote(o, (int)o->w[k].trap, "a copy or memset writes into its chunks");
	}
	/* weights the copy reads, in chunks that left the GPU: their traps
	 * are loaded first */
	for (uint32_t k = first_after(o, src); sbytes && k < o->nw && o->w[k].lo < src + sbytes;
	     k++) {
		const struct ft_off_weight *w = &o->w[k];
		if (w->trap < o->ntraps && o->t[w->trap].block >= 0 &&
		    ft_off_live(&o->t[w->trap], src, src + sbytes))
			ensure(o, (int)w->trap, s, NULL, NULL);
	}
	pthread_mutex_unlock(&o->lock);
}

unsigned ft_off_graph_traps(struct ft_offload *o, const uint64_t *addr, unsigned n,
			    struct ft_off_read *out, unsigned cap)
{
	if (!o->active)
		return 0;
	unsigned nt = 0;
	ft_off_lock(o);
	for (unsigned i = 0; i < 2 * n; i++) {
		/* each address's weight, then the one its weight runs on into
		 * (ft_off_links), when it left the GPU, as eager launches do */
		int k;
		if (i % 2 == 0) {
			k = offloaded_at(o, addr[i / 2]);
		} else {
			k = ft_off_weight_of(o, addr[i / 2]);
			k = k < 0 ? -1 : linked_offloaded(o, k);
			k = k < 0 ? -1 : offloaded_at(o, o->w[k].lo); /* (its trap has a block) */
		}
		if (k < 0)
			continue;
		int t = (int)o->w[k].trap;
		unsigned j = 0;
		while (j < nt && j < cap && out[j].trap != t)
			j++;
		if (j < nt && j < cap)
			continue;
		if (nt < cap) /* the weight's start: an address past it reads as foreign */
			out[nt] = (struct ft_off_read){ .trap = t, .block = o->t[t].block,
							.addr = o->w[k].lo };
		nt++;
	}
	pthread_mutex_unlock(&o->lock);
	return nt;
}

void ft_off_keep_all(struct ft_offload *o, const char *why)
{
	if (!o->active || __atomic_load_n(&o->all_kept, __ATOMIC_RELAXED))
		return;
	ft_off_lock(o);
	ft_warn_once("offloading stops, every weight comes back to the GPU: %s", why);
	/* (a trap that must wait for a capture to end is pending: it comes
	 * back before the next replay); done only once every trap is back or
	 * pending, so that another thread's call waits for it meanwhile */
	o->quiet = 1;
	for (uint32_t t = 0; t < o->ntraps; t++)
		ft_off_demote(o, (int)t, why);
	o->quiet = 0;
	__atomic_store_n(&o->all_kept, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&o->lock);
}

void ft_off_keep(struct ft_offload *o, const uint64_t *addr, unsigned n, const char *why)
{
	if (!o->active)
		return;
	ft_off_lock(o);
	/* the caller said why once: each trap at info level */
	o->quiet = 1;
	for (unsigned i = 0; i < n; i++) {
		int k = offloaded_at(o, addr[i]);
		if (k >= 0)
			ft_off_demote(o, (int)o->w[k].trap, why);
	}
	o->quiet = 0;
	pthread_mutex_unlock(&o->lock);
}
