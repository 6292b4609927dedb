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
 * cannot be met, with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: flextensor-plan PROFILE [--fraction F | --budget-gib G] "
		   "[--reserve-gib R] [--blocks N] [--min-blocks N] [--scale S] [--raw]\n");
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
	double fraction = 0, budget_gib = 0, reserve_gib = 0, scale = 1.0;
	struct ft_plan_input in = { .num_blocks = 4, .min_blocks = 4 };
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--raw")) {
			in.raw = 1;
			continue;
		}
		if (!v)
			return usage(stderr, 2);
		if (!strcmp(a, "--fraction"))
			fraction = atof(v);
		else if (!strcmp(a, "--budget-gib"))
			budget_gib = atof(v);
		else if (!strcmp(a, "--reserve-gib"))
			reserve_gib = atof(v);
		else if (!strcmp(a, "--blocks"))
			in.num_blocks = (uint32_t)atoi(v);
		else if (!strcmp(a, "--min-blocks"))
			in.min_blocks = (uint32_t)atoi(v);
		else if (!strcmp(a, "--scale"))
			scale = atof(v);
		else
			return usage(stderr, 2);
		i++;
	}
	if (in.min_blocks > in.num_blocks)
		in.min_blocks = in.num_blocks;
	struct ft_profile p;
	char why[512];
	enum ft_profile_refusal r = ft_profile_load(argv[1], &p, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		fprintf(stderr, "flextensor-plan: %s refused (%s): %s\n", argv[1],
			ft_profile_refusal_name(r), why);
		return 2;
	}
	double budget = fraction > 0 ? fraction * (double)p.device.total_bytes : budget_gib * GIB;
	if (budget > 0) {
		budget -= reserve_gib * GIB;
		if (budget < 1)
			budget = 1;
	}
	in.profile = &p;
	in.budget = (uint64_t)budget;
	in.scale = scale;
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
