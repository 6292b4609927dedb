/*
 * Launch parameter scan and the CUtensorMap table (include/ft/scan.h).
 * The scan runs on every launch, so it takes the registry lock once, rejects
 * words outside [lo, hi) of all allocations without a search, and
 * deduplicates (allocation, offset) pairs in a small array.
 */
#include "ft/scan.h"

#include <cuda.h>
#include <string.h>

static uint64_t hash128(const void *p)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < 128; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h ? h : 1;
}

void ft_tmaps_init(struct ft_tmaps *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void ft_tmaps_put(struct ft_tmaps *t, const void *map128, uint64_t global_addr)
{
	uint64_t h = hash128(map128);
	pthread_mutex_lock(&t->lock);
	t->slot[h % FT_TMAP_SLOTS].hash = h;
	t->slot[h % FT_TMAP_SLOTS].addr = global_addr;
	t->used++;
	pthread_mutex_unlock(&t->lock);
}

uint64_t ft_tmaps_get(struct ft_tmaps *t, const void *map128)
{
	if (!t->used)
		return 0;
	uint64_t h = hash128(map128), addr = 0;
	pthread_mutex_lock(&t->lock);
	if (t->slot[h % FT_TMAP_SLOTS].hash == h)
		addr = t->slot[h % FT_TMAP_SLOTS].addr;
	pthread_mutex_unlock(&t->lock);
	return addr;
}

static void add_ref(struct ft_refs *out, const struct ft_alloc *a, uint64_t addr,
		    uint32_t param, uint32_t byte, uint8_t via)
{
	uint64_t off = addr - a->base;
	for (unsigned i = 0; i < out->n; i++)
		if (out->v[i].alloc_id == a->id && out->v[i].offset == off)
			return;
	if (out->n == FT_MAX_REFS) {
		out->dropped++;
		return;
	}
	out->v[out->n++] = (struct ft_ref){ .alloc_id = a->id, .offset = off,
					    .alloc_base = a->base, .alloc_size = a->size,
					    .param = param,
					    .word = (uint16_t)(byte / 8 < 0xffff ? byte / 8 : 0xffff),
					    .via = via };
}

/* [lo, hi) of the registry, read once per launch under the read lock (the
 * bounds cannot move while it is held), so the per-word reject is two
 * compares against registers. */
struct bounds {
	uint64_t lo, hi;
};

/* Words of one parameter whose bytes are at host address p and which sits at
 * offset off of the parameter block. */
static void scan_param(const struct ft_registry *r, struct ft_tmaps *t, struct bounds b,
		       const unsigned char *p, uint32_t off, uint32_t size,
		       uint32_t param, struct ft_refs *out)
{
	uint32_t first = (off + 7u) & ~7u;
	for (uint32_t w = first; w + 8 <= off + size; w += 8) {
		uint64_t v;
		memcpy(&v, p + (w - off), 8);
		if (v - b.lo >= b.hi - b.lo)
			continue;
		const struct ft_alloc *a = ft_registry_find_locked(r, v);
		if (a)
			add_ref(out, a, v, param, w, FT_VIA_WORD);
	}
	if (size == 128 && !(off & 63)) {
		uint64_t g = ft_tmaps_get(t, p);
		const struct ft_alloc *a = g ? ft_registry_find_locked(r, g) : NULL;
		if (a)
			add_ref(out, a, g, param, off, FT_VIA_TENSORMAP);
	}
}

const void *ft_scan_extra_buffer(void **extra, uint64_t *size)
{
	const void *buf = NULL;
	uint64_t sz = 0;
	for (int i = 0; extra && i < 32 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
			sz = *(const size_t *)extra[i + 1];
	}
	*size = buf ? sz : 0;
	return buf;
}

int ft_scan_launch(struct ft_registry *r, struct ft_tmaps *t,
		   const struct ft_layout *layout, void **params, void **extra,
		   struct ft_refs *out)
{
	uint64_t bufsize = 0;
	const unsigned char *buf = NULL;

	out->n = out->dropped = 0;
	if (!params && extra)
		buf = ft_scan_extra_buffer(extra, &bufsize);
	if (!buf && !(params && layout))
		return -1;

	ft_registry_rdlock(r);
	struct bounds b = { atomic_load_explicit(&r->lo, memory_order_relaxed),
			    atomic_load_explicit(&r->hi, memory_order_relaxed) };
	if (b.hi <= b.lo) {
		ft_registry_unlock(r);
		return 0;
	}
	if (buf && layout) {
		for (uint32_t i = 0; i < layout->nparams; i++) {
			const struct ft_param *pp = &layout->p[i];
			if ((uint64_t)pp->offset + pp->size <= bufsize)
				scan_param(r, t, b, buf + pp->offset, pp->offset,
					   pp->size, i, out);
		}
	} else if (buf) {
		/* No layout: every aligned word of the buffer. */
		for (uint32_t w = 0; w + 8 <= bufsize; w += 8)
			scan_param(r, t, b, buf + w, w, 8, w / 8, out);
	} else {
		for (uint32_t i = 0; i < layout->nparams; i++)
			if (params[i])
				scan_param(r, t, b, params[i], layout->p[i].offset,
					   layout->p[i].size, i, out);
	}
	ft_registry_unlock(r);
	return 0;
}
