/* Weight identification rules: weights, KV caches written by kernels, input
 * staging written by copies, activations allocated during passes, buffers
 * not read every pass, small buffers, a single checksum; extents and the
 * first-touch order of the weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ft/discover.h"

enum { WEIGHTS = 1, KV = 2, STAGING = 3, SPARSE = 4, ACT = 10 };
#define MB (1u << 20)

static uint32_t find(const struct ft_discover *d, uint64_t a, uint64_t o)
{
	for (uint32_t i = 0; i < d->n; i++)
		if (d->r[i].alloc_id == a && d->r[i].offset == o)
			return i;
	fail_msg("region %llu+%llu not found", (unsigned long long)a, (unsigned long long)o);
	return 0;
}

static void classify_all(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0); /* ids < 5 existed before the first pass */
	for (int pass = 0; pass < 3; pass++) {
		/* weights: three tensors in one allocation, read head-first */
		ft_disc_read(&d, WEIGHTS, 4 * MB, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 2 * MB, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 6 * MB, 0, 8 * MB);       /* 2 MiB, last */
		ft_disc_read(&d, WEIGHTS, 6 * MB, 0, 8 * MB);       /* read twice: same region */
		ft_disc_read(&d, KV, 0, 0, 64 * MB);                /* written by kernels */
		ft_disc_read(&d, STAGING, 0, 0, 4 * MB);
		ft_disc_write(&d, STAGING, 1024, 16);            /* copy into the middle */
		ft_disc_read(&d, ACT, 0, 0, 32 * MB);               /* allocated during passes */
		if (pass != 1)
			ft_disc_read(&d, SPARSE, 0, 0, 4 * MB);
		ft_disc_read(&d, WEIGHTS, 8 * MB - 4096, 0, 8 * MB); /* a 4 KiB tail tensor */
		if (pass < 2)
			ft_disc_pass_end(&d);
	}
	/* pass 2 is still running: only passes 0 and 1 count */
	ft_disc_extents(&d);
	for (uint32_t i = 0; i < d.n; i++) {
		uint64_t sum = d.r[i].alloc_id == KV ? 1000 + i : 42 + i;
		ft_disc_sum(&d, i, sum);
		ft_disc_sum(&d, i, d.r[i].alloc_id == KV ? 2000 + i : 42 + i);
	}
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 0)), FT_DISC_WEIGHT);
	assert_int_equal(d.r[find(&d, WEIGHTS, 0)].extent, 2 * MB);
	assert_int_equal(d.r[find(&d, WEIGHTS, 6 * MB)].extent, 2 * MB - 4096);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 8 * MB - 4096)), FT_DISC_SMALL);
	assert_int_equal(ft_disc_classify(&d, find(&d, KV, 0)), FT_DISC_CHANGED);
	assert_int_equal(ft_disc_classify(&d, find(&d, STAGING, 0)), FT_DISC_WRITTEN);
	assert_int_equal(ft_disc_classify(&d, find(&d, ACT, 0)), FT_DISC_TOO_NEW);
	assert_int_equal(ft_disc_classify(&d, find(&d, SPARSE, 0)), FT_DISC_NOT_EVERY);

	uint32_t *w;
	uint32_t n = ft_disc_weights(&d, &w);
	assert_int_equal(n, 4);
	/* first-touch order: 4 MiB, 0, 2 MiB, 6 MiB */
	assert_int_equal(d.r[w[0]].offset, 4 * MB);
	assert_int_equal(d.r[w[1]].offset, 0);
	assert_int_equal(d.r[w[2]].offset, 2 * MB);
	assert_int_equal(d.r[w[3]].offset, 6 * MB);
	free(w);
	ft_disc_destroy(&d);
}

/* A word that lands inside a weight at an address no tensor starts at (not
 * 16-byte aligned) reads that weight; it does not split it in two. */
static void unaligned_reference_splits_nothing(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 3; pass++) {
		ft_disc_read(&d, WEIGHTS, 0, 0, 112 * MB);
		if (pass > 0)
			ft_disc_read(&d, WEIGHTS, 44 * MB + 0x27, 0, 112 * MB);
		ft_disc_read(&d, WEIGHTS, 8 * MB + 4096, 0, 112 * MB); /* a view: aligned */
		ft_disc_pass_end(&d);
	}
	ft_disc_extents(&d);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.r[find(&d, WEIGHTS, 0)].extent, 8 * MB + 4096);
	assert_int_equal(d.r[find(&d, WEIGHTS, 8 * MB + 4096)].extent, 104 * MB - 4096);
	ft_disc_destroy(&d);
}

static void one_checksum_is_not_proof(void **state)
{
	(void)state;
	struct ft_discover d;
	ft_disc_init(&d, 5);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_pass_end(&d);
	ft_disc_extents(&d);
	ft_disc_sum(&d, 0, 7);
	assert_int_equal(ft_disc_classify(&d, 0), FT_DISC_UNCHECKED);
	ft_disc_sum(&d, 0, 7);
	assert_int_equal(ft_disc_classify(&d, 0), FT_DISC_WEIGHT);
	ft_disc_destroy(&d);
}

/* A read 512 bytes into a tensor that has an allocation of its own, in
 * every pass, starts a region there; the 512 bytes before it, stable and
 * read only, are the weight's start (its base pointer is what a gather
 * carries), so the weight begins at the allocation's start.  Were those
 * bytes seen to change, they would be another tensor; and in an
 * allocation holding more regions (a caching allocator's segment: a norm
 * weight before a projection) the small one is another tensor too. */
