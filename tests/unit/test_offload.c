/* The block engine without a GPU: chunk coverage, and the executor's
 * ordering checked by simulation.  A fake driver table records every event
 * record, stream wait and copy; vector clocks then decide happens-before.
 * For every kernel that reads an offloaded trap: the copy that put the trap
 * in its block happens before it, and no later copy into that block happens
 * before the kernel.  Checked on regular passes, several streams, kernels
 * reading two traps, a stale pointer into a trap sharing the block, tied
 * weights read at both ends, strategy mode, and random launch sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/offload.h"
#include "ft/kernels.h"
#include "../common/stub_driver.h"
#include "../../src/engine/offload_int.h" /* the engine's own state */

#define MB (1ull << 20)
#define CHUNK (2 * MB)

/* ----------------------------------------------------------- coverage */

static void cover_whole_chunks_only(void **state)
{
	(void)state;
	/* one allocation [0, 16 MiB); spans of one trap: [1, 5) MiB and
	 * [5, 9) MiB touch, [12, 16) MiB */
	struct ft_span alloc[] = { { 0, 16 * MB } };
	struct ft_span spans[] = { { 12 * MB, 16 * MB }, { 1 * MB, 5 * MB }, { 5 * MB, 9 * MB } };
	struct ft_span out[8];
	uint32_t n = ft_cover(spans, 3, alloc, 1, CHUNK, out, 8);
	assert_int_equal(n, 2);
	assert_int_equal(out[0].lo, 2 * MB); /* [1, 9) -> chunks [2, 8) */
	assert_int_equal(out[0].hi, 8 * MB);
	assert_int_equal(out[1].lo, 12 * MB);
	assert_int_equal(out[1].hi, 16 * MB);
	/* a span across two allocations is cut at the boundary */
	struct ft_span two[] = { { 0, 4 * MB }, { 4 * MB, 8 * MB } };
	struct ft_span across[] = { { 1 * MB, 8 * MB } };
	n = ft_cover(across, 1, two, 2, CHUNK, out, 8);
	assert_int_equal(n, 2);
	assert_int_equal(out[0].lo, 2 * MB);
	assert_int_equal(out[0].hi, 4 * MB);
	assert_int_equal(out[1].lo, 4 * MB);
	assert_int_equal(out[1].hi, 8 * MB);
	/* outside any allocation, or less than a chunk: nothing */
	struct ft_span small[] = { { 1 * MB, 3 * MB } };
	assert_int_equal(ft_cover(small, 1, alloc, 1, CHUNK, out, 8), 0);
	struct ft_span far[] = { { 32 * MB, 40 * MB } };
	assert_int_equal(ft_cover(far, 1, alloc, 1, CHUNK, out, 8), 0);
}

/* --------------------------------------------------------- simulation */

#define NS 5          /* streams: 0 = the copy stream, 1..3 compute, 4 the slices'
			 (FT_EXPERT_PAGING's demand stream) */
#define MAXOPS 200000
#define NEV 4096

enum { OP_KERNEL, OP_COPY };

struct op {
	int kind, stream, block, trap;  /* copy: into block, holding trap */
	uint64_t lo, hi;                /* copy: the bytes written (alloc mode) */
	uint64_t at[4];                 /* kernel: the address of each read (0: the
					   trap's, as check() sees it) */
	int reads[4], nreads;           /* kernel: traps read */
	int rblock[4];                  /* kernel: their blocks when it was launched */
	uint32_t clock[NS];
};

static struct sim {
	struct op op[MAXOPS];
	int nops;
	uint32_t cur[NS][NS];           /* each stream's clock for its next op */
	uint32_t ev[NEV][NS];           /* clock captured by each event */
	int nev;
	int ntraps;
	uint64_t base[64];              /* trap t's run: [base, base + CHUNK) */
	int capturing;                  /* a capture is in progress */
	uint64_t captured_bytes;        /* copied into captures */
	char captured[NEV];             /* the event was last recorded in one */
} S;

static int stream_id(CUstream s)
{
	return (int)(uintptr_t)s;
}

static void add_op(struct op *o)
{
	int s = o->stream;
	S.cur[s][s]++;
	memcpy(o->clock, S.cur[s], sizeof(o->clock));
	S.op[S.nops++] = *o;
}

static CUresult f_event_create(CUevent *e, unsigned flags)
{
	(void)flags;
	*e = (CUevent)(uintptr_t)(++S.nev);
	return CUDA_SUCCESS;
}

static CUresult f_record(CUevent e, CUstream s)
{
	/* captured work runs at replays, not now: it orders nothing here */
	S.captured[(uintptr_t)e] = (char)S.capturing;
	if (!S.capturing)
		memcpy(S.ev[(uintptr_t)e], S.cur[stream_id(s)], sizeof(S.ev[0]));
	return CUDA_SUCCESS;
}

static CUresult f_wait(CUstream s, CUevent e, unsigned flags)
{
	(void)flags;
	/* as the driver: an event last recorded in a capture cannot be
	 * waited on once it is over (CUDA_ERROR_CAPTURED_EVENT) */
	if (S.captured[(uintptr_t)e] && !S.capturing)
		fail_msg("a wait on event %d, last recorded in a capture that is over",
			 (int)(uintptr_t)e);
	if (S.capturing)
		return CUDA_SUCCESS;
	uint32_t *c = S.cur[stream_id(s)];
	for (int k = 0; k < NS; k++)
		if (S.ev[(uintptr_t)e][k] > c[k])
			c[k] = S.ev[(uintptr_t)e][k];
	return CUDA_SUCCESS;
}

static struct ft_offload *O;

/* The copy stream is stream 0, any other the engine makes (the slices'
 * demand stream) stream 4. */
static int streams_made;
static CUresult f_stream(CUstream *s, unsigned flags)
{
	(void)flags;
	*s = (CUstream)(uintptr_t)(streams_made++ ? 4 : 0);
	return CUDA_SUCCESS;
}

static CUresult f_copy(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	(void)src;
	if (S.capturing) {
		S.captured_bytes += n;
		return CUDA_SUCCESS;
	}
	struct op o = { .kind = OP_COPY, .stream = stream_id(s), .trap = -1, .lo = dst,
			.hi = dst + n };
	for (int t = 0; t < S.ntraps; t++) {
		if (dst == S.base[t])
			o.trap = t;
		for (uint32_t i = 0; o.trap < 0 && i < O->t[t].nruns; i++)
			if (dst >= O->t[t].runs[i].lo && dst < O->t[t].runs[i].hi)
				o.trap = t; /* a part of a trap's run: a slice */
	}
	assert_true(o.trap >= 0);
	o.block = O->t[o.trap].block;
	add_op(&o);
	return CUDA_SUCCESS;
}

static CUresult f_sync(void)
{
	/* every stream waits for everything */
	uint32_t all[NS] = { 0 };
	for (int s = 0; s < NS; s++)
		for (int k = 0; k < NS; k++)
			if (S.cur[s][k] > all[k])
				all[k] = S.cur[s][k];
	for (int s = 0; s < NS; s++)
		memcpy(S.cur[s], all, sizeof(all));
	return CUDA_SUCCESS;
}

static struct ft_real real;
static struct ft_stats stats;
/* every launch is counted, as the interposer counts it before the executor
 * sees it (executor.c: follow_table knows launches one after another by it) */
#define ft_off_launch(...) (atomic_fetch_add(&stats.v[FT_STAT_launches], 1), ft_off_launch(__VA_ARGS__))
static struct ft_vmm vmm;
static int hold_ignored = 1; /* FT_HOLD_IGNORED of the engines made */

/* The VMM's allocations of a test: one chunk-aligned range each, every
 * chunk with memory of its own. */
static struct ft_vmm_alloc va[64];
static CUmemGenericAllocationHandle own[64][32];
static unsigned char hostflag[64][32];

/* The default layout: trap t's one weight is one chunk at base[t], an
 * allocation of its own. */
static uint32_t layout(int ntraps, struct ft_off_weight *w, struct ft_span *allocs)
{
	for (int t = 0; t < ntraps; t++) {
		S.base[t] = (uint64_t)(t + 1) * 16 * MB;
		w[t] = (struct ft_off_weight){ S.base[t], S.base[t] + CHUNK, (uint32_t)t, 0, 0, NULL, 0 };
		allocs[t] = (struct ft_span){ S.base[t], S.base[t] + CHUNK };
	}
	return (uint32_t)ntraps;
}

/* An engine made by ft_off_init and ft_off_stage (the stubs above stand
 * for the driver) over ntraps traps, traps with block[t] >= 0 offloaded,
 * the weights w[0..nw) in the VMM allocations allocs[0..na) (sorted, at
 * most 4 chunks each), the copy stream id 0.  S.base[t] is where trap t's
 * copies land (its first run). */
static struct ft_offload *engine_of(int ntraps, const int *block, int nblocks, int mode,
				    const struct ft_off_weight *w, uint32_t nw,
				    const struct ft_span *allocs, uint32_t na)
{
	stub_engine_driver(&real); /* then the calls the simulation watches */
	real.cuEventCreate = f_event_create;
	real.cuEventRecord = f_record;
	real.cuStreamWaitEvent = f_wait;
	real.cuMemcpyHtoDAsync_v2 = f_copy;
	real.cuCtxSynchronize = f_sync;
	real.cuStreamCreate = f_stream;
	streams_made = 0;
	memset(&stats, 0, sizeof(stats));
	stub_vmm(&vmm, &real, CHUNK, va, na);
	for (uint32_t i = 0; i < na; i++) {
		uint32_t n = (uint32_t)((allocs[i].hi - allocs[i].lo) / CHUNK);
		assert_true(n >= 1 && n <= 32);
		for (uint32_t k = 0; k < n; k++)
			own[i][k] = 1 + i * 32 + k, hostflag[i][k] = 0;
		va[i] = (struct ft_vmm_alloc){ .base = allocs[i].lo, .size = n * CHUNK, .nchunks = n,
					       .own = own[i], .host = hostflag[i] };
	}
	const struct ft_off_config c = { .real = &real, .vmm = &vmm, .stats = &stats,
					 .mode = mode, .pinned = 1, .hold_ignored = hold_ignored };
	struct ft_offload *o = ft_off_new();
	char why[256];
	if (ft_off_init(o, &c, block, (uint32_t)ntraps, (uint32_t)nblocks, w, nw, why, sizeof(why)) ||
	    ft_off_stage(o, why, sizeof(why)))
		fail_msg("the engine's set-up failed: %s", why);
	memset(&stats, 0, sizeof(stats));
	O = o;
	return o;
}

/* An engine over ntraps traps of one chunk each (layout). */
static struct ft_offload *engine(int ntraps, const int *block, int nblocks, int mode)
{
	struct ft_off_weight w[64];
	struct ft_span a[64];
	memset(&S, 0, sizeof(S));
	S.ntraps = ntraps;
	uint32_t n = layout(ntraps, w, a);
	return engine_of(ntraps, block, nblocks, mode, w, n, a, n);
}

/* The default layout of ntraps traps, with extra weights w[0..nw) added
 * and allocations moved by edit (NULL: none) before the engine is made. */
static struct ft_offload *engine_edit(int ntraps, const int *block, int nblocks,
				      const struct ft_off_weight *extra, uint32_t nextra,
				      uint32_t (*edit)(struct ft_off_weight *, uint32_t,
						       struct ft_span *, uint32_t))
{
	struct ft_off_weight w[64];
	struct ft_span a[64];
	memset(&S, 0, sizeof(S));
	S.ntraps = ntraps;
	uint32_t n = layout(ntraps, w, a), na = n;
	for (uint32_t i = 0; i < nextra; i++)
		w[n++] = extra[i];
	if (edit)
		na = edit(w, n, a, na);
	return engine_of(ntraps, block, nblocks, FT_TM_ALLOCATION_BLOCK, w, n, a, na);
}

static void done(struct ft_offload *o)
{
	ft_off_destroy(o);
}

/* A kernel op after the executor saw it: the blocks its reads had then (a
 * trap that came back to the GPU is resident from then on). */
static void launched(struct op *k)
{
	for (int i = 0; i < k->nreads; i++)
		k->rblock[i] = O->t[k->reads[i]].block;
	add_op(k);
}

/* Kernel kern (NULL: one the executor keeps no statistics for) on stream
 * s reading traps r[0..n), each through its parameter word 0. */
static void kernel_of(struct ft_offload *o, int s, const int *r, int n, struct ft_kernel *kern)
{
	uint64_t a[4];
	static const uint16_t words[4];
	struct op k = { .kind = OP_KERNEL, .stream = s, .nreads = n };
	for (int i = 0; i < n; i++) {
		a[i] = S.base[r[i]];
		k.reads[i] = r[i];
	}
	ft_off_launch(o, (CUstream)(uintptr_t)s, a, kern ? words : NULL, (unsigned)n, 0, kern, "k");
	launched(&k);
}

static void kernel(struct ft_offload *o, int s, const int *r, int n)
{
	kernel_of(o, s, r, n, NULL);
}

/* Kernel kern (NULL: one the executor keeps no statistics for) on stream 1
 * whose parameters hold the addresses a[0..na) (in its words 0), reading
 * traps r[0..nr). */
static void kernel_at_of(struct ft_offload *o, struct ft_kernel *kern, const uint64_t *a,
			 unsigned na, const int *r, int nr, const char *name)
{
	static const uint16_t words[4];
	struct op k = { .kind = OP_KERNEL, .stream = 1, .nreads = nr };
	memcpy(k.reads, r, (size_t)nr * sizeof(*r));
	ft_off_launch(o, (CUstream)(uintptr_t)1, a, kern ? words : NULL, na, 0, kern, name);
	launched(&k);
}

static void kernel_at(struct ft_offload *o, const uint64_t *a, unsigned na, const int *r, int nr,
		      const char *name)
{
	kernel_at_of(o, NULL, a, na, r, nr, name);
}

/* The engine and a kernel's statistics, freed. */
static void done_with(struct ft_offload *o, struct ft_kernel *kern)
{
	free((void *)atomic_load(&kern->turns));
	free(kern);
	done(o);
}

static int hb(const struct op *a, const struct op *b)
{
	return a->clock[a->stream] <= b->clock[a->stream];
}

/* The invariant, over everything recorded. */
static void check(void)
{
	for (int i = 0; i < S.nops; i++) {
		const struct op *k = &S.op[i];
		if (k->kind != OP_KERNEL)
			continue;
		for (int r = 0; r < k->nreads; r++) {
			int t = k->reads[r], b = k->rblock[r];
			if (b < 0)
				continue;
			int last = -1;
			for (int j = 0; j < i; j++)
				if (S.op[j].kind == OP_COPY && S.op[j].block == b)
					last = j;
			if (last < 0 || S.op[last].trap != t)
				fail_msg("kernel %d reads trap %d, but the last copy into block %d "
					 "before it holds trap %d", i, t, b,
					 last < 0 ? -1 : S.op[last].trap);
			if (!hb(&S.op[last], k))
				fail_msg("kernel %d may run before trap %d's copy (op %d)", i, t, last);
			for (int j = i + 1; j < S.nops; j++)
				if (S.op[j].kind == OP_COPY && S.op[j].block == b && S.op[j].trap != t &&
				    !hb(k, &S.op[j]))
					fail_msg("copy %d (trap %d) into block %d may overwrite trap %d "
						 "while kernel %d reads it", j, S.op[j].trap, b, t, i);
		}
	}
}

static const int round_robin4[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 };

static void regular_passes(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 5; pass++)
		for (int t = 0; t < 10; t++)
			for (int k = 0; k < 3; k++)
				kernel(o, 1, &t, 1);
	check();
	/* one copy per trap and pass, plus the next pass's first trap, loaded
	 * during the tail of the last one */
	assert_int_equal(stats.v[FT_STAT_offload_copies], 51);
	assert_int_equal(stats.v[FT_STAT_offload_misses], 1); /* only the very first */
	done(o);
}

