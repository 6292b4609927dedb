/*
 * The phase machine, upstream's meaning: DISCOVERY for max(1,
 * FT_DISCOVERY_ITERS) passes, PROFILING for max(1, FT_PROFILING_ITERS)
 * passes, then INFERENCE; transitions are counted after a pass completes
 * and never go back.  Pure C; the caller serialises.
 */
#ifndef FT_PHASE_H
#define FT_PHASE_H

#include <stdint.h>

enum ft_phase_id { FT_PHASE_DISCOVERY, FT_PHASE_PROFILING, FT_PHASE_INFERENCE };

struct ft_phases {
	int phase;
	uint64_t in_phase;   /* passes completed in the current phase */
	uint64_t total;      /* passes completed */
	uint64_t discovery;  /* effective counts */
	uint64_t profiling;
};

void ft_phases_init(struct ft_phases *p, long discovery_iters, long profiling_iters);
/* A pass completed; returns 1 when the phase changed. */
int ft_phases_pass(struct ft_phases *p);
uint64_t ft_phases_iters_before_inference(const struct ft_phases *p);
const char *ft_phase_name(int phase);

#endif
