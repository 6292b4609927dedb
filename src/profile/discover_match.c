/*
 * A restart's match of a saved profile's weights (ft_disc_match,
 * include/ft/discover.h): by size in order (FT_SKIP_DISCOVERY), or by size
 * and checksum in any order, a saved weight found at a region's start, at
 * the start of a longer region, or (at a pass's end) where another found
 * one ends.
 */
#include "ft/discover.h"
#include "discover_int.h"

#include <stdlib.h>
#include <string.h>

/* Saved weights sorted by (size, checksum), for ft_disc_match. */
#define MATCH_AFTER_MAX 8 /* saved weights found inside a region (match_after) */
/* Where region_of[] says saved weight j is: d->r's index (>= 0), not found
 * (NONE), or made[-2 - region_of[j]] (a region this process has not). */
#define NONE (-1)
struct saved_w {
	uint64_t size, sum;
	uint32_t k;
};

static int by_size_sum(const void *a, const void *b)
{
	const struct saved_w *x = a, *y = b;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	if (x->sum != y->sum)
		return x->sum < y->sum ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* The first saved weight of (size, sum) not taken yet, or -1. */
static int take_saved(const struct saved_w *w, uint32_t nw, const int32_t *region_of,
		      uint64_t size, uint64_t sum)
{
	uint32_t lo = 0, hi = nw;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (w[mid].size < size || (w[mid].size == size && w[mid].sum < sum))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < nw && w[lo].size == size && w[lo].sum == sum; lo++)
		if (region_of[w[lo].k] == NONE)
			return (int)w[lo].k;
	return -1;
}

/* The region found for saved weight j (NULL: none). */
static const struct ft_disc_region *found_at(const struct ft_discover *d, const int32_t *region_of,
					     const struct ft_disc_region *made, uint32_t j)
{
	return region_of[j] >= 0 ? &d->r[region_of[j]] : region_of[j] == NONE ? NULL
									 : &made[-2 - region_of[j]];
}

/* Whether a region begins at (alloc, offset), here or among made[0..nmade). */
static int begins_at(const struct ft_discover *d, const struct ft_disc_region *made,
		     uint32_t nmade, uint64_t alloc, uint64_t offset)
{
	for (uint32_t i = 0; i < nmade; i++)
		if (made[i].alloc_id == alloc && made[i].offset == offset)
			return 1;
	uint32_t i = ft_disc_lower(d, alloc, offset);
	return i < d->n && d->r[i].alloc_id == alloc && d->r[i].offset == offset;
}

/* Saved weights not found at a region's start that begin where a found one
 * ends, in its allocation, where no region begins in this process: a stack
 * slot that pointed into a weight split it in the run that saved the
 * profile and not in this one (on an H100 a start-up harness's restarts
 * saw 114 weights against the saved 115, and learnt again).  Each is
 * checksummed there and, found, described in made[] (at most cap).  Tried
 * only for a few missing weights (each try is a checksum per found weight
 * and missing size).  Returns how many more were found. */
static uint32_t match_after(const struct ft_discover *d, const struct saved_w *w, uint32_t nw,
			    const uint64_t *sizes, uint32_t nsizes, int32_t *region_of,
			    struct ft_disc_region *made, uint32_t *nmade, uint32_t cap,
			    ft_disc_sum_fn sum, void *ctx)
{
	uint32_t more = 0;
	for (int progress = 1; progress && *nmade < cap;) {
		progress = 0;
		for (uint32_t f = 0; f < nsizes && *nmade < cap; f++) {
			const struct ft_disc_region *a = found_at(d, region_of, made, f);
			if (!a)
				continue;
			uint64_t at = a->offset + sizes[f], checked = 0;
			if (at >= a->alloc_size || begins_at(d, made, *nmade, a->alloc_id, at))
				continue;
			struct ft_disc_region r = *a;
			r.offset = at;
			for (uint32_t x = 0; x < nw; x++) {
				if (region_of[w[x].k] != NONE || w[x].size > a->alloc_size - at ||
				    w[x].size == checked)
					continue;
				checked = w[x].size;
				uint64_t s = sum(ctx, &r, w[x].size);
				int j = s ? take_saved(w, nw, region_of, w[x].size, s) : -1;
				if (j < 0)
					continue;
				r.extent = r.sum_extent = w[x].size;
				r.sum = s;
				r.nsums = 1;
				r.views = 0;
				made[*nmade] = r;
				region_of[j] = -2 - (int32_t)(*nmade)++;
				more++;
				progress = 1;
				break;
			}
		}
	}
	return more;
}

/* made[0..nmade) become regions of d->r (sorted in), and region_of[] says
 * d->r's indices only.  0, or -1 (out of memory: d as it was, but grown). */
static int insert_made(struct ft_discover *d, int32_t *region_of, uint32_t nsizes,
		       const struct ft_disc_region *made, uint32_t nmade)
{
	if (ft_disc_reserve(d, d->n + nmade))
		return -1;
	for (uint32_t m = 0; m < nmade; m++) {
		uint32_t q = ft_disc_lower(d, made[m].alloc_id, made[m].offset);
		ft_disc_insert(d, q, &made[m]);
		for (uint32_t j = 0; j < nsizes; j++) {
			if (region_of[j] >= (int32_t)q)
				region_of[j]++;
			else if (region_of[j] == -2 - (int32_t)m)
				region_of[j] = (int32_t)q;
		}
	}
	ft_disc_extents(d); /* owners by the new indices */
	return 0;
}