/* Trap 9 also holds a small weight that stayed on the GPU whole (in no
 * run), whose extent reaches over activations a layer-1 kernel reads: that
 * reference is not trap 9's (it shares trap 1's block) and loads nothing. */
static void activations_in_a_resident_weights_extent(void **state)
{
	(void)state;
	uint64_t norm = 10 * 16 * MB + 4 * CHUNK; /* beside trap 9's weight, in no allocation */
	const struct ft_off_weight small = { norm, norm + CHUNK, 9, 0, 0, NULL, 0 };
	struct ft_offload *o = engine_edit(10, round_robin4, 4, &small, 1, NULL);
	for (int pass = 0; pass < 5; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 1) {
				uint64_t a[2] = { S.base[1], norm + 256 };
				kernel_at(o, a, 2, (const int[]){ 1 }, 1, "k");
			}
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	assert_int_equal(stats.v[FT_STAT_offload_copies], 51);
	done(o);
}

static void several_streams(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			kernel(o, 2 + t % 2, &t, 1); /* a side stream reads it too */
		}
	check();
	done(o);
}

static void two_traps_in_one_kernel(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 9; t++) {
			int both[] = { t, t + 1 };
			kernel(o, 1, both, 2);
			kernel(o, 1, &t, 1);
		}
	check();
	done(o);
}

/* A kernel reads trap t < 6 and also carries a pointer into trap t + 4,
 * which shares t's block (a new kernel: no statistics yet, so whether the
 * pointer is read cannot be known).  The launch must not read the other's
 * bytes: one of the two comes back to the GPU for good (memory, not
 * results, pays for the guess), the one further from the pass's position:
 * traps 4 to 7, once each; then (t, t + 4) no longer share a block. */
static void stale_reference_into_the_same_block(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 5; pass++)
		for (int t = 0; t < 10; t++)
			for (int k = 0; k < 3; k++) {
				uint64_t a[2] = { S.base[t], S.base[(t + 4) % 10] };
				struct op op = { .kind = OP_KERNEL, .stream = 1, .nreads = 2 };
				op.reads[0] = t;
				op.reads[1] = (t + 4) % 10;
				int both = !k && t <= 5;
				if (!both)
					op.nreads = 1;
				ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, both ? 2 : 1, 0,
					      NULL, "k");
				launched(&op);
			}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 4);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 4);
	for (int t = 4; t < 8; t++)
		assert_int_equal(o->t[t].block, -1);
	done(o);
}

/* Two traps that share a block are read by one launch (the plan did not
 * know they are read together): the launch must read both right.  Before
 * the fix the nearer was loaded and the other reference dropped as stale,
 * so the kernel read trap 1's bytes as trap 5's. */
static CUresult copies_done;   /* what cuEventQuery says of every event */

static CUresult f_query(CUevent e)
{
	(void)e;
	return copies_done;
}

/* A kernel reads trap t and, through a word judged stale, the next trap,
 * which the prefetch has put in its block: with FT_HOLD_IGNORED, once that
 * copy is done, the launch waits for it and the block is not reloaded
 * under it, so the read is right (check()) though the judgement was wrong.
 * While the copy is under way nothing is held (the launch would stall).  A
 * stale word into a trap that is not in its block loads nothing.  Without
 * FT_HOLD_IGNORED both are only counted. */
static void an_ignored_reference_holds_its_trap_in_its_block(void **state)
{
	(void)state;
	static const struct { int hold; CUresult query; } runs[] = {
		{ 1, CUDA_SUCCESS }, { 1, CUDA_ERROR_NOT_READY }, { 0, CUDA_SUCCESS } };
	for (int r = 0; r < 3; r++) {
		hold_ignored = runs[r].hold;
		copies_done = runs[r].query;
		struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
		real.cuEventQuery = f_query;
		int launches = 0, in_block = 0, held = hold_ignored && copies_done == CUDA_SUCCESS;
		for (int pass = 0; pass < 3; pass++)
			for (int t = 0; t < 10; t++) {
				int u = (t + 1) % 10, far = (t + 5) % 10;
				uint64_t a[3] = { S.base[t], S.base[u], S.base[far] };
				struct op op = { .kind = OP_KERNEL, .stream = 1, .nreads = 1 };
				op.reads[0] = t;
				/* u is in its block (prefetched), except at the
				 * first launch and where its block still holds the
				 * trap before t */
				if (o->b[o->t[u].block].occupant == u) {
					in_block++;
					if (held)
						op.reads[op.nreads++] = u;
				}
				ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, 1, 2, NULL, "k");
				launched(&op);
				launches++;
			}
		check();
		assert_true(in_block >= 2 * launches / 3);
		assert_int_equal(stats.v[FT_STAT_offload_ignored_refs], 2 * launches);
		assert_int_equal(stats.v[FT_STAT_offload_held], held ? in_block : 0);
		/* nothing loaded for the stale words: each trap once a pass
		 * (and trap 0 for the next), only the first load late */
		assert_int_equal(stats.v[FT_STAT_offload_copies], launches + 1);
		assert_int_equal(stats.v[FT_STAT_offload_misses], 1);
		done(o);
	}
	hold_ignored = 1;
}

/* Traps referred to in a pass only by ignored references, never loaded
 * (on the H200, every prefill GEMM's weight of a model rescaled before its
 * first forward, with wrong logits), make the pass counted and said; stale
 * words into traps the pass reads anyway (ATen's elementwise kernels carry
 * many) do not. */
static void a_pass_of_ignored_references_is_said(void **state)
{
	(void)state;
	for (int unread = 0; unread < 2; unread++) {
		struct ft_offload *o = engine(12, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
		/* unread: the launches read traps 0-5 only, and carry
		 * stale words into 6-11 */
		int n = unread ? 6 : 12;
		for (int pass = 0; pass < 3; pass++)
			for (int t = 0; t < n; t++) {
				uint64_t a[3] = { S.base[t], S.base[(t + 6) % 12], S.base[(t + 8) % 12] };
				struct op op = { .kind = OP_KERNEL, .stream = 1, .nreads = 1 };
				op.reads[0] = t;
				ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, 1, unread ? 1 : 2, NULL,
					      "k");
				launched(&op);
			}
		check();
		/* two passes ended (the third is under way) */
		assert_int_equal(stats.v[FT_STAT_offload_ignored_passes], unread ? 2 : 0);
		assert_true(stats.v[FT_STAT_offload_ignored_refs] >= (unread ? 18u : 72u));
		done(o);
	}
}

static void a_launch_reading_two_traps_of_one_block_reads_both(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 5) {
				int both[] = { 5, 1 }; /* trap 1 shares block 0 with 5 */
				kernel(o, 1, both, 2);
			}
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	done(o);
}

/* The same inside a CUDA graph capture, where the device cannot be
 * waited for: the capture leaves the smaller... (equal: the further) trap
 * out of its loads, and it comes back to the GPU when the capture is over,
 * before any replay; eager launches then read it from its own memory. */
static void two_traps_of_one_block_in_a_capture(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	S.capturing = 1;
	for (int t = 0; t < 10; t++) {
		uint64_t a[2] = { S.base[t], S.base[1] };
		ft_off_capture_launch(o, (CUstream)(uintptr_t)1, 9, a, NULL, t == 5 ? 2 : 1, 0,
				      NULL, "k");
	}
	ft_off_capture_end(o, (CUstream)(uintptr_t)1, 9);
	S.capturing = 0;
	int gone = o->t[1].pending ? 1 : o->t[5].pending ? 5 : -1;
	assert_true(gone >= 0);
	assert_true(o->t[gone].block >= 0); /* not while capturing */
	ft_off_capture_over(o);
	assert_int_equal(o->t[gone].block, -1);
	assert_int_equal(o->t[gone].pending, 0);
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	check();
	done(o);
}

/* Trap 1's allocation begins a chunk earlier, with trap 0's v_proj. */
static uint32_t v_proj_segment(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
			       uint32_t na)
{
	(void)w, (void)nw;
	a[1].lo -= CHUNK;
	return na;
}

/* The H200's Qwen2 failure.  Trap 0 (resident: the embedding with layer
 * 0's attention, and small regions every layer reads, biases and norms)
 * holds layer 0's v_proj, which the allocator put right before layer 1's
 * k_proj (trap 1) in one segment: a link, since one tensor may have been
 * seen through two pointers.  Every layer's bias kernel reads one of trap
 * 0's small regions.  A read of any trap 0 weight loaded trap 1 with it,
 * into block 0, under the kernel reading trap 5 (also block 0): wrong
 * logits in every decode step.  Only a read of the linked weight itself
 * may load trap 1. */
static void a_link_is_followed_from_its_weight_only(void **state)
{
	(void)state;
	static const int blocks[] = { -1, 0, 1, 2, 3, 0, 1, 2, 3, 0 };
	/* trap 0's v_proj: the chunk before trap 1's weight, one allocation;
	 * a small region of trap 0 (biases) in none */
	uint64_t v0 = 2 * 16 * MB - CHUNK, bias = 16 * MB + 4 * CHUNK;
	const struct ft_off_weight extra[] = { { v0, v0 + CHUNK, 0, 0, 0, NULL, 0 },
					       { bias, bias + CHUNK, 0, 0, 0, NULL, 0 } };
	struct ft_offload *o = engine_edit(10, blocks, 4, extra, 2, v_proj_segment);
	for (uint32_t i = 0; i < o->nw; i++) /* only v_proj runs on into trap 1 */
		assert_int_equal(o->w[i].link, o->w[i].lo == v0 ? 2 : 0);
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			/* the bias kernel: trap t and trap 0's small region */
			uint64_t a[2] = { S.base[t], bias };
			kernel_at(o, a, 2, (const int[]){ t, 0 }, 2, "bias");
			if (t == 0) /* layer 0's v_proj, read through the linked weight */
				kernel_at(o, &v0, 1, (const int[]){ 0, 1 }, 2, "v");
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	/* one load per offloaded trap and pass (and the next pass's first) */
	assert_true(stats.v[FT_STAT_offload_copies] <= 4 * 9 + 1);
	done(o);
}