static void small_start_joins_the_weight(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int p = 0; p < 2; p++) {
		for (uint64_t a = WEIGHTS; a <= STAGING; a++) {
			ft_disc_read(&d, a, 0, 0, 8 * MB);
			ft_disc_read(&d, a, 512, 0, 8 * MB);
		}
		ft_disc_read(&d, STAGING, 4 * MB, 0, 8 * MB);
		ft_disc_pass_end(&d);
	}
	for (int k = 0; k < 2; k++) {
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++) /* KV's first 512 bytes change */
			ft_disc_sum(&d, i, d.r[i].alloc_id == KV && !d.r[i].offset ? 100 + k : 7);
	}
	ft_disc_extents(&d);
	uint32_t w0 = find(&d, WEIGHTS, 0), kv0 = find(&d, KV, 0), kv512 = find(&d, KV, 512);
	assert_int_equal(ft_disc_classify(&d, w0), FT_DISC_WEIGHT);
	assert_int_equal(d.r[w0].extent, 8 * MB);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 512)), FT_DISC_PART);
	assert_int_equal(ft_disc_classify(&d, kv0), FT_DISC_CHANGED);
	assert_int_equal(ft_disc_classify(&d, kv512), FT_DISC_WEIGHT);
	assert_int_equal(d.r[kv512].extent, 8 * MB - 512);
	assert_int_equal(ft_disc_classify(&d, find(&d, STAGING, 0)), FT_DISC_SMALL);
	assert_int_equal(ft_disc_classify(&d, find(&d, STAGING, 512)), FT_DISC_WEIGHT);
	ft_disc_destroy(&d);
}

/* A tensor placed in a weight's tail changes the weight's extent: the
 * earlier checksum covered other bytes and does not count. */
/* Buffers the allocator placed in a weight's free tail after the first
 * pass: one alone is a region of its own at once (one aligned view is no
 * sign of views the data chooses); two are views of the weight until the
 * bytes of one are seen to change, then both are regions of their own, the
 * weight's extent ends where the first begins, and its sampling starts
 * again. */
static void tail_buffer_restarts_sampling(void **state)
{
	(void)state;
	struct ft_discover d;
	ft_disc_init(&d, 5);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_pass_end(&d);
	ft_disc_extents(&d);
	ft_disc_sum(&d, 0, 1);                   /* over 8 MiB */
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 6 * MB, 0, 8 * MB); /* one new tensor in the tail */
	ft_disc_pass_end(&d);
	ft_disc_extents(&d);
	assert_int_equal(ft_disc_classify(&d, 1), FT_DISC_NOT_EVERY);
	assert_int_equal(d.r[0].extent, 6 * MB);
	for (int pass = 2; pass < 4; pass++) {
		ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 6 * MB, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 7 * MB, 0, 8 * MB); /* and a second */
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		assert_int_equal(ft_disc_classify(&d, 1), FT_DISC_PART);
		assert_int_equal(ft_disc_classify(&d, 2), FT_DISC_PART);
		assert_int_equal(d.r[0].extent, 8 * MB);
		assert_int_equal(d.r[2].extent, 1 * MB); /* sampled over its own bytes */
		ft_disc_sum(&d, 0, 1);
		ft_disc_sum(&d, 1, 10);
		ft_disc_sum(&d, 2, 10 + (uint64_t)pass); /* written by kernels */
	}
	ft_disc_extents(&d);
	assert_int_not_equal(ft_disc_classify(&d, 1), FT_DISC_PART);
	assert_int_not_equal(ft_disc_classify(&d, 2), FT_DISC_PART);
	assert_int_equal(d.r[0].extent, 6 * MB);
	ft_disc_sum(&d, 0, 2);                   /* over 6 MiB: a new series */
	assert_int_equal(ft_disc_classify(&d, 0), FT_DISC_UNCHECKED);
	ft_disc_sum(&d, 0, 2);
	assert_int_equal(d.r[0].nsums, 2);
	assert_false(d.r[0].sums_differ);
	ft_disc_destroy(&d);
}

/* A pass boundary confirmed a few launches after it happened: what those
 * launches read first is taken back from the pass that ended (they are read
 * again into the next one), what it had read before stays. */
static void reads_after_a_late_boundary_move(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 2; pass++) {
		ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
		ft_disc_read(&d, WEIGHTS, 2 * MB, 0, 8 * MB);
		if (pass == 0) {
			/* the next pass's first launches: its first weight,
			 * and an expert read only then */
			uint64_t since = d.feeds;
			ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
			ft_disc_read(&d, SPARSE, 0, 0, 4 * MB);
			ft_disc_unread_since(&d, since);
		}
		ft_disc_pass_end(&d);
		if (pass == 0) {
			ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
			ft_disc_read(&d, SPARSE, 0, 0, 4 * MB);
		}
	}
	ft_disc_extents(&d);
	for (uint32_t i = 0; i < d.n; i++) {
		ft_disc_sum(&d, i, 7);
		ft_disc_sum(&d, i, 7);
	}
	/* read once, in the second pass: no weight */
	assert_int_equal(d.r[find(&d, SPARSE, 0)].touched, 2);
	assert_int_equal(ft_disc_classify(&d, find(&d, SPARSE, 0)), FT_DISC_NOT_EVERY);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 0)), FT_DISC_WEIGHT);
	assert_int_equal(d.r[find(&d, WEIGHTS, 0)].touched, 3);
	ft_disc_destroy(&d);
}

/* Two buffers a warm-up left in a weight's free tail (a segment of the
 * caching allocator: a GEMM's output, a reduction's), read in the first
 * pass only and stable after, 512 bytes apart in their alignment: no
 * views chosen by the data (those vary from pass to pass, or lie at an
 * expert's stride), so no parts; the weight ends at the first.  (On an
 * H100 they were taken for views: a prefill's hidden states placed there
 * loaded the weight's trap, were written into its block and lost.) */
