/*
 * Kernel metadata cache (include/ft/kernels.h): an open-addressing table of
 * atomic pointers.  Readers probe without locks; the first sight of a handle
 * queries the driver and publishes under a mutex.
 */
#include "ft/kernels.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ft_kernels_init(struct ft_kernels *k, const struct ft_real *real)
{
	memset(k, 0, sizeof(*k));
	k->real = real;
	k->next_id = 1;
	k->slot = calloc(FT_KERNEL_SLOTS, sizeof(*k->slot));
	if (!k->slot)
		return -ENOMEM;
	pthread_mutex_init(&k->lock, NULL);
	return 0;
}

static size_t slot_of(const void *h)
{
	uint64_t x = (uint64_t)(uintptr_t)h;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)(x & (FT_KERNEL_SLOTS - 1));
}

/* Layout through one of the two query functions; -1 if it refuses the handle. */
static int query_count(const struct ft_real *real, const void *h, int as_kernel,
		       struct ft_param *out, uint32_t max)
{
	uint32_t n = 0;
	for (; n < max; n++) {
		size_t off = 0, size = 0;
		CUresult rc;
		if (as_kernel)
			rc = real->cuKernelGetParamInfo
				     ? real->cuKernelGetParamInfo((CUkernel)h, n, &off, &size)
				     : CUDA_ERROR_NOT_FOUND;
		else
			rc = real->cuFuncGetParamInfo
				     ? real->cuFuncGetParamInfo((CUfunction)h, n, &off, &size)
				     : CUDA_ERROR_NOT_FOUND;
		if (rc == CUDA_ERROR_INVALID_VALUE)
			break; /* past the last parameter */
		if (rc != CUDA_SUCCESS)
			return n ? (int)n : -1;
		if (out) {
			out[n].offset = (uint32_t)off;
			out[n].size = (uint32_t)size;
		}
	}
	return (int)n;
}

static struct ft_kernel *describe(struct ft_kernels *k, const void *h)
{
	static __thread struct ft_param tmp[FT_MAX_PARAMS];
	const struct ft_real *real = k->real;
	int is_kernel = 0;
	int n = query_count(real, h, 0, tmp, FT_MAX_PARAMS);
	if (n <= 0) {
		/* A CUkernel may be refused, or (driver-dependent) read as a
		 * function without parameters: ask the CUkernel query too. */
		int nk = query_count(real, h, 1, tmp, FT_MAX_PARAMS);
		if (nk > 0 || n < 0) {
			n = nk;
			is_kernel = 1;
		}
	}
	const char *name = NULL;
	if (!is_kernel && real->cuFuncGetName &&
	    real->cuFuncGetName(&name, (CUfunction)h) != CUDA_SUCCESS)
		name = NULL;
	if ((is_kernel || !name) && real->cuKernelGetName &&
	    real->cuKernelGetName(&name, (CUkernel)h) != CUDA_SUCCESS)
		name = NULL;

	uint32_t np = n > 0 ? (uint32_t)n : 0;
	struct ft_kernel *e = calloc(1, sizeof(*e) + np * sizeof(e->params[0]));
	if (!e)
		return NULL;
	e->handle = h;
	e->known = n >= 0;
	e->is_kernel = is_kernel;
	e->name = strdup(name ? name : "?");
	memcpy(e->params, tmp, np * sizeof(tmp[0]));
	e->layout.nparams = np;
	e->layout.p = e->params;
	return e;
}

const struct ft_kernel *ft_kernels_get(struct ft_kernels *k, const void *h)
{
	size_t s = slot_of(h);
	for (size_t i = 0; i < FT_KERNEL_SLOTS; i++) {
		struct ft_kernel *e = atomic_load_explicit(
			&k->slot[(s + i) & (FT_KERNEL_SLOTS - 1)], memory_order_acquire);
		if (!e)
			break;
		if (e->handle == h)
			return e;
	}

	pthread_mutex_lock(&k->lock);
	struct ft_kernel *found = NULL;
	size_t i;
	for (i = 0; i < FT_KERNEL_SLOTS; i++) {
		struct ft_kernel *e = atomic_load_explicit(
			&k->slot[(s + i) & (FT_KERNEL_SLOTS - 1)], memory_order_relaxed);
		if (!e)
			break;
		if (e->handle == h) {
			found = e;
			break;
		}
	}
	/* Keep the table at most 3/4 full so probes stay short. */
	if (!found && k->used < FT_KERNEL_SLOTS / 4 * 3) {
		found = describe(k, h);
		if (found) {
			found->id = k->next_id++;
			k->used++;
			atomic_store_explicit(&k->slot[(s + i) & (FT_KERNEL_SLOTS - 1)],
					      found, memory_order_release);
		}
	}
	pthread_mutex_unlock(&k->lock);
	return found;
}

