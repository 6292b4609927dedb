/*
 * The dlsym override: Triton and the CUDA runtime (shared, or static inside
 * cuBLAS/NCCL) reach the driver by dlsym(libcuda, "cu...").  The export is
 * unversioned on purpose: an unversioned definition satisfies both
 * dlsym@GLIBC_2.34 and dlsym@GLIBC_2.2.5 references, a named version node
 * would silently intercept nothing.
 *
 * Every dlsym of the process passes here, so the fast path is two character
 * compares and a tail call.  The pass-through must stay a genuine tail call:
 * glibc resolves RTLD_NEXT relative to the return address, and a normal call
 * would make RTLD_NEXT lookups start after this library instead of after the
 * real caller (tests/preload/rtld_next guards this).
 *
 * The sanitizers' runtimes call dlsym while they start, before their shadow
 * memory exists: the fast path (dlsym, resolve) is never instrumented, or a
 * process with the library built with -Db_sanitize=address segfaults before
 * main (tests/preload/sanitized).
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "lib.h"

#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym;

NO_SANITIZE static dlsym_fn resolve(void)
{
	dlsym_fn f = atomic_load_explicit(&real_dlsym, memory_order_relaxed);
	if (__builtin_expect(f != NULL, 1))
		return f;
	/* Newest first: programs built on glibc >= 2.34 bind GLIBC_2.34. */
	f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	atomic_store_explicit(&real_dlsym, f, memory_order_relaxed);
	return f;
}

NO_SANITIZE void *ft_real_dlsym(void *handle, const char *symbol)
{
	dlsym_fn f = resolve();
	return f ? f(handle, symbol) : NULL;
}

static int from_libcuda(const void *caller)
{
	Dl_info info;
	return ft_g.libcuda_base && dladdr(caller, &info) &&
	       info.dli_fbase == ft_g.libcuda_base;
}

__attribute__((noinline)) static void *hooked(void *handle, const char *symbol,
					      const void *caller)
{
	void *p = ft_real_dlsym(handle, symbol);
	/* The driver looking itself up, or a lookup during our own start:
	 * answer as glibc would. */
	if (!p || ft_lib_in_init() || from_libcuda(caller))
		return p;
	ft_lib_ensure();
	if (!ft_observing())
		return p;
	void *hook = ft_hook_by_name(symbol);
	/* Substitute only when p is the very function we wrap (another
	 * library may export a cu* name of its own). */
	if (p == hook || ft_is_runtime_hook(symbol) || p == ft_real_by_name(symbol)) {
		FT_STAT_INC(&ft_g.stats, dlsym_hooked);
		return hook;
	}
	ft_debug_once("dlsym(%s) found a definition outside libcuda; not hooked", symbol);
	return p;
}

FT_EXPORT NO_SANITIZE void *dlsym(void *restrict handle, const char *restrict symbol)
{
	if (__builtin_expect(symbol[0] == 'c' && symbol[1] == 'u', 0) &&
	    ft_hook_by_name(symbol))
		return hooked(handle, symbol, __builtin_return_address(0));
	return resolve()(handle, symbol);
}
