/* Pass detection (include/ft/passes.h). */
#include "ft/passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIN_PASS 8        /* launches: no shorter pass is looked for */
#define CONFIRM 16        /* matching regions that confirm a candidate */
#define MAX_CAND 16       /* candidates weighed at once */
#define LOG_MAX 4096      /* launches kept for handing over; older candidates are dropped */
#define LOG_REFS (LOG_MAX * 8)
#define NONE UINT64_MAX
#define FT_PASS_MAX_REFS 64 /* references per launch considered */

struct ft_pass_region {
	struct ft_region_ref key;
	uint64_t last;          /* launch of the latest touch; 0 = empty slot (stored + 1) */
	uint64_t ret;           /* launches between its two latest touches; 0 = none */
};

struct ft_pass_cand {
	uint64_t c;             /* the candidate launch */
	uint64_t a;             /* start of the hypothetical previous pass */
	struct ft_region_ref anchor;
	uint32_t matched, against;
};

struct ft_pass_log {
	uint64_t index[LOG_MAX];
	uint64_t from[LOG_MAX]; /* absolute position of its first ref in ref[] */
	uint32_t n[LOG_MAX];
	uint64_t launches;      /* logged so far */
	uint64_t refs;          /* refs logged so far */
	struct ft_region_ref ref[LOG_REFS];
};

int ft_passes_init(struct ft_passes *p)
{
	memset(p, 0, sizeof(*p));
	p->cap = 1024;
	p->regions = calloc(p->cap, sizeof(*p->regions));
	p->cand = calloc(MAX_CAND, sizeof(*p->cand));
	p->log = calloc(1, sizeof(*p->log));
	p->moved_ref = malloc(LOG_REFS * sizeof(*p->moved_ref));
	p->moved_end = malloc(LOG_MAX * sizeof(*p->moved_end));
	if (p->regions && p->cand && p->log && p->moved_ref && p->moved_end)
		return 0;
	ft_passes_destroy(p);
	return -ENOMEM;
}

void ft_passes_destroy(struct ft_passes *p)
{
	free(p->regions);
	free(p->cand);
	free(p->log);
	free(p->moved_ref);
	free(p->moved_end);
	memset(p, 0, sizeof(*p));
}

static uint32_t hash(struct ft_region_ref k)
{
	uint64_t x = k.alloc_id * 0x9e3779b97f4a7c15ULL ^ (k.offset + 0x632be59bd9b4e019ULL);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (uint32_t)(x ^ (x >> 29));
}

static struct ft_pass_region *find(struct ft_pass_region *t, uint32_t cap, struct ft_region_ref k)
{
	uint32_t j = hash(k) & (cap - 1);
	while (t[j].last && (t[j].key.alloc_id != k.alloc_id || t[j].key.offset != k.offset))
		j = (j + 1) & (cap - 1);
	return &t[j];
}

/* The entry of k (last == 0: never touched); NULL when out of memory. */
static struct ft_pass_region *region(struct ft_passes *p, struct ft_region_ref k)
{
	if (p->used * 2 >= p->cap) {
		uint32_t cap = p->cap * 2;
		struct ft_pass_region *t = calloc(cap, sizeof(*t));
		if (!t)
			return NULL;
		for (uint32_t i = 0; i < p->cap; i++)
			if (p->regions[i].last)
				*find(t, cap, p->regions[i].key) = p->regions[i];
		free(p->regions);
		p->regions = t;
		p->cap = cap;
	}
	struct ft_pass_region *e = find(p->regions, p->cap, k);
	if (!e->last) {
		e->key = k;
		e->ret = 0;
	}
	return e;
}

static void log_launch(struct ft_pass_log *l, uint64_t index, const struct ft_region_ref *r,
		       unsigned n)
{
	uint32_t s = (uint32_t)(l->launches++ % LOG_MAX);
	l->index[s] = index;
	l->from[s] = l->refs;
	l->n[s] = n;
	for (unsigned i = 0; i < n; i++)
		l->ref[(l->refs + i) % LOG_REFS] = r[i];
	l->refs += n;
}

