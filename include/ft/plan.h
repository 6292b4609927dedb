/*
 * The planner: which traps to offload, onto how many GPU blocks, and when
 * each copy is issued, from traps (bytes, compute time), the copy curve and a
 * budget.  Pure C on plain data (CPU-tested; flextensor-plan prints it).
 *
 * Model of execution (what the executor will do): traps run in order on the
 * compute stream, pass after pass.  An offloaded trap's weights are copied
 * into its block on one copy stream, in trap order; a copy starts when the
 * copy stream is free and its block's previous occupant has finished
 * computing (so the first traps of pass n + 1 load during the tail of pass
 * n); a trap starts when the previous trap has finished and its copy has
 * landed.  Offloaded traps take blocks round-robin, so two consecutive
 * transfers never share a block.  The plan is simulated over three passes
 * and the last one is reported (steady state).
 *
 * Memory: peak = sum of block sizes (largest trap each block holds) + bytes
 * of the traps that stay resident.  Memory mode (budget > 0) picks the traps
 * whose copies hide best until the peak fits, spreads that many evenly over
 * the pass when that fits and is predicted no slower, then takes the block
 * count with the shortest predicted pass; latency mode offloads a trap only when its copy
 * fits in the previous trap's compute time x scale.  With an NVMe tier, the
 * store beyond the host's share is read from the disk each pass: a pass
 * lasts at least those reads, and latency mode offloads no more than the
 * disk can read in the pass's compute time x scale.
 */
#ifndef FT_PLAN_H
#define FT_PLAN_H

#include <stdint.h>

#include "ft/profile.h"

#define FT_PLAN_MIN_BUDGET (256ULL << 20) /* upstream's minimum */

struct ft_plan_input {
	const struct ft_profile *profile; /* traps, weights, curve */
	uint64_t budget;          /* bytes for the traps (blocks + resident); 0 = latency mode */
	uint32_t num_blocks, min_blocks;
	double scale;             /* FT_TRANSFER_BUDGET_SCALE */
	int raw;                  /* raw_block_transfer: one copy per trap, else one per weight */
	int one_block;            /* strategy: every offloaded trap shares one block (the
	                           * executor loads a trap when a launch first reads it) */
	/* the NVMe tier (FT_NVME_OFFLOAD_ENABLED): the store beyond host_bytes
	 * is read from a file at disk_rate bytes/s, once a pass (the reader
	 * runs ahead of the copies); 0: no tier */
	double disk_rate;
	uint64_t host_bytes;
};

/* 0, or -1 with why: the budget cannot be met (what to change is said).
 * out (struct ft_plan, ft/profile.h) is the caller's; ft_plan_free frees
 * what it holds. */
int ft_plan_make(const struct ft_plan_input *in, struct ft_plan *out, char *why, uint32_t len);
void ft_plan_free(struct ft_plan *p);
/* Memory mode's budget for the weights on the GPU (resident weights +
 * blocks), upstream's rule: fraction of the device's total bytes, capped by
 * what is free plus the weights already on it; 0 (latency mode) when the
 * fraction is NAN (none) or the total unknown.  The one definition: the
 * VMM's limit before a plan and the planner both use it. */
uint64_t ft_plan_budget(double fraction, uint64_t total, uint64_t free_bytes, uint64_t weights);
/* The copy stream's ms a pass under plan p: its offloaded traps' copy
 * times, or, for a plan saved without them (profiles before 0.3), its
 * offloaded bytes at the copy curve c[0..n)'s rate. */
double ft_plan_copies(const struct ft_plan *p, const struct ft_curve_point *c, uint32_t n);

#endif
