/* Trap grouping by the repeating weight-size period (include/ft/traps.h). */
#include "ft/traps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/search.h"

/* Sizes measured from the allocator's layout carry padding (a region runs to
 * the next tensor some launch pointed at): equal within an eighth or 1 MiB. */
static int same_size(uint64_t a, uint64_t b)
{
	uint64_t d = a > b ? a - b : b - a, m = a > b ? a : b;
	return d * 8 <= m || d <= (1u << 20);
}

/* Sizes that may be one tensor's, padded differently: the larger at most
 * twice the smaller plus the caching allocator's 20 MiB large-segment
 * rounding (a weight whose segment tail later held another tensor, or
 * runs to its segment's end). */
static int padded_same(uint64_t a, uint64_t b)
{
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	return hi <= 2 * lo + (20u << 20);
}

/* Whether the p sizes at x are a layer like the p at ref: every one
 * padded_same, and at least half (p = 1: none need) strictly the same. */
static int like_layer(const uint64_t *x, const uint64_t *ref, uint32_t p)
{
	uint32_t strict = 0;
	for (uint32_t j = 0; j < p; j++) {
		if (!padded_same(x[j], ref[j]))
			return 0;
		strict += same_size(x[j], ref[j]);
	}
	return strict * 2 + 1 >= p;
}

/* The longest run of i with s[i] like s[i + p] (the same size; tolerant:
 * padded_same), which covers [*at, *at + length + p): its length, and in
 * *strict how many of its comparisons were the same size. */
static uint32_t longest_run(const uint64_t *s, uint32_t n, uint32_t p, int tolerant,
			    uint32_t *at, uint32_t *strict)
{
	uint32_t best_len = 0, a = 0, len = 0, same = 0;
	*at = *strict = 0;
	for (uint32_t i = 0; i + p < n; i++) {
		int eq = same_size(s[i], s[i + p]);
		if (eq || (tolerant && padded_same(s[i], s[i + p]))) {
			if (!len)
				a = i, same = 0;
			same += eq;
			if (++len > best_len) {
				best_len = len;
				*at = a;
				*strict = same;
			}
		} else {
			len = 0;
		}
	}
	return best_len;
}

/* Whether a run of len comparisons at period p covers enough weights to be
 * the layer pattern: three periods and half the weights. */
static int enough(uint32_t len, uint32_t p, uint32_t n)
{
	uint32_t covered = len + p;
	return len && covered / p >= 3 && covered * 2 >= n;
}

/* Whether the p sizes at x differ from a layer's (ref) only by padding:
 * every one padded_same and at least about ref's (padding only adds). */
static int padded_layer(const uint64_t *x, const uint64_t *ref, uint32_t p)
{
	for (uint32_t j = 0; j < p; j++)
		if (!padded_same(x[j], ref[j]) || x[j] * 8 < ref[j] * 7)
			return 0;
	return 1;
}

/* The layers of p weights from *c on, each like the one before, and those
 * before *c that are like the one after them, like the first, or only
 * padded differently from the first: their number; *c moves to the first.
 * 0 where *c continues a chain from *c - p (counted from there). */
static uint32_t chain(const uint64_t *s, uint32_t n, uint32_t p, uint32_t *c)
{
	uint32_t a = *c, k = 1;
	if (a >= p && like_layer(s + a - p, s + a, p))
		return 0;
	while (a + (k + 1) * p <= n && like_layer(s + a + k * p, s + a + (k - 1) * p, p))
		k++;
	const uint64_t *ref = s + a;
	while (a >= p && (like_layer(s + a - p, s + a, p) || like_layer(s + a - p, ref, p) ||
			  padded_layer(s + a - p, ref, p)))
		a -= p, k++;
	*c = a;
	return k;
}

