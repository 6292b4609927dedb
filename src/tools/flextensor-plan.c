/*
 * flextensor-plan: the plan the library would make for a profile.json.
 *   flextensor-plan PROFILE [--fraction F | --budget-gib G] [--reserve-gib R]
 *                   [--blocks N] [--min-blocks N] [--scale S] [--raw]
 * --fraction is of the profile's device memory; --reserve-gib is what must
 * stay resident besides the weights (activations, KV cache), taken off the
 * budget.  Without a budget: latency mode.  Prints per trap whether it is
 * offloaded, its block, copy time, when the copy is issued (negative: during
 * the previous pass) and the predicted wait, then the predicted pass time
 * against the resident time and the transfer floor.  Exit 2 when the budget
 * cannot be met, with the reason, and on a bad argument: every number is
 * strict decimal text within the range of the matching FT_* option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/input.h"
#include "ft/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
/* --budget-gib and --reserve-gib: up to 1 PiB, so that the budget in bytes
 * is exact in a double and far inside uint64_t. */
#define MAX_GIB (1024.0 * 1024.0)

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: flextensor-plan PROFILE [--fraction F | --budget-gib G] "
		   "[--reserve-gib R] [--blocks N] [--min-blocks N] [--scale S] [--raw]\n");
	return rc;
}

/* A number argument: strict decimal text in (lo, hi] (lo_open) or
 * [lo, hi], checked before it is converted to anything; 0 or -1 with the
 * reason on stderr. */
static int number(const char *flag, const char *v, double lo, int lo_open, double hi,
		  double *out)
{
	double x;
	if (!ft_input_parse_double(v, &x) && (lo_open ? x > lo : x >= lo) && x <= hi) {
		*out = x;
		return 0;
	}
	fprintf(stderr, "flextensor-plan: %s %s is not valid: expected a decimal number %s %.10g "
		"and at most %.10g\n", flag, v, lo_open ? "greater than" : "from", lo, hi);
	return -1;
}

static int whole(const char *flag, const char *v, long lo, long hi, uint32_t *out)
{
	long x;
	if (!ft_input_parse_long(v, lo, hi, &x)) {
		*out = (uint32_t)x;
		return 0;
	}
	fprintf(stderr, "flextensor-plan: %s %s is not valid: expected a whole number from %ld "
		"to %ld\n", flag, v, lo, hi);
	return -1;
}

struct args {
	double fraction, budget_gib, reserve_gib, scale; /* 0: not given */
	int min_given;
};

