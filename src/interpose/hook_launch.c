/*
 * Launch hooks.  The parameters are scanned before the launch (profiling
 * brackets launches with events); counters, the trace and learning follow
 * when the driver has returned, with its result.
 */
#include "hooks.h"

static CUresult observed(const struct ft_launch *l, struct ft_seen *s, CUresult rc)
{
	ft_obs_launch_after(l, s, rc);
	return rc;
}

#define LAUNCH_KERNEL(sym, is_ptsz)                                            \
	CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz,      \
		     unsigned bx, unsigned by, unsigned bz, unsigned smem,     \
		     CUstream s, void **params, void **extra)                  \
	{                                                                      \
		ft_lib_ensure();                                               \
		if (!ft_observing())                                           \
			return FT_CALL(sym, f, gx, gy, gz, bx, by, bz, smem, s, \
				       params, extra);                         \
		struct ft_launch l = { #sym, f, s, is_ptsz, { gx, gy, gz },    \
				       { bx, by, bz }, smem, params, extra };  \
		struct ft_seen seen;                                           \
		ft_obs_launch_before(&l, &seen);                               \
		return observed(&l, &seen, FT_CALL(sym, f, gx, gy, gz, bx, by, \
						   bz, smem, s, params, extra)); \
	}
LAUNCH_KERNEL(cuLaunchKernel, 0)
LAUNCH_KERNEL(cuLaunchKernel_ptsz, 1)

#define LAUNCH_COOPERATIVE(sym, is_ptsz)                                       \
	CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz,      \
		     unsigned bx, unsigned by, unsigned bz, unsigned smem,     \
		     CUstream s, void **params)                                \
	{                                                                      \
		ft_lib_ensure();                                               \
		if (!ft_observing())                                           \
			return FT_CALL(sym, f, gx, gy, gz, bx, by, bz, smem, s, \
				       params);                                \
		struct ft_launch l = { #sym, f, s, is_ptsz, { gx, gy, gz },    \
				       { bx, by, bz }, smem, params, NULL };   \
		struct ft_seen seen;                                           \
		ft_obs_launch_before(&l, &seen);                               \
		return observed(&l, &seen, FT_CALL(sym, f, gx, gy, gz, bx, by, \
						   bz, smem, s, params));      \
	}
LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel, 0)
LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel_ptsz, 1)

#define LAUNCH_EX(sym, is_ptsz)                                                \
	CUresult sym(const CUlaunchConfig *c, CUfunction f, void **params,     \
		     void **extra)                                             \
	{                                                                      \
		ft_lib_ensure();                                               \
		if (!ft_observing() || !c)                                     \
			return FT_CALL(sym, c, f, params, extra);              \
		struct ft_launch l = { #sym, f, c->hStream, is_ptsz,           \
				       { c->gridDimX, c->gridDimY, c->gridDimZ }, \
				       { c->blockDimX, c->blockDimY, c->blockDimZ }, \
				       c->sharedMemBytes, params, extra };     \
		struct ft_seen seen;                                           \
		ft_obs_launch_before(&l, &seen);                               \
		return observed(&l, &seen, FT_CALL(sym, c, f, params, extra)); \
	}
LAUNCH_EX(cuLaunchKernelEx, 0)
LAUNCH_EX(cuLaunchKernelEx_ptsz, 1)