uint32_t ft_traps_period(const uint64_t *s, uint32_t n, uint32_t *start, uint32_t *layers)
{
	for (uint32_t per = 1; per <= n / 3; per++) {
		/* Longest run of i with s[i] == s[i + per]: it covers
		 * [a, b + per).  p is the layer's period: per, or a divisor
		 * (per itself stays the loop's: a rejected divisor must not
		 * send the search back to it). */
		uint32_t best_a = 0, strict = 0, p = per;
		uint32_t best_len = longest_run(s, n, p, 0, &best_a, &strict);
		if (enough(best_len, p, n)) {
			/* A divisor of p may be the layer: tensors of 1-10 MB
			 * share the caching allocator's 20 MiB segments, and
			 * the last in each runs to the segment's end, so a
			 * layer's k_proj or v_proj measures 6 MiB instead of
			 * 3.5 every few layers (Qwen2-7B on the H200: a period
			 * of five layers).  The smallest divisor whose sizes
			 * repeat allowing for such padding, the same size in
			 * at least three comparisons of four, is taken. */
			for (uint32_t q = 1; q < p; q++) {
				uint32_t at, same, len;
				if (p % q || !enough(len = longest_run(s, n, q, 1, &at, &same), q, n) ||
				    same * 4 < len * 3)
					continue;
				p = q, best_a = at, best_len = len;
				break;
			}
			/* The run tells the period, not where the layers are:
			 * padding varies from layer to layer (weights of the
			 * first layers placed in larger free blocks, a k_proj
			 * at a segment's end), so the longest chain of layers
			 * each like the one before is searched from every
			 * start, nearest the run's first. */
			uint32_t most = 0, first = 0;
			for (uint32_t i = 0; i + p <= n; i++) {
				uint32_t c = i <= best_a ? best_a - i : i;
				if (c + p > n)
					continue;
				uint32_t b = c, k = chain(s, n, p, &b);
				if (k > most) {
					most = k;
					first = b;
				}
			}
			/* Layers that cover less than half the weights are not
			 * the model's pattern: a longer period may be. */
			if ((uint64_t)most * p * 2 < n)
				continue;
			*start = first;
			*layers = most;
			best_a = *start;
			/* The last layer before the head may end its allocator
			 * segment, so its last weight runs to the segment's end:
			 * padding only adds.  One more layer when the next p
			 * weights are each at least about the previous layer's and
			 * something (the head) still follows. */
			uint32_t end = best_a + *layers * p;
			while (end + p < n) {
				uint32_t j = 0;
				while (j < p && s[end + j] * 8 >= s[end + j - p] * 7)
					j++;
				if (j < p && !like_layer(s + end, s + end - p, p))
					break;
				++*layers;
				end += p;
			}
			return p;
		}
	}
	return 0;
}

static void fill(struct ft_trap *t, unsigned index, const char *role, const uint64_t *s,
		 uint32_t first, uint32_t count)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->label, sizeof(t->label), "trap.%u", index);
	snprintf(t->role, sizeof(t->role), "%s", role);
	t->first_weight = first;
	t->nweights = count;
	for (uint32_t i = 0; i < count; i++)
		t->bytes += s[first + i];
}

/* Full index of the m-th of nm major weights (at[]; NULL: every weight is
 * major), n from the last on. */
static uint32_t full(const uint32_t *at, uint32_t nm, uint32_t m, uint32_t n)
{
	if (m >= nm)
		return n;
	return at && m ? at[m] : m;
}

/* A layout of the major weights found at rotation r (the sequence read
 * from index r on, cyclically): period p, layers from start (rotated). */
struct layout {
	uint32_t r, p, start, layers;
};

/* The layout of ms rotated by r (tmp: nm entries of scratch); p 0 when
 * there is no period. */
static struct layout at_rotation(const uint64_t *ms, uint32_t nm, uint32_t r, uint64_t *tmp)
{
	struct layout l = { .r = r };
	const uint64_t *x = ms;
	if (r) {
		for (uint32_t i = 0; i < nm; i++)
			tmp[i] = ms[(i + r) % nm];
		x = tmp;
	}
	l.p = ft_traps_period(x, nm, &l.start, &l.layers);
	return l;
}

/* A discovery pass begins where pass detection put the boundary, which in
 * a program that runs other work between forwards (a serving engine's
 * prefills, decode replays, sampling) may be in the middle of the forward:
 * the pass reads the last layers, the head, the embedding, then the first
 * layers (the H200's start-up harness: a rotation by 29 of 113 weights).
 * The weights of a pass are a cycle, so the layout is also sought at the
 * rotations that begin where the layers found begin and around the largest
 * weight (the embedding or head, in most models), and the one whose layers
 * cover the most weights is kept (the sequence as read on a tie). */
static struct layout best_layout(const uint64_t *ms, uint32_t nm)
{
	struct layout best = at_rotation(ms, nm, 0, NULL);
	uint64_t *tmp = nm > 1 ? malloc(nm * sizeof(*tmp)) : NULL;
	if (!tmp)
		return best;
	uint32_t big = 0;
	for (uint32_t i = 1; i < nm; i++)
		if (ms[i] > ms[big])
			big = i;
	uint32_t cand[3] = { best.p ? best.start : 0, big, (big + 1) % nm };
	for (int c = 0; c < 3; c++) {
		if (!cand[c])
			continue;
		struct layout l = at_rotation(ms, nm, cand[c], tmp);
		if (l.p && (uint64_t)l.layers * l.p > (uint64_t)best.layers * best.p)
			best = l;
	}
	free(tmp);
	return best;
}