/* Copies the logged launches from index c on into moved_ref/moved_end. */
static void hand_over(struct ft_passes *p, uint64_t c)
{
	struct ft_pass_log *l = p->log;
	uint64_t first = l->launches > LOG_MAX ? l->launches - LOG_MAX : 0;
	uint64_t k = l->launches;
	while (k > first && l->index[(k - 1) % LOG_MAX] >= c)
		k--;
	uint32_t nref = 0;
	p->moved = 0;
	for (; k < l->launches; k++) {
		uint32_t s = (uint32_t)(k % LOG_MAX);
		if (l->refs - l->from[s] > LOG_REFS)
			continue; /* its refs were overwritten: handed over empty */
		for (uint32_t i = 0; i < l->n[s] && nref < LOG_REFS; i++)
			p->moved_ref[nref++] = l->ref[(l->from[s] + i) % LOG_REFS];
		p->moved_end[p->moved++] = nref;
	}
}

/* a and b within an eighth of b */
static int near(uint64_t a, uint64_t b)
{
	return (a > b ? a - b : b - a) * 8 <= b;
}

/* Touched again after as many launches as the time before: read once a
 * pass, like a weight (within an eighth). */
static int periodic(const struct ft_pass_region *e, uint64_t i)
{
	return e->ret && near(i - (e->last - 1), e->ret);
}

/* One region touched by launch i: votes on the candidates, then is
 * remembered.  Returns the previous touch (NONE if never). */
static uint64_t touch(struct ft_passes *p, struct ft_pass_region *e, uint64_t i)
{
	if (!e->last)
		return NONE;
	uint64_t last = e->last - 1;
	if (last == i)
		return NONE; /* twice in one launch */
	for (uint32_t k = 0; k < p->ncand; k++) {
		struct ft_pass_cand *c = &p->cand[k];
		if (last >= c->c)
			continue; /* reused within the new pass */
		if (last >= c->a) {
			/* evidence only from a region that comes back after
			 * at least half the candidate's length (a buffer
			 * reused every layer would back a boundary anywhere) */
			if ((i - last) * 2 >= c->c - c->a)
				c->matched++;
		}
		else if (periodic(e, i) && e->ret * 2 >= c->c - c->a)
			c->against++;
	}
	return last;
}

/* The hypothesis a region touched again by launch i offers: the previous
 * pass began at its last touch (NONE: none).  The distance is of pass scale
 * and the region is not one reused at short distance; once passes are
 * known, the candidate also keeps in step with them: the last touch was in
 * the first tenth of the current pass. */
static uint64_t offer(const struct ft_passes *p, uint64_t last1, uint64_t ret, uint64_t i,
		      uint64_t minp, uint64_t maxp)
{
	if (!last1 || last1 - 1 == i)
		return NONE;
	uint64_t last = last1 - 1, d = i - last;
	if (d < minp || d > maxp)
		return NONE;
	/* reused at short distance: no anchor, unless read exactly twice a
	 * pass (a tied embedding: lookup, then head) */
	if (ret && ret < minp && !(p->prev_len && near(ret + d, p->prev_len)))
		return NONE;
	if (p->prev_len && (last < p->start || (last - p->start) * 10 > i - p->start))
		return NONE;
	return last;
}

/* Where candidate x places the boundary: at x, or at the anchor's next
 * touch if that came just after (a tied embedding: the head reads it at
 * the end of the pass, the lookup at the start). */
static uint64_t placed(const struct ft_passes *p, const struct ft_pass_cand *x)
{
	const struct ft_pass_region *e = find(p->regions, p->cap, x->anchor);
	uint64_t len = p->prev_len > x->c - x->a ? p->prev_len : x->c - x->a;
	if (e->last && e->last - 1 > x->c && (e->last - 1 - x->c) * 5 <= len)
		return e->last - 1;
	return x->c;
}

/* A candidate has been confirmed: the boundary goes to the earliest
 * standing one with enough support; returns where. */
static uint64_t confirm(struct ft_passes *p)
{
	/* The earliest standing candidate with enough support. */
	struct ft_pass_cand *b = NULL;
	for (uint32_t k = 0; k < p->ncand; k++) {
		struct ft_pass_cand *x = &p->cand[k];
		if (x->matched >= CONFIRM / 4 && (!b || placed(p, x) < placed(p, b)))
			b = x;
	}
	uint64_t c = placed(p, b);
	p->prev_len2 = p->prev_len;
	p->prev_len = p->passes ? c - p->start : c - b->a;
	p->start = c;
	p->passes++;
	/* candidates for the next boundary may already stand (proposed at
	 * this very launch, a pass after c): those in step with the new pass
	 * and of its scale (one proposed before, while nothing was known,
	 * may be a layer long) */
	uint32_t keep = 0;
	for (uint32_t k = 0; k < p->ncand; k++)
		if (p->cand[k].c > c && p->cand[k].a >= c &&
		    (p->cand[k].c - p->cand[k].a) * 2 >= p->prev_len)
			p->cand[keep++] = p->cand[k];
	p->ncand = keep;
	hand_over(p, c);
	return c;
}

