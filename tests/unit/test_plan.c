/* The planner on synthetic profiles: an 80-layer 70B-shaped model and an
 * 8B-shaped one, decode-like (copies dominate) and prefill-like (compute
 * dominates), budgets from 25 % to 90 % of the weights, latency mode,
 * refusals.  Invariants checked on every plan: the peak never exceeds the
 * budget, no two consecutive transfers (the pass wraps) share a block, every
 * offloaded trap's copy lands before the trap starts, and the predicted pass
 * is never faster than max(resident, transfer floor). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/plan.h"
#include "ft/traps.h"
#include "llama_sizes.h"

static const struct ft_curve_point curve[] = {
	{ 65536, 0.0041 }, { 262144, 0.0075 }, { 1 << 20, 0.0218 },
	{ 4 << 20, 0.0791 }, { 16 << 20, 0.3107 }, { 64 << 20, 1.243 },
};

/* bytes_per_ms: compute speed (3.3e9 decode-like, 3.3e7 prefill-like) */
static void make(struct ft_profile *p, uint32_t layers, uint64_t d, uint64_t ffn, uint64_t kv,
		 double bytes_per_ms)
{
	memset(p, 0, sizeof(*p));
	p->nweights = llama_sizes(&p->weights, layers, d, ffn, kv, 128256, 0);
	p->ntraps = (uint32_t)ft_traps_group(p->weights, p->nweights, 256 << 20, &p->traps);
	for (uint32_t i = 0; i < p->ntraps; i++) {
		double ms = (double)p->traps[i].bytes / bytes_per_ms;
		p->traps[i].compute = (struct ft_stat_ms){ ms, ms, ms, 10 };
	}
	p->curve = malloc(sizeof(curve));
	memcpy(p->curve, curve, sizeof(curve));
	p->ncurve = 6;
}

static void check(const struct ft_plan *pl, const struct ft_profile *p, uint64_t budget)
{
	if (budget)
		assert_true(pl->peak_bytes <= budget);
	int prev = -1, first = -1, last = -1;
	uint32_t m = 0;
	for (uint32_t i = 0; i < pl->ntraps; i++) {
		const struct ft_plan_trap *t = &pl->t[i];
		assert_int_equal(t->offloaded, t->block >= 0);
		if (t->block < 0)
			continue;
		m++;
		if (prev >= 0 && t->block == pl->t[prev].block)
			fail_msg("traps %d and %u share block %d", prev, i, t->block);
		assert_true(t->issue_ms + t->copy_ms <= t->start_ms + 1e-6);
		if (first < 0)
			first = (int)i;
		prev = last = (int)i;
	}
	if (m >= 2)
		assert_int_not_equal(pl->t[first].block, pl->t[last].block);
	assert_true(pl->pass_ms >= pl->floor_ms - 1e-6);
	assert_true(pl->floor_ms >= pl->compute_ms - 1e-9);
	(void)p;
}

static uint64_t total(const struct ft_profile *p)
{
	uint64_t t = 0;
	for (uint32_t i = 0; i < p->ntraps; i++)
		t += p->traps[i].bytes;
	return t;
}

static void budgets(void **state)
{
	(void)state;
	static const struct {
		uint32_t layers;
		uint64_t d, ffn, kv;
	} models[] = { { 80, 8192, 28672, 1024 }, { 32, 4096, 14336, 1024 } };
	static const double speed[] = { 3.3e9, 3.3e7 };
	static const double keep[] = { 0.25, 0.5, 0.75, 0.9 };
	for (size_t mi = 0; mi < 2; mi++)
		for (size_t si = 0; si < 2; si++) {
			struct ft_profile p;
			make(&p, models[mi].layers, models[mi].d, models[mi].ffn, models[mi].kv,
			     speed[si]);
			for (size_t ki = 0; ki < 4; ki++) {
				for (int raw = 0; raw < 2; raw++) {
					struct ft_plan_input in = { &p, (uint64_t)(keep[ki] * (double)total(&p)),
								    4, 2, 1.0, raw, 0, 0, 0 };
					struct ft_plan pl;
					char why[512];
					if (ft_plan_make(&in, &pl, why, sizeof(why)))
						fail_msg("%u layers keep %.2f: %s", models[mi].layers,
							 keep[ki], why);
					check(&pl, &p, in.budget);
					assert_true(pl.offloaded_bytes > 0);
					/* compute-heavy (prefill-like) at half the weights:
					 * copies hide */
					if (si == 1 && keep[ki] >= 0.5)
						assert_true(pl.pass_ms <= 1.05 * pl.floor_ms);
					ft_plan_free(&pl);
				}
			}
			ft_profile_free(&p);
		}
}