static void buffers_of_one_pass_are_no_views(void **state)
{
	(void)state;
	enum { SEG = 1 };
	struct ft_discover d;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 4; pass++) {
		ft_disc_read(&d, SEG, 4 * MB, 0, 20 * MB);
		if (!pass) {
			ft_disc_read(&d, SEG, 12 * MB, 0, 20 * MB);
			ft_disc_read(&d, SEG, 14566912, 0, 20 * MB); /* 512-aligned */
		}
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	uint32_t w = find(&d, SEG, 4 * MB);
	assert_int_equal(ft_disc_classify(&d, w), FT_DISC_WEIGHT);
	assert_int_equal(d.r[w].extent, 8 * MB);
	assert_int_equal(d.r[w].views, 0);
	assert_int_equal(ft_disc_classify(&d, find(&d, SEG, 12 * MB)), FT_DISC_NOT_EVERY);
	ft_disc_destroy(&d);
	/* experts read in one pass are views all the same, at their stride: a
	 * prefill routes to all 8 in the first pass, decode steps to 3 and 6
	 * after it; the stacked tensor stays one weight (the pass-count rule
	 * alone made two of 4 MiB, experts 3 and 6) */
	const uint64_t expert = 4 * MB;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 6; pass++) {
		for (uint64_t e = 0; e < 8; e++)
			if (!pass || e == 3 || e == 6)
				ft_disc_read(&d, SEG, e * expert, 0, 8 * expert);
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	uint32_t *idx, n = ft_disc_weights(&d, &idx);
	assert_int_equal(n, 1);
	assert_int_equal(d.r[idx[0]].offset, 0);
	assert_true(d.r[idx[0]].extent >= 7 * expert); /* experts 0-6 at least */
	free(idx);
	ft_disc_destroy(&d);
}

/* Views the data chooses split no weight: an embedding read whole every
 * pass and through one token's row in some (a decode step's lookup), and a
 * stacked expert tensor read through the routed experts' slices only, are
 * one weight each, of their whole extent, read through known views. */
static void views_chosen_by_data_are_parts(void **state)
{
	(void)state;
	enum { EMB = 1, EXPERTS = 2, NEXT = 3 };
	const uint64_t row = 8192, expert = 6 * MB;
	static const int routed[4][2] = { { 1, 5 }, { 5, 6 }, { 2, 1 }, { 7, 6 } };
	struct ft_discover d;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 4; pass++) {
		ft_disc_read(&d, EMB, 1272 * row + 508, 0, 250 * MB);
		ft_disc_read(&d, EMB, 0, 0, 250 * MB);
		ft_disc_read(&d, EMB, (uint64_t)(1000 + 77 * pass) * row, 0, 250 * MB);
		for (int e = 0; e < 2; e++)
			ft_disc_read(&d, EXPERTS, (uint64_t)routed[pass][e] * expert, 0, 8 * expert);
		ft_disc_read(&d, NEXT, 0, 0, 16 * MB);
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	/* a misaligned word read before the table's start, every pass: no
	 * tensor begins there */
	assert_int_equal(ft_disc_classify(&d, find(&d, EMB, 1272 * row + 508)), FT_DISC_PART);
	uint32_t *idx, n = ft_disc_weights(&d, &idx);
	assert_int_equal(n, 3);
	const struct ft_disc_region *emb = &d.r[idx[0]], *ex = &d.r[idx[1]];
	assert_int_equal(emb->alloc_id, EMB);
	assert_int_equal(emb->extent, 250 * MB);
	/* up to the last part (the misaligned word) and the least gap past it */
	assert_int_equal(emb->views, (1272 * row + 508) + (41 * row + 508));
	/* the experts' weight begins at the lowest slice read (expert 1) */
	assert_int_equal(ex->alloc_id, EXPERTS);
	assert_int_equal(ex->offset, expert);
	assert_int_equal(ex->extent, 7 * expert);
	assert_int_equal(ex->views, 7 * expert);
	assert_int_equal(d.r[idx[2]].alloc_id, NEXT);
	assert_int_equal(ft_disc_classify(&d, find(&d, EXPERTS, 6 * expert)), FT_DISC_PART);
	/* the experts' slices (FT_EXPERT_PAGING): the routed experts read
	 * after the lowest, each from its start to the next one read; the
	 * table's token rows (8 KiB apart, one misaligned) are no slices, and
	 * a weight without views has none */
	uint64_t sl[8] = { 0 };
	assert_int_equal(ft_disc_slices(&d, idx[1], ex->extent, sl, 8), 4);
	assert_int_equal(sl[0], expert);
	assert_int_equal(sl[1], 4 * expert);
	assert_int_equal(sl[2], 5 * expert);
	assert_int_equal(sl[3], 6 * expert);
	assert_int_equal(ft_disc_slices(&d, idx[1], ex->extent, sl, 2), 4); /* (capped) */
	assert_int_equal(ft_disc_slices(&d, idx[0], emb->extent, sl, 8), 0);
	assert_int_equal(ft_disc_slices(&d, idx[2], d.r[idx[2]].extent, sl, 8), 0);
	free(idx);
	ft_disc_destroy(&d);
}

/* Slices start 1 MiB apart or more: views of rows of a table are none.  A
 * region inside read every pass, at the stride of the views that are not
 * (an expert the router picks every pass), starts one too. */
