/*
 * Profile refresh from serving traffic: the per-trap compute times of the
 * first `need` passes of one kind, timed while serving, become the
 * profile's timings (median, min, max per trap).  A pass counts only when
 * every trap has a compute time (a pass of another shape, or one cut short,
 * has not).  Pure C.
 */
#ifndef FT_REFRESH_H
#define FT_REFRESH_H

#include <stdint.h>

#include "ft/profile.h"

struct ft_refresh {
	uint32_t ntraps, need, got;
	float *ms;               /* need x ntraps compute times */
};

int ft_refresh_init(struct ft_refresh *r, uint32_t ntraps, uint32_t need);
void ft_refresh_free(struct ft_refresh *r);
/* One timed pass, v[trap * cols + col] with the compute time in column
 * col: 1 when it completes the collection, 0 when more are needed or the
 * pass did not count (-1 when it was already complete). */
int ft_refresh_add(struct ft_refresh *r, const float *v, uint32_t cols, uint32_t col);
/* The collected statistics into traps[0..ntraps) (complete collections
 * only): 0, or -1 when incomplete. */
int ft_refresh_apply(const struct ft_refresh *r, struct ft_trap *traps);

#endif