/* Memory mode on the 8B shape at half its weights, decode-like (copies
 * dominate, so every choice predicts the same pass): the offloaded layers
 * are spread over the pass, no long stretch of resident layers (after which
 * the copy stream would have sat idle while the program launched them). */
static void offloaded_layers_spread(void **state)
{
	(void)state;
	struct ft_profile p;
	make(&p, 32, 4096, 14336, 1024, 3.3e9);
	struct ft_plan_input in = { &p, total(&p) / 2, 4, 2, 1.0, 0, 0, 0, 0 };
	struct ft_plan pl;
	char why[512];
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	check(&pl, &p, in.budget);
	uint32_t m = 0, layers = 0, run = 0, longest = 0;
	for (uint32_t i = 0; i < pl.ntraps; i++) {
		if (strcmp(p.traps[i].role, "layer"))
			continue;
		layers++;
		m += pl.t[i].offloaded;
		run = pl.t[i].offloaded ? 0 : run + 1;
		if (run > longest)
			longest = run;
	}
	assert_true(m >= layers / 3 && m < layers);
	/* evenly: no resident stretch longer than the even gap, rounded up */
	assert_true(longest <= (layers - m + m - 1) / m + 1);
	ft_plan_free(&pl);
	ft_profile_free(&p);
}

static void latency_mode(void **state)
{
	(void)state;
	struct ft_profile p;
	make(&p, 32, 4096, 14336, 1024, 3.3e7); /* compute-heavy: much hides */
	struct ft_plan_input in = { &p, 0, 4, 2, 1.0, 0, 0, 0, 0 };
	struct ft_plan pl;
	char why[256];
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	check(&pl, &p, 0);
	assert_true(pl.offloaded_bytes > total(&p) / 2);
	assert_true(pl.stall_ms <= 0.05 * pl.pass_ms);
	ft_plan_free(&pl);
	ft_profile_free(&p);
	make(&p, 32, 4096, 14336, 1024, 3.3e9); /* decode: nothing hides */
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	assert_int_equal(pl.offloaded_bytes, 0);
	assert_true(pl.pass_ms - pl.compute_ms < 1e-6 && pl.compute_ms - pl.pass_ms < 1e-6);
	ft_plan_free(&pl);
	ft_profile_free(&p);
}

/* A trap whose bytes must all stay (apply.c gives the planner 0 bytes for
 * a trap read all over the pass) is never offloaded: it would take a block
 * slot for nothing and put the first and last real transfers of the pass
 * in one block, as seen on the H200 (the serving harness's plan gave its
 * shared trap 0 block 0). */
static void nothing_left_to_copy(void **state)
{
	(void)state;
	struct ft_profile p;
	for (int latency = 0; latency < 2; latency++) {
		make(&p, 32, 4096, 14336, 1024, latency ? 3.3e7 : 3.3e9);
		p.traps[0].bytes = 0;
		struct ft_plan_input in = { &p, latency ? 0 : total(&p) / 2, 4, 2, 1.0, 0, 0, 0, 0 };
		struct ft_plan pl;
		char why[512];
		assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
		assert_int_equal(pl.t[0].offloaded, 0);
		assert_true(pl.offloaded_bytes > 0);
		check(&pl, &p, in.budget);
		ft_plan_free(&pl);
		ft_profile_free(&p);
	}
}

/* Traps one launch reads together never share a block: a pair that
 * round-robin would put in one block (1 and 5 of 4 blocks), every layer
 * with the next but one, and a triangle that two blocks cannot hold. */