static void slices_are_views_a_mebibyte_apart(void **state)
{
	(void)state;
	enum { A = 1, B = 2 };
	const uint64_t expert = 4 * MB, row = 512 * 1024;
	static const int routed[4][2] = { { 1, 2 }, { 2, 3 }, { 3, 1 }, { 1, 3 } };
	struct ft_discover d;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 4; pass++) {
		ft_disc_read(&d, A, 0, 0, 8 * expert);
		ft_disc_read(&d, B, 0, 0, 8 * expert);
		for (int e = 0; e < 2; e++) {
			ft_disc_read(&d, A, (uint64_t)routed[pass][e] * expert, 0, 8 * expert);
			ft_disc_read(&d, B, (uint64_t)routed[pass][e] * row, 0, 8 * expert);
		}
		ft_disc_read(&d, A, 5 * expert, 0, 8 * expert); /* every pass */
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	uint64_t sl[8];
	uint32_t a = find(&d, A, 0), b = find(&d, B, 0);
	assert_int_equal(ft_disc_slices(&d, a, 8 * expert, sl, 8), 4);
	assert_int_equal(sl[2], 3 * expert);
	assert_int_equal(sl[3], 5 * expert);
	assert_int_equal(ft_disc_slices(&d, b, 8 * expert, sl, 8), 0);
	/* within the region's first 5 experts, before the one read every
	 * pass */
	assert_int_equal(ft_disc_slices(&d, a, 5 * expert, sl, 8), 3);
	assert_int_equal(sl[2], 3 * expert);
	/* the experts of A no view began: 4, 6 and 7 (the region's own start
	 * begins slot 0) */
	assert_int_equal(ft_disc_unread_slices(&d, a, 8 * expert), 3);
	ft_disc_destroy(&d);
}

/* Two stacked tensors of 8 experts, each its own allocation, whose routers
 * pick expert 3 (1) every pass and never 0-2 (0) (a decode step's tokens
 * are alike; on the H200 a Mixtral layer's up projection): the expert read
 * every pass is no owner of its own, and a region at the allocation's
 * start, never read, leads the views (both in one call); each weight is
 * the whole tensor, sliced at each expert read. */
static void stacked_tensor_first_experts_unread(void **state)
{
	(void)state;
	const uint64_t expert = 4 * MB;
	static const int other[3] = { 5, 6, 7 }, other4[3] = { 2, 4, 2 };
	struct ft_discover d;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 3; pass++) {
		ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
		/* allocation 3: expert 3 every pass; 4: expert 1 every pass */
		ft_disc_read(&d, 3, 3 * expert, 0, 8 * expert);
		ft_disc_read(&d, 3, (uint64_t)other[pass] * expert, 0, 8 * expert);
		ft_disc_read(&d, 4, expert, 0, 8 * expert);
		ft_disc_read(&d, 4, (uint64_t)other4[pass] * expert, 0, 8 * expert);
		ft_disc_pass_end(&d);
		if (pass == 1) { /* experts first read in the last pass: 6; 4 */
			ft_disc_extents(&d);
			assert_int_equal(ft_disc_new_slices(&d, 1), 2);
		}
		ft_disc_lead_slices(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	assert_int_equal(ft_disc_new_slices(&d, 1), 1); /* expert 7 of 3 */
	assert_int_equal(ft_disc_new_slices(&d, 3), 7); /* 3, 5, 6, 7; 1, 2, 4 */
	for (uint64_t a = 3; a <= 4; a++) {
		uint32_t x = find(&d, a, 0);
		assert_int_equal(d.r[x].owner, x);
		assert_int_equal(d.r[find(&d, a, (a == 3 ? 3 : 1) * expert)].owner, x);
		assert_int_equal(ft_disc_classify(&d, x), FT_DISC_WEIGHT);
		assert_int_equal(d.r[x].extent, 8 * expert);
	}
	uint32_t x = find(&d, 3, 0);
	uint64_t sl[8];
	assert_int_equal(ft_disc_slices(&d, x, 8 * expert, sl, 8), 4);
	assert_int_equal(sl[0], 3 * expert);
	assert_int_equal(sl[3], 7 * expert);
	assert_int_equal(ft_disc_unread_slices(&d, x, 8 * expert), 3); /* 1, 2, 4 */
	ft_disc_destroy(&d);
}

/* The H200's PIECEWISE start-up harness: a word 4 bytes past a row near
 * the embedding's end, read every pass, and the table's start, with no
 * token rows read as views.  The misaligned word's kind (2) was lost in a
 * chain of &&, which made it a view (1) that, alone, was no part: the
 * table became two weights, 240.06 and 9.94 MiB, the second offloaded with
 * another trap and read through the first.  It is a part. */
static void a_misaligned_word_alone_is_a_part(void **state)
{
	(void)state;
	enum { EMB = 1, NEXT = 2 };
	struct ft_discover d;
	ft_disc_init(&d, 5);
	for (int pass = 0; pass < 4; pass++) {
		ft_disc_read(&d, EMB, 251723780, 0, 250 * MB);
		ft_disc_read(&d, EMB, 0, 0, 250 * MB);
		ft_disc_read(&d, NEXT, 0, 0, 16 * MB);
		ft_disc_pass_end(&d);
		ft_disc_extents(&d);
		for (uint32_t i = 0; i < d.n; i++)
			ft_disc_sum(&d, i, 100 + d.r[i].offset);
	}
	assert_int_equal(ft_disc_classify(&d, find(&d, EMB, 251723780)), FT_DISC_PART);
	uint32_t *idx, n = ft_disc_weights(&d, &idx);
	assert_int_equal(n, 2);
	assert_int_equal(d.r[idx[0]].alloc_id, EMB);
	assert_int_equal(d.r[idx[0]].offset, 0);
	assert_int_equal(d.r[idx[0]].extent, 250 * MB);
	free(idx);
	ft_disc_destroy(&d);
}

static void writes_and_boundaries(void **state)
{
	(void)state;
	struct ft_discover d;
	ft_disc_init(&d, 5);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 4 * MB, 0, 8 * MB);
	/* a write that ends exactly where the second region begins touches
	 * only the first */
	ft_disc_write(&d, WEIGHTS, 4 * MB - 16, 16);
	assert_true(d.r[0].written);
	assert_false(d.r[1].written);
	/* a write in another allocation touches neither */
	ft_disc_write(&d, KV, 0, 8 * MB);
	assert_false(d.r[1].written);
	/* a write covering the tail */
	ft_disc_write(&d, WEIGHTS, 6 * MB, 4096);
	assert_true(d.r[1].written);
	ft_disc_destroy(&d);
}