void ft_kernels_flush(struct ft_kernels *k)
{
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < FT_KERNEL_SLOTS; i++) {
		struct ft_kernel *e = atomic_exchange_explicit(&k->slot[i], NULL,
							       memory_order_acq_rel);
		if (e) {
			e->next_retired = k->retired;
			k->retired = e;
		}
	}
	k->used = 0;
	pthread_mutex_unlock(&k->lock);
}

void ft_kernels_destroy(struct ft_kernels *k)
{
	if (!k->slot)
		return;
	ft_kernels_flush(k);
	while (k->retired) {
		struct ft_kernel *e = k->retired;
		k->retired = e->next_retired;
		free((void *)e->name);
		free((void *)atomic_load(&e->hits));
		free((void *)atomic_load(&e->turns));
		free(e);
	}
	free(k->slot);
	k->slot = NULL;
	pthread_mutex_destroy(&k->lock);
}


/* *slot's n counters, allocated on first use (NULL when out of memory). */
static _Atomic uint32_t *counters(_Atomic(_Atomic uint32_t *) *slot, size_t n)
{
	_Atomic uint32_t *h = atomic_load_explicit(slot, memory_order_acquire);
	if (h)
		return h;
	_Atomic uint32_t *fresh = calloc(n, sizeof(*fresh)), *none = NULL;
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(slot, &none, fresh))
		return fresh;
	free((void *)fresh);
	return none;
}

int ft_kernel_turn(struct ft_kernel *k, unsigned w, int in_turn, int count)
{
	_Atomic uint32_t *c = w < FT_KERNEL_WORDS ? counters(&k->turns, 2 * FT_KERNEL_WORDS) : NULL;
	if (!c)
		return 0;
	uint32_t in = atomic_load_explicit(&c[2 * w], memory_order_relaxed);
	uint32_t out = atomic_load_explicit(&c[2 * w + 1], memory_order_relaxed);
	if (count) {
		if (in + out >= FT_KERNEL_COUNTED) {
			/* halved: the verdict follows what the word does
			 * lately (one taken while the position was wrong
			 * does not stand for good); (racing counts are lost,
			 * not wrong) */
			in /= 2, out /= 2;
			atomic_store_explicit(&c[2 * w], in, memory_order_relaxed);
			atomic_store_explicit(&c[2 * w + 1], out, memory_order_relaxed);
		}
		atomic_fetch_add_explicit(&c[2 * w + !in_turn], 1, memory_order_relaxed);
		out += !in_turn;
		in += !!in_turn;
	}
	return out >= 4 && out > in ? -1 : in >= 4 && in >= out ? 1 : 0;
}

int ft_kernel_slicer(struct ft_kernel *k, unsigned w, int mark)
{
	if (w >= FT_KERNEL_WORDS)
		return 0;
	uint64_t bit = 1ull << (w % 64);
	if (mark)
		atomic_fetch_or_explicit(&k->slicer[w / 64], bit, memory_order_relaxed);
	return !!(atomic_load_explicit(&k->slicer[w / 64], memory_order_relaxed) & bit);
}

void ft_kernel_count(struct ft_kernel *k, const struct ft_refs *refs)
{
	if (!refs->n || atomic_load_explicit(&k->launches, memory_order_relaxed) >= FT_KERNEL_COUNTED)
		return;
	_Atomic uint32_t *h = counters(&k->hits, FT_KERNEL_WORDS);
	if (!h)
		return;
	for (unsigned i = 0; i < refs->n; i++)
		if (refs->v[i].word < FT_KERNEL_WORDS)
			atomic_fetch_add_explicit(&h[refs->v[i].word], 1, memory_order_relaxed);
	/* after the words: a reader never sees more hits than launches */
	atomic_fetch_add_explicit(&k->launches, 1, memory_order_release);
}

unsigned ft_kernel_mark_stale(const struct ft_kernel *k, struct ft_refs *refs)
{
	uint32_t n = atomic_load_explicit(&k->launches, memory_order_acquire);
	_Atomic uint32_t *h = atomic_load_explicit(&k->hits, memory_order_acquire);
	unsigned marked = 0;
	if (n < 8 || !h)
		return 0;
	for (unsigned i = 0; i < refs->n; i++) {
		unsigned w = refs->v[i].word;
		refs->v[i].stale = w < FT_KERNEL_WORDS &&
			(uint64_t)atomic_load_explicit(&h[w], memory_order_relaxed) * 10 < (uint64_t)n * 9;
		marked += refs->v[i].stale;
	}
	return marked;
}