/* Trap 1's weight spans two chunks, the second its allocator segment's
 * free tail. */
static uint32_t two_chunk_weight(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				 uint32_t na)
{
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 1)
			w[i].hi += CHUNK;
	a[1].hi += CHUNK;
	return na;
}

/* The H200's Qwen2 run, layer 0's q_proj: the allocator put tensors in the
 * free tail of an offloaded weight's segment (a decode GEMM's workspace,
 * the output of another).  The first brings the tail's chunk back to the
 * GPU; a later one, lower in that chunk, must load nothing: it once counted
 * as a read of trap 1, so every GEMM that used it while the pass was in
 * trap 5 (trap 1's block) brought trap 5 back to the GPU, and others loaded
 * trap 1 (1 GiB there) again and again.  A copy out of it loads nothing
 * either. */
/* The bytes the copies into blocks moved (the fake driver's record). */
static uint64_t bytes_copied(void)
{
	uint64_t n = 0;
	for (int i = 0; i < S.nops; i++)
		if (S.op[i].kind == OP_COPY)
			n += S.op[i].hi - S.op[i].lo;
	return n;
}

static void tensors_in_a_weights_tail_load_nothing(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, NULL, 0, two_chunk_weight);
	uint64_t first = S.base[1] + CHUNK + 4096, second = S.base[1] + CHUNK;
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 5) {
				uint64_t a[2] = { S.base[5], pass ? second : first };
				kernel_at(o, a, 2, (const int[]){ 5 }, 1, "gemm");
				ft_off_copy(o, (CUstream)(uintptr_t)1, 0, 0, second, 4096);
			}
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_tails], 1);
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 0);
	assert_int_equal(stats.v[FT_STAT_offload_copies], 4 * 10 + 1);
	/* the tail back on the GPU is copied no more, nor counted (on the
	 * H200 Qwen2's stores counted their tails: 4 % more than copied) */
	assert_int_equal(stats.v[FT_STAT_offload_copy_bytes], bytes_copied());
	done(o);
}

/* FT_VERIFY's pieces of a trap loaded in part: its dense part between the
 * slices and the slices copied in, at their offsets in the store (the runs
 * packed back to back); a slice not in (one across two runs) and a dead
 * run (a tail given back) are left out. */
static void verify_checks_the_pieces_a_block_holds(void **state)
{
	(void)state;
	const uint64_t M = 1 << 20;
	struct ft_span runs[3] = { { 16 * M, 20 * M }, { 22 * M, 26 * M }, { 26 * M, 28 * M } };
	unsigned char dead[3] = { 0, 0, 1 };
	struct ft_off_slice sl[4] = { { 17 * M, 18 * M, 1 }, { 19 * M, 23 * M, 1 },
				      { 24 * M, 25 * M, 1 }, { 25 * M + M / 2, 27 * M, 1 } };
	uint64_t in = 1 | 4 | 8; /* slice 1 is not in the block */
	struct ft_off_trap x = { .nruns = 3, .runs = runs, .dead = dead, .sl = sl, .nsl = 4,
				 .sl_in = &in };
	/* lo, hi, store offset: in half MiB */
	static const uint64_t want[][3] = {
		{ 32, 34, 0 }, { 34, 36, 2 }, { 36, 38, 4 },                    /* run 0 */
		{ 46, 48, 10 }, { 48, 50, 12 }, { 50, 51, 14 }, { 51, 52, 15 }, /* run 1 */
	};
	uint32_t n = 0;
	struct ft_off_piece *p = ft_off_slices_loaded(&x, &n);
	assert_non_null(p);
	assert_int_equal(n, 7);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(p[i].lo, want[i][0] * (M / 2));
		assert_int_equal(p[i].hi, want[i][1] * (M / 2));
		assert_int_equal(p[i].at, want[i][2] * (M / 2));
	}
	free(p);
}

/* The weights of traps 1 and 5 (block 1's) span two chunks each. */
static uint32_t two_chunk_block1(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				 uint32_t na)
{
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 1 || w[i].trap == 5)
			w[i].hi += CHUNK;
	a[1].hi += CHUNK;
	a[5].hi += CHUNK;
	return na;
}

static int creates_left = -1; /* device chunks cuMemCreate still makes, -1: any */
static int sync_copies;

static CUresult create_until_out(CUmemGenericAllocationHandle *h, size_t n,
				 const CUmemAllocationProp *p, unsigned long long f)
{
	if (!creates_left)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (creates_left > 0)
		creates_left--;
	return stub_create(h, n, p, f);
}

static CUresult count_sync_copy(CUdeviceptr d, const void *p, size_t n)
{
	(void)d, (void)p, (void)n;
	sync_copies++;
	return CUDA_SUCCESS;
}

/* Trap 5 (two chunks) must come back to the GPU when one launch reads it
 * with trap 1, its block's other trap (as large, and nearer the pass), but device memory runs out after
 * one chunk.  Its chunks are still the block's memory then: filling them
 * from the store would overwrite trap 1's bytes.  It stays offloaded
 * whole, nothing is copied, the chunk it got goes back; once memory is
 * there again, the next such launch brings it back. */
static void a_trap_that_finds_no_memory_stays_offloaded_whole(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, NULL, 0, two_chunk_block1);
	real.cuMemCreate = create_until_out;
	real.cuMemcpyHtoD_v2 = count_sync_copy;
	sync_copies = 0;
	uint64_t held = vmm.device_bytes;
	for (int pass = 0; pass < 2; pass++) {
		creates_left = pass ? -1 : 1;
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 1) {
				int both[] = { 1, 5 };
				kernel(o, 1, both, 2);
			}
			if (!pass && t == 1) {
				assert_int_equal(stats.v[FT_STAT_offload_stuck], 1);
				assert_int_equal(stats.v[FT_STAT_offload_demoted], 0);
				assert_int_equal(o->t[5].block, 1);
				assert_int_equal(sync_copies, 0);
				assert_int_equal(vmm.device_bytes, held);
				assert_int_equal(va[5].own[0], 0);
				assert_int_equal(va[5].own[1], 0);
			}
		}
	}
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	assert_int_equal(o->t[5].block, -1);
	assert_int_equal(sync_copies, 1);
	assert_int_equal(vmm.device_bytes, held + 2 * CHUNK);
	assert_true(va[5].own[0] && va[5].own[1]);
	creates_left = -1;
	done(o);
}

/* Trap 2's weight starts half-way into its allocation's first chunk,
 * which other tensors share (it stays on the GPU), and runs on through
 * the second, which leaves it: its copies land there. */
static uint32_t shared_first_chunk(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				   uint32_t na)
{
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 2)
			w[i].lo += CHUNK / 2, w[i].hi += CHUNK;
	a[2].hi += CHUNK;
	S.base[2] += CHUNK;
	return na;
}

/* A launch reads trap 2 only through a view into its weight that begins
 * in the resident first chunk (a slice of a fused weight): the bytes it
 * reads go on into the chunk that left the GPU, so the trap is loaded
 * (it once loaded nothing: the reference was taken for a tensor in a
 * resident chunk). */
static void a_view_from_a_resident_chunk_into_offloaded_ones_loads_the_trap(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, NULL, 0, shared_first_chunk);
	uint64_t view = S.base[2] - CHUNK / 2 + 4096;
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			if (t != 2) {
				kernel(o, 1, &t, 1);
				continue;
			}
			kernel_at(o, &view, 1, (const int[]){ 2 }, 1, "slice");
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_tails], 0);
	done(o);
}

/* A tensor placed in a weight's free tail, first referred to inside a
 * capture: the tail cannot come back alone (the device cannot be waited
 * for), so the whole trap comes back when the capture is over, before any
 * replay; the capture leaves it out of its loads. */
static void a_tail_tensor_in_a_capture_brings_the_trap_back_after_it(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, NULL, 0, two_chunk_weight);
	uint64_t tail = S.base[1] + CHUNK + 4096;
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	S.capturing = 1;
	for (int t = 0; t < 10; t++) {
		uint64_t a[2] = { S.base[t], tail };
		ft_off_capture_launch(o, (CUstream)(uintptr_t)1, 9, a, NULL, t == 4 ? 2 : 1, 0,
				      NULL, "k");
	}
	ft_off_capture_end(o, (CUstream)(uintptr_t)1, 9);
	S.capturing = 0;
	assert_int_equal(o->t[1].pending, 1);
	assert_true(o->t[1].block >= 0);
	ft_off_capture_over(o);
	assert_int_equal(o->t[1].block, -1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	assert_int_equal(stats.v[FT_STAT_offload_tails], 0);
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	check();
	done(o);
}

static _Atomic int others; /* captures under way in other threads */
static int capture_at_sync;  /* the next device wait starts one */

static CUresult sync_then_capture(void)
{
	if (capture_at_sync && !--capture_at_sync)
		atomic_store(&others, 1);
	return f_sync();
}

/* Two traps wait to come back (conflicts while another thread captured);
 * once it is over, the first comes back, and while it waits for the
 * device another capture begins: the second must stay pending, and come
 * back after that one (it was once forgotten, its block read by later
 * captures as if it held the trap). */
static void a_capture_that_begins_while_traps_come_back(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	o->captures = &others;
	real.cuCtxSynchronize = sync_then_capture;
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	atomic_store(&others, 1);
	int a[] = { 1, 5 }, b[] = { 2, 6 };
	kernel(o, 1, a, 2);
	kernel(o, 1, b, 2);
	assert_int_equal(o->npending, 2);
	atomic_store(&others, 0);
	capture_at_sync = 1;
	int zero = 0;
	kernel(o, 1, &zero, 1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	assert_int_equal(o->npending, 1);
	atomic_store(&others, 0);
	kernel(o, 1, &zero, 1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 2);
	assert_int_equal(o->npending, 0);
	for (int t = 0; t < 10; t++)
		assert_int_equal(o->t[t].pending, 0);
	done(o);
}

/* An eager launch reads two traps of one block while another thread
 * captures a graph: the device cannot be waited for, so the trap cannot
 * come back now.  It is pending (an error says the launch may read wrong),
 * and comes back at the first launch after the capture. */
static void a_conflict_while_another_thread_captures_waits_for_its_end(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	atomic_store(&others, 0);
	o->captures = &others;
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	atomic_store(&others, 1);
	int both[] = { 1, 5 };
	kernel(o, 1, both, 2);
	int gone = o->t[1].pending ? 1 : o->t[5].pending ? 5 : -1;
	assert_true(gone >= 0);
	assert_true(o->t[gone].block >= 0);
	assert_int_equal(stats.v[FT_STAT_offload_stuck], 1);
	atomic_store(&others, 0);
	int zero = 0;
	kernel(o, 1, &zero, 1);
	assert_int_equal(o->t[gone].block, -1);
	assert_int_equal(o->t[gone].pending, 0);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	done(o);
}

/* Trap 1's weight spans two chunks, all of it views discovery saw (the
 * slices of a stacked expert tensor). */
static uint32_t two_chunk_views(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				uint32_t na)
{
	na = two_chunk_weight(w, nw, a, na);
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 1)
			w[i].views = w[i].hi;
	return na;
}

/* A read inside a weight, below the views discovery saw (a routed expert's
 * slice in its second chunk, while the pass is in trap 6): a read of the
 * weight's trap, loaded for it; not a tensor in the weight's tail, which
 * would come back to the GPU for good and be read there. */
static void a_view_inside_a_weight_loads_its_trap(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, NULL, 0, two_chunk_views);
	uint64_t expert = S.base[1] + CHUNK + 4096;
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 6) {
				uint64_t a[2] = { S.base[6], expert };
				kernel_at(o, a, 2, (const int[]){ 6, 1 }, 2, "expert");
			}
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_tails], 0);
	assert_int_equal(stats.v[FT_STAT_offload_foreign_refs], 0);
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 0);
	done(o);
}

/* Two small weights side by side in one small allocator segment (one
 * chunk, so neither leaves the GPU): layer 0's bias (trap 1) and a region
 * of trap 0 (the embedding's trap, offloaded in block 0). */
static uint32_t small_segment(struct ft_off_weight *w, uint32_t nw, struct ft_span *a, uint32_t na)
{
	uint64_t seg = 12 * 16 * MB;
	w[nw++] = (struct ft_off_weight){ seg + 4096, seg + 65536, 1, 0, 0, NULL, 0 };
	w[nw++] = (struct ft_off_weight){ seg + 65536, seg + CHUNK, 0, 0, 0, NULL, 0 };
	a[na++] = (struct ft_span){ seg, seg + CHUNK };
	return na;
}