/* The candidate weights after one pass, their contents taken on a saved
 * profile's word, as the one-pass match sees them: how many (idx malloc'd). */
static uint32_t after_one_pass(struct ft_discover *d, uint32_t **idx)
{
	ft_disc_pass_end(d);
	d->content_known = 1;
	ft_disc_extents(d);
	return ft_disc_weights(d, idx);
}

/* FT_SKIP_DISCOVERY: one pass, contents on the saved profile's word; the
 * saved sizes are matched in order, other regions of the pass skipped. */
static void saved_sizes_after_one_pass(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);  /* 2 MiB */
	ft_disc_read(&d, KV, 0, 0, 4 * MB);       /* 4 MiB, changes: no checksum to say so */
	ft_disc_read(&d, WEIGHTS, 2 * MB, 0, 8 * MB); /* 6 MiB */
	uint32_t *idx, found, missing;
	uint32_t n = after_one_pass(&d, &idx);
	assert_int_equal(n, 3); /* the KV cache is a candidate too */
	static const uint64_t saved[] = { 2 * MB, 6 * MB }, other[] = { 2 * MB, 5 * MB };
	assert_int_equal(ft_disc_match(&d, &idx, n, saved, NULL, 2, NULL, NULL, 1, &found, &missing), 2);
	assert_int_equal(d.r[idx[0]].offset, 0);
	assert_int_equal(d.r[idx[1]].alloc_id, WEIGHTS);
	assert_int_equal(d.r[idx[1]].offset, 2 * MB);
	free(idx);
	n = ft_disc_weights(&d, &idx);
	assert_int_equal(ft_disc_match(&d, &idx, n, other, NULL, 2, NULL, NULL, 1, &found, &missing), 0);
	assert_int_equal(found, 1);
	free(idx);
	ft_disc_destroy(&d);
}

/* Checksums of regions' first bytes, for ft_disc_match: none can be made
 * (no_sum), or one that depends on where the bytes are and how many. */
static uint64_t no_sum(void *ctx, const struct ft_disc_region *r, uint64_t bytes)
{
	(void)ctx, (void)r, (void)bytes;
	return 0;
}

static uint64_t prefix_sum(void *ctx, const struct ft_disc_region *r, uint64_t bytes)
{
	(void)ctx;
	return r->alloc_id * 1000 + r->offset + bytes;
}

/* A region longer than a saved weight (a tensor after it, which cut its
 * extent when the profile was made, not read yet): it matches when its
 * first bytes have the weight's checksum, and its extent is cut. */
static void saved_contents_in_a_longer_region(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);      /* 8 MiB: the weight is 6 */
	uint32_t *idx, found, missing;
	uint32_t n = after_one_pass(&d, &idx);
	assert_int_equal(n, 1);
	ft_disc_sum(&d, idx[0], 1); /* the whole region's: not the weight's */
	static const uint64_t sizes[] = { 6 * MB }, sums[] = { WEIGHTS * 1000 + 6 * MB },
			      other[] = { WEIGHTS * 1000 + 5 * MB };
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, other, 1, prefix_sum, NULL, 1, &found, &missing), 0);
	assert_int_equal(d.r[idx[0]].extent, 8 * MB);
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, sums, 1, prefix_sum, NULL, 1, &found, &missing), 1);
	assert_int_equal(d.r[idx[0]].extent, 6 * MB);
	free(idx);
	ft_disc_destroy(&d);
}

/* Two saved weights found in one allocation, the first over its saved size
 * reaching into the second's region (as a restart's match reaches to the
 * allocation's end): weights never overlap, so the match fails. */
static void saved_contents_never_overlap(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 3 * MB, 0, 8 * MB);
	uint32_t *idx, found, missing;
	uint32_t n = after_one_pass(&d, &idx);
	assert_int_equal(n, 2);
	static const uint64_t sizes[] = { 8 * MB, 5 * MB },
			      sums[] = { WEIGHTS * 1000 + 8 * MB, WEIGHTS * 1000 + 3 * MB + 5 * MB };
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, sums, 2, prefix_sum, NULL, 1, &found, &missing), 0);
	assert_int_equal(found, 1);
	assert_int_equal(missing, 1);
	free(idx);
	ft_disc_destroy(&d);
}

/* A weight the run that saved the profile saw split in two (a stack slot
 * pointed into it: on an H100 a start-up harness saved 115 weights, its
 * restarts found 114 and learnt again), read whole by this one: the first
 * part is found at the region's start, the second where the first ends,
 * in either saved order; a region is made there.  A part whose bytes
 * differ is not found. */