static void traps_read_together_get_blocks_of_their_own(void **state)
{
	(void)state;
	struct ft_profile p;
	for (int latency = 0; latency < 2; latency++) {
		make(&p, 32, 4096, 14336, 1024, latency ? 3.3e7 : 3.3e9);
		assert_int_equal(ft_coread_add(&p, 5, 1), 1);
		for (uint32_t t = 1; t + 2 < p.ntraps; t += 3)
			ft_coread_add(&p, t, t + 2);
		struct ft_plan_input in = { &p, latency ? 0 : total(&p) / 2, 4, 2, 1.0, 0, 0, 0, 0 };
		struct ft_plan pl;
		char why[512];
		assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
		check(&pl, &p, in.budget);
		assert_true(pl.offloaded_bytes > 0);
		for (uint32_t k = 0; k < p.ncoread; k++) {
			const struct ft_plan_trap *a = &pl.t[p.coread[k][0]], *b = &pl.t[p.coread[k][1]];
			if (a->block >= 0 && a->block == b->block)
				fail_msg("traps %u and %u are read together but share block %d",
					 p.coread[k][0], p.coread[k][1], a->block);
		}
		ft_plan_free(&pl);
		ft_profile_free(&p);
	}
	/* every trap offloaded over exactly four blocks: round-robin puts
	 * traps 1 and 5 in one */
	make(&p, 8, 4096, 14336, 1024, 3.3e7);
	ft_coread_add(&p, 1, 5);
	struct ft_plan_input all = { &p, 0, 4, 4, 1000.0, 0, 0, 0, 0 };
	struct ft_plan one;
	char w[512];
	assert_int_equal(ft_plan_make(&all, &one, w, sizeof(w)), 0);
	check(&one, &p, 0);
	assert_true(one.t[1].block >= 0 && one.t[5].block >= 0);
	assert_int_not_equal(one.t[1].block, one.t[5].block);
	ft_plan_free(&one);
	ft_profile_free(&p);
	/* three traps pairwise read together, all offloaded: not two blocks */
	make(&p, 4, 4096, 14336, 1024, 3.3e7);
	ft_coread_add(&p, 1, 2), ft_coread_add(&p, 2, 3), ft_coread_add(&p, 1, 3);
	struct ft_plan_input in = { &p, 0, 3, 2, 1000.0, 0, 0, 0, 0 };
	struct ft_plan pl;
	char why[512];
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	assert_true(pl.nblocks == 3 || pl.t[1].block < 0 || pl.t[2].block < 0 || pl.t[3].block < 0);
	assert_true(pl.t[1].block < 0 || pl.t[1].block != pl.t[3].block);
	ft_plan_free(&pl);
	ft_profile_free(&p);
	/* the same triangle inside a 32-layer model, with a budget and two
	 * blocks at most: trap 3 finds no block (2's is the previous one, 1's
	 * is read with it) and stays on the GPU; the plan is made all the
	 * same (it once failed whole, so nothing was offloaded) */
	make(&p, 32, 4096, 14336, 1024, 3.3e9);
	ft_coread_add(&p, 1, 2), ft_coread_add(&p, 2, 3), ft_coread_add(&p, 1, 3);
	struct ft_plan_input two = { &p, total(&p) / 4, 2, 2, 1.0, 0, 0, 0, 0 };
	assert_int_equal(ft_plan_make(&two, &pl, why, sizeof(why)), 0);
	check(&pl, &p, two.budget);
	assert_true(pl.t[1].block < 0 || pl.t[2].block < 0 || pl.t[3].block < 0);
	assert_true(pl.offloaded_bytes > total(&p) / 2);
	ft_plan_free(&pl);
	ft_profile_free(&p);
}

/* FT_TRANSFER_MODE=strategy: one block, which every offloaded trap takes
 * in turn.  A trap read together with an offloaded one stays on the GPU and
 * the plan counts it, so the budget holds (the executor once kept such
 * traps after a plan of four blocks: 7.7 GiB of weights on the GPU under a
 * 6 GiB budget, the H200's 16 GB model). */