/* The H200's Qwen2 run once more: every layer's kernels read layer 0's
 * bias, which abuts a small region of trap 0 in the segment the allocator
 * packs biases into: a link.  Neither weight left the GPU, so a read of the
 * bias reads nothing offloaded; it loaded trap 0 (1 GiB) at every layer
 * and sent the layers sharing its block back to the GPU. */
static void a_link_between_resident_bytes_loads_nothing(void **state)
{
	(void)state;
	struct ft_off_weight w[64];
	struct ft_span a[64];
	memset(&S, 0, sizeof(S));
	S.ntraps = 10;
	uint32_t n = layout(10, w, a), na = small_segment(w, n, a, n);
	struct ft_offload *o = engine_of(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK, w, n + 2, a, na);
	uint64_t bias = 12 * 16 * MB + 4096;
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			uint64_t r[2] = { S.base[t], bias };
			kernel_at(o, r, 2, (const int[]){ t }, 1, "bias_add");
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	assert_int_equal(stats.v[FT_STAT_offload_copies], 4 * 10 + 1);
	done(o);
}

static void tied_weight_read_at_both_ends(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	int zero = 0;
	for (int pass = 0; pass < 4; pass++) {
		for (int t = 0; t < 10; t++)
			kernel(o, 1, &t, 1);
		kernel(o, 1, &zero, 1); /* the head reads the embedding */
	}
	check();
	done(o);
}

/* Trap 7's weight placed right after trap 2's; with one_allocation, both
 * lie in one VMM allocation (else in two that abut). */
static int one_allocation;

static uint32_t abut(struct ft_off_weight *w, uint32_t nw, struct ft_span *a, uint32_t na)
{
	uint64_t at = 3 * 16 * MB + CHUNK; /* where trap 2's weight ends */
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 7)
			w[i] = (struct ft_off_weight){ at, at + CHUNK, 7, 0, 0, NULL, 0 };
	uint32_t k = 0;
	for (uint32_t i = 0; i < na; i++) {
		if (a[i].lo == 8 * 16 * MB)
			continue; /* trap 7's own allocation moves */
		if (a[i].lo == 3 * 16 * MB && one_allocation)
			a[i].hi += CHUNK;
		a[k++] = a[i];
		if (a[i].lo == 3 * 16 * MB && !one_allocation)
			a[k++] = (struct ft_span){ at, at + CHUNK };
	}
	S.base[7] = at;
	return k;
}

/* Trap 7's weight begins where trap 2's ends in one allocation (a stale
 * pointer into one tensor, seen as two): a kernel reading trap 2 reads
 * trap 7's bytes too, so trap 7 must be in place as well, eager or in a
 * graph paged at its launch boundary. */
static void adjacent_weights_are_linked(void **state)
{
	(void)state;
	static const int blocks[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1 };
	one_allocation = 1;
	struct ft_offload *o = engine_edit(10, blocks, 4, NULL, 0, abut);
	for (uint32_t i = 0; i < o->nw; i++) /* trap 2's weight runs on into trap 7's */
		assert_int_equal(o->w[i].link, o->w[i].trap == 2 ? 8 : 0);
	struct ft_off_read rd[8];
	assert_int_equal(ft_off_graph_traps(o, &S.base[2], 1, rd, 8), 2);
	assert_int_equal(rd[0].trap, 2);
	assert_int_equal(rd[1].trap, 7);
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			uint64_t a = S.base[t];
			kernel_at(o, &a, 1, (const int[]){ t, 7 }, t == 2 ? 2 : 1, "k");
		}
	check();
	done(o);
}

/* Trap 2's weight, 16 chunks kept on the GPU out of any trap (shared
 * across the pass), followed in its allocation by trap 7's, one chunk (an
 * eighth of it at most), or two (more), above the other traps. */
static int tail_chunks = 1;

static uint32_t abut_kept(struct ft_off_weight *w, uint32_t nw, struct ft_span *a, uint32_t na)
{
	const uint64_t at = 40 * 16 * MB, end = at + 16 * CHUNK;
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 2)
			w[i] = (struct ft_off_weight){ at, end, UINT32_MAX, 0, 0, NULL, 0 };
		else if (w[i].trap == 7)
			w[i] = (struct ft_off_weight){ end, end + tail_chunks * CHUNK, 7, 0, 0, NULL, 0 };
	uint32_t k = 0;
	for (uint32_t i = 0; i < na; i++)
		if (a[i].lo != S.base[2] && a[i].lo != S.base[7])
			a[k++] = a[i];
	a[k++] = (struct ft_span){ at, end + tail_chunks * CHUNK };
	S.base[2] = at;
	S.base[7] = end;
	return k;
}

/* The H200's PIECEWISE start-up harness under FT_VERIFY: a word 4 bytes
 * past a row near the embedding's end split it into two weights; the
 * first, read all over the pass, stayed on the GPU out of its trap, the
 * last 9.9 MiB went with trap 0, and a lookup of a token there (through
 * the table's start) read another trap's bytes: NaN in 9 of 16 requests.
 * A weight that runs on from a kept one in its allocation, at most an
 * eighth of its size, is kept too: trap 7 (its only weight) is no longer
 * offloaded, and a read through the kept weight finds its bytes where they
 * always were.  A larger one is not (the layer after a shared bias). */
static void a_kept_weight_keeps_what_runs_on_from_it(void **state)
{
	(void)state;
	static const int blocks[] = { 0, 1, -1, 3, 0, 1, 2, 3, 0, 1 };
	tail_chunks = 3;
	struct ft_offload *o = engine_edit(10, blocks, 4, NULL, 0, abut_kept);
	assert_true(o->t[7].block >= 0);
	done(o);
	tail_chunks = 1;
	o = engine_edit(10, blocks, 4, NULL, 0, abut_kept);
	for (uint32_t i = 0; i < o->nw; i++) {
		assert_int_equal(o->w[i].link, 0);
		if (o->w[i].lo == S.base[2] || o->w[i].lo == S.base[7])
			assert_true(o->w[i].trap >= o->ntraps);
	}
	assert_int_equal(o->t[7].block, -1);
	struct ft_off_read rd[8];
	assert_int_equal(ft_off_graph_traps(o, &S.base[2], 1, rd, 8), 0);
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			uint64_t a = S.base[t];
			if (t == 2 || t == 7)
				kernel_at(o, &a, 1, (const int[]){ 0 }, 0, "kept");
			else
				kernel_at(o, &a, 1, (const int[]){ t }, 1, "k");
		}
	check();
	done(o);
}

/* Weights of two allocations that merely abut (VMM places allocations
 * side by side) are two tensors: no link, so a read of one never loads
 * the other. */
static void abutting_allocations_are_not_linked(void **state)
{
	(void)state;
	static const int blocks[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1 };
	one_allocation = 0;
	struct ft_offload *o = engine_edit(10, blocks, 4, NULL, 0, abut);
	for (uint32_t i = 0; i < o->nw; i++)
		assert_int_equal(o->w[i].link, 0);
	done(o);
}

/* A captured pass loads each offloaded trap once: the next pass's first
 * traps are loaded by the next replay itself (a capture assumes nothing
 * about the blocks), so loading them at the end of the capture would only
 * make every replay wait for copies nobody reads.  The layout of the
 * serving harness's plan on the H200: trap 0 resident, the last offloaded
 * trap moved to block 1 (an odd cycle), which left block 0 free for trap 1
 * near the end of the pass: each replay copied trap 1 twice (a 144 MiB
 * copy, 5 % of the step).  After the capture, eager work on another
 * stream waits for the eager copies, not on events the capture recorded
 * (the driver refuses such waits: the reads would race the copies). */
static void capture_loads_each_trap_once(void **state)
{
	(void)state;
	static const int blocks[] = { -1, 0, 1, 2, 3, 0, 1, 2, 3, 1 };
	struct ft_offload *o = engine(10, blocks, 4, FT_TM_ALLOCATION_BLOCK);
	for (int t = 0; t < 10; t++) /* an eager pass first */
		kernel(o, 1, &t, 1);
	for (int start = 0; start < 2; start++) {
		/* a capture from the pass's start, and one that begins at
		 * trap 3 and wraps (the pass boundary inside the graph) */
		uint64_t cap = 7 + (uint64_t)start;
		int first = start ? 3 : 0;
		uint64_t before = stats.v[FT_STAT_offload_copies];
		S.capturing = 1;
		for (int i = 0; i < 10; i++) {
			int t = (first + i) % 10;
			uint64_t a = S.base[t];
			ft_off_capture_launch(o, (CUstream)(uintptr_t)1, cap, &a, NULL, 1, 0, NULL, "k");
		}
		ft_off_capture_end(o, (CUstream)(uintptr_t)1, cap);
		S.capturing = 0;
		assert_int_equal(stats.v[FT_STAT_offload_copies] - before, 9);
		/* eager work goes on where it was, on a stream that did not
		 * read the blocks before (as PyTorch warms a graph up on a
		 * side stream, then runs eager work on its own) */
		for (int t = 0; t < 10; t++)
			kernel(o, 2 + start, &t, 1);
	}
	check();
	done(o);
}

/* A graph replay on stream s, as the engine sees it from outside: it loads
 * what it reads into any block (copies of no trap the eager state knows,
 * trap -2) and reads them, all in s's order. */
static void replay(struct ft_offload *o, int s)
{
	ft_off_replay(o, (CUstream)(uintptr_t)s, 0, 0);
	for (uint32_t b = 0; b < o->nblocks; b++) {
		struct op c = { .kind = OP_COPY, .stream = s, .block = (int)b, .trap = -2 };
		add_op(&c);
	}
	ft_off_replay(o, (CUstream)(uintptr_t)s, 1, 0);
}

/* Eager passes (on random streams, some cut short) and graph replays (on
 * random streams) interleave, as prefills and decode steps of a server:
 * no eager kernel reads a block a replay loaded, or one a copy may still
 * be writing, and no replay overwrites a block an eager kernel still
 * reads or an eager copy is still filling. */
static void eager_passes_between_replays(void **state)
{
	(void)state;
	srand(11);
	for (int round = 0; round < 200; round++) {
		int n = 4 + rand() % 12, nb = 2 + rand() % 3, block[16], m = 0;
		for (int t = 0; t < n; t++)
			block[t] = t == 0 || rand() % 3 == 0 ? -1 : m++ % nb;
		struct ft_offload *o = engine(n, block, nb, FT_TM_ALLOCATION_BLOCK);
		for (int i = 0; i < 12; i++) {
			if (rand() % 2) {
				replay(o, 1 + rand() % 3);
				continue;
			}
			int s = 1 + rand() % 3, end = rand() % 4 ? n : 1 + rand() % n;
			for (int t = 0; t < end; t++) {
				kernel(o, s, &t, 1);
				if (t && rand() % 2) {
					int zero = 0; /* a resident weight read between layers */
					kernel(o, s, &zero, 1);
				}
			}
		}
		check();
		/* a replay's use of a block comes after the eager copies into
		 * it before the replay, and before those after it */
		for (int j = 0; j < S.nops; j++) {
			if (S.op[j].kind != OP_COPY || S.op[j].trap != -2)
				continue;
			for (int i = 0; i < S.nops; i++) {
				if (S.op[i].kind != OP_COPY || S.op[i].trap < 0 ||
				    S.op[i].block != S.op[j].block)
					continue;
				if (i < j && !hb(&S.op[i], &S.op[j]))
					fail_msg("replay op %d may overwrite block %d while copy %d "
						 "fills it", j, S.op[j].block, i);
				if (i > j && !hb(&S.op[j], &S.op[i]))
					fail_msg("copy %d may fill block %d while replay op %d uses it",
						 i, S.op[j].block, j);
			}
		}
		done(o);
	}
}

/* After a replay the pass's position is unknown.  A launch then refers
 * into a resident trap's extent past its weight's start (the serving
 * harness's argmax over logits the allocator placed in a weight segment's
 * free tail): that is no weight read, so it must not place the pass.  Had
 * it, the prefill's new kernels would read traps 1, 2, 3... "out of turn",
 * their words would soon be taken for roaming ones, and their reads would
 * go unloaded (the H200 showed it: a layer read what the replay had left
 * in its block). */
static void a_tail_reference_does_not_place_the_pass(void **state)
{
	(void)state;
	static const int block[] = { -1, 0, 1, 2, -1, -1, -1, 3, 0, 1 };
	struct ft_offload *o = engine(10, block, 4, FT_TM_ALLOCATION_BLOCK);
	struct ft_kernel *gemm = calloc(1, sizeof(*gemm)); /* a kernel new to the pass */
	replay(o, 1);
	uint64_t tail = S.base[6] + 4096;
	ft_off_launch(o, (CUstream)(uintptr_t)1, &tail, NULL, 1, 0, NULL, "argmax");
	assert_int_equal(o->cur, -1);
	for (int t = 1; t < 10; t++)
		for (int k = 0; k < 3; k++)
			kernel_of(o, 1, &t, 1, gemm);
	check();
	assert_int_equal(stats.v[FT_STAT_offload_roaming_refs], 0);
	done_with(o, gemm);
}

