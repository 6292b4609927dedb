/* Weight identification (include/ft/discover.h). */
#include "ft/discover.h"
#include "discover_int.h"
#include "ft/search.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FT_DISC_UNDO_MAX (1u << 16)

int ft_disc_init(struct ft_discover *d, uint64_t cutoff_id)
{
	memset(d, 0, sizeof(*d));
	d->cutoff_id = cutoff_id;
	d->cap = 256;
	d->r = calloc(d->cap, sizeof(*d->r));
	return d->r ? 0 : -ENOMEM;
}

void ft_disc_destroy(struct ft_discover *d)
{
	free(d->r);
	free(d->pairs);
	free(d->undo);
	memset(d, 0, sizeof(*d));
}

static int before(const struct ft_disc_region *r, uint64_t a, uint64_t o)
{
	return r->alloc_id < a || (r->alloc_id == a && r->offset < o);
}

uint32_t ft_disc_lower(const struct ft_discover *d, uint64_t a, uint64_t o)
{
	uint32_t lo = 0, hi = d->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (before(&d->r[mid], a, o))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ft_disc_reserve(struct ft_discover *d, uint32_t n)
{
	uint32_t cap = d->cap;
	while (cap < n)
		cap *= 2;
	if (cap == d->cap)
		return 0;
	struct ft_disc_region *r = realloc(d->r, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	d->r = r;
	d->cap = cap;
	return 0;
}

void ft_disc_insert(struct ft_discover *d, uint32_t i, const struct ft_disc_region *r)
{
	memmove(&d->r[i + 1], &d->r[i], (d->n - i) * sizeof(*d->r));
	d->r[i] = *r;
	d->n++;
}

int ft_disc_read(struct ft_discover *d, uint64_t a, uint64_t o, uint64_t alloc_base,
		 uint64_t alloc_size)
{
	uint32_t i = ft_disc_lower(d, a, o);
	int known = i < d->n && d->r[i].alloc_id == a && d->r[i].offset == o;
	/* No tensor a kernel reads starts at an address that is not 16-byte
	 * aligned: such a word (an index, a size, a computed address seen on
	 * the H200 44 MiB into a layer's weight) reads the region holding it
	 * instead of splitting a weight in two. */
	if (!known && o % FT_DISC_ALIGN && i > 0 && d->r[i - 1].alloc_id == a)
		i--;
	else if (!known) {
		if (ft_disc_reserve(d, d->n + 1))
			return -ENOMEM;
		ft_disc_insert(d, i, &(struct ft_disc_region){ .alloc_id = a, .offset = o,
							       .alloc_base = alloc_base,
							       .alloc_size = alloc_size,
							       .last_pass = UINT32_MAX,
							       .owner = i });
	}
	struct ft_disc_region *r = &d->r[i];
	if (d->pass < FT_DISCOVER_MAX_PASSES)
		r->touched |= 1ULL << d->pass;
	if (r->last_pass != d->pass) {
		r->last_pass = d->pass;
		r->order = d->order_next++;
		r->first_feed = d->feeds;
	} else if (r->reach != d->order_next && a < d->cutoff_id) {
		/* (reads are taken back only from the launches that began the
		 * next pass before it was confirmed: the older half goes when
		 * the log is full) */
		if (d->nundo == FT_DISC_UNDO_MAX) {
			memmove(d->undo, d->undo + d->nundo / 2,
				(d->nundo - d->nundo / 2) * sizeof(*d->undo));
			d->nundo -= d->nundo / 2;
		}
		if (d->nundo == d->capundo) {
			uint32_t cap = d->capundo ? 2 * d->capundo : 1024;
			struct ft_disc_undo *u = realloc(d->undo, cap * sizeof(*u));
			if (u) {
				d->undo = u;
				d->capundo = cap;
			}
		}
		if (d->nundo < d->capundo) /* (out of memory: not taken back) */
			d->undo[d->nundo++] = (struct ft_disc_undo){ a, r->offset, d->feeds,
								     r->reach };
	}
	r->reach = d->order_next;
	d->feeds++;
	return 0;
}

void ft_disc_unread_since(struct ft_discover *d, uint64_t since)
{
	for (uint32_t i = 0; i < d->n; i++) {
		struct ft_disc_region *r = &d->r[i];
		if (r->last_pass != d->pass || r->first_feed < since)
			continue;
		if (d->pass < FT_DISCOVER_MAX_PASSES)
			r->touched &= ~(1ULL << d->pass);
		r->last_pass = UINT32_MAX;
	}
	/* regions read again since: their reach before, latest read first */
	for (; d->nundo && d->undo[d->nundo - 1].feed >= since; d->nundo--) {
		const struct ft_disc_undo *u = &d->undo[d->nundo - 1];
		uint32_t i = ft_disc_lower(d, u->alloc_id, u->offset);
		if (i < d->n && d->r[i].alloc_id == u->alloc_id && d->r[i].offset == u->offset &&
		    d->r[i].last_pass == d->pass)
			d->r[i].reach = u->reach;
	}
}

/* The key of the region a read at (a, o) went to (ft_disc_read's rule for
 * a misaligned word: the region holding it); 0 when there is none. */
static int resolve(const struct ft_discover *d, uint64_t a, uint64_t o, uint64_t *off)
{
	uint32_t i = ft_disc_lower(d, a, o);
	if (i < d->n && d->r[i].alloc_id == a && d->r[i].offset == o) {
		*off = o;
		return 1;
	}
	if (o % FT_DISC_ALIGN && i > 0 && d->r[i - 1].alloc_id == a) {
		*off = d->r[i - 1].offset;
		return 1;
	}
	return 0;
}


static uint64_t pair_hash(const struct ft_disc_pair *p)
{
	uint64_t h = 1469598103934665603ull;
	const uint64_t v[4] = { p->a_id, p->a_off, p->b_id, p->b_off };
	for (int i = 0; i < 4; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h ^ (h >> 29);
}

static int pair_empty(const struct ft_disc_pair *p)
{
	return !p->a_id && !p->a_off && !p->b_id && !p->b_off;
}

/* Inserts p (a before b) into the set at cap slots (a power of two). */
static void pair_put(struct ft_disc_pair *set, uint32_t cap, const struct ft_disc_pair *p,
		     uint32_t *n)
{
	for (uint64_t h = pair_hash(p);; h++) {
		struct ft_disc_pair *x = &set[h & (cap - 1)];
		if (pair_empty(x)) {
			*x = *p;
			++*n;
			return;
		}
		if (!memcmp(x, p, sizeof(*p)))
			return;
	}
}

static void add_pair(struct ft_discover *d, uint64_t ai, uint64_t ao, uint64_t bi, uint64_t bo)
{
	if (ai == bi && ao == bo)
		return;
	int swap = ai > bi || (ai == bi && ao > bo);
	struct ft_disc_pair p = { swap ? bi : ai, swap ? bo : ao, swap ? ai : bi, swap ? ao : bo };
	if (2 * (d->npairs + 1) > d->cappairs) {
		uint32_t cap = d->cappairs ? d->cappairs * 2 : 1024;
		struct ft_disc_pair *set = cap <= 2 * FT_DISC_MAX_PAIRS ? calloc(cap, sizeof(*set)) : NULL;
		if (!set) {
			d->pairs_full = 1;
			return;
		}
		uint32_t n = 0;
		for (uint32_t i = 0; i < d->cappairs; i++)
			if (!pair_empty(&d->pairs[i]))
				pair_put(set, cap, &d->pairs[i], &n);
		free(d->pairs);
		d->pairs = set;
		d->cappairs = cap;
		d->npairs = n;
	}
	pair_put(d->pairs, d->cappairs, &p, &d->npairs);
}

void ft_disc_together(struct ft_discover *d, const uint64_t *ids, const uint64_t *offs,
		      unsigned n)
{
	uint64_t key[16][2];
	unsigned k = 0;
	for (unsigned i = 0; i < n && k < 16; i++)
		if (ids[i] < d->cutoff_id && resolve(d, ids[i], offs[i], &key[k][1]))
			key[k++][0] = ids[i];
	for (unsigned i = 0; i < k; i++)
		for (unsigned j = i + 1; j < k; j++)
			add_pair(d, key[i][0], key[i][1], key[j][0], key[j][1]);
}

static int by_pair(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Two reads that began at first-touch positions o1, o2 and ended before
 * r1, r2 (0: none) overlap. */
static int overlap(uint32_t o1, uint32_t r1, uint32_t o2, uint32_t r2)
{
	return r1 && r2 && (o1 > o2 ? o1 : o2) < (r1 < r2 ? r1 : r2);
}

/* Regions i and j were each read after the other was first read, in each
 * of the last two completed passes (a stale pointer read once out of its
 * place is not taken for a loop). */
static int interleaved(const struct ft_discover *d, uint32_t i, uint32_t j)
{
	const struct ft_disc_region *a = &d->r[i], *b = &d->r[j];
	return overlap(a->morder, a->mreach, b->morder, b->mreach) &&
	       overlap(a->morder2, a->mreach2, b->morder2, b->mreach2);
}

uint32_t ft_disc_interleaved(const struct ft_discover *d, const uint32_t *idx, uint32_t n,
			     uint32_t (**out)[2])
{
	*out = NULL;
	uint32_t m = 0;
	for (uint32_t k = 0; k < n; k++)
		for (uint32_t j = k + 1; j < n && m < FT_DISC_MAX_PAIRS; j++)
			m += interleaved(d, idx[k], idx[j]);
	uint32_t (*v)[2] = m ? malloc(m * sizeof(*v)) : NULL, u = 0;
	uint32_t *last = v ? malloc(n * sizeof(*last)) : NULL;
	uint64_t *before = last ? malloc((n + 1) * sizeof(*before)) : NULL;
	if (!before) {
		free(v), free(last);
		return 0;
	}
	for (uint32_t k = 0; k < n; k++)
		for (uint32_t j = k + 1; j < n && u < m; j++)
			if (interleaved(d, idx[k], idx[j])) {
				v[u][0] = k;
				v[u++][1] = j;
			}
	/* each weight's span, from itself to the last weight first read
	 * before its own last read: one that holds more than half of the
	 * weights' bytes is read all over the pass (a tied embedding read
	 * first and last, a table every layer reads), and none of its pairs
	 * is kept: it stays on the GPU instead once profiling finds it read
	 * again after later traps began */
	before[0] = 0;
	for (uint32_t k = 0; k < n; k++) {
		before[k + 1] = before[k] + d->r[idx[k]].extent;
		last[k] = k;
	}
	for (uint32_t i = 0; i < u; i++)
		if (v[i][1] > last[v[i][0]])
			last[v[i][0]] = v[i][1];
	m = 0;
	for (uint32_t i = 0; i < u; i++) {
		uint32_t a = v[i][0], b = v[i][1];
		if (2 * (before[last[a] + 1] - before[a]) <= before[n] &&
		    2 * (before[last[b] + 1] - before[b]) <= before[n])
			memcpy(v[m++], v[i], sizeof(*v));
	}
	free(last), free(before);
	if (!m)
		free(v);
	*out = m ? v : NULL;
	return m;
}

uint32_t ft_disc_weight_pairs(const struct ft_discover *d, const uint32_t *idx, uint32_t n,
			      const uint32_t (*il)[2], uint32_t ni, uint32_t (**out)[2])
{
	*out = NULL;
	int32_t *pos = malloc((d->n + 1) * sizeof(*pos));
	uint32_t (*v)[2] = malloc((d->npairs + d->n + ni + 1) * sizeof(*v)), m = ni;
	if (!pos || !v) {
		free(pos);
		free(v);
		return 0;
	}
	if (ni)
		memcpy(v, il, ni * sizeof(*v));
	for (uint32_t i = 0; i < d->n; i++)
		pos[i] = -1;
	for (uint32_t k = 0; k < n; k++)
		pos[idx[k]] = (int32_t)k;
	for (uint32_t i = 0; i < d->cappairs; i++) {
		const struct ft_disc_pair *p = &d->pairs[i];
		if (pair_empty(p))
			continue;
		uint32_t x = ft_disc_lower(d, p->a_id, p->a_off), y = ft_disc_lower(d, p->b_id, p->b_off);
		if (x >= d->n || y >= d->n)
			continue;
		x = d->r[x].owner; /* a part is read as its region */
		y = d->r[y].owner;
		if (pos[x] < 0 || pos[y] < 0 || pos[x] == pos[y])
			continue;
		v[m][0] = (uint32_t)(pos[x] < pos[y] ? pos[x] : pos[y]);
		v[m++][1] = (uint32_t)(pos[x] < pos[y] ? pos[y] : pos[x]);
	}
	/* one tensor seen through two pointers reads on into the next */
	for (uint32_t i = 0; i + 1 < d->n; i++) {
		uint32_t j = i + 1;
		if (d->r[i].owner != i)
			continue;
		while (j < d->n && d->r[j].owner != j)
			j++; /* the next region that is not a part */
		if (j < d->n && d->r[i].alloc_id == d->r[j].alloc_id && pos[i] >= 0 &&
		    pos[j] >= 0 && d->r[i].offset + d->r[i].extent == d->r[j].offset) {
			v[m][0] = (uint32_t)(pos[i] < pos[j] ? pos[i] : pos[j]);
			v[m++][1] = (uint32_t)(pos[i] < pos[j] ? pos[j] : pos[i]);
		}
	}
	free(pos);
	qsort(v, m, sizeof(*v), by_pair);
	uint32_t u = 0;
	for (uint32_t i = 0; i < m; i++)
		if (!u || by_pair(v[i], v[u - 1]))
			memcpy(v[u++], v[i], sizeof(*v));
	if (!u) {
		free(v);
		return 0;
	}
	*out = v;
	return u;
}

void ft_disc_write(struct ft_discover *d, uint64_t a, uint64_t o, uint64_t bytes)
{
	/* Regions of a that start before o + bytes and end after o; extents
	 * are not final yet, so any region from the one holding o on. */
	uint32_t i = ft_disc_lower(d, a, o);
	if (i > 0 && d->r[i - 1].alloc_id == a)
		i--; /* the region that may contain o */
	for (; i < d->n && d->r[i].alloc_id == a && d->r[i].offset < o + bytes; i++) {
		struct ft_disc_region *r = &d->r[i];
		uint64_t end = i + 1 < d->n && d->r[i + 1].alloc_id == a ? d->r[i + 1].offset
									  : r->alloc_size;
		if (end > o)
			r->written = 1;
	}
}

static uint64_t all_passes(const struct ft_discover *d)
{
	uint32_t passes = d->passes_done < FT_DISCOVER_MAX_PASSES ? d->passes_done
								 : FT_DISCOVER_MAX_PASSES;
	return passes >= 64 ? ~0ULL : (1ULL << passes) - 1;
}

uint64_t ft_disc_views_in(const struct ft_discover *d, uint32_t i, uint64_t end)
{
	const struct ft_disc_region *r = &d->r[i];
	uint64_t last = r->offset, gap = UINT64_MAX;
	for (uint32_t j = i + 1; j < d->n && d->r[j].alloc_id == r->alloc_id &&
				 d->r[j].offset < r->offset + end; j++) {
		if (d->r[j].offset - last < gap)
			gap = d->r[j].offset - last;
		last = d->r[j].offset;
	}
	if (gap == UINT64_MAX)
		return 0;
	uint64_t v = last - r->offset + gap;
	return v < end ? v : end;
}

/* The views inside region i's first extent bytes that start slices (into
 * out[0..cap), ascending), how many, and the gcd of their offsets (*g);
 * -1 when a region inside is something else. */
static int32_t slice_views(const struct ft_discover *d, uint32_t i, uint64_t extent, uint64_t *out,
			   uint32_t cap, uint64_t *g)
{
	const struct ft_disc_region *r = &d->r[i];
	uint64_t all = all_passes(d);
	int32_t n = 0, some = 0;
	*g = 0;
	for (uint32_t j = i + 1; j < d->n && d->r[j].alloc_id == r->alloc_id &&
				 d->r[j].offset < r->offset + extent; j++) {
		const struct ft_disc_region *v = &d->r[j];
		uint64_t off = v->offset - r->offset;
		if (!(v->touched & all))
			continue; /* read in the pass under way only: no start (the
				     slice before it runs on over it) */
		if (v->offset % FT_DISC_ALIGN || v->written || v->sums_differ)
			return -1;
		/* one read every pass inside is an expert the router always
		 * picks (experts_read_every_pass made it a part) */
		*g = ft_gcd64(*g, off);
		some += (v->touched & all) != all;
	}
	if (some < 2) /* the data chose no views */
		*g = 0;
	for (uint32_t j = i + 1; j < d->n && d->r[j].alloc_id == r->alloc_id &&
				 d->r[j].offset < r->offset + extent; j++) {
		if (!(d->r[j].touched & all))
			continue;
		if ((uint32_t)n < cap)
			out[n] = d->r[j].offset - r->offset;
		n++;
	}
	return n;
}

uint32_t ft_disc_slices(const struct ft_discover *d, uint32_t i, uint64_t extent,
			uint64_t *out, uint32_t cap)
{
	uint64_t g;
	if (d->passes_done < 2) /* one pass tells no view from a tensor */
		return 0;
	int32_t n = slice_views(d, i, extent, out, cap, &g);
	return n >= 2 && g >= FT_DISC_SLICE_MIN ? (uint32_t)n : 0;
}

uint64_t ft_disc_unread_slices(const struct ft_discover *d, uint32_t i, uint64_t extent)
{
	uint64_t g;
	if (d->passes_done < 2)
		return 0;
	int32_t n = slice_views(d, i, extent, NULL, 0, &g);
	if (n < 2 || g < FT_DISC_SLICE_MIN)
		return 0;
	/* slots of g bytes from the region's start, each begun by a view
	 * (the first by the region itself); a last one cut short counts
	 * where another region begins after it, not in the allocation's
	 * padding */
	const struct ft_disc_region *r = &d->r[i];
	uint64_t slots = extent / g;
	if (extent % g && r->offset + extent < r->alloc_size)
		slots++;
	return slots > (uint64_t)n + 1 ? slots - (uint64_t)n - 1 : 0;
}

int ft_disc_declared(const struct ft_discover *d, uint64_t va)
{
	uint32_t lo = 0, hi = d->ndecl;
	while (lo < hi) { /* the last declared tensor starting at or before va */
		uint32_t mid = (lo + hi) / 2;
		if (d->decl[mid].lo <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && va < d->decl[lo - 1].hi ? (int)lo - 1 : -1;
}

/* Declared tensors (part may be NULL: out of memory): a region inside one,
 * after another region of it, is its part; the first region of one is
 * nobody's part (the region before it is another tensor's). */
static void declared_parts(const struct ft_discover *d, uint8_t *part)
{
	int prev = -1;
	for (uint32_t i = 0; part && d->ndecl && i < d->n; i++) {
		const struct ft_disc_region *r = &d->r[i];
		int k = ft_disc_declared(d, r->alloc_base + r->offset);
		/* undeclared memory is nobody's part: no weight takes it in */
		part[i] = k >= 0 && i > 0 && k == prev && d->r[i - 1].alloc_id == r->alloc_id ? 2
											     : 0;
		prev = k;
	}
}

/* Each region's owner: the one before it's when part[i] says it is a part
 * (part NULL: none is). */
static void set_owners(struct ft_discover *d, const uint8_t *part)
{
	for (uint32_t i = 0; i < d->n; i++)
		d->r[i].owner = part && part[i] ? d->r[i - 1].owner : i;
}

/* A region read in every pass, aligned, stable and never written, among
 * views of its allocation (two or more, part[] 1: read in some completed
 * passes, not all) at a stride of a MiB or more from it, and no further
 * than one stride past the last of them: an expert the router picks every
 * pass (a decode step's tokens are alike), in the stacked tensor the views
 * are experts of.  It is a part of the owner before it too (3): as an owner
 * of its own it would cut the tensor in two, the experts before it no
 * weight (not read every pass on their own) and the layer's sizes unlike
 * the others'.  (On the H200 a Mixtral layer's stacked up projection was
 * cut at its fourth expert.)  A tensor read every pass right after a
 * stacked one, at its stride, is taken into it too: one weight, whose
 * slice from its start holds it. */
static void experts_read_every_pass(struct ft_discover *d, uint8_t *part)
{
	uint64_t all = all_passes(d);
	for (uint32_t i = 1; part && all && i < d->n; i++) {
		struct ft_disc_region *r = &d->r[i];
		if (part[i] || d->r[i - 1].alloc_id != r->alloc_id || r->offset % FT_DISC_ALIGN ||
		    r->written || r->sums_differ || (r->touched & all) != all)
			continue;
		uint64_t g = 0, last = 0;
		uint32_t views = 0, j = i;
		while (j > 0 && d->r[j - 1].alloc_id == r->alloc_id)
			j--; /* the allocation's first region */
		for (; j < d->n && d->r[j].alloc_id == r->alloc_id; j++)
			if (part[j] == 1 && (d->r[j].touched & all) && !d->r[j].sums_differ) {
				uint64_t o = d->r[j].offset; /* (j != i: part[i] is 0) */
				g = ft_gcd64(g, o > r->offset ? o - r->offset : r->offset - o);
				last = last > o ? last : o;
				views++;
			}
		if (views >= 2 && g >= FT_DISC_SLICE_MIN && r->offset <= last + g) {
			part[i] = 3;
			r->owner = d->r[i - 1].owner;
		}
	}
}

uint32_t ft_disc_new_slices(const struct ft_discover *d, uint32_t since)
{
	uint32_t n = 0, before = d->passes_done > since ? d->passes_done - since : 0;
	uint64_t earlier = before >= 64 ? ~0ull : (1ull << before) - 1;
	for (uint32_t i = 0; i < d->n; i++) {
		const struct ft_disc_region *v = &d->r[i], *o = &d->r[v->owner];
		uint64_t g;
		if (v->owner == i || o->alloc_id >= d->cutoff_id || (v->touched & earlier) ||
		    !(v->touched & all_passes(d)))
			continue; /* no part, or read before those passes (or not yet) */
		if (slice_views(d, v->owner, o->extent, NULL, 0, &g) >= 2 && g >= FT_DISC_SLICE_MIN)
			n++;
	}
	return n;
}

void ft_disc_lead_slices(struct ft_discover *d)
{
	int made = 0;
	ft_disc_extents(d);
	/* from the last region down: an insertion moves only the regions
	 * after it, whose owners (set by ft_disc_extents) are not used again */
	for (uint32_t i = d->n; i-- > 0;) {
		const struct ft_disc_region *r = &d->r[i];
		uint64_t g;
		if ((i && d->r[i - 1].alloc_id == r->alloc_id) || !r->offset || r->owner != i ||
		    r->alloc_id >= d->cutoff_id || r->written || r->sums_differ ||
		    d->passes_done < 2 || slice_views(d, i, r->extent, NULL, 0, &g) < 2 ||
		    g < FT_DISC_SLICE_MIN || r->offset % g)
			continue;
		if (ft_disc_reserve(d, d->n + 1))
			return;
		made = 1;
		/* (read from d->r again: reserving may have moved it) */
		struct ft_disc_region lead = { .alloc_id = d->r[i].alloc_id, .offset = 0,
					       .alloc_base = d->r[i].alloc_base,
					       .alloc_size = d->r[i].alloc_size,
					       .last_pass = UINT32_MAX, .owner = i };
		ft_disc_insert(d, i, &lead);
	}
	if (made) /* (else the extents stand) */
		ft_disc_extents(d);
}

void ft_disc_extents(struct ft_discover *d)
{
	uint64_t all = all_passes(d);
	/* owners: a region not read in every completed pass is a part of the
	 * region before it in its allocation (before any pass completed,
	 * nothing is known: every region is its own) -- unless its own bytes
	 * changed between two samples: no view into a weight does that, a
	 * buffer the allocator placed in a weight's free tail does (a GEMM's
	 * workspace).  A misaligned offset is no tensor's start either: one
	 * read before the start of its tensor made a region of its own (on
	 * the H200 one 4 bytes past a row of the embedding, read every pass
	 * before the table itself), which is a part once that start is read */
	uint8_t *part = calloc(d->n + 1, 1);
	uint32_t *nparts = calloc(d->n + 1, sizeof(*nparts));
	if (!part || !nparts) { /* out of memory: every region its own */
		free(part);
		part = NULL;
	}
	for (uint32_t i = 0; part && i < d->n; i++) {
		const struct ft_disc_region *r = &d->r[i];
		/* 2: misaligned, a part however often it is read; 1: a view
		 * (kept below only among others).  (Written as one chain of
		 * &&, the 2 became a 1: a misaligned word alone in its
		 * allocation was then no part, and split the H200's embedding
		 * at 4 bytes past a row near its end.) */
		int may = i > 0 && d->r[i - 1].alloc_id == r->alloc_id && !r->sums_differ &&
			  !r->written;
		part[i] = !may ? 0 : r->offset % FT_DISC_ALIGN ? 2 :
				  all && (r->touched & all) != all ? 1 : 0;
	}
	/* An allocation of two regions, a small one at its start and a
	 * weight-sized one to its end, both stable and read only, holds one
	 * tensor: a read some bytes into it starts a region there (on the
	 * H200 an elementwise kernel read 512 bytes into the start-up
	 * harness's embedding, an allocation of its own, in every pass), and
	 * the bytes before it, left out of the weight, are those its base
	 * pointer names (the embedding's gather), so the gather loaded
	 * nothing and read another trap's bytes.  Only there: in a segment of
	 * the caching allocator a small tensor before a weight is another
	 * tensor (a layer's norm weight), which the H200 recordings show. */
	for (uint32_t i = 1; part && i < d->n; i++) {
		const struct ft_disc_region *a = &d->r[i - 1], *r = &d->r[i];
		if (part[i] || part[i - 1] || a->alloc_id != r->alloc_id || a->offset ||
		    r->offset >= FT_WEIGHT_MIN_BYTES || a->written || a->sums_differ ||
		    r->written || r->sums_differ)
			continue;
		uint32_t j = i + 1; /* the next region that is no part of r */
		while (j < d->n && d->r[j].alloc_id == r->alloc_id && part[j])
			j++;
		if ((j == d->n || d->r[j].alloc_id != r->alloc_id) &&
		    r->alloc_size - r->offset >= FT_WEIGHT_MIN_BYTES)
			part[i] = 2;
	}
	/* One aligned part alone is no sign of views the data chooses: a
	 * buffer the allocator placed in a weight's free tail, read in some
	 * passes, looks the same, and offloaded with the weight its writes
	 * would be lost.  Two or more are (a token's rows, routed experts),
	 * read in two passes or more between them (the data chooses other
	 * views in other passes), or at starts a stride of FT_DISC_SLICE_MIN
	 * or more apart (experts: a prefill routes to all of them in one
	 * pass, decode steps to the same few after it).  Views all read in
	 * one pass at no such stride are that pass's buffers (on an H100 a
	 * Mixtral's warm-up left a GEMM's output and a reduction's in a
	 * weight's free tail, 512-aligned, read there once and stable after;
	 * taken for two views, they made a prefill's hidden states, placed
	 * there later, load the weight's trap, be written into its block and
	 * lost: FT_VERIFY said "offloaded trap 2 changed in its block").
	 * Buffers of two passes still pass (not seen yet). */
	uint64_t *seen = part ? calloc(2 * ((size_t)d->n + 1), sizeof(*seen)) : NULL;
	uint64_t *step = seen ? seen + d->n + 1 : NULL;
	for (int round = 0, changed = 1; part && seen && changed && round < 8; round++) {
		changed = 0;
		set_owners(d, part);
		memset(nparts, 0, d->n * sizeof(*nparts));
		memset(seen, 0, 2 * ((size_t)d->n + 1) * sizeof(*seen));
		for (uint32_t i = 0; i < d->n; i++)
			if (part[i] == 1) {
				uint32_t o = d->r[i].owner;
				nparts[o]++;
				seen[o] |= d->r[i].touched & all;
				step[o] = ft_gcd64(step[o], d->r[i].offset - d->r[o].offset);
			}
		for (uint32_t i = 0; i < d->n; i++) {
			uint32_t o = d->r[i].owner;
			if (part[i] == 1 &&
			    (nparts[o] < 2 || (__builtin_popcountll(seen[o]) < 2 &&
					       step[o] < FT_DISC_SLICE_MIN))) {
				part[i] = 0;
				changed = 1;
			}
		}
	}
	if (part && !seen) /* out of memory: no views */
		for (uint32_t i = 0; i < d->n; i++)
			part[i] = part[i] == 1 ? 0 : part[i];
	free(seen);
	experts_read_every_pass(d, part);
	declared_parts(d, part);
	set_owners(d, part);
	free(part);
	free(nparts);
	for (uint32_t i = 0; i < d->n; i++) {
		d->r[i].mtouched = d->r[i].touched;
		d->r[i].views = 0;
	}
	/* merged: touched if any of them was (none written: a written
	 * region is no part); the first-touch position in the last completed
	 * pass of whichever was read first */
	for (uint32_t i = 0; i < d->n; i++) {
		struct ft_disc_region *r = &d->r[i];
		int last = d->passes_done && r->done_pass == d->passes_done;
		r->morder = last ? r->order_done : UINT32_MAX;
		r->mreach = last ? r->reach_done : 0;
		/* the pass before: the last it was read in, or the one before */
		int done = d->passes_done > 1 && r->done_pass == d->passes_done - 1;
		int prev = last && d->passes_done > 1 && r->prev_pass == d->passes_done - 1;
		r->morder2 = done ? r->order_done : prev ? r->order_prev : UINT32_MAX;
		r->mreach2 = done ? r->reach_done : prev ? r->reach_prev : 0;
	}
	for (uint32_t i = 0; i < d->n; i++) {
		struct ft_disc_region *r = &d->r[i], *o = &d->r[r->owner];
		if (r->owner == i)
			continue;
		o->mtouched |= r->touched;
		o->written |= r->written; /* a copy into a part wrote the tensor */
		if (r->morder < o->morder)
			o->morder = r->morder;
		if (r->mreach > o->mreach)
			o->mreach = r->mreach;
		if (r->morder2 < o->morder2)
			o->morder2 = r->morder2;
		if (r->mreach2 > o->mreach2)
			o->mreach2 = r->mreach2;
	}
	for (uint32_t i = 0; i < d->n; i++)
		if (d->r[i].morder == UINT32_MAX)
			d->r[i].morder = d->r[i].order_done;
	for (uint32_t i = 0; i < d->n; i++) {
		struct ft_disc_region *r = &d->r[i];
		uint32_t j = i + 1;
		if (r->owner == i)
			while (j < d->n && d->r[j].alloc_id == r->alloc_id && d->r[j].owner != j)
				j++;
		uint64_t end = j < d->n && d->r[j].alloc_id == r->alloc_id ? d->r[j].offset
									 : r->alloc_size;
		/* a declared tensor's bytes end where it says */
		int k = d->ndecl ? ft_disc_declared(d, r->alloc_base + r->offset) : -1;
		if (k >= 0 && d->decl[k].hi - r->alloc_base < end)
			end = d->decl[k].hi - r->alloc_base;
		r->extent = end > r->offset ? end - r->offset : 0;
		if (r->owner == i && j > i + 1)
			r->views = ft_disc_views_in(d, i, r->extent);
	}
}

void ft_disc_pass_end(struct ft_discover *d)
{
	for (uint32_t i = 0; i < d->n; i++)
		if (d->r[i].last_pass == d->pass) {
			d->r[i].order_prev = d->r[i].order_done;
			d->r[i].reach_prev = d->r[i].reach_done;
			d->r[i].prev_pass = d->r[i].done_pass;
			d->r[i].order_done = d->r[i].order;
			d->r[i].reach_done = d->r[i].reach;
			d->r[i].done_pass = d->pass + 1;
		}
	d->nundo = 0;
	d->passes_done++;
	d->pass++;
	d->order_next = 0;
}

void ft_disc_sum(struct ft_discover *d, uint32_t i, uint64_t sum)
{
	struct ft_disc_region *r = &d->r[i];
	if (r->nsums && r->sum_extent != r->extent)
		r->nsums = r->sums_differ = 0;
	r->sum_extent = r->extent;
	if (!r->nsums)
		r->sum = sum;
	else if (r->sum != sum)
		r->sums_differ = 1;
	if (r->nsums < 255)
		r->nsums++;
}

enum ft_disc_reason ft_disc_classify(const struct ft_discover *d, uint32_t i)
{
	const struct ft_disc_region *r = &d->r[i];
	uint64_t all = all_passes(d);
	int k = d->ndecl ? ft_disc_declared(d, r->alloc_base + r->offset) : -1;
	if (d->ndecl && k < 0)
		return FT_DISC_UNDECLARED;
	if (k < 0 && r->alloc_id >= d->cutoff_id)
		return FT_DISC_TOO_NEW;
	if (r->owner != i)
		return FT_DISC_PART;
	if (k >= 0 && d->decl[k].buffer)
		return FT_DISC_BUFFER;
	if (!all || (r->mtouched & all) != all)
		return FT_DISC_NOT_EVERY;
	if (r->written)
		return FT_DISC_WRITTEN;
	if (r->sums_differ)
		return FT_DISC_CHANGED;
	if (r->nsums < 2 && !d->content_known && k < 0)
		return FT_DISC_UNCHECKED;
	if (r->extent < FT_WEIGHT_MIN_BYTES)
		return FT_DISC_SMALL;
	return FT_DISC_WEIGHT;
}

const char *ft_disc_reason_name(enum ft_disc_reason r)
{
	static const char *const names[] = {
		"weight", "allocated during passes", "not read every pass",
		"written by copies", "content changed", "not checked twice", "small",
		"part of a region before it", "not declared", "a declared buffer",
	};
	return (unsigned)r < FT_DISC_REASONS ? names[r] : "?";
}

static const struct ft_discover *sort_d;
static int by_order(const void *a, const void *b)
{
	const struct ft_disc_region *x = &sort_d->r[*(const uint32_t *)a];
	const struct ft_disc_region *y = &sort_d->r[*(const uint32_t *)b];
	return x->morder < y->morder ? -1 : x->morder > y->morder;
}

uint32_t ft_disc_weights(const struct ft_discover *d, uint32_t **idx)
{
	uint32_t *v = malloc((d->n + 1) * sizeof(*v)), k = 0;
	if (!v) {
		*idx = NULL;
		return 0;
	}
	for (uint32_t i = 0; i < d->n; i++)
		if (ft_disc_classify(d, i) == FT_DISC_WEIGHT)
			v[k++] = i;
	sort_d = d;
	qsort(v, k, sizeof(*v), by_order);
	*idx = v;
	return k;
}