static void one_block(void **state)
{
	(void)state;
	struct ft_profile p;
	make(&p, 32, 4096, 14336, 1024, 3.3e9);
	for (uint32_t t = 1; t + 1 < p.ntraps; t += 2)
		ft_coread_add(&p, t, t + 1);
	struct ft_plan_input in = { &p, total(&p) * 3 / 5, 4, 2, 1.0, 0, 1, 0, 0 };
	struct ft_plan pl;
	char why[512];
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	assert_int_equal(pl.nblocks, 1);
	assert_true(pl.peak_bytes <= in.budget);
	uint64_t resident = 0, big = 0;
	uint32_t m = 0;
	for (uint32_t i = 0; i < pl.ntraps; i++) {
		if (pl.t[i].block < 0) {
			resident += p.traps[i].bytes;
			continue;
		}
		assert_int_equal(pl.t[i].block, 0);
		m++;
		if (p.traps[i].bytes > big)
			big = p.traps[i].bytes;
	}
	assert_true(m >= 2);
	assert_int_equal(pl.peak_bytes, resident + big);
	for (uint32_t k = 0; k < p.ncoread; k++)
		assert_true(pl.t[p.coread[k][0]].block < 0 || pl.t[p.coread[k][1]].block < 0);
	ft_plan_free(&pl);
	ft_profile_free(&p);
}

static void refusals(void **state)
{
	(void)state;
	struct ft_profile p;
	make(&p, 32, 4096, 14336, 1024, 3.3e9);
	struct ft_plan pl;
	char why[512];
	struct ft_plan_input in = { &p, 100 << 20, 4, 2, 1.0, 0, 0, 0, 0 };
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "below the minimum of 256 MiB"));
	in.budget = 1ULL << 30; /* 1 GiB: two 1002 MiB traps need two blocks at least */
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "cannot hold the traps"));
	assert_non_null(strstr(why, "raise FT_MAX_GPU_MEM_FRACTION"));
	in.budget = 0;
	in.num_blocks = 2;
	in.min_blocks = 3;
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "below min_blocks"));
	ft_profile_free(&p);
}

/* An NVMe tier beyond a host share: latency mode offloads no more than the
 * disk reads in the pass's compute (x scale), memory mode predicts a pass
 * no shorter than the disk's reads. */
static void disk_bandwidth(void **state)
{
	(void)state;
	struct ft_profile p;
	make(&p, 16, 4096, 14336, 1024, 3.3e7); /* prefill-like: every copy hides */
	struct ft_plan_input in = { &p, 0, 4, 2, 1.0, 0, 0, 0, 0 };
	struct ft_plan all, pl;
	char why[512];
	assert_int_equal(ft_plan_make(&in, &all, why, sizeof(why)), 0);
	check(&all, &p, 0);
	assert_true(all.disk_ms == 0);
	/* a disk that reads a quarter of the bytes offloaded before in the
	 * pass's compute, beyond a host share of a quarter of them */
	in.host_bytes = all.offloaded_bytes / 4;
	in.disk_rate = (double)all.offloaded_bytes / 4 / all.compute_ms * 1e3;
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	check(&pl, &p, 0);
	assert_true(pl.offloaded_bytes < all.offloaded_bytes);
	assert_true(pl.offloaded_bytes <= in.host_bytes + all.offloaded_bytes / 4 + 1);
	assert_true(pl.offloaded_bytes > in.host_bytes);
	assert_true(pl.disk_ms <= pl.compute_ms * 1.000001);
	ft_plan_free(&pl);
	/* memory mode at half the model, the disk slower than the pass: the
	 * pass is the disk's */
	in.budget = total(&p) / 2;
	in.host_bytes = 0;
	in.disk_rate = (double)total(&p) / 8 / all.compute_ms * 1e3;
	assert_int_equal(ft_plan_make(&in, &pl, why, sizeof(why)), 0);
	check(&pl, &p, in.budget);
	double ms = (double)pl.offloaded_bytes / in.disk_rate * 1e3;
	assert_true(fabs(pl.disk_ms - ms) < 1e-6 * ms);
	assert_true(pl.pass_ms >= pl.disk_ms - 1e-9);
	assert_true(pl.floor_ms >= pl.disk_ms - 1e-9);
	assert_true(pl.disk_ms > pl.compute_ms);
	ft_plan_free(&pl);
	ft_plan_free(&all);
	ft_profile_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(disk_bandwidth),
		cmocka_unit_test(budgets),
		cmocka_unit_test(offloaded_layers_spread),
		cmocka_unit_test(latency_mode),
		cmocka_unit_test(nothing_left_to_copy),
		cmocka_unit_test(traps_read_together_get_blocks_of_their_own),
		cmocka_unit_test(one_block),
		cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