/* A grouped GEMM (kern, word 0) right after the kernel that wrote its
 * pointer array: its parameters hold trap ref's address, out of the pass's
 * turn; it reads traps r[0..n), some through the array. */
static void gemm_after(struct ft_offload *o, struct ft_kernel *kern, int ref, const int *r, int n)
{
	uint64_t a = S.base[ref];
	kernel_at_of(o, kern, &a, 1, r, n, "grouped_gemm");
}

/* Three passes over traps 0-9 (in blocks block[], nb of them), the third
 * with that grouped GEMM right after kernel 1, its parameters holding trap
 * ref's address, reading trap 1 through its table; checked. */
static struct ft_offload *stray_pass(struct ft_kernel *gemm, const int *block, int nb, int ref)
{
	struct ft_offload *o = engine(10, block, nb, FT_TM_ALLOCATION_BLOCK);
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (pass == 2 && t == 1)
				gemm_after(o, gemm, ref, (const int[]){ 1 }, 1);
		}
	check();
	return o;
}

/* The kernel right after one that read trap t may read t through a table
 * that one wrote (Mixtral's grouped GEMM reads the experts through the
 * pointer array prepare_grouped_gemm_data filled).  When its parameters
 * also hold another trap's address out of turn (on the H100 another
 * layer's experts'), t stays in its block: held where that trap has
 * another block; where they share one, one of the two comes back to the
 * GPU for good (the further from the pass: 5), not 5 loaded over 1.  A
 * launch in between ends it: trap 7 is loaded over trap 3 as before. */
static void a_kernel_reads_what_the_kernel_before_it_read(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	struct ft_kernel *gemm = calloc(1, sizeof(*gemm));
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (pass < 2)
				continue;
			if (t == 1)
				gemm_after(o, gemm, 5, (const int[]){ 1, 5 }, 2);
			if (t == 2)
				gemm_after(o, gemm, 7, (const int[]){ 2, 7 }, 2);
			if (t == 3) {
				ft_off_launch(o, (CUstream)(uintptr_t)1, NULL, NULL, 0, 0, NULL, "other");
				gemm_after(o, gemm, 7, (const int[]){ 7 }, 1);
			}
		}
	check();
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	assert_int_equal(o->t[5].block, -1);
	assert_int_equal(o->t[1].block, 1);
	assert_int_equal(stats.v[FT_STAT_offload_table_holds], 2); /* 1 after 5 went, 2 */
	assert_int_equal(o->t[7].block, 3);
	done_with(o, gemm);
}

/* The same grouped GEMM whose parameters hold the address of the trap one
 * ahead of its table's trap (in turn: it moves the pass) from a word not
 * known to read in turn: trap 1 stays in its block for it, and the move's
 * prefetch stops there rather than load trap 5 over it; the next move
 * (kernel 3's) loads 5.  Where the table's trap shares a block with the
 * launch's own (2 blocks: trap 3 and trap 1), nothing comes back for
 * good: that launch's trap is loaded, as before the rule.  A stray address
 * two ahead at a trap that stayed on the GPU, past an offloaded one (3,
 * past 2), holds too: that move's prefetch reaches trap 6, into trap 1's
 * block. */
static void a_table_reader_whose_stray_word_points_ahead(void **state)
{
	(void)state;
	struct ft_kernel *gemm = calloc(1, sizeof(*gemm));
	struct ft_offload *o = stray_pass(gemm, round_robin4, 4, 2);
	assert_int_equal(stats.v[FT_STAT_offload_table_holds], 1);
	assert_int_equal(stats.v[FT_STAT_offload_conflicts], 0);
	assert_int_equal(o->t[5].block, 1);
	done_with(o, gemm);

	static const int two[] = { 0, 1, 0, 1, 0, 1 };
	o = engine(6, two, 2, FT_TM_ALLOCATION_BLOCK);
	gemm = calloc(1, sizeof(*gemm));
	for (int pass = 0; pass < 2; pass++)
		for (int t = 0; t < 6; t++)
			kernel(o, 1, &t, 1);
	int one = 1;
	kernel(o, 1, &one, 1);
	gemm_after(o, gemm, 3, (const int[]){ 3 }, 1);
	check();
	assert_int_equal(stats.v[FT_STAT_offload_table_holds], 0);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 0);
	assert_int_equal(o->b[1].occupant, 3);
	done_with(o, gemm);

	static const int resident3[] = { 0, 1, 2, -1, 3, 0, 1, 2, 3, 0 };
	gemm = calloc(1, sizeof(*gemm));
	o = stray_pass(gemm, resident3, 4, 3);
	assert_int_equal(stats.v[FT_STAT_offload_table_holds], 1);
	done_with(o, gemm);
}

/* Kernels whose words the statistics judge (one GEMM kernel for every
 * layer, word 0): in the first pass after the plan its word is not known
 * yet, and a move to the next layer holds the layer before (the prefetch
 * into its block waits for the move after); once the word has read in turn
 * four times it is known, and no pass after holds anything. */
static void holds_end_once_the_words_are_known(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	struct ft_kernel *gemm = calloc(1, sizeof(*gemm));
	uint64_t holds[8];
	for (int pass = 0; pass < 8; pass++) {
		for (int t = 0; t < 10; t++) {
			uint64_t a = S.base[t];
			kernel_at_of(o, gemm, &a, 1, &t, 1, "gemm");
		}
		holds[pass] = stats.v[FT_STAT_offload_table_holds];
	}
	check();
	assert_true(holds[0] > 0);
	assert_int_equal(holds[7], holds[1]);
	done_with(o, gemm);
}

/* The same while another thread captures a graph: the trap to come back
 * (5, the further from the pass) cannot now, is pending, and the launch
 * does not load it over trap 1 (an error says that launch may read
 * wrong); it comes back at the first launch after the capture. */
static void a_table_conflict_while_another_thread_captures(void **state)
{
	(void)state;
	struct ft_offload *o = engine(10, round_robin4, 4, FT_TM_ALLOCATION_BLOCK);
	struct ft_kernel *gemm = calloc(1, sizeof(*gemm));
	atomic_store(&others, 0);
	o->captures = &others;
	for (int t = 0; t < 10; t++)
		kernel(o, 1, &t, 1);
	for (int t = 0; t < 2; t++)
		kernel(o, 1, &t, 1);
	atomic_store(&others, 1);
	gemm_after(o, gemm, 5, (const int[]){ 1 }, 1);
	assert_int_equal(o->t[5].pending, 1);
	assert_int_equal(o->b[1].occupant, 1);
	assert_int_equal(stats.v[FT_STAT_offload_table_holds], 1);
	assert_int_equal(stats.v[FT_STAT_offload_stuck], 1);
	atomic_store(&others, 0);
	int two = 2;
	kernel(o, 1, &two, 1);
	assert_int_equal(o->t[5].block, -1);
	assert_int_equal(stats.v[FT_STAT_offload_demoted], 1);
	check();
	done_with(o, gemm);
}

static void strategy_mode(void **state)
{
	(void)state;
	static const int one[] = { 0, 0, 0, 0, 0, 0 };
	struct ft_offload *o = engine(6, one, 1, FT_TM_STRATEGY);
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 6; t++) {
			kernel(o, 1, &t, 1);
			kernel(o, 2, &t, 1);
		}
	check();
	done(o);
}

static void random_sequences(void **state)
{
	(void)state;
	srand(7);
	for (int round = 0; round < 200; round++) {
		int n = 3 + rand() % 10, nb = 1 + rand() % 4, block[16];
		int mode = rand() % 3 == 2 ? FT_TM_STRATEGY : FT_TM_ALLOCATION_BLOCK;
		if (mode == FT_TM_STRATEGY)
			nb = 1; /* as ft_off_apply makes it */
		for (int t = 0; t < n; t++)
			block[t] = rand() % 4 == 0 ? -1 : t % nb;
		struct ft_offload *o = engine(n, block, nb, mode);
		for (int i = 0; i < 300; i++) {
			int r[2] = { rand() % n, rand() % n };
			int k = rand() % 4 == 0 && r[0] != r[1] && block[r[0]] != block[r[1]] ? 2 : 1;
			kernel(o, 1 + rand() % 3, r, k);
		}
		check();
		done(o);
	}
}

/* ------------------------------------------------- FT_EXPERT_PAGING */

/* Trap 1 holds, after its own weight (one chunk), a stacked tensor of four
 * experts of a chunk each in the same allocation: slices at 1, 2 and 3
 * chunks past the tensor's start (discovery's ft_disc_slices). */
#define EXPERTS (2 * 16 * MB + CHUNK)
static const uint64_t expert_starts[] = { CHUNK, 2 * CHUNK, 3 * CHUNK };
static const struct ft_off_weight stacked = { EXPERTS, EXPERTS + 4 * CHUNK, 1, 0,
					      EXPERTS + 4 * CHUNK, expert_starts, 3 };

/* Trap 1's allocation runs on to the end of its last weight (the stacked
 * tensor added after its own). */
static uint32_t experts_allocation(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				   uint32_t na)
{
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 1 && w[i].hi > a[1].hi)
			a[1].hi = w[i].hi;
	return na;
}

static struct ft_offload *moe_engine(void)
{
	return engine_edit(10, round_robin4, 4, &stacked, 1, experts_allocation);
}

/* A launch on stream s of kern (NULL: none known) reading the addresses
 * a[0..n) of traps r[0..n), through its parameter words 0, 1, ... */
static void kernel_reads(struct ft_offload *o, int s, const uint64_t *a, const int *r, int n,
			 struct ft_kernel *kern)
{
	static const uint16_t words[4] = { 0, 1, 2, 3 };
	struct op k = { .kind = OP_KERNEL, .stream = s, .nreads = n };
	memcpy(k.reads, r, (size_t)n * sizeof(*r));
	memcpy(k.at, a, (size_t)n * sizeof(*a));
	ft_off_launch(o, (CUstream)(uintptr_t)s, a, kern ? words : NULL, (unsigned)n, 0, kern,
		      "expert");
	launched(&k);
}

/* Expert e of trap 1 read on stream s through word 0 of kern. */
static void expert(struct ft_offload *o, int s, int e, struct ft_kernel *kern)
{
	uint64_t a = EXPERTS + (uint64_t)e * CHUNK;
	kernel_reads(o, s, &a, (const int[]){ 1 }, 1, kern);
}

/* The bytes each kernel reads at an address of its own (op.at) were
 * copied, since the last copy of another trap into the block, by a copy
 * that happens before the kernel. */
static void check_bytes(void)
{
	for (int i = 0; i < S.nops; i++) {
		const struct op *k = &S.op[i];
		for (int r = 0; k->kind == OP_KERNEL && r < k->nreads; r++) {
			int t = k->reads[r], b = k->rblock[r];
			uint64_t a = k->at[r];
			if (!a || b < 0)
				continue;
			int other = -1, ok = 0;
			for (int j = 0; j < i; j++)
				if (S.op[j].kind == OP_COPY && S.op[j].block == b && S.op[j].trap != t)
					other = j;
			for (int j = other + 1; j < i && !ok; j++)
				ok = S.op[j].kind == OP_COPY && S.op[j].trap == t && S.op[j].lo <= a &&
				     a < S.op[j].hi && hb(&S.op[j], k);
			if (!ok)
				fail_msg("kernel %d reads 0x%llx of trap %d, which no copy that "
					 "happens before it put in block %d", i, (unsigned long long)a,
					 t, b);
		}
	}
}

/* A kernel (its parameter word 0) new to the executor. */
static struct ft_kernel *new_kernel(void)
{
	static uint64_t id;
	struct ft_kernel *k = calloc(1, sizeof(*k));
	assert_non_null(k);
	k->id = ++id;
	return k;
}

static void free_kernel(struct ft_kernel *k)
{
	free((void *)atomic_load(&k->turns));
	free((void *)atomic_load(&k->hits));
	free(k);
}

/* Four decode steps that route two of trap 1's four experts each, read
 * by gemm through one word: the first reference loads every expert (the
 * word not learnt yet), then each routed one comes on its own, one
 * chunk. */
static void two_routed_a_step(struct ft_offload *o, struct ft_kernel *gemm)
{
	static const int routed[4][2] = { { 1, 2 }, { 0, 3 }, { 2, 0 }, { 3, 1 } };
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			for (int i = 0; t == 1 && i < 2; i++)
				expert(o, 1, routed[pass][i], gemm);
		}
	check();
	check_bytes();
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies], 4 + 3 * 2);
	assert_int_equal(stats.v[FT_STAT_offload_slice_bytes], 10 * CHUNK);
}

/* Decode steps route two of the four experts a pass, read by one GEMM
 * through one word (transformers' loop over routed experts): the trap's
 * load moves its dense part and each routed expert comes on its own, the
 * unrouted ones never move -- once the word has referred to two experts
 * in one pass; its first reference loads them all. */