/* A trap boundary: before full weight index at, a trap of role begins. */
struct cut {
	uint32_t at;
	const char *role;
};

static int by_at(const void *a, const void *b)
{
	uint32_t x = ((const struct cut *)a)->at, y = ((const struct cut *)b)->at;
	return x < y ? -1 : x > y;
}

/* The layer period among the major weights (ms, at[]: nm of them; at NULL:
 * every weight): embedding, layers, head, read from the layout's rotation
 * on; in the order of the pass, a trap that spans its start is cut there.
 * In a rotated pass the head and the embedding lie between layers, read at
 * the two ends of a forward (of a CUDA graph's, whose boundary is not the
 * pass's): when they are at most three major weights (lm_head, the
 * embedding, perhaps a norm), each is a trap of its own, so that a forward
 * does not load a trap of both twice; more (layers of another shape outside
 * the pattern) stay one trap on each side of the rotation.  A minor weight
 * belongs to the trap of the major one before it.  Returns the traps made,
 * 0 without a period, -1 when out of memory. */
static int by_period(const uint64_t *s, uint32_t n, const uint64_t *ms, const uint32_t *at,
		     uint32_t nm, struct ft_trap *t)
{
	struct layout l = best_layout(ms, nm);
	if (!l.p)
		return 0;
	struct cut *c = malloc((nm + 2) * sizeof(*c));
	if (!c)
		return -1;
	/* boundaries in the rotated sequence of major weights */
	uint32_t nc = 0, wrap = (nm - l.r) % nm, k = 0, end = l.start + l.layers * l.p;
	int each = l.r && l.start + (nm - end) <= 3;
	const char *first = NULL;
	for (uint32_t m = 0; m < l.start; m += each ? 1 : l.start)
		c[nc++] = (struct cut){ m, "embedding" };
	for (uint32_t i = 0; i < l.layers; i++)
		c[nc++] = (struct cut){ l.start + i * l.p, "layer" };
	for (uint32_t m = end; m < nm; m += each ? 1 : nm)
		c[nc++] = (struct cut){ m, "head" };
	/* the role of the trap that holds the pass's first weight */
	for (uint32_t i = 0; i < nc && c[i].at <= wrap; i++)
		first = c[i].role;
	/* to full indices in the pass's order */
	for (uint32_t i = 0; i < nc; i++)
		c[i].at = full(at, nm, (c[i].at + l.r) % nm, n);
	c[nc++] = (struct cut){ 0, first };
	qsort(c, nc, sizeof(*c), by_at);
	for (uint32_t i = 0; i < nc; i++) {
		uint32_t e = i + 1 < nc ? c[i + 1].at : n;
		if (e > c[i].at)
			fill(&t[k], k, c[i].role, s, c[i].at, e - c[i].at), k++;
	}
	free(c);
	return (int)k;
}

int ft_traps_group(const uint64_t *s, uint32_t n, uint64_t target, struct ft_trap **out)
{
	struct ft_trap *t = calloc(n + 2, sizeof(*t));
	uint32_t k = 0;
	if (!t)
		return -1;
	int r = n ? by_period(s, n, s, NULL, n, t) : 0;
	if (r > 0)
		k = (uint32_t)r;
	if (!r && n >= 3) {
		/* Small regions that discovery found in some layers only (norm
		 * weights packed in a shared small segment, seen on the H200)
		 * break the period: look for it among the weights of at least a
		 * sixteenth of the median size. */
		uint64_t *sorted = malloc(n * sizeof(*sorted)), *ms = malloc(n * sizeof(*ms));
		uint32_t *at = malloc(n * sizeof(*at)), nm = 0;
		if (sorted && ms && at) {
			memcpy(sorted, s, n * sizeof(*s));
			qsort(sorted, n, sizeof(*sorted), ft_cmp_u64);
			uint64_t floor = sorted[n / 2] / 16;
			for (uint32_t i = 0; i < n; i++)
				if (s[i] >= floor) {
					at[nm] = i;
					ms[nm++] = s[i];
				}
			if (nm < n && (r = by_period(s, n, ms, at, nm, t)) > 0)
				k = (uint32_t)r;
		} else {
			r = -1;
		}
		free(sorted), free(ms), free(at);
	}
	if (r < 0) {
		free(t);
		return -1;
	}
	if (!k) {
		uint32_t first = 0;
		uint64_t acc = 0;
		for (uint32_t i = 0; i < n; i++) {
			acc += s[i];
			if (acc >= target || i + 1 == n) {
				fill(&t[k], k, "other", s, first, i + 1 - first);
				k++;
				first = i + 1;
				acc = 0;
			}
		}
	}
	*out = t;
	return (int)k;
}

