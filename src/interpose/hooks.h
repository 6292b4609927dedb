/*
 * Declarations of every hook, generated from hooks.def with the exact driver
 * type (PFN_<base>_v<version><suffix>): a hook whose definition drifts from
 * the driver's ABI does not compile.
 */
#ifndef FT_INTERPOSE_HOOKS_H
#define FT_INTERPOSE_HOOKS_H

#include <cuda_runtime_api.h>

#include "lib.h"

#define FT_HOOK(sym, base, ver, sfx) \
	FT_EXPORT extern __typeof__(*(PFN_##base##_v##ver##sfx)0) sym;
#define FT_USE(sym, base, ver, sfx)
#define FT_RT_HOOK(sym)
#include "ft/hooks.def"
#undef FT_HOOK
#undef FT_USE
#undef FT_RT_HOOK

/* Runtime entry points (libcudart), with and without the per-thread twin. */
typedef cudaError_t (*ft_pfn_entry_point)(const char *, void **, unsigned long long,
					  enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*ft_pfn_entry_point_by_version)(
	const char *, void **, unsigned int, unsigned long long,
	enum cudaDriverEntryPointQueryResult *);
FT_EXPORT extern __typeof__(*(ft_pfn_entry_point)0) cudaGetDriverEntryPoint;
FT_EXPORT extern __typeof__(*(ft_pfn_entry_point)0) cudaGetDriverEntryPoint_ptsz;
FT_EXPORT extern __typeof__(*(ft_pfn_entry_point_by_version)0) cudaGetDriverEntryPointByVersion;
FT_EXPORT extern __typeof__(*(ft_pfn_entry_point_by_version)0)
	cudaGetDriverEntryPointByVersion_ptsz;

#endif