static void experts_are_loaded_one_at_a_time(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	assert_int_equal(o->t[1].nsl, 4);
	two_routed_a_step(o, gemm);
	assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], 1);
	/* one chunk a trap a load, and the slices */
	assert_int_equal(stats.v[FT_STAT_offload_copy_bytes],
			 stats.v[FT_STAT_offload_copies] * CHUNK + 10 * CHUNK);
	free_kernel(gemm);
	done(o);
}

/* A pass that routes to three of the four experts (a prefill) makes the
 * trap's next load copy every expert with it, ahead of the launches; one
 * that routes to one makes the load after copy the dense part again. */
static void most_experts_read_last_time_come_with_the_trap(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	static const int routed[5][3] = { { 0, 1, 2 }, { 1, 2, 3 }, { 3, -1, -1 },
					   { 2, -1, -1 }, { 0, 1, -1 } };
	uint64_t copies[5], aheads[5];
	for (int pass = 0; pass < 5; pass++) {
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			for (int i = 0; t == 1 && i < 3 && routed[pass][i] >= 0; i++)
				expert(o, 1, routed[pass][i], gemm);
		}
		copies[pass] = stats.v[FT_STAT_offload_slice_copies];
		aheads[pass] = stats.v[FT_STAT_offload_slice_aheads];
	}
	check();
	check_bytes();
	/* pass 0: every expert at the unlearnt first reference (three asked
	 * for, learnt or not); passes 1 and 2: whole; pass 3: dense (pass 2
	 * asked for one), expert 2 on demand; pass 4: dense, two on demand */
	assert_int_equal(copies[0], 4);
	assert_int_equal(copies[1], 4);
	assert_int_equal(aheads[1], 1);
	assert_int_equal(copies[2], 4);
	assert_int_equal(aheads[2], 2);
	assert_int_equal(copies[3], 4 + 1);
	assert_int_equal(copies[4], 5 + 2);
	assert_int_equal(aheads[4], 2);
	free_kernel(gemm);
	done(o);
}

/* The first launches read experts 0, 1 and 2 of trap 1 before anything
 * loaded it (a miss): those asks belong to the residency the miss's load
 * begins, so the trap's next load copies it whole. */
static void a_miss_asks_for_the_residency_it_begins(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	for (int e = 0; e < 3; e++)
		expert(o, 1, e, gemm);
	assert_int_equal(stats.v[FT_STAT_offload_misses], 1);
	for (int pass = 0; pass < 2; pass++)
		for (int t = 0; t < 10; t++)
			if (pass || t != 1)
				kernel(o, 1, &t, 1);
	assert_int_equal(stats.v[FT_STAT_offload_slice_aheads], 1);
	check();
	free_kernel(gemm);
	done(o);
}

/* Discovery saw one expert start of four (the second): slice 1 holds
 * experts 1, 2 and 3 (not cut at the stride: one slice of two is one
 * stride long, not more than half).  A reference to expert 2, on the
 * slices' stride inside slice 1, asks for that slice too: with expert 0
 * that is both slices, and the next load is whole. */
static const uint64_t one_start[] = { CHUNK };
static const struct ft_off_weight one_start_stacked = { EXPERTS, EXPERTS + 4 * CHUNK, 1, 0,
							EXPERTS + 4 * CHUNK, one_start, 1 };

static void an_expert_inside_a_slice_asks_for_it(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, &one_start_stacked, 1,
					   experts_allocation);
	struct ft_kernel *gemm = new_kernel();
	assert_int_equal(o->t[1].nsl, 2);
	for (int pass = 0; pass < 2; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			for (int e = 0; t == 1 && pass == 0 && e < 3; e += 2)
				expert(o, 1, e, gemm);
		}
	assert_int_equal(stats.v[FT_STAT_offload_slice_aheads], 1);
	check();
	free_kernel(gemm);
	done(o);
}

/* Discovery saw two expert starts of four (the second and the fourth):
 * slice 1 would hold experts 1 and 2.  Two of its three slices are one
 * stride long, so each is cut at the stride: four slices, one an expert,
 * and the decode steps of experts_are_loaded_one_at_a_time move the same
 * bytes as when every start was seen (a routed expert 1 or 2 does not
 * bring the other with it). */
static const uint64_t sparse_starts[] = { CHUNK, 3 * CHUNK };
static const struct ft_off_weight sparse_stacked = { EXPERTS, EXPERTS + 4 * CHUNK, 1, 0,
						     EXPERTS + 4 * CHUNK, sparse_starts, 2 };

static void experts_no_pass_routed_to_are_loaded_alone(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, &sparse_stacked, 1,
					   experts_allocation);
	struct ft_kernel *gemm = new_kernel();
	assert_int_equal(o->t[1].nsl, 4);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(o->t[1].sl[i].lo, EXPERTS + i * CHUNK);
		assert_int_equal(o->t[1].sl[i].hi, EXPERTS + (i + 1) * CHUNK);
	}
	two_routed_a_step(o, gemm);
	free_kernel(gemm);
	done(o);
}

/* All four experts seen and, after them at their stride (taken into the
 * weight by experts_read_every_pass), a tensor two strides long that the
 * experts' GEMM word reads every pass from its start to its end: the last
 * slice has no start after it to bound the read, so it is not cut, and
 * the reference copies all of it. */
static const uint64_t tail_starts[] = { CHUNK, 2 * CHUNK, 3 * CHUNK, 4 * CHUNK };
static const struct ft_off_weight tail_stacked = { EXPERTS, EXPERTS + 6 * CHUNK, 1, 0,
						   EXPERTS + 6 * CHUNK, tail_starts, 4 };

static void a_tensor_after_the_experts_is_copied_whole(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, &tail_stacked, 1,
					   experts_allocation);
	struct ft_kernel *gemm = new_kernel();
	assert_int_equal(o->t[1].nsl, 5);
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t != 1)
				continue;
			expert(o, 1, pass % 4, gemm);
			expert(o, 1, (pass + 1) % 4, gemm);
			uint64_t a = EXPERTS + 4 * CHUNK;
			kernel_reads(o, 1, &a, (const int[]){ 1 }, 1, gemm);
			S.op[S.nops - 1].at[0] = a + CHUNK; /* it reads its second chunk */
		}
	check();
	check_bytes();
	free_kernel(gemm);
	done(o);
}

/* Trap 1: its own weight begins half-way into its allocation's first
 * chunk, which other tensors share (it stays on the GPU), and runs on
 * through the second; the stacked tensor of four experts after it, in the
 * same trap, begins where it ends -- in the same allocation (runs_on) or
 * in one of its own. */
#define EXPERTS_AFTER (2 * 16 * MB + 2 * CHUNK)
static const struct ft_off_weight stacked_after = { EXPERTS_AFTER, EXPERTS_AFTER + 4 * CHUNK, 1, 0,
						    EXPERTS_AFTER + 4 * CHUNK, expert_starts, 3 };
static int runs_on;

static uint32_t weight_before_experts(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				      uint32_t na)
{
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 1 && w[i].lo == S.base[1])
			w[i].lo += CHUNK / 2, w[i].hi += CHUNK;
	S.base[1] += CHUNK / 2;
	if (runs_on) {
		a[1].hi = EXPERTS_AFTER + 4 * CHUNK;
		return na;
	}
	a[1].hi = EXPERTS_AFTER;
	memmove(&a[3], &a[2], (na - 2) * sizeof(*a));
	a[2] = (struct ft_span){ EXPERTS_AFTER, EXPERTS_AFTER + 4 * CHUNK };
	return na + 1;
}

/* A launch reads trap 1's own weight through a view that begins in the
 * resident first chunk (past the views discovery saw in it: none).  Its
 * bytes on are in the trap's dense part, which the load copies; a view
 * does not read past its allocation, so the experts after it come only
 * when they begin where it ends in that allocation (on the H100 a
 * Mixtral's decode GEMMs loaded every expert of a trap each step for such
 * references).  (1.5 chunks before them, it may be whole experts of
 * half a chunk of one tensor with them: a_link_into_experts_... says when
 * it cannot be.) */
static void a_view_beside_experts_loads_them_only_if_it_may_read_on_into_them(void **state)
{
	(void)state;
	for (runs_on = 0; runs_on < 2; runs_on++) {
		struct ft_offload *o = engine_edit(10, round_robin4, 4, &stacked_after, 1,
						   weight_before_experts);
		assert_int_equal(o->t[1].nsl, 4);
		uint64_t view = S.base[1] + 4096;
		for (int pass = 0; pass < 3; pass++)
			for (int t = 0; t < 10; t++) {
				kernel(o, 1, &t, 1);
				if (t == 1)
					kernel_at(o, &view, 1, (const int[]){ 1 }, 1, "gemv");
			}
		check();
		assert_int_equal(stats.v[FT_STAT_offload_tails], 0);
		assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], runs_on ? 3 : 0);
		assert_int_equal(stats.v[FT_STAT_offload_slice_copies], runs_on ? 12 : 0);
		done(o);
	}
}

/* Trap 0's weight and, after it in its allocation, trap 1's stacked
 * tensor of three slices two chunks apart: a link (one tensor seen
 * through two pointers, perhaps).  Trap 0's weight begins 4 KiB into its
 * first chunk and ends two chunks in (joined 0: no expert of a MiB or more
 * fits both it and the slices' stride), or is two chunks (1: whole
 * experts of the stride), or one (2: whole experts of one chunk, of which
 * discovery saw every other start). */
static const uint64_t wide_starts[] = { 2 * CHUNK, 4 * CHUNK };
static const struct ft_off_weight stacked_wide = { 0, 6 * CHUNK, 1, 0, 6 * CHUNK, wide_starts,
						   2 };
static int joined;

static uint32_t experts_after_trap0(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				    uint32_t na)
{
	uint64_t at = S.base[0] + (joined == 2 ? 1 : 2) * CHUNK, in = joined ? 0 : 4096;
	for (uint32_t i = 0; i < nw; i++)
		if (w[i].trap == 0)
			w[i].lo += in, w[i].hi = at;
		else if (w[i].nslices)
			w[i].lo += at, w[i].hi += at, w[i].views += at;
	S.base[0] += in;
	a[0].hi = at + 6 * CHUNK;
	return na;
}

/* A read of trap 0's weight follows the link into trap 1.  Were the two
 * weights one tensor of experts, trap 0's weight would be whole experts
 * of it: where some expert size fits, every expert comes with the read
 * (also where discovery's stride is a multiple of the experts' size);
 * where none does, they are two tensors, and the read loads trap 1's
 * dense part only (on the H100 a Mixtral's decode steps loaded every
 * expert of seven traps a step, each for the weight before it in one
 * allocation). */
static void a_link_into_experts_off_their_stride_loads_none(void **state)
{
	(void)state;
	for (joined = 0; joined < 3; joined++) {
		struct ft_offload *o = engine_edit(10, round_robin4, 4, &stacked_wide, 1,
						   experts_after_trap0);
		assert_int_equal(o->t[1].nsl, 3);
		assert_int_equal(o->w[0].link, 2);
		for (int pass = 0; pass < 3; pass++)
			for (int t = 0; t < 10; t++)
				kernel(o, 1, &t, 1);
		check();
		assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], joined ? 3 : 0);
		assert_int_equal(stats.v[FT_STAT_offload_slice_copies], joined ? 9 : 0);
		done(o);
	}
}

/* Trap 1's stacked experts (moe_engine's) and a weight of trap 1's own
 * that begins where trap 0's weight ends in trap 0's allocation: a link
 * into trap 1, whose dense part holds that weight. */
static const struct ft_off_weight dense_after0[] = {
	{ EXPERTS, EXPERTS + 4 * CHUNK, 1, 0, EXPERTS + 4 * CHUNK, expert_starts, 3 },
	{ 16 * MB + CHUNK, 16 * MB + 2 * CHUNK, 1, 0, 0, NULL, 0 },
};

static uint32_t dense_after_trap0(struct ft_off_weight *w, uint32_t nw, struct ft_span *a,
				  uint32_t na)
{
	(void)w;
	(void)nw;
	a[0].hi = 16 * MB + 2 * CHUNK;
	a[1].hi = EXPERTS + 4 * CHUNK;
	return na;
}

/* A read of trap 0's weight runs on, perhaps, into trap 1's weight after
 * it, which is not sliced: it is in the dense part that every load of
 * trap 1 copies, and the experts stay where they are (on the H100 a
 * Mixtral's decode steps loaded every expert of seven traps a step for
 * such links). */
static void a_link_into_a_dense_weight_loads_no_expert(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, dense_after0, 2,
					   dense_after_trap0);
	assert_int_equal(o->t[1].nsl, 4);
	assert_int_equal(o->w[0].link, 2);
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++)
			kernel(o, 1, &t, 1);
	check();
	assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], 0);
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies], 0);
	done(o);
}