/* One flag and its value; 0, or -1 (reason printed). */
static int flag(struct args *a, struct ft_plan_input *in, const char *f, const char *v)
{
	/* the ranges of FT_MAX_GPU_MEM_FRACTION, FT_NUM_BLOCKS, FT_MIN_BLOCKS
	 * and FT_TRANSFER_BUDGET_SCALE (options.def) */
	if (!strcmp(f, "--fraction"))
		return number(f, v, 0, 1, 1, &a->fraction);
	if (!strcmp(f, "--budget-gib"))
		return number(f, v, 0, 1, MAX_GIB, &a->budget_gib);
	if (!strcmp(f, "--reserve-gib"))
		return number(f, v, 0, 0, MAX_GIB, &a->reserve_gib);
	if (!strcmp(f, "--scale"))
		return number(f, v, 0, 1, 1e6, &a->scale);
	if (!strcmp(f, "--blocks"))
		return whole(f, v, 2, 1024, &in->num_blocks);
	if (!strcmp(f, "--min-blocks")) {
		a->min_given = 1;
		return whole(f, v, 2, 1024, &in->min_blocks);
	}
	fprintf(stderr, "flextensor-plan: unknown option '%s'\n", f);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
	struct args a = { .scale = 1.0 };
	struct ft_plan_input in = { .num_blocks = 4, .min_blocks = 4 };
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--raw")) {
			in.raw = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "flextensor-plan: %s needs a value\n", argv[i]);
			return usage(stderr, 2);
		}
		if (flag(&a, &in, argv[i], argv[i + 1]))
			return usage(stderr, 2);
		i++;
	}
	if (a.fraction > 0 && a.budget_gib > 0) {
		fprintf(stderr, "flextensor-plan: --fraction and --budget-gib both set the budget: "
			"give one of them\n");
		return 2;
	}
	if (a.reserve_gib > 0 && !(a.fraction > 0 || a.budget_gib > 0)) {
		fprintf(stderr, "flextensor-plan: --reserve-gib is taken off a budget: give "
			"--fraction or --budget-gib with it (without one the plan is made in "
			"latency mode)\n");
		return 2;
	}
	if (in.min_blocks > in.num_blocks) {
		if (a.min_given) {
			fprintf(stderr, "flextensor-plan: --min-blocks %u is larger than --blocks "
				"(%u): raise --blocks or lower --min-blocks\n", in.min_blocks,
				in.num_blocks);
			return 2;
		}
		in.min_blocks = in.num_blocks; /* --blocks 2 alone: the default 4 follows */
	}
	struct ft_profile p;
	char why[512];
	enum ft_profile_refusal r = ft_profile_load(argv[1], &p, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		fprintf(stderr, "flextensor-plan: %s refused (%s): %s\n", argv[1],
			ft_profile_refusal_name(r), why);
		return 2;
	}
	/* Every term is positive and below 2^51 here (fraction <= 1 of a
	 * device size, at most MAX_GIB GiB), so the conversion is exact. */
	double budget = a.fraction > 0 ? a.fraction * (double)p.device.total_bytes
				       : a.budget_gib * GIB;
	if (budget > 0) {
		budget -= a.reserve_gib * GIB;
		if (budget < 1)
			budget = 1;
	}
	in.profile = &p;
	in.budget = (uint64_t)budget;
	in.scale = a.scale;
	struct ft_plan plan;
	if (ft_plan_make(&in, &plan, why, sizeof(why))) {
		fprintf(stderr, "flextensor-plan: no plan: %s\n", why);
		ft_profile_free(&p);
		return 2;
	}
	printf("%-9s %-9s %9s %10s %4s %5s %9s %10s %9s\n", "Trap", "Role", "MiB", "Compute ms",
	       "Off", "Block", "Copy ms", "Issued ms", "Wait ms");
	for (uint32_t i = 0; i < plan.ntraps; i++) {
		const struct ft_plan_trap *t = &plan.t[i];
		printf("%-9s %-9s %9.1f %10.3f %4s %5d %9.3f %10.3f %9.3f\n", p.traps[i].label,
		       p.traps[i].role, (double)p.traps[i].bytes / (1 << 20), p.traps[i].compute.median,
		       t->offloaded ? "yes" : "no", t->block, t->offloaded ? t->copy_ms : 0,
		       t->offloaded ? t->issue_ms : 0, t->wait_ms);
	}
	uint64_t blocks = 0, total = 0;
	for (uint32_t k = 0; k < plan.nblocks; k++)
		blocks += plan.block_bytes[k];
	for (uint32_t i = 0; i < plan.ntraps; i++)
		total += p.traps[i].bytes;
	double floor = plan.floor_ms;
	printf("\nmode %s, %s, %u blocks, %.1f MiB of blocks\n", in.budget ? "memory" : "latency",
	       in.raw ? "raw_block_transfer" : "allocation_block_transfer", plan.nblocks,
	       (double)blocks / (1 << 20));
	printf("offloaded %.1f of %.1f MiB of weights (%.0f%%); weights on the GPU at peak %.1f MiB",
	       (double)plan.offloaded_bytes / (1 << 20), (double)total / (1 << 20),
	       total ? 100.0 * (double)plan.offloaded_bytes / (double)total : 0.0,
	       (double)plan.peak_bytes / (1 << 20));
	if (in.budget)
		printf(" (budget %.1f MiB)", (double)in.budget / (1 << 20));
	printf("\npredicted pass %.3f ms, stall %.3f ms; resident %.3f ms, transfer floor %.3f ms; "
	       "ratio to max(resident, floor) %.3f\n", plan.pass_ms, plan.stall_ms, plan.compute_ms,
	       floor, floor > 0 ? plan.pass_ms / floor : 0.0);
	ft_plan_free(&plan);
	ft_profile_free(&p);
	return 0;
}
