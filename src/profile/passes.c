/* Pass detection (include/ft/passes.h). */
#include "ft/passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EARLY_PERMILLE 100  /* anchors: first touched in the first tenth of the pass */
#define CONFIRM 8
#define SLACK 4
#define RELEARN_MIN 256
#define LOG_MAX 4096        /* a candidate open longer than this is dropped */

struct ft_pass_slot {
	struct ft_region_ref key;
	uint32_t generation;    /* 0 = empty */
	uint32_t count;         /* touches in the current pass */
	uint32_t pos;           /* order of first touch in the current pass */
	uint64_t first;         /* launch (within the pass) of the first touch */
};

struct ft_pass_log {
	uint32_t n, cap;        /* launches */
	uint32_t nref, refcap;
	uint64_t *index;        /* launch index of each logged launch */
	uint32_t *end;          /* end of each launch's refs in ref[] */
	struct ft_region_ref *ref;
};

int ft_passes_init(struct ft_passes *p)
{
	memset(p, 0, sizeof(*p));
	p->generation = 1;
	p->slots_cap = 1024;
	p->slots = calloc(p->slots_cap, sizeof(*p->slots));
	p->log = calloc(1, sizeof(*p->log));
	return p->slots && p->log ? 0 : -ENOMEM;
}

void ft_passes_destroy(struct ft_passes *p)
{
	if (p->log) {
		free(p->log->index);
		free(p->log->end);
		free(p->log->ref);
		free(p->log);
	}
	free(p->slots);
	memset(p, 0, sizeof(*p));
}

static uint32_t hash(struct ft_region_ref k)
{
	uint64_t x = k.alloc_id * 0x9e3779b97f4a7c15ULL ^ (k.offset + 0x632be59bd9b4e019ULL);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (uint32_t)(x ^ (x >> 29));
}

static int same(struct ft_region_ref a, struct ft_region_ref b)
{
	return a.alloc_id == b.alloc_id && a.offset == b.offset;
}

/* The slot of k, fresh (count 0) when it is not of the current pass; NULL
 * when out of memory. */
static struct ft_pass_slot *slot(struct ft_passes *p, struct ft_region_ref k)
{
	if (p->slots_used * 2 >= p->slots_cap) {
		/* Grow, keeping only the current pass's regions. */
		uint32_t cap = p->slots_cap * 2;
		struct ft_pass_slot *s = calloc(cap, sizeof(*s));
		if (!s)
			return NULL;
		uint32_t used = 0;
		for (uint32_t i = 0; i < p->slots_cap; i++) {
			struct ft_pass_slot *o = &p->slots[i];
			if (o->generation != p->generation)
				continue;
			uint32_t j = hash(o->key) & (cap - 1);
			while (s[j].generation)
				j = (j + 1) & (cap - 1);
			s[j] = *o;
			used++;
		}
		free(p->slots);
		p->slots = s;
		p->slots_cap = cap;
		p->slots_used = used;
	}
	uint32_t j = hash(k) & (p->slots_cap - 1);
	for (;;) {
		struct ft_pass_slot *s = &p->slots[j];
		if (s->generation != p->generation) {
			/* empty, or stale (another pass): free */
			p->slots_used++;
			*s = (struct ft_pass_slot){ .key = k, .generation = p->generation };
			return s;
		}
		if (same(s->key, k))
			return s;
		j = (j + 1) & (p->slots_cap - 1);
	}
}

static void new_pass(struct ft_passes *p, uint64_t start)
{
	p->start = start;
	p->n = 0;
	p->norder = 0;
	p->pending = 0;
	p->log->n = p->log->nref = 0;
	/* A new generation makes every slot stale at once. */
	if (++p->generation == 0) {
		memset(p->slots, 0, p->slots_cap * sizeof(*p->slots));
		p->generation = 1;
	}
	p->slots_used = 0;
}