/* A word that refers to one expert a pass (transformers' grouped GEMM is
 * handed the first routed expert and reads the others through a pointer
 * array in device memory) loads every expert, every pass.  So does a
 * reference inside the tensor off its slices' stride (a row or a tile of
 * an expert, which may read on past it), even from a word that reads one
 * expert at a time (one on the stride, an expert discovery never saw
 * routed: preload case stacked-hidden).  Nothing is copied twice. */
static void a_word_that_refers_to_one_expert_a_pass_loads_them_all(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *grouped = new_kernel(), *gemm = new_kernel();
	for (int pass = 0; pass < 4; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 1)
				expert(o, 1, pass, grouped);
		}
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies], 4 * 4);
	assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], 4);
	for (int pass = 0; pass < 2; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 1) {
				uint64_t a = EXPERTS + CHUNK + 4096;
				expert(o, 1, 1 + 2 * pass, gemm);
				expert(o, 1, 2, gemm);
				kernel_reads(o, 1, &a, (const int[]){ 1 }, 1, gemm);
			}
		}
	/* the first pass: every expert at gemm's first reference, then
	 * nothing; the second: expert 3, expert 2, then the other two */
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies], 16 + 4 + 4);
	assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], 4 + 1 + 1);
	check();
	check_bytes();
	free_kernel(grouped);
	free_kernel(gemm);
	done(o);
}

/* Two streams read trap 1: stream 2 waited for one expert, then stream 1's
 * read of another copies it; stream 2's read of that one must wait for
 * the copy too, though it already waited for the trap.  (The GEMM's word
 * is learnt on stream 1 alone: references from two streams in turn teach
 * nothing, as two threads' forwards might interleave.) */
static void a_slice_copied_later_is_waited_for_by_every_stream(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	for (int pass = 0; pass < 3; pass++)
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			if (t == 1 && !pass) {
				expert(o, 1, 1, gemm);
				expert(o, 1, 3, gemm);
			} else if (t == 1) {
				expert(o, 1, pass, gemm);
				expert(o, 2, pass, gemm);
				expert(o, 1, 3 - pass, gemm);
				expert(o, 2, 3 - pass, gemm);
			}
		}
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies], 4 + 2 + 2);
	check();
	check_bytes();
	free_kernel(gemm);
	done(o);
}

/* A pass in which gemm reads experts 1 and 2 of trap 1 (its first
 * reference copies every expert, the second teaches it to read one at a
 * time), then the next pass up to trap 1 and its expert 2: trap 1's block
 * holds its own weight and expert 2 only. */
static void expert_two_only(struct ft_offload *o, struct ft_kernel *gemm)
{
	for (int t = 0; t < 10; t++) {
		kernel(o, 1, &t, 1);
		if (t == 1) {
			expert(o, 1, 1, gemm);
			expert(o, 1, 2, gemm);
		}
	}
	kernel(o, 1, (const int[]){ 0 }, 1);
	kernel(o, 1, (const int[]){ 1 }, 1);
	expert(o, 1, 2, gemm);
	assert_false(ft_off_slices_whole(&o->t[1]));
}

/* A capture loads the sliced trap whole (a graph's replays route
 * differently), and leaves the eager state's slices as they were: an
 * eager read after it of an expert the eager pass did not load copies it. */
static void a_capture_loads_every_expert_and_eager_slices_stay(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	expert_two_only(o, gemm);
	uint64_t before = stats.v[FT_STAT_offload_slice_copies];
	S.capturing = 1;
	for (int t = 0; t < 10; t++) {
		uint64_t a = t == 1 ? EXPERTS + 3 * CHUNK : S.base[t];
		static const uint16_t w0[1];
		ft_off_capture_launch(o, (CUstream)(uintptr_t)1, 5, &a, w0, 1, 0, gemm, "k");
	}
	ft_off_capture_end(o, (CUstream)(uintptr_t)1, 5);
	S.capturing = 0;
	/* nine traps of a chunk, and trap 1: its own chunk and four experts */
	assert_int_equal(S.captured_bytes, 9 * CHUNK + 5 * CHUNK);
	expert(o, 1, 3, gemm);
	expert(o, 1, 2, gemm);
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies] - before, 1);
	for (int t = 2; t < 10; t++)
		kernel(o, 1, &t, 1);
	check();
	check_bytes();
	free_kernel(gemm);
	done(o);
}

/* Stale words into trap 1 while its block holds some of its experts: a
 * launch that reads trap 1 anyway copies the expert its word points to (a
 * wrong judgement reads the right bytes, as with the trap loaded whole);
 * one that does not is not held on trap 1 (holding would not bring that
 * expert), until every expert is in. */
static void a_stale_word_into_missing_experts(void **state)
{
	(void)state;
	copies_done = CUDA_SUCCESS;
	struct ft_offload *o = moe_engine();
	real.cuEventQuery = f_query;
	struct ft_kernel *gemm = new_kernel();
	expert_two_only(o, gemm);
	uint64_t copies = stats.v[FT_STAT_offload_slice_copies];
	uint64_t a[2] = { S.base[1], EXPERTS + 3 * CHUNK };
	struct op k = { .kind = OP_KERNEL, .stream = 1, .nreads = 2, .reads = { 1, 1 },
			.at = { S.base[1], EXPERTS + 3 * CHUNK } };
	ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, 1, 1, NULL, "k");
	launched(&k);
	assert_int_equal(stats.v[FT_STAT_offload_slice_copies] - copies, 1);
	uint64_t b[2] = { S.base[0], EXPERTS };
	ft_off_launch(o, (CUstream)(uintptr_t)1, b, NULL, 1, 1, NULL, "k");
	ft_off_launched(o);
	assert_int_equal(stats.v[FT_STAT_offload_held], 0);
	for (int e = 0; e < 4; e++)
		expert(o, 1, e, gemm);
	assert_true(ft_off_slices_whole(&o->t[1]));
	ft_off_launch(o, (CUstream)(uintptr_t)1, b, NULL, 1, 1, NULL, "k");
	ft_off_launched(o);
	assert_int_equal(stats.v[FT_STAT_offload_held], 1);
	check();
	check_bytes();
	free_kernel(gemm);
	done(o);
}

/* As a_stale_word_into_missing_experts, where discovery saw experts 1
 * and 3 only (sparse_starts: slice 1 is cut at the stride, expert 2's
 * start is a cut's, not a start seen): a stale word at expert 2 copies
 * every missing expert, as it did inside the uncut slice; one at expert
 * 1's start, seen, its own. */
static void a_stale_word_at_a_cut_copies_every_expert(void **state)
{
	(void)state;
	for (int at = 1; at <= 2; at++) {
		copies_done = CUDA_SUCCESS;
		struct ft_offload *o = engine_edit(10, round_robin4, 4, &sparse_stacked, 1,
						   experts_allocation);
		real.cuEventQuery = f_query;
		struct ft_kernel *gemm = new_kernel();
		assert_int_equal(o->t[1].nsl, 4);
		for (int t = 0; t < 10; t++) {
			kernel(o, 1, &t, 1);
			for (int e = 2; t == 1 && e >= 1; e--)
				expert(o, 1, e, gemm);
		}
		kernel(o, 1, (const int[]){ 0 }, 1);
		kernel(o, 1, (const int[]){ 1 }, 1);
		expert(o, 1, 3 - at, gemm); /* the other one's expert in, this one's not */
		uint64_t copies = stats.v[FT_STAT_offload_slice_copies];
		uint64_t e = EXPERTS + (uint64_t)at * CHUNK, a[2] = { S.base[1], e };
		struct op k = { .kind = OP_KERNEL, .stream = 1, .nreads = 2, .reads = { 1, 1 },
				.at = { S.base[1], e } };
		ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, 1, 1, NULL, "k");
		launched(&k);
		assert_int_equal(stats.v[FT_STAT_offload_slice_copies] - copies, at == 2 ? 3 : 1);
		check();
		check_bytes();
		free_kernel(gemm);
		done(o);
	}
}

/* A word that refers to one expert a layer (a grouped GEMM) is not taken
 * for a loop over experts when nothing read whole comes between two of
 * its references: after a graph replay, from another stream, or inside a
 * capture.  It loads every slice of the trap each time. */
static void replays_and_streams_teach_no_slicer(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *grouped = new_kernel();
	for (int pass = 0; pass < 4; pass++) {
		/* the trap's own weight read first, then one expert */
		for (int t = 0; t < 2; t++)
			kernel(o, 1, &t, 1);
		expert(o, 1 + pass % 2, pass, grouped);
		replay(o, 3);
	}
	S.capturing = 1;
	uint64_t a[2] = { EXPERTS + CHUNK, EXPERTS + 2 * CHUNK };
	static const uint16_t w0[1];
	for (int i = 0; i < 2; i++)
		ft_off_capture_launch(o, (CUstream)(uintptr_t)1, 9, &a[i], w0, 1, 0, grouped, "k");
	ft_off_capture_end(o, (CUstream)(uintptr_t)1, 9);
	S.capturing = 0;
	assert_false(ft_kernel_slicer(grouped, 0, 0));
	assert_int_equal(stats.v[FT_STAT_offload_slice_wholes], 4);
	free_kernel(grouped);
	done(o);
}

/* One stacked tensor that discovery split in two weights of one trap (an
 * expert read in every pass began a weight of its own): a reference not
 * trusted with one slice loads every slice of the trap, the other
 * weight's too (a grouped GEMM handed an expert of the first reads the
 * second's through its pointer array). */
static const uint64_t half_starts[] = { CHUNK };
static const struct ft_off_weight halves[] = {
	{ EXPERTS, EXPERTS + 2 * CHUNK, 1, 0, EXPERTS + 2 * CHUNK, half_starts, 1 },
	{ EXPERTS + 2 * CHUNK, EXPERTS + 4 * CHUNK, 1, 0, EXPERTS + 4 * CHUNK, half_starts, 1 },
};

static void an_untrusted_reference_loads_the_whole_trap(void **state)
{
	(void)state;
	struct ft_offload *o = engine_edit(10, round_robin4, 4, halves, 2, experts_allocation);
	struct ft_kernel *grouped = new_kernel();
	assert_int_equal(o->t[1].nsl, 4);
	kernel(o, 1, (const int[]){ 0 }, 1);
	kernel(o, 1, (const int[]){ 1 }, 1);
	expert(o, 1, 1, grouped);
	assert_true(ft_off_slices_whole(&o->t[1]));
	struct op k = { .kind = OP_KERNEL, .stream = 1, .nreads = 1, .reads = { 1 },
			.at = { EXPERTS + 3 * CHUNK } };
	launched(&k); /* (what its pointer array reads) */
	check();
	check_bytes();
	free_kernel(grouped);
	done(o);
}

/* A stale word into trap 1's own (dense) weight while the pass is in it
 * and experts are missing from its block: held, as without slices. */
static void a_stale_word_into_a_dense_weight_holds_a_sliced_trap(void **state)
{
	(void)state;
	struct ft_offload *o = moe_engine();
	struct ft_kernel *gemm = new_kernel();
	expert_two_only(o, gemm);
	uint64_t a[2] = { S.base[0], S.base[1] };
	ft_off_launch(o, (CUstream)(uintptr_t)1, a, NULL, 1, 1, NULL, "k");
	ft_off_launched(o);
	assert_int_equal(stats.v[FT_STAT_offload_held], 1);
	free_kernel(gemm);
	done(o);
}

/* -------------------------------------------------------- coded stores */

static size_t slot_alloc[FT_OFF_SLOTS];
static int nslot_alloc;
static CUresult count_alloc(CUdeviceptr *d, size_t n)
{
	if (nslot_alloc < FT_OFF_SLOTS)
		slot_alloc[nslot_alloc] = n;
	nslot_alloc++;
	*d = (CUdeviceptr)nslot_alloc << 32;
	return CUDA_SUCCESS;
}
static CUresult count_free(CUdeviceptr d) { (void)d; return CUDA_SUCCESS; }

/* The decoder's staging slots hold a piece of one trap's image, which is
 * no larger than the trap's raw bytes, nor so than its block: where every
 * block is smaller than FT_OFF_SLOT_BYTES, each slot is the largest one's
 * size, else FT_OFF_SLOT_BYTES; they count in the blocks' bytes until
 * released. */