/* The launch's proposal, if any: the region whose previous touch (before
 * this launch) offers the earliest hypothetical previous pass. */
static void propose(struct ft_passes *p, uint64_t i, const struct ft_region_ref *r, unsigned n,
		    const uint64_t *last1, const uint64_t *ret)
{
	/* a quarter of the longer of the last two passes: prefills and decode
	 * steps alternate, and a short pass must not let a buffer reused every
	 * few layers of a long one back a boundary */
	uint64_t longer = p->prev_len > p->prev_len2 ? p->prev_len : p->prev_len2;
	uint64_t minp = longer / 4 > MIN_PASS ? longer / 4 : MIN_PASS;
	uint64_t maxp = p->prev_len ? 4 * p->prev_len + 64 : NONE;
	uint64_t best_a = NONE;
	struct ft_region_ref anchor = { 0 };
	for (unsigned j = 0; j < n; j++) {
		uint64_t a = offer(p, last1[j], ret[j], i, minp, maxp);
		if (a != NONE && (best_a == NONE || a < best_a)) {
			best_a = a;
			anchor = r[j];
		}
	}
	if (best_a != NONE && p->ncand < MAX_CAND && (!p->passes || i - p->start >= MIN_PASS))
		p->cand[p->ncand++] = (struct ft_pass_cand){ .c = i, .a = best_a, .anchor = anchor };
}

enum ft_pass_source ft_passes_launch(struct ft_passes *p, uint64_t i,
				     const struct ft_region_ref *r, unsigned n, uint64_t *start)
{
	p->launches++;
	if (p->marked)
		return FT_PASS_NONE;
	if (p->prev_len && i - p->start > 4 * p->prev_len + 256)
		p->prev_len = p->prev_len2 = 0; /* nothing confirmed for too long: learn afresh */
	log_launch(p->log, i, r, n);

	/* each region's state before this launch, for the proposal below */
	uint64_t last1[FT_PASS_MAX_REFS], ret[FT_PASS_MAX_REFS];
	if (n > FT_PASS_MAX_REFS)
		n = FT_PASS_MAX_REFS;
	for (unsigned j = 0; j < n; j++) {
		struct ft_pass_region *e = region(p, r[j]);
		if (!e)
			return FT_PASS_NONE;
		last1[j] = e->last;
		ret[j] = e->ret;
		uint64_t last = touch(p, e, i);
		if (!e->last)
			p->used++;
		if (last != NONE)
			e->ret = i - last;
		e->last = i + 1;
	}

	/* Drop the refuted and the too old; confirm the earliest standing
	 * candidate once one has enough matches. */
	int confirmed = 0;
	uint32_t kept = 0;
	for (uint32_t k = 0; k < p->ncand; k++) {
		struct ft_pass_cand *c = &p->cand[k];
		if (c->against > 2 + c->matched / 8 || i - c->c >= LOG_MAX - 1)
			continue;
		/* enough matches, or a whole hypothetical pass survived (a
		 * small model reads fewer than CONFIRM regions a pass) */
		confirmed |= c->matched >= CONFIRM ||
			     (c->matched >= CONFIRM / 4 && i - c->c >= c->c - c->a);
		p->cand[kept++] = *c;
	}
	p->ncand = kept;
	uint64_t c = NONE;
	if (confirmed)
		c = confirm(p);
	propose(p, i, r, n, last1, ret);
	if (c == NONE)
		return FT_PASS_NONE;
	if (start)
		*start = c;
	return FT_PASS_EAGER;
}



unsigned ft_passes_moved(const struct ft_passes *p, const struct ft_region_ref **refs,
			 const uint32_t **ends)
{
	*refs = p->moved_ref;
	*ends = p->moved_end;
	return p->moved;
}

enum ft_pass_source ft_passes_graph(struct ft_passes *p, int reads_memory)
{
	if (p->marked || !reads_memory)
		return FT_PASS_NONE;
	p->passes++;
	return FT_PASS_GRAPH;
}

void ft_passes_mark_from_now(struct ft_passes *p)
{
	if (!p->marked) {
		/* From now on only marks count: forget what the heuristics learnt. */
		p->marked = 1;
		p->ncand = 0;
		p->start = p->launches;
	}
}

enum ft_pass_source ft_passes_mark(struct ft_passes *p)
{
	ft_passes_mark_from_now(p);
	p->passes++;
	return FT_PASS_MARK;
}