int ft_traps_split(struct ft_trap **traps, uint32_t n, const uint64_t *sizes, uint64_t max_bytes,
		   const uint8_t *nocut)
{
	/* every piece of a cut trap holds a weight: at most one per weight */
	uint32_t most = 0;
	for (uint32_t i = 0; i < n; i++)
		most += (*traps)[i].nweights ? (*traps)[i].nweights : 1;
	struct ft_trap *t = calloc(most + 1, sizeof(*t));
	if (!t)
		return -1;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct ft_trap *x = &(*traps)[i];
		if (strcmp(x->role, "layer")) {
			fill(&t[k], k, x->role, sizes, x->first_weight, x->nweights), k++;
			continue;
		}
		uint32_t first = x->first_weight, end = x->first_weight + x->nweights;
		uint64_t acc = 0;
		for (uint32_t w = first; w < end; w++) {
			if (acc && acc + sizes[w] > max_bytes && !(nocut && nocut[w])) {
				fill(&t[k], k, "layer", sizes, first, w - first), k++;
				first = w, acc = 0;
			}
			acc += sizes[w];
		}
		fill(&t[k], k, "layer", sizes, first, end - first), k++;
	}
	if (k == n) {
		free(t); /* nothing was cut */
		return (int)n;
	}
	free(*traps);
	*traps = t;
	return (int)k;
}

uint8_t *ft_traps_nocut(const struct ft_trap *traps, uint32_t ntraps, uint32_t n,
			const uint32_t (*pairs)[2], uint32_t npairs)
{
	uint8_t *nocut = calloc(n + 1, 1);
	int32_t *d = calloc(n + 2, sizeof(*d));
	uint32_t *trap = malloc((n + 1) * sizeof(*trap));
	if (!nocut || !d || !trap) {
		free(d);
		free(trap);
		free(nocut);
		return NULL;
	}
	for (uint32_t w = 0; w < n; w++)
		trap[w] = UINT32_MAX;
	for (uint32_t t = 0; t < ntraps; t++)
		for (uint32_t k = 0; k < traps[t].nweights && traps[t].first_weight + k < n; k++)
			trap[traps[t].first_weight + k] = t;
	/* pair (i, j) in one trap: no cut before i + 1 .. j (a difference
	 * array); pairs across traps are apart already */
	for (uint32_t k = 0; k < npairs; k++)
		if (pairs[k][0] < pairs[k][1] && pairs[k][1] < n &&
		    trap[pairs[k][0]] == trap[pairs[k][1]]) {
			d[pairs[k][0] + 1]++;
			d[pairs[k][1] + 1]--;
		}
	free(trap);
	int32_t open = 0;
	for (uint32_t w = 0; w < n; w++) {
		open += d[w];
		nocut[w] = open > 0;
	}
	free(d);
	return nocut;
}

static int by_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

uint32_t ft_traps_exclude_bus(struct ft_trap *traps, uint32_t n, const uint64_t *host,
			      double bus_bytes_per_ms)
{
	double *r = malloc((n + 1) * sizeof(*r));
	uint32_t done = 0;
	for (uint32_t t = 0; r && t < n; t++) {
		struct ft_trap *x = &traps[t];
		if (!host[t] || !x->compute.samples)
			continue;
		/* the median time per byte of the traps of its role timed on
		 * the GPU */
		uint32_t m = 0;
		for (uint32_t k = 0; k < n; k++)
			if (!host[k] && traps[k].bytes && traps[k].compute.samples &&
			    !strcmp(traps[k].role, x->role))
				r[m++] = traps[k].compute.median / (double)traps[k].bytes;
		double est;
		if (m) {
			qsort(r, m, sizeof(*r), by_double);
			est = r[m / 2] * (double)x->bytes;
		} else {
			est = x->compute.median -
			      (bus_bytes_per_ms > 0 ? (double)host[t] / bus_bytes_per_ms : 0);
			if (est < x->compute.median / 10)
				est = x->compute.median / 10;
		}
		if (est > x->compute.median)
			est = x->compute.median;
		x->compute.median = x->compute.min = x->compute.max = est;
		done++;
	}
	free(r);
	return done;
}