static void staging_slots_fit_the_largest_offloaded_trap(void **state)
{
	(void)state;
	static struct ft_offload o;
	struct ft_real r = { 0 };
	stub_engine_driver(&r);
	r.cuMemAlloc_v2 = count_alloc;
	r.cuMemFree_v2 = count_free;
	struct ft_off_block b[2] = { { .nchunks = 3 }, { .nchunks = 2 } };
	for (int big = 0; big < 2; big++) {
		memset(&o, 0, sizeof(o));
		o.real = &r;
		o.codec = (const struct ft_gpu *)&r; /* any: only its presence is read */
		o.chunk = CHUNK;
		o.b = b;
		o.nblocks = 2;
		b[1].nchunks = big ? (uint32_t)(2 * FT_OFF_SLOT_BYTES / CHUNK) : 2;
		nslot_alloc = 0;
		ft_off_codec_init(&o);
		size_t want = big ? FT_OFF_SLOT_BYTES : 3 * CHUNK;
		assert_non_null(o.codec);
		assert_int_equal(nslot_alloc, FT_OFF_SLOTS);
		for (int i = 0; i < FT_OFF_SLOTS; i++)
			assert_int_equal(slot_alloc[i], want);
		assert_int_equal(o.slot_bytes, want);
		assert_int_equal(o.block_bytes, (uint64_t)FT_OFF_SLOTS * want);
		ft_off_codec_release(&o);
		assert_int_equal(o.block_bytes, 0);
	}
}

/* A coded load's calls, in order: copies, decodes, event records and
 * stream waits (an event and a stream are told apart by the handles the
 * stubs make). */
enum { Z_COPY, Z_DECODE, Z_RECORD, Z_WAIT };
static struct zop {
	int kind;
	CUdeviceptr dst, src;         /* copy: slot; decode: slot -> block */
	size_t n;                     /* copy: bytes; decode: chunks */
	CUevent e;
	CUstream s;
} zops[256];
static int nzops;
static struct zop *zop(int kind)
{
	assert_true(nzops < 256);
	zops[nzops] = (struct zop){ .kind = kind };
	return &zops[nzops++];
}
static int zevents;
static CUresult z_event(CUevent *e, unsigned f)
{
	(void)f;
	*e = (CUevent)(uintptr_t)(0x1000 + ++zevents);
	return CUDA_SUCCESS;
}
static int zstreams;
static CUresult z_stream(CUstream *s, unsigned f)
{
	(void)f;
	*s = (CUstream)(uintptr_t)(0x100 + ++zstreams);
	return CUDA_SUCCESS;
}
static CUresult z_copy(CUdeviceptr d, const void *p, size_t n, CUstream s)
{
	(void)p;
	struct zop *z = zop(Z_COPY);
	z->dst = d, z->n = n, z->s = s;
	return CUDA_SUCCESS;
}
static CUresult z_record(CUevent e, CUstream s)
{
	struct zop *z = zop(Z_RECORD);
	z->e = e, z->s = s;
	return CUDA_SUCCESS;
}
static CUresult z_wait(CUstream s, CUevent e, unsigned f)
{
	(void)f;
	struct zop *z = zop(Z_WAIT);
	z->e = e, z->s = s;
	return CUDA_SUCCESS;
}
static CUresult z_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			 unsigned by, unsigned bz, unsigned sh, CUstream s, void **params,
			 void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)extra;
	struct zop *z = zop(Z_DECODE);
	z->src = *(CUdeviceptr *)params[0];
	z->dst = *(CUdeviceptr *)params[3];
	z->n = *(uint32_t *)params[5];
	z->s = s;
	return CUDA_SUCCESS;
}

/* The first call of kind in zops[from..to) on event e and stream s (0:
 * any; no handle the stubs make is 0): its index, or -1. */
static int find_op(int from, int to, int kind, CUevent e, CUstream s)
{
	for (int i = from; i < to; i++)
		if (zops[i].kind == kind && (!e || zops[i].e == e) && (!s || zops[i].s == s))
			return i;
	return -1;
}

/* Where in zops[0..before) event e was last recorded: its index, or -1. */
static int recorded_at(CUevent e, int before)
{
	for (int i = before - 1; i >= 0; i--)
		if (zops[i].kind == Z_RECORD && zops[i].e == e)
			return i;
	return -1;
}

/* A coded load copies the trap's image in pieces that fit the staging
 * slots, as many whole chunks a piece as fit, the slots in turn; each
 * piece is decoded from the slot it landed in into its chunks' place in
 * the block, after its copy, and a slot takes its next piece only after
 * the decode of its last one. */
static void coded_loads_cut_pieces_to_the_staging_slots(void **state)
{
	(void)state;
	enum { N = 40 }; /* chunks: images of a few bytes to 64 KiB */
	uint16_t *w = malloc((size_t)N * FT_Z_CHUNK);
	assert_non_null(w);
	uint32_t g = 12345;
	for (size_t i = 0; i < (size_t)N * FT_Z_VALS; i++) {
		g = g * 1664525u + 1013904223u;
		unsigned c = (unsigned)(i / FT_Z_VALS) % 4;
		w[i] = c == 0 ? 0 : c == 1 ? (uint16_t)(g >> 16) :
		       (uint16_t)(0x3c00 | ((g >> 16) & (c == 2 ? 0x80ff : 0x807f)));
	}
	static struct ft_offload o;
	static struct ft_off_trap x;
	static struct ft_gpu codec;
	static struct ft_stats st;
	struct ft_real r = { 0 };
	stub_engine_driver(&r);
	r.cuMemAlloc_v2 = count_alloc;
	r.cuMemFree_v2 = count_free;
	r.cuEventCreate = z_event;
	r.cuStreamCreate = z_stream;
	r.cuEventRecord = z_record;
	r.cuStreamWaitEvent = z_wait;
	r.cuMemcpyHtoDAsync_v2 = z_copy;
	r.cuLaunchKernel = z_launch;
	codec = (struct ft_gpu){ .real = &r, .state = 1, .decode = (CUfunction)&codec };
	struct ft_off_block b = { .nchunks = N * FT_Z_CHUNK / CHUNK + 1, .va = 7ull << 40 };
	memset(&o, 0, sizeof(o));
	memset(&x, 0, sizeof(x));
	o.real = &r, o.stats = &st, o.codec = &codec, o.chunk = CHUNK, o.b = &b, o.nblocks = 1;
	o.mode = FT_TM_RAW_BLOCK, o.t = &x, o.ntraps = 1;
	nslot_alloc = 0;
	ft_off_codec_init(&o);
	assert_non_null(o.codec);
	assert_int_equal(ft_z_encode(w, (size_t)N * FT_Z_CHUNK, 1, &x.z), 0);
	x.host = x.z.data, x.zdesc = 5ull << 40;
	CUstream cs = (CUstream)(uintptr_t)0x99;
	/* slots of one raw chunk to about three: pieces of one chunk to many */
	for (size_t slot = FT_Z_CHUNK; slot <= 4 * FT_Z_CHUNK; slot += FT_Z_CHUNK + 4096) {
		o.slot_bytes = slot;
		o.ring.next = 0; /* the events ft_off_codec_init made stay */
		memset(o.ring.used, 0, sizeof(o.ring.used));
		nzops = 0;
		assert_ptr_equal(ft_off_load_coded(&o, 0, cs), o.decode);
		uint32_t next = 0; /* the first chunk not yet copied */
		int piece = 0, last_free[FT_OFF_SLOTS];
		for (int i = 0; i < FT_OFF_SLOTS; i++)
			last_free[i] = -1;
		for (int i = 0; i < nzops; i++) {
			if (zops[i].kind != Z_COPY)
				continue;
			int k = piece++ % FT_OFF_SLOTS;
			assert_true(zops[i].dst == o.slot[k] && zops[i].s == cs);
			assert_true(zops[i].n <= slot);
			uint32_t end = ft_z_piece_end(&x.z, next, x.z.nchunks, slot);
			assert_int_equal(zops[i].n, ft_z_span(&x.z, next, end));
			/* as many chunks as fit: one more would not */
			if (end < x.z.nchunks)
				assert_true(ft_z_span(&x.z, next, end + 1) > slot);
			/* a reused slot: the copy stream waited for its last decode */
			if (last_free[k] >= 0)
				assert_true(find_op(last_free[k] + 1, i, Z_WAIT, o.ring.free[k], cs) >= 0);
			/* then its decode, after the copy, from the slot into place */
			int d = find_op(i + 1, nzops, Z_DECODE, 0, 0);
			assert_true(d >= 0);
			assert_true(zops[d].src == o.slot[k] && zops[d].s == o.decode);
			assert_int_equal(zops[d].n, end - next);
			assert_true(zops[d].dst == b.va + (CUdeviceptr)next * FT_Z_CHUNK);
			int full = recorded_at(o.ring.full[k], d);
			assert_true(full > i && zops[full].s == cs &&
				    find_op(full + 1, d, Z_WAIT, o.ring.full[k], o.decode) >= 0);
			int fr = find_op(d + 1, nzops, Z_RECORD, o.ring.free[k], 0);
			assert_true(fr >= 0 && zops[fr].s == o.decode);
			last_free[k] = fr;
			next = end;
		}
		assert_int_equal(next, x.z.nchunks);
		assert_true(piece > FT_OFF_SLOTS); /* the ring wrapped */
	}
	ft_z_free(&x.z);
	memset(&x.z, 0, sizeof(x.z));
	ft_off_codec_release(&o);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cover_whole_chunks_only),
		cmocka_unit_test(regular_passes),
		cmocka_unit_test(several_streams),
		cmocka_unit_test(activations_in_a_resident_weights_extent),
		cmocka_unit_test(two_traps_in_one_kernel),
		cmocka_unit_test(stale_reference_into_the_same_block),
		cmocka_unit_test(an_ignored_reference_holds_its_trap_in_its_block),
		cmocka_unit_test(a_pass_of_ignored_references_is_said),
		cmocka_unit_test(a_launch_reading_two_traps_of_one_block_reads_both),
		cmocka_unit_test(two_traps_of_one_block_in_a_capture),
		cmocka_unit_test(a_link_is_followed_from_its_weight_only),
		cmocka_unit_test(tensors_in_a_weights_tail_load_nothing),
		cmocka_unit_test(verify_checks_the_pieces_a_block_holds),
		cmocka_unit_test(a_view_inside_a_weight_loads_its_trap),
		cmocka_unit_test(a_link_between_resident_bytes_loads_nothing),
		cmocka_unit_test(tied_weight_read_at_both_ends),
		cmocka_unit_test(adjacent_weights_are_linked),
		cmocka_unit_test(a_kept_weight_keeps_what_runs_on_from_it),
		cmocka_unit_test(abutting_allocations_are_not_linked),
		cmocka_unit_test(capture_loads_each_trap_once),
		cmocka_unit_test(eager_passes_between_replays),
		cmocka_unit_test(a_tail_reference_does_not_place_the_pass),
		cmocka_unit_test(a_kernel_reads_what_the_kernel_before_it_read),
		cmocka_unit_test(a_table_reader_whose_stray_word_points_ahead),
		cmocka_unit_test(holds_end_once_the_words_are_known),
		cmocka_unit_test(a_table_conflict_while_another_thread_captures),
		cmocka_unit_test(a_trap_that_finds_no_memory_stays_offloaded_whole),
		cmocka_unit_test(a_view_from_a_resident_chunk_into_offloaded_ones_loads_the_trap),
		cmocka_unit_test(a_tail_tensor_in_a_capture_brings_the_trap_back_after_it),
		cmocka_unit_test(a_conflict_while_another_thread_captures_waits_for_its_end),
		cmocka_unit_test(a_capture_that_begins_while_traps_come_back),
		cmocka_unit_test(experts_are_loaded_one_at_a_time),
		cmocka_unit_test(most_experts_read_last_time_come_with_the_trap),
		cmocka_unit_test(a_word_that_refers_to_one_expert_a_pass_loads_them_all),
		cmocka_unit_test(a_view_beside_experts_loads_them_only_if_it_may_read_on_into_them),
		cmocka_unit_test(a_link_into_experts_off_their_stride_loads_none),
		cmocka_unit_test(a_link_into_a_dense_weight_loads_no_expert),
		cmocka_unit_test(a_miss_asks_for_the_residency_it_begins),
		cmocka_unit_test(an_expert_inside_a_slice_asks_for_it),
		cmocka_unit_test(experts_no_pass_routed_to_are_loaded_alone),
		cmocka_unit_test(staging_slots_fit_the_largest_offloaded_trap),
		cmocka_unit_test(coded_loads_cut_pieces_to_the_staging_slots),
		cmocka_unit_test(a_tensor_after_the_experts_is_copied_whole),
		cmocka_unit_test(a_slice_copied_later_is_waited_for_by_every_stream),
		cmocka_unit_test(a_capture_loads_every_expert_and_eager_slices_stay),
		cmocka_unit_test(a_stale_word_into_missing_experts),
		cmocka_unit_test(a_stale_word_at_a_cut_copies_every_expert),
		cmocka_unit_test(replays_and_streams_teach_no_slicer),
		cmocka_unit_test(an_untrusted_reference_loads_the_whole_trap),
		cmocka_unit_test(a_stale_word_into_a_dense_weight_holds_a_sliced_trap),
		cmocka_unit_test(strategy_mode),
		cmocka_unit_test(random_sequences),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
