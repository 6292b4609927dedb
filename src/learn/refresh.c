/*
 * The profile's compute timings refreshed from passes timed after the
 * plan (include/ft/learn.h): an adopted profile.json from serving traffic,
 * and estimates made for traps timed with weights in host memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn_int.h"

/* A timed pass while the profile's timings are refreshed: once enough have
 * come, the profile in memory gets them (ft_save_profile writes them) and,
 * with FT_PROFILE_STORAGE_DIR, profile.json (the plan in effect stays;
 * this process plans nothing again).  Under the executor's lock; nothing
 * else changes the profile's timings in INFERENCE. */
static int refresh_pass(void *arg, const float *v, uint32_t ntraps, int kind)
{
	struct ft_learn *L = arg;
	if (ntraps != L->refresh.ntraps)
		return 1;
	if (kind != L->refresh_kind)
		return 0;
	uint32_t got = L->refresh.got;
	int done = ft_refresh_add(&L->refresh, v, FT_T_COLS, FT_T_COMPUTE);
	FT_STAT_ADD(L->env.stats, refresh_passes, L->refresh.got - got);
	if (done != 1)
		return done < 0;
	if (ft_refresh_apply(&L->refresh, L->prof.traps))
		return 1;
	FT_STAT_INC(L->env.stats, profile_refreshes);
	double sum = 0;
	for (uint32_t t = 0; t < L->prof.ntraps; t++)
		sum += L->prof.traps[t].compute.median;
	ft_info("profile: compute timings refreshed from %u passes timed after the plan: %.3f ms "
		"of trap compute per pass", L->refresh.need, sum);
	if (!L->refresh_file)
		return 1;
	const char *dir = ft_learn_profile_dir(L);
	if (!dir)
		return 1;
	int rc = ft_profile_save(&L->prof, dir);
	if (rc)
		ft_warn("cannot refresh %s/%s's timings (%s)", dir, FT_PROFILE_FILE, strerror(-rc));
	else
		ft_info("%s/%s: compute timings refreshed", dir, FT_PROFILE_FILE);
	return 1;
}

/* The per-trap compute times of the first max(1, FT_PROFILING_ITERS)
 * passes of a kind replace the profile's: with FT_PROFILE_STORAGE_DIR and
 * an adopted profile.json, of the kind FT_VLLM_TIMING_BATCH names (decode
 * passes are CUDA graph replays: servers capture their decode steps, after
 * the plan so that they page; prefill passes are eager passes: a program
 * without graphs runs every pass eagerly), into profile.json; when the
 * traps were timed with weights in host memory (their times estimated),
 * of the first eager passes, always in memory and into profile.json unless
 * FT_VLLM_TIMING_BATCH is empty or the file is read-only. */
void ft_learn_arm_refresh(struct ft_learn *L, const struct ft_profile *p)
{
	const char *dir = ft_learn_profile_dir(L);
	int batch = L->env.opt->vllm_timing_batch;
	int estimated = L->timed_over_budget && !L->adopted;
	int file = dir && batch >= 0 && batch != FT_BATCH_NONE && (L->adopted || estimated);
	if (file && L->env.opt->profile_read_only) {
		ft_info("FT_PROFILE_READ_ONLY=1: %s/%s's timings are not refreshed", dir,
			FT_PROFILE_FILE);
		file = 0;
	}
	if (!file && !estimated)
		return;
	L->refresh_file = file;
	L->refresh_kind = batch == FT_BATCH_DECODE && !estimated ? FT_PASS_GRAPH : FT_PASS_EAGER;
	uint32_t need = L->env.opt->profiling_iters > 1 ? (uint32_t)L->env.opt->profiling_iters : 1;
	if (need > FT_TIMING_PASSES) {
		ft_info("FT_PROFILING_ITERS=%ld is more passes than the timing store keeps: the "
			"refresh takes the first %u", (long)L->env.opt->profiling_iters,
			(unsigned)FT_TIMING_PASSES);
		need = FT_TIMING_PASSES;
	}
	if (ft_refresh_init(&L->refresh, p->ntraps, need) ||
	    ft_off_on_pass(L->env.off, refresh_pass, L, L->refresh_kind == FT_PASS_GRAPH)) {
		ft_refresh_free(&L->refresh);
		ft_warn("cannot time passes: the profile's timings are not refreshed");
		return;
	}
	ft_info("the profile's timings%s will be refreshed from the first %u %s", file ? " (and "
		"profile.json's)" : "", need,
		L->refresh_kind == FT_PASS_GRAPH ? "CUDA graph replays (decode)" : "eager passes");
}

void ft_learn_exit(struct ft_learn *L)
{
	if (L->refresh.need && L->refresh.got < L->refresh.need)
		ft_info("the profile's timings%s were not refreshed: %u of the %u passes they were "
			"to be refreshed from were timed", L->refresh_file ? " (and profile.json's)" : "",
			L->refresh.got, L->refresh.need);
}