static void saved_weight_split_in_two(void **state)
{
	(void)state;
	for (int order = 0; order < 3; order++) {
		struct ft_discover d;
		assert_int_equal(ft_disc_init(&d, 5), 0);
		ft_disc_read(&d, WEIGHTS, 0, 0, 32 * MB);
		ft_disc_read(&d, SPARSE, 0, 0, 4 * MB);
		uint32_t *idx, found, missing;
		uint32_t n = after_one_pass(&d, &idx);
		assert_int_equal(n, 2);
		assert_int_equal(d.n, 2);
		const uint64_t a = WEIGHTS * 1000 + 19 * MB, b = WEIGHTS * 1000 + 32 * MB,
			       c = SPARSE * 1000 + 4 * MB;
		uint64_t sizes[3] = { 19 * MB, 13 * MB, 4 * MB }, sums[3] = { a, b, c };
		if (order == 1) { /* the tail first, as first-touch order may have it */
			sizes[0] = 13 * MB, sums[0] = b;
			sizes[1] = 19 * MB, sums[1] = a;
		}
		if (order == 2)
			sums[1] = b + 1; /* other bytes: not found */
		uint32_t m = ft_disc_match(&d, &idx, n, sizes, sums, 3, prefix_sum, NULL, 1, &found,
					   &missing);
		if (order == 2) {
			assert_int_equal(m, 0);
			assert_int_equal(found, 2);
			assert_int_equal(missing, 1);
			free(idx);
			ft_disc_destroy(&d);
			continue;
		}
		assert_int_equal(m, 3);
		assert_int_equal(d.n, 3);
		uint32_t head = order ? idx[1] : idx[0], tail = order ? idx[0] : idx[1];
		assert_int_equal(d.r[head].offset, 0);
		assert_int_equal(d.r[head].extent, 19 * MB);
		assert_int_equal(d.r[tail].alloc_id, WEIGHTS);
		assert_int_equal(d.r[tail].offset, 19 * MB);
		assert_int_equal(d.r[tail].extent, 13 * MB);
		assert_int_equal(d.r[idx[2]].alloc_id, SPARSE);
		assert_int_equal(ft_disc_classify(&d, tail), FT_DISC_WEIGHT);
		free(idx);
		ft_disc_destroy(&d);
	}
}

/* A saved weight that the pass read apart (a token's row of the embedding
 * read through its own pointer, every pass so far): the region at its
 * start matches over the saved size, up to the allocation's end, and the
 * regions inside are its views. */
static void saved_contents_read_apart(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 3 * MB, 0, 8 * MB); /* a row: 3 MiB + 5 MiB */
	ft_disc_read(&d, SPARSE, 0, 0, 4 * MB);
	/* one launch reads the row and the other weight */
	const uint64_t ids[] = { WEIGHTS, SPARSE }, offs[] = { 3 * MB, 0 };
	ft_disc_together(&d, ids, offs, 2);
	uint32_t *idx, found, missing;
	uint32_t n = after_one_pass(&d, &idx);
	assert_int_equal(n, 3);
	static const uint64_t sizes[] = { 8 * MB, 4 * MB },
			      sums[] = { WEIGHTS * 1000 + 8 * MB, SPARSE * 1000 + 4 * MB };
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, sums, 2, prefix_sum, NULL, 1, &found, &missing), 2);
	assert_int_equal(d.r[idx[0]].offset, 0);
	assert_int_equal(d.r[idx[0]].extent, 8 * MB);
	assert_int_equal(d.r[idx[0]].views, 6 * MB); /* the row, and its length past it */
	/* read together through the row: the pair is the weights' */
	uint32_t (*pairs)[2];
	assert_int_equal(ft_disc_weight_pairs(&d, idx, 2, NULL, 0, &pairs), 1);
	assert_int_equal(pairs[0][0], 0);
	assert_int_equal(pairs[0][1], 1);
	free(pairs);
	free(idx);
	ft_disc_destroy(&d);
}

/* A saved profile with checksums after one pass: a region matches only
 * with the saved size and checksum, never with a checksum of 0, and in any
 * order. */
static void saved_contents_after_one_pass(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	ft_disc_read(&d, KV, 0, 0, 2 * MB);           /* 2 MiB, other contents */
	ft_disc_read(&d, WEIGHTS, 0, 0, 8 * MB);      /* 2 MiB */
	ft_disc_read(&d, WEIGHTS, 2 * MB, 0, 8 * MB); /* 6 MiB */
	uint32_t *idx, found, missing;
	uint32_t n = after_one_pass(&d, &idx);
	assert_int_equal(n, 3);
	for (uint32_t i = 0; i < n; i++)
		ft_disc_sum(&d, idx[i], d.r[idx[i]].alloc_id == KV ? 7 : 100 + d.r[idx[i]].offset);
	static const uint64_t sizes[] = { 2 * MB, 6 * MB };
	static const uint64_t sums[] = { 100, 100 + 2 * MB }, zero[] = { 0, 100 + 2 * MB };
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, sums, 2, no_sum, NULL, 1, &found, &missing), 2);
	assert_int_equal(d.r[idx[0]].alloc_id, WEIGHTS); /* not the KV cache, first by size */
	assert_int_equal(d.r[idx[0]].offset, 0);
	free(idx);
	n = ft_disc_weights(&d, &idx);
	assert_int_equal(ft_disc_match(&d, &idx, n, sizes, zero, 2, no_sum, NULL, 1, &found, &missing), 0);
	assert_int_equal(found, 1);
	assert_int_equal(missing, 0);
	free(idx);
	/* another order than the pass's (the pass began elsewhere in the
	 * forward): the regions come in the saved order */
	static const uint64_t rsizes[] = { 6 * MB, 2 * MB }, rsums[] = { 100 + 2 * MB, 100 };
	n = ft_disc_weights(&d, &idx);
	assert_int_equal(ft_disc_match(&d, &idx, n, rsizes, rsums, 2, no_sum, NULL, 1, &found, &missing), 2);
	assert_int_equal(d.r[idx[0]].offset, 2 * MB);
	assert_int_equal(d.r[idx[1]].offset, 0);
	assert_int_equal(d.r[idx[1]].alloc_id, WEIGHTS);
	free(idx);
	ft_disc_destroy(&d);
}

