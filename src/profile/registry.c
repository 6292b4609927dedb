/*
 * Allocation registry (see include/ft/registry.h).  The array stays sorted by
 * base and free of overlaps, so a lookup is one binary search for the last
 * entry whose base is <= addr.
 */
#include "ft/registry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *ft_alloc_kind_name(int kind)
{
	static const char *const names[] = {
#define X(k, s) s,
		FT_ALLOC_KINDS(X)
#undef X
	};
	if (kind < 0 || (size_t)kind >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[kind];
}

static void update_bounds(struct ft_registry *r)
{
	if (!r->n) {
		atomic_store_explicit(&r->lo, UINT64_MAX, memory_order_relaxed);
		atomic_store_explicit(&r->hi, 0, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&r->lo, r->v[0].base, memory_order_relaxed);
	atomic_store_explicit(&r->hi, r->v[r->n - 1].base + r->v[r->n - 1].size,
			      memory_order_relaxed);
}

int ft_registry_init(struct ft_registry *r)
{
	memset(r, 0, sizeof(*r));
	r->next_id = 1;
	update_bounds(r);
	r->lock = &r->own;
	return -pthread_rwlock_init(r->lock, NULL);
}

void ft_registry_destroy(struct ft_registry *r)
{
	pthread_rwlock_destroy(r->lock);
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}

void ft_registry_clear(struct ft_registry *r)
{
	pthread_rwlock_wrlock(r->lock);
	r->n = 0;
	update_bounds(r);
	pthread_rwlock_unlock(r->lock);
}

void ft_registry_fork(struct ft_registry *r, int step)
{
	/* A read lock is enough: no writer is then halfway through an
	 * update, and readers change nothing. */
	if (step == 0) {
		pthread_rwlock_rdlock(r->lock);
		return;
	}
	pthread_rwlock_unlock(r->lock);
	if (step == 1)
		return;
	/* The child: other threads of the parent may have held the lock for
	 * reading, and their counts came along; the lock is left, and a new
	 * one taken (without memory, the old one is re-created).  The
	 * parent's allocations are not the child's. */
	pthread_rwlock_t *l = malloc(sizeof(*l));
	if (l && !pthread_rwlock_init(l, NULL))
		r->lock = l;
	else
		pthread_rwlock_init(r->lock, NULL);
	r->n = 0;
	update_bounds(r);
}

/* Index of the first entry whose base is > addr. */
static size_t upper(const struct ft_registry *r, uint64_t addr)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->v[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct ft_alloc *ft_registry_find_locked(const struct ft_registry *r,
					       uint64_t addr)
{
	size_t i = upper(r, addr);
	if (!i)
		return NULL;
	const struct ft_alloc *a = &r->v[i - 1];
	return addr - a->base < a->size ? a : NULL;
}

uint64_t ft_registry_add(struct ft_registry *r, uint64_t base, uint64_t size,
			 int kind, int device, unsigned *evicted)
{
	unsigned ev = 0;
	uint64_t id = 0;

	if (!size || base + size < base)
		return 0;
	pthread_rwlock_wrlock(r->lock);
	/* Remove entries overlapping [base, base + size). */
	size_t i = upper(r, base);
	if (i && r->v[i - 1].base + r->v[i - 1].size > base)
		i--;
	size_t j = i;
	while (j < r->n && r->v[j].base < base + size)
		j++;
	ev = (unsigned)(j - i);
	if (ev) {
		memmove(&r->v[i], &r->v[j], (r->n - j) * sizeof(r->v[0]));
		r->n -= ev;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct ft_alloc *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			goto out;
		r->v = v;
		r->cap = cap;
	}
	memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(r->v[0]));
	id = r->next_id++;
	r->v[i] = (struct ft_alloc){ .base = base, .size = size, .id = id,
				     .device = device, .kind = (uint8_t)kind };
	r->n++;
out:
	update_bounds(r);
	pthread_rwlock_unlock(r->lock);
	if (evicted)
		*evicted = ev;
	return id;
}

int ft_registry_remove(struct ft_registry *r, uint64_t base, struct ft_alloc *out)
{
	int rc = -ENOENT;
	pthread_rwlock_wrlock(r->lock);
	size_t i = upper(r, base);
	if (i && r->v[i - 1].base == base) {
		if (out)
			*out = r->v[i - 1];
		memmove(&r->v[i - 1], &r->v[i], (r->n - i) * sizeof(r->v[0]));
		r->n--;
		update_bounds(r);
		rc = 0;
	}
	pthread_rwlock_unlock(r->lock);
	return rc;
}

size_t ft_registry_remove_range(struct ft_registry *r, uint64_t base, uint64_t size,
				void (*fn)(void *ud, const struct ft_alloc *a), void *ud)
{
	pthread_rwlock_wrlock(r->lock);
	size_t i = upper(r, base);
	if (i && r->v[i - 1].base == base)
		i--;
	size_t k = i, removed = 0;
	for (size_t j = i; j < r->n; j++) {
		const struct ft_alloc *a = &r->v[j];
		if (a->base >= base && a->base + a->size <= base + size) {
			if (fn)
				fn(ud, a);
			removed++;
			continue;
		}
		if (a->base >= base + size) {
			memmove(&r->v[k], &r->v[j], (r->n - j) * sizeof(r->v[0]));
			k += r->n - j;
			break;
		}
		r->v[k++] = *a;
	}
	r->n -= removed;
	update_bounds(r);
	pthread_rwlock_unlock(r->lock);
	return removed;
}

int ft_registry_lookup(struct ft_registry *r, uint64_t addr, struct ft_alloc *out)
{
	int rc = -ENOENT;
	pthread_rwlock_rdlock(r->lock);
	const struct ft_alloc *a = ft_registry_find_locked(r, addr);
	if (a) {
		*out = *a;
		rc = 0;
	}
	pthread_rwlock_unlock(r->lock);
	return rc;
}

size_t ft_registry_count(struct ft_registry *r)
{
	pthread_rwlock_rdlock(r->lock);
	size_t n = r->n;
	pthread_rwlock_unlock(r->lock);
	return n;
}

uint64_t ft_registry_next_id(struct ft_registry *r)
{
	pthread_rwlock_rdlock(r->lock);
	uint64_t id = r->next_id;
	pthread_rwlock_unlock(r->lock);
	return id;
}

void ft_registry_rdlock(struct ft_registry *r)
{
	pthread_rwlock_rdlock(r->lock);
}

void ft_registry_unlock(struct ft_registry *r)
{
	pthread_rwlock_unlock(r->lock);
}
