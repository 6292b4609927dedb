/*
 * Pointer routing, generated from hooks.def.  Code that resolves driver
 * functions itself (cuGetProcAddress, cudaGetDriverEntryPoint, dlsym) gets
 * the driver's own answer first; we then identify the exact symbol that
 * pointer implements (cuLaunchKernel_ptsz, cuMemAlloc_v2, ...) and hand back
 * the hook of that exact name, so the ABI and the per-thread-stream semantics
 * are right by construction.  Pointers we do not hook pass through.
 */
#include <stdlib.h>
#include <string.h>

#include "hooks.h"

struct hook_row {
	const char *name;
	void *hook;
	int runtime;
};

/* cudaGetDriverEntryPoint is deprecated in CUDA 13 but still called. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const struct hook_row rows[] = {
#define FT_HOOK(sym, base, ver, sfx) { #sym, (void *)&sym, 0 },
#define FT_USE(sym, base, ver, sfx)
#define FT_RT_HOOK(sym) { #sym, (void *)&sym, 1 },
#include "ft/hooks.def"
#undef FT_HOOK
#undef FT_USE
#undef FT_RT_HOOK
};
#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

struct route {
	void *real;
	const struct hook_row *row;
};

static struct route routes[N_ROWS];
static size_t n_routes;
static void *reals[N_ROWS]; /* by row index */

static int by_real(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct route *)a)->real;
	uintptr_t y = (uintptr_t)((const struct route *)b)->real;
	return x < y ? -1 : x > y;
}

void ft_routes_build(const struct ft_real *real)
{
	size_t i = 0;
#define FT_HOOK(sym, base, ver, sfx) reals[i++] = (void *)real->sym;
#define FT_USE(sym, base, ver, sfx)
#define FT_RT_HOOK(sym) reals[i++] = NULL;
#include "ft/hooks.def"
#undef FT_HOOK
#undef FT_USE
#undef FT_RT_HOOK
	n_routes = 0;
	for (i = 0; i < N_ROWS; i++)
		if (reals[i])
			routes[n_routes++] = (struct route){ reals[i], &rows[i] };
	qsort(routes, n_routes, sizeof(routes[0]), by_real);
}

/* "cuMemcpyHtoDAsync_v2_ptsz" -> length of "cuMemcpyHtoDAsync" */
static size_t base_len(const char *s)
{
	size_t n = strlen(s);
	if (n > 5 && (!strcmp(s + n - 5, "_ptsz") || !strcmp(s + n - 5, "_ptds")))
		n -= 5;
	size_t k = n;
	while (k > 0 && s[k - 1] >= '0' && s[k - 1] <= '9')
		k--;
	if (k < n && k >= 2 && s[k - 1] == 'v' && s[k - 2] == '_')
		n = k - 2;
	return n;
}

static int same_family(const char *a, const char *b)
{
	size_t la = base_len(a), lb = base_len(b);
	return la == lb && !strncmp(a, b, la);
}

void *ft_route(void *p, const char *requested)
{
	if (!ft_g.enabled || !p || !requested)
		return p;
	size_t lo = 0, hi = n_routes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((uintptr_t)routes[mid].real < (uintptr_t)p)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Several names may share one address: take the one of the family. */
	for (; lo < n_routes && routes[lo].real == p; lo++)
		if (same_family(routes[lo].row->name, requested))
			return routes[lo].row->hook;
	return p;
}

static const struct hook_row *row_by_name(const char *name, size_t *index)
{
	for (size_t i = 0; i < N_ROWS; i++)
		if (!strcmp(rows[i].name, name)) {
			if (index)
				*index = i;
			return &rows[i];
		}
	return NULL;
}

void *ft_hook_by_name(const char *name)
{
	const struct hook_row *r = row_by_name(name, NULL);
	return r ? r->hook : NULL;
}

void *ft_real_by_name(const char *name)
{
	size_t i;
	return row_by_name(name, &i) ? reals[i] : NULL;
}

int ft_is_runtime_hook(const char *name)
{
	const struct hook_row *r = row_by_name(name, NULL);
	return r && r->runtime;
}