static int log_launch(struct ft_pass_log *l, uint64_t index, const struct ft_region_ref *r,
		      unsigned n)
{
	if (l->n == LOG_MAX)
		return -1;
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 256;
		uint64_t *ix = realloc(l->index, cap * sizeof(*ix));
		if (!ix)
			return -1;
		l->index = ix;
		uint32_t *e = realloc(l->end, cap * sizeof(*e));
		if (!e)
			return -1;
		l->end = e;
		l->cap = cap;
	}
	if (l->nref + n > l->refcap) {
		uint32_t cap = (l->nref + n) * 2;
		struct ft_region_ref *rr = realloc(l->ref, cap * sizeof(*rr));
		if (!rr)
			return -1;
		l->ref = rr;
		l->refcap = cap;
	}
	memcpy(l->ref + l->nref, r, n * sizeof(*r));
	l->nref += n;
	l->index[l->n] = index;
	l->end[l->n++] = l->nref;
	return 0;
}

/* One launch into the current pass; replay: no candidate logic. */
static void touch(struct ft_passes *p, const struct ft_region_ref *r, unsigned n, uint64_t index,
		  int replay)
{
	uint64_t at = p->n++;
	if (p->pending && !replay && log_launch(p->log, index, r, n))
		p->pending = 0;
	for (unsigned i = 0; i < n; i++) {
		struct ft_pass_slot *s = slot(p, r[i]);
		if (!s)
			return;
		uint32_t c = s->count;
		if (c == 0) {
			s->count = 1;
			s->pos = p->norder++;
			s->first = at;
			if (p->pending && !replay)
				p->unknown++;
			continue;
		}
		s->count = c + 1;
		if (replay)
			continue;
		int early = c == 1 && s->first * 1000 <= (uint64_t)EARLY_PERMILLE * p->n;
		int again = p->pending && same(r[i], p->anchor);
		if ((early || again) && (!p->pending || s->pos <= p->anchor_pos)) {
			p->pending = 1;
			p->cand = index;
			p->anchor = r[i];
			p->anchor_pos = s->pos;
			p->matched = p->unknown = 0;
			p->log->n = p->log->nref = 0;
			if (log_launch(p->log, index, r, n))
				p->pending = 0;
			continue;
		}
		if (p->pending && c == 1 && s->pos > p->anchor_pos)
			p->matched++;
	}
}

enum ft_pass_source ft_passes_launch(struct ft_passes *p, uint64_t index,
				     const struct ft_region_ref *r, unsigned n, uint64_t *start)
{
	p->launches++;
	if (p->marked)
		return FT_PASS_NONE;
	uint64_t limit = p->prev_len * 3 > RELEARN_MIN ? p->prev_len * 3 : RELEARN_MIN;
	if (p->n > limit)
		new_pass(p, index); /* nothing repeated for too long: learn afresh */
	touch(p, r, n, index, 0);
	if (!p->pending)
		return FT_PASS_NONE;
	if (p->unknown > p->matched + SLACK) {
		p->pending = 0;
		return FT_PASS_NONE;
	}
	if (p->matched < CONFIRM)
		return FT_PASS_NONE;

	/* Confirmed: the new pass began at the candidate. */
	struct ft_pass_log *l = p->log;
	uint64_t cand = p->cand;
	p->prev_len = p->n - l->n;
	p->passes++;
	/* Take the log out so that new_pass does not clear it. */
	uint32_t nl = l->n;
	new_pass(p, cand);
	p->moved = nl;
	uint32_t from = 0;
	for (uint32_t i = 0; i < nl; i++) {
		touch(p, l->ref + from, l->end[i] - from, l->index[i], 1);
		from = l->end[i];
	}
	if (start)
		*start = cand;
	return FT_PASS_EAGER;
}

unsigned ft_passes_moved(const struct ft_passes *p, const struct ft_region_ref **refs,
			 const uint32_t **ends)
{
	*refs = p->log->ref;
	*ends = p->log->end;
	return p->moved;
}

enum ft_pass_source ft_passes_graph(struct ft_passes *p, int reads_memory)
{
	if (p->marked || !reads_memory)
		return FT_PASS_NONE;
	p->passes++;
	return FT_PASS_GRAPH;
}

enum ft_pass_source ft_passes_mark(struct ft_passes *p)
{
	if (!p->marked) {
		/* From now on only marks count: forget what the heuristics learnt. */
		p->marked = 1;
		new_pass(p, p->launches);
	}
	p->passes++;
	return FT_PASS_MARK;
}