/* Regions one launch reads together, among the weights: pairs by
 * first-touch position; regions of allocations made during the passes and
 * non-weights are left out; consecutive weights of one allocation (one
 * tensor may have been seen through two pointers) are read together too. */
static void weights_read_together(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 2; pass++) {
		/* W1: [0, 4) and [4, 8) MiB; W2: [0, 8) MiB; W3 [0, 8), ACT */
		uint64_t ids[3], offs[3];
		ft_disc_read(&d, 1, 0, 0, 8 * MB);
		ft_disc_read(&d, 2, 0, 0, 8 * MB);
		ids[0] = 1, offs[0] = 0, ids[1] = 2, offs[1] = 0;
		ft_disc_together(&d, ids, offs, 2);          /* W1+0 with W2 */
		ft_disc_read(&d, 1, 4 * MB, 0, 8 * MB);
		ft_disc_read(&d, ACT, 0, 0, 8 * MB);
		ids[0] = 1, offs[0] = 4 * MB, ids[1] = ACT, offs[1] = 0;
		ft_disc_together(&d, ids, offs, 2);          /* an activation: no pair */
		ft_disc_read(&d, 3, 0, 0, 8 * MB);
		ids[0] = 3, offs[0] = 0, ids[1] = 3, offs[1] = 0x27;
		ft_disc_together(&d, ids, offs, 2);          /* a misaligned word: itself */
		ft_disc_pass_end(&d);
	}
	ft_disc_extents(&d);
	for (uint32_t i = 0; i < d.n; i++) {
		ft_disc_sum(&d, i, 7);
		ft_disc_sum(&d, i, 7);
	}
	uint32_t *idx, (*pairs)[2];
	uint32_t n = ft_disc_weights(&d, &idx);
	assert_int_equal(n, 4); /* W1+0, W2, W1+4, W3 */
	uint32_t np = ft_disc_weight_pairs(&d, idx, n, NULL, 0, &pairs);
	/* (0, 1): read together; (0, 2): W1's two regions abut */
	assert_int_equal(np, 2);
	assert_int_equal(pairs[0][0], 0);
	assert_int_equal(pairs[0][1], 1);
	assert_int_equal(pairs[1][0], 0);
	assert_int_equal(pairs[1][1], 2);
	free(pairs);
	free(idx);
	ft_disc_destroy(&d);
}

/* The pairs of weights read together after the passes so far; *n: the
 * weights. */
static uint32_t pairs_after(struct ft_discover *d, uint32_t (**pairs)[2], uint32_t *n)
{
	ft_disc_extents(d);
	for (uint32_t i = 0; i < d->n; i++) {
		ft_disc_sum(d, i, 7);
		ft_disc_sum(d, i, 7);
	}
	uint32_t *idx;
	*n = ft_disc_weights(d, &idx);
	uint32_t (*inter)[2];
	uint32_t ni = ft_disc_interleaved(d, idx, *n, &inter);
	uint32_t np = ft_disc_weight_pairs(d, idx, *n, (const uint32_t (*)[2])inter, ni, pairs);
	free(inter);
	free(idx);
	return np;
}

/* Weights whose reads interleave in the last two passes (a loop over
 * routed experts reads expert e's up projection W1, its down projection W2,
 * then expert e + 1's up projection) are read together; W3, read after
 * both, is not. */
static void weights_interleaved(void **state)
{
	(void)state;
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (int e = 0; e < 2; e++) {
			ft_disc_read(&d, 1, 0, 0, 8 * MB);
			ft_disc_read(&d, 2, 0, 0, 8 * MB);
		}
		ft_disc_read(&d, 3, 0, 0, 32 * MB); /* (the pair: under half the bytes) */
		ft_disc_pass_end(&d);
	}
	uint32_t (*pairs)[2], n;
	assert_int_equal(pairs_after(&d, &pairs, &n), 1);
	assert_int_equal(n, 3);
	assert_int_equal(pairs[0][0], 0);
	assert_int_equal(pairs[0][1], 1);
	free(pairs);
	ft_disc_destroy(&d);
	/* each pass reads W4 (64 MiB), W1, W2, W3, then the next pass's start
	 * reads W1 again before the boundary is known: that read is taken back
	 * (without which W1 would interleave with W2 and W3) */
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 3; pass++) {
		ft_disc_read(&d, 4, 0, 0, 64 * MB);
		ft_disc_read(&d, 1, 0, 0, 8 * MB);
		ft_disc_read(&d, 2, 0, 0, 8 * MB);
		ft_disc_read(&d, 3, 0, 0, 8 * MB);
		uint64_t since = d.feeds;
		ft_disc_read(&d, 1, 0, 0, 8 * MB);
		ft_disc_unread_since(&d, since);
		ft_disc_pass_end(&d);
	}
	assert_int_equal(pairs_after(&d, &pairs, &n), 0);
	assert_int_equal(n, 4);
	ft_disc_destroy(&d);
	/* interleaved in the last pass only (a stale pointer read once out
	 * of its place): no pair */
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (int e = 0; e < 1 + pass; e++) {
			ft_disc_read(&d, 1, 0, 0, 8 * MB);
			ft_disc_read(&d, 2, 0, 0, 8 * MB);
		}
		ft_disc_read(&d, 3, 0, 0, 32 * MB);
		ft_disc_pass_end(&d);
	}
	assert_int_equal(pairs_after(&d, &pairs, &n), 0);
	assert_int_equal(n, 3);
	ft_disc_destroy(&d);
	/* W4, read first and last (a tied embedding), interleaves with all:
	 * its partners span more than half of the bytes, no pair of it kept */
	assert_int_equal(ft_disc_init(&d, 5), 0);
	for (int pass = 0; pass < 2; pass++) {
		ft_disc_read(&d, 4, 0, 0, 8 * MB);
		for (int e = 0; e < 2; e++) {
			ft_disc_read(&d, 1, 0, 0, 8 * MB);
			ft_disc_read(&d, 2, 0, 0, 8 * MB);
		}
		ft_disc_read(&d, 3, 0, 0, 8 * MB);
		ft_disc_read(&d, 4, 0, 0, 8 * MB);
		ft_disc_pass_end(&d);
	}
	assert_int_equal(pairs_after(&d, &pairs, &n), 1);
	assert_int_equal(n, 4);
	assert_int_equal(pairs[0][0], 1); /* W1, W2 */
	assert_int_equal(pairs[0][1], 2);
	free(pairs);
	ft_disc_destroy(&d);
}

