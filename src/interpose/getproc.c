/*
 * Resolver wrappers: cuGetProcAddress (11.3 ABI), cuGetProcAddress_v2 (12.0
 * ABI) and the runtime's cudaGetDriverEntryPoint[ByVersion][_ptsz].  Each
 * asks the real resolver first, keeping its status truthful, then swaps the
 * answer for the hook of the exact symbol returned (ft_route).  The runtime
 * looks up cuGetProcAddress through cuGetProcAddress and uses that pointer
 * for everything else: routing hands back our wrapper of the same arity.
 */
#include <dlfcn.h>

#include "hooks.h"

static void *substitute(void *p, const char *symbol, int stat)
{
	void *q = ft_route(p, symbol);
	if (q != p)
		atomic_fetch_add_explicit(&ft_g.stats.v[stat], 1, memory_order_relaxed);
	return q;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
			  cuuint64_t flags)
{
	CUresult rc = FT_CALL(cuGetProcAddress, symbol, pfn, version, flags);
	if (rc == CUDA_SUCCESS && pfn && *pfn)
		*pfn = substitute(*pfn, symbol, FT_STAT_getproc_hooked);
	return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
			     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	CUresult rc = FT_CALL(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
	if (rc == CUDA_SUCCESS && pfn && *pfn)
		*pfn = substitute(*pfn, symbol, FT_STAT_getproc_hooked);
	return rc;
}

/* The runtime that the caller uses: the next definition after us in the
 * global scope, else the one in the caller's own dependency scope (a
 * libcudart loaded RTLD_LOCAL by a Python extension is not global). */
static void *runtime_real(const char *name, const void *caller)
{
	void *p = ft_real_dlsym(RTLD_NEXT, name);
	Dl_info info;
	if (!p && dladdr(caller, &info) && info.dli_fname) {
		void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = ft_real_dlsym(h, name);
			dlclose(h);
		}
	}
	if (p == ft_hook_by_name(name))
		p = NULL;
	return p;
}

#define ENTRY_POINT(sym)                                                       \
	cudaError_t sym(const char *symbol, void **fp, unsigned long long flags,  \
			enum cudaDriverEntryPointQueryResult *st)                 \
	{                                                                      \
		ft_pfn_entry_point real =                                      \
			(ft_pfn_entry_point)runtime_real(#sym,                 \
							 __builtin_return_address(0)); \
		if (!real)                                                     \
			return cudaErrorNotSupported;                          \
		cudaError_t rc = real(symbol, fp, flags, st);                  \
		ft_lib_ensure();                                               \
		if (rc == cudaSuccess && fp && *fp)                            \
			*fp = substitute(*fp, symbol, FT_STAT_entrypoint_hooked); \
		return rc;                                                     \
	}

#define ENTRY_POINT_BY_VERSION(sym)                                            \
	cudaError_t sym(const char *symbol, void **fp, unsigned int version,      \
			unsigned long long flags,                                 \
			enum cudaDriverEntryPointQueryResult *st)                 \
	{                                                                      \
		ft_pfn_entry_point_by_version real =                           \
			(ft_pfn_entry_point_by_version)runtime_real(           \
				#sym, __builtin_return_address(0));            \
		if (!real)                                                     \
			return cudaErrorNotSupported;                          \
		cudaError_t rc = real(symbol, fp, version, flags, st);         \
		ft_lib_ensure();                                               \
		if (rc == cudaSuccess && fp && *fp)                            \
			*fp = substitute(*fp, symbol, FT_STAT_entrypoint_hooked); \
		return rc;                                                     \
	}

ENTRY_POINT(cudaGetDriverEntryPoint)
ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
