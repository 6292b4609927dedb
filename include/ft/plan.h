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
 * fits in the previous trap's compute time x scale.
 */
#ifndef FT_PLAN_H
#define FT_PLAN_H

#include <stdint.h>

#include "ft/profile.h"

#define FT_PLAN_MIN_BUDGET (256ULL << 20) /* upstream's minimum */

struct ft_plan_trap {
	int offloaded;
	int block;          /* -1 when resident */
	double copy_ms;     /* predicted copy time */
	double issue_ms;    /* when the copy starts, from the pass's start */
	double start_ms;    /* when the trap starts computing */
	double wait_ms;     /* compute stream stalled for the copy */
};

struct ft_plan {
	uint32_t ntraps;
	struct ft_plan_trap *t;
	uint32_t nblocks;
	uint64_t block_bytes[64];
	uint64_t peak_bytes;      /* blocks + resident traps */
	uint64_t offloaded_bytes;
	double pass_ms;           /* predicted, steady state */
	double stall_ms;
	double compute_ms;        /* all traps resident */
	double floor_ms;          /* max(compute, copies of what is offloaded) */
};

struct ft_plan_input {
	const struct ft_profile *profile; /* traps, weights, curve */
	uint64_t budget;          /* bytes for the traps (blocks + resident); 0 = latency mode */
	uint32_t num_blocks, min_blocks;
	double scale;             /* FT_TRANSFER_BUDGET_SCALE */
	int raw;                  /* raw_block_transfer: one copy per trap, else one per weight */
};

/* 0, or -1 with why: the budget cannot be met (what to change is said). */
int ft_plan_make(const struct ft_plan_input *in, struct ft_plan *out, char *why, uint32_t len);
void ft_plan_free(struct ft_plan *p);

#endif