/* Declared tensors: one pass and no checksum make a declared parameter a
 * weight; its extent ends where it does; a region inside it is its part
 * even when read every pass; a declared buffer, memory nobody declared (a
 * KV cache, an old allocation), or a declared parameter written by a copy
 * is none.  Base address of WEIGHTS: 1 GiB. */
static void declared_tensors(void **state)
{
	(void)state;
	const uint64_t base = 1ull << 30;
	static struct ft_disc_decl decl[] = {
		{ (1ull << 30), (1ull << 30) + 3 * MB, 0, 0 },          /* w0: 3 MiB */
		{ (1ull << 30) + 4 * MB, (1ull << 30) + 5 * MB, 1, 1 }, /* a buffer */
		{ (1ull << 30) + 6 * MB, (1ull << 30) + 7 * MB, 2, 0 }, /* w2 */
		{ (1ull << 30) + 7 * MB, (1ull << 30) + 8 * MB, 3, 0 }, /* w3, copied into */
	};
	struct ft_discover d;
	assert_int_equal(ft_disc_init(&d, 2), 0); /* KV (id 2) is as old as the weights */
	d.decl = decl;
	d.ndecl = 4;
	ft_disc_read(&d, WEIGHTS, 6 * MB, base, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 0, base, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 1 * MB, base, 8 * MB); /* inside w0, read every pass */
	ft_disc_read(&d, WEIGHTS, 4 * MB, base, 8 * MB);
	ft_disc_read(&d, WEIGHTS, 7 * MB, base, 8 * MB);
	ft_disc_write(&d, WEIGHTS, 7 * MB + 64, 16);
	ft_disc_read(&d, KV, 0, 0, 64 * MB);
	ft_disc_pass_end(&d);
	ft_disc_extents(&d);
	uint32_t w0 = find(&d, WEIGHTS, 0);
	assert_int_equal(ft_disc_classify(&d, w0), FT_DISC_WEIGHT); /* no checksum */
	assert_int_equal(d.r[w0].extent, 3 * MB);                   /* not up to 4 MiB */
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 1 * MB)), FT_DISC_PART);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 4 * MB)), FT_DISC_BUFFER);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 6 * MB)), FT_DISC_WEIGHT);
	assert_int_equal(d.r[find(&d, WEIGHTS, 6 * MB)].extent, 1 * MB);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 7 * MB)), FT_DISC_WRITTEN);
	assert_int_equal(ft_disc_classify(&d, find(&d, KV, 0)), FT_DISC_UNDECLARED);
	assert_int_equal(ft_disc_declared(&d, base + 3 * MB), -1); /* between tensors */
	assert_int_equal(ft_disc_declared(&d, base + 7 * MB), 3);
	uint32_t *w;
	assert_int_equal(ft_disc_weights(&d, &w), 2);
	assert_int_equal(d.r[w[0]].offset, 6 * MB); /* first-touch order */
	assert_int_equal(d.r[w[1]].offset, 0);
	free(w);
	/* a second pass that misses w2: not read every pass */
	ft_disc_read(&d, WEIGHTS, 0, base, 8 * MB);
	ft_disc_pass_end(&d);
	ft_disc_extents(&d);
	assert_int_equal(ft_disc_classify(&d, find(&d, WEIGHTS, 6 * MB)), FT_DISC_NOT_EVERY);
	/* a copy into a part of w0 wrote w0 */
	ft_disc_write(&d, WEIGHTS, 1 * MB + 64, 16);
	ft_disc_extents(&d);
	assert_int_equal(ft_disc_classify(&d, w0), FT_DISC_WRITTEN);
	ft_disc_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(weights_read_together),
		cmocka_unit_test(weights_interleaved),
		cmocka_unit_test(classify_all),
		cmocka_unit_test(small_start_joins_the_weight),
		cmocka_unit_test(unaligned_reference_splits_nothing),
		cmocka_unit_test(one_checksum_is_not_proof),
		cmocka_unit_test(tail_buffer_restarts_sampling),
		cmocka_unit_test(buffers_of_one_pass_are_no_views),
		cmocka_unit_test(views_chosen_by_data_are_parts),
		cmocka_unit_test(slices_are_views_a_mebibyte_apart),
		cmocka_unit_test(stacked_tensor_first_experts_unread),
		cmocka_unit_test(a_misaligned_word_alone_is_a_part),
		cmocka_unit_test(reads_after_a_late_boundary_move),
		cmocka_unit_test(writes_and_boundaries),
		cmocka_unit_test(saved_sizes_after_one_pass),
		cmocka_unit_test(saved_contents_after_one_pass),
		cmocka_unit_test(saved_contents_in_a_longer_region),
		cmocka_unit_test(saved_contents_read_apart),
		cmocka_unit_test(saved_weight_split_in_two),
		cmocka_unit_test(saved_contents_never_overlap),
		cmocka_unit_test(declared_tensors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