static uint32_t match_sums(struct ft_discover *d, uint32_t **pidx, uint32_t n,
			   const uint64_t *sizes, const uint64_t *sums, uint32_t nsizes,
			   ft_disc_sum_fn sum, void *ctx, int split, uint32_t *found,
			   uint32_t *missing)
{
	struct saved_w *w = malloc((nsizes + 1) * sizeof(*w));
	int32_t *region_of = malloc((nsizes + 1) * sizeof(*region_of));
	uint8_t *used = calloc(n + 1, 1);
	struct ft_disc_region made[MATCH_AFTER_MAX];
	uint32_t nw = 0, k = 0, nmade = 0, *idx = *pidx;
	*found = 0;
	*missing = 0;
	if (!w || !region_of || !used)
		goto out;
	for (uint32_t i = 0; i < nsizes; i++) {
		region_of[i] = NONE;
		if (sums[i]) /* all-zero bytes prove nothing: never found */
			w[nw++] = (struct saved_w){ sizes[i], sums[i], i };
	}
	qsort(w, nw, sizeof(*w), by_size_sum);
	/* regions whose sample covered exactly a saved size: no GPU work */
	for (uint32_t i = 0; i < n; i++) {
		const struct ft_disc_region *r = &d->r[idx[i]];
		int j = r->nsums && r->sum_extent == r->extent
				? take_saved(w, nw, region_of, r->extent, r->sum) : -1;
		if (j >= 0) {
			region_of[j] = (int32_t)idx[i];
			used[i] = 1;
			k++;
		}
	}
	/* the rest: a saved weight may be the start of a longer region */
	for (uint32_t i = 0; i < n && k < nw; i++) {
		struct ft_disc_region *r = &d->r[idx[i]];
		uint64_t checked = 0; /* (one checksum per size) */
		for (uint32_t a = 0; !used[i] && a < nw; a++) {
			/* up to the allocation's end: the pass may have read a
			 * weight through views that split it (a token's row) */
			if (region_of[w[a].k] >= 0 || w[a].size > r->alloc_size - r->offset ||
			    w[a].size == checked)
				continue;
			/* a sample that covered exactly this size was tried above */
			if (w[a].size == r->extent && r->nsums && r->sum_extent == r->extent)
				continue;
			checked = w[a].size;
			uint64_t s = sum(ctx, r, w[a].size);
			int j = s ? take_saved(w, nw, region_of, w[a].size, s) : -1;
			if (j >= 0) {
				region_of[j] = (int32_t)idx[i];
				used[i] = 1;
				k++;
			}
		}
	}
	if (split && k < nw && nw - k <= MATCH_AFTER_MAX)
		k += match_after(d, w, nw, sizes, nsizes, region_of, made, &nmade,
				 MATCH_AFTER_MAX, sum, ctx);
	if (k == nsizes && nmade) {
		uint32_t *grown = realloc(idx, (nsizes + 1) * sizeof(*idx));
		if (grown)
			*pidx = idx = grown;
		if (!grown || insert_made(d, region_of, nsizes, made, nmade))
			k--; /* (out of memory: not found) */
	}
	/* matched weights never overlap: a region found over a saved size
	 * up to its allocation's end may reach into another's (one weight's
	 * view matching another weight's bytes); then the two are not found */
	if (k == nsizes) {
		/* d->r is in (allocation, offset) order: in it, each saved
		 * weight's end against the next matched region's start */
		int32_t *saved_in = malloc((d->n + 1) * sizeof(*saved_in)), prev = -1;
		for (uint32_t i = 0; saved_in && i < d->n; i++)
			saved_in[i] = -1;
		for (uint32_t j = 0; saved_in && j < nsizes; j++)
			saved_in[region_of[j]] = (int32_t)j;
		for (uint32_t i = 0; saved_in && i < d->n; i++) {
			int32_t j = saved_in[i];
			if (j < 0)
				continue;
			const struct ft_disc_region *a = prev < 0 ? NULL : &d->r[region_of[prev]];
			if (a && a->alloc_id == d->r[i].alloc_id &&
			    d->r[i].offset < a->offset + sizes[prev]) {
				region_of[j] = NONE;
				k--;
				break;
			}
			prev = j;
		}
		free(saved_in);
	}
	*found = k;
	while (*missing < nsizes && region_of[*missing] != NONE)
		(*missing)++;
	if (k == nsizes)
		for (uint32_t i = 0; i < nsizes; i++) {
			idx[i] = (uint32_t)region_of[i];
			struct ft_disc_region *r = &d->r[idx[i]];
			r->extent = sizes[i];
			r->views = ft_disc_views_in(d, idx[i], sizes[i]);
			/* the regions inside are its views (pairs read through them) */
			for (uint32_t j = idx[i] + 1; j < d->n && d->r[j].alloc_id == r->alloc_id &&
						      d->r[j].offset < r->offset + sizes[i]; j++)
				d->r[j].owner = idx[i];
		}
out:
	free(w);
	free(region_of);
	free(used);
	return k == nsizes ? k : 0;
}

uint32_t ft_disc_match(struct ft_discover *d, uint32_t **pidx, uint32_t n,
		       const uint64_t *sizes, const uint64_t *sums, uint32_t nsizes,
		       ft_disc_sum_fn sum, void *ctx, int split, uint32_t *found,
		       uint32_t *missing)
{
	if (sums)
		return match_sums(d, pidx, n, sizes, sums, nsizes, sum, ctx, split, found,
				  missing);
	uint32_t k = 0, *idx = *pidx;
	for (uint32_t i = 0; i < n && k < nsizes; i++)
		if (d->r[idx[i]].extent == sizes[k])
			idx[k++] = idx[i];
	*found = *missing = k;
	return k == nsizes ? k : 0;
}
