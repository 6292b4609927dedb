/* Trap grouping by the repeating weight-size period (include/ft/traps.h). */
#include "ft/traps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/search.h"

#define JOIN_TRIES 24 /* chains joined per period, at most (layers_of) */

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

/* Whether, when no period covers half the weights in one run, the runs of
 * s[i] the same size as s[i + p] that span three periods or more cover
 * half together, the longest (len) an eighth: each weight that discovery
 * did not take (its region changed, was not checked twice) cuts the run in
 * its layer, so that no one run need cover half. */
static int enough_runs(const uint64_t *s, uint32_t n, uint32_t p, uint32_t len)
{
	/* a layer of one or two weights is no transformer's: its chains,
	 * sizes padded_same, could run through anything */
	if (p < 3 || len < 2 * p || (uint64_t)(len + p) * 8 < n)
		return 0;
	uint64_t covered = 0;
	len = 0;
	for (uint32_t i = 0; i + p <= n; i++) {
		if (i + p < n && same_size(s[i], s[i + p])) {
			len++;
			continue;
		}
		if (len >= 2 * p)
			covered += len + p;
		len = 0;
	}
	return covered * 2 >= n;
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

/* The largest size a weight of the layer ref (p sizes) may measure: its
 * largest, with a sixteenth and 2 MiB of padding; a larger weight is no
 * layer's (a head, an embedding). */
static uint64_t layer_top(const uint64_t *ref, uint32_t p)
{
	uint64_t top = 0;
	for (uint32_t i = 0; i < p; i++)
		top = ref[i] > top ? ref[i] : top;
	return top + top / 16 + (2u << 20);
}

/* Whether the g sizes at x are a layer like ref (p sizes) with weights
 * missing (g < p: x is ref with some left out) or added (g > p: ref is x
 * with some left out), each kept one padded_same, and none larger than
 * ref's largest (a sixteenth and 2 MiB of padding allowed): a layer's
 * weights or parts of them, never a head or an embedding.  (padded_same
 * alone let Llama-2-70B's 500 MiB lm_head and embedding, with the final
 * norm, pass for a layer missing weights beside 448 MiB projections.) */
static int layer_but_some(const uint64_t *x, uint32_t g, const uint64_t *ref, uint32_t p)
{
	const uint64_t *in = g < p ? x : ref, *of = g < p ? ref : x;
	uint32_t m = g < p ? g : p, k = g < p ? p : g, j = 0;
	uint64_t top = layer_top(ref, p);
	for (uint32_t i = 0; i < g; i++)
		if (x[i] > top)
			return 0;
	for (uint32_t i = 0; i < m; i++, j++) {
		while (j < k && !padded_same(in[i], of[j]))
			j++;
		if (j == k)
			return 0;
	}
	return 1;
}

/* How many of the p sizes at x are the same size as ref's. */
static uint32_t strict_like(const uint64_t *x, const uint64_t *ref, uint32_t p)
{
	uint32_t k = 0;
	for (uint32_t j = 0; j < p; j++)
		k += same_size(x[j], ref[j]);
	return k;
}

/* How well layers resume at x after a gap of g weights at gap, ref the
 * whole layer on the gap's other side, y the layer beyond x (NULL: none):
 * the sizes of the two layers the same as ref's, plus one (0: they do not
 * resume there).  The gap must be a layer like ref with weights missing or
 * added, x like ref and y like x; without y (two gaps close together, or
 * the end) x must be ref's sizes exactly. */
static uint32_t resumes(const uint64_t *x, const uint64_t *y, const uint64_t *gap, uint32_t g,
			const uint64_t *ref, uint32_t p)
{
	uint32_t sx = strict_like(x, ref, p);
	if (!like_layer(x, ref, p) || !layer_but_some(gap, g, ref, p))
		return 0;
	if (y && like_layer(y, x, p))
		return sx + strict_like(y, ref, p) + 1;
	return sx == p ? sx + 1 : 0;
}

/* One weight that discovery did not take (its contents changed in one
 * pass, or it was not checked twice) leaves its layer with p - 1 weights,
 * and a weight found in two regions leaves one with p + 1: the chain of
 * layers stops there, and the layers after it are out of step.  A chain
 * goes on across such a layer when the two layers after it (before it,
 * going back) are like the layer on its other side and its g weights are
 * that layer's with some missing or added (never the head and the
 * embedding between two chains of a pass that began mid-forward: their
 * sizes are no layer's).  Sizes padded alike (like_layer) also match a
 * layer out of step by one, so the gap g (1 to 2p - 1) is the one after
 * which the most sizes are the same, the smallest on a tie.  Layer starts
 * are written to cuts from the chain of k layers at first, the end after
 * the last; their number. */
static uint32_t join(const uint64_t *s, uint32_t n, uint32_t p, uint32_t first, uint32_t k,
		     uint32_t *cuts)
{
	uint32_t back = 0, a = first;
	/* going back, the starts are written from the top of cuts down */
	for (;;) {
		uint32_t best = 0, bg = 0;
		for (uint32_t g = 1; g < 2 * p; g++) {
			if (g == p || a < g + p)
				continue;
			uint32_t b = a - g;
			uint32_t r = resumes(s + b - p, b >= 2 * p ? s + b - 2 * p : NULL, s + b, g, s + a, p);
			if (r > best)
				best = r, bg = g;
		}
		if (!best)
			break;
		uint32_t b = a - bg;
		cuts[n - back++] = b;
		do {
			b -= p;
			cuts[n - back++] = b;
		} while (b >= p && like_layer(s + b - p, s + b, p));
		a = b;
	}
	uint32_t nl = 0;
	for (uint32_t i = 0; i < back; i++)
		cuts[nl++] = cuts[n - back + 1 + i];
	for (uint32_t i = 0; i < k; i++)
		cuts[nl++] = first + i * p;
	uint32_t e = first + k * p;
	for (;;) {
		uint32_t best = 0, bg = 0;
		for (uint32_t g = 1; g < 2 * p; g++) {
			if (g == p || e + g + p > n)
				continue;
			uint32_t r = resumes(s + e + g, e + g + 2 * p <= n ? s + e + g + p : NULL, s + e, g,
					     s + e - p, p);
			if (r > best)
				best = r, bg = g;
		}
		if (!best)
			break;
		cuts[nl++] = e;
		e += bg;
		do {
			cuts[nl++] = e;
			e += p;
		} while (e + p <= n && like_layer(s + e, s + e - p, p));
	}
	cuts[nl] = e;
	return nl;
}

/* Of the layers at cuts (nl, cuts[nl] their end), how many pairs of whole
 * layers side by side differ in a size: a chain out of step by a weight
 * (sizes padded alike, like_layer) differs where it began. */
static uint32_t misfits(const uint64_t *s, const uint32_t *cuts, uint32_t nl, uint32_t p)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i + 1 < nl; i++)
		if (cuts[i + 1] - cuts[i] == p && cuts[i + 2] - cuts[i + 1] == p &&
		    strict_like(s + cuts[i + 1], s + cuts[i], p) < p)
			k++;
	return k;
}

/* The layer period of s (0: none), with the starts of its layers in cuts
 * (n + 1 entries: *nl starts, then the end of the last layer); relaxed: by
 * enough_runs, for when no period was found otherwise. */
static uint32_t layers_of(const uint64_t *s, uint32_t n, uint32_t *cuts, uint32_t *nl,
			  int relaxed)
{
	uint32_t *tmp = malloc((n + 1) * sizeof(*tmp));
	if (!tmp)
		return 0;
	for (uint32_t per = 1; per <= n / 3; per++) {
		/* Longest run of i with s[i] == s[i + per]: it covers
		 * [a, b + per).  p is the layer's period: per, or a divisor
		 * (per itself stays the loop's: a rejected divisor must not
		 * send the search back to it). */
		uint32_t best_a = 0, strict = 0, p = per;
		uint32_t best_len = longest_run(s, n, p, 0, &best_a, &strict);
		if (relaxed ? enough_runs(s, n, p, best_len) : enough(best_len, p, n)) {
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
			uint32_t most = 0;
			for (uint32_t c = 0; c + p <= n; c++) {
				uint32_t b = c, k = chain(s, n, p, &b);
				most = k > most ? k : most;
			}
			/* Joined across layers with weights missing or added
			 * (join), a chain of at least half the longest's
			 * layers may cover the most: the out-of-step chain
			 * before a missing weight is one layer longer than the
			 * right one.  The JOIN_TRIES chains nearest the run
			 * are joined (each phase of a dense layer's, near it;
			 * all of a layer of hundreds of experts' took 25 s). */
			uint32_t best = 0, fewest = 0, tried = 0;
			for (uint32_t i = 0; i + p <= n && tried < JOIN_TRIES; i++) {
				uint32_t c = i <= best_a ? best_a - i : i;
				if (c + p > n)
					continue;
				uint32_t b = c, k = chain(s, n, p, &b), m, f;
				if (!k || k * 2 < most)
					continue;
				tried++;
				if ((m = join(s, n, p, b, k, tmp)) == 0 || tmp[m] - tmp[0] < best)
					continue;
				f = misfits(s, tmp, m, p);
				if (tmp[m] - tmp[0] == best && f >= fewest)
					continue;
				best = tmp[m] - tmp[0];
				fewest = f;
				memcpy(cuts, tmp, (m + 1) * sizeof(*cuts));
				*nl = m;
			}
			/* Layers that cover less than half the weights are not
			 * the model's pattern: a longer period may be. */
			if ((uint64_t)best * 2 < n)
				continue;
			/* The last layer before the head may end its allocator
			 * segment, so its last weight runs to the segment's end:
			 * padding only adds.  One more layer when the next p
			 * weights are each at least about the previous layer's,
			 * none more than padded_same, and something (the head)
			 * still follows. */
			uint32_t end = cuts[*nl];
			while (end + p < n) {
				uint32_t j = 0;
				while (j < p && s[end + j] * 8 >= s[end + j - p] * 7 &&
				       padded_same(s[end + j], s[end + j - p]))
					j++;
				if (j < p && !like_layer(s + end, s + end - p, p))
					break;
				cuts[(*nl)++] = end;
				end += p;
			}
			cuts[*nl] = end;
			free(tmp);
			return p;
		}
	}
	free(tmp);
	return 0;
}

uint32_t ft_traps_period(const uint64_t *s, uint32_t n, uint32_t *start, uint32_t *layers)
{
	uint32_t *cuts = malloc((n + 1) * sizeof(*cuts)), nl = 0;
	uint32_t p = cuts ? layers_of(s, n, cuts, &nl, 0) : 0;
	if (cuts && !p)
		p = layers_of(s, n, cuts, &nl, 1);
	*start = p ? cuts[0] : 0;
	*layers = p ? nl : 0;
	free(cuts);
	return p;
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
 * from index r on, cyclically): period p, nl layers beginning at cuts[]
 * (rotated; cuts[nl]: the end of the last). */
struct layout {
	uint32_t r, p, nl;
	uint32_t *cuts;
};

static uint32_t covered(const struct layout *l)
{
	return l->p ? l->cuts[l->nl] - l->cuts[0] : 0;
}

/* The layout of ms rotated by r (tmp: nm entries of scratch); p 0 when
 * there is no period (or no memory for its cuts). */
static struct layout at_rotation(const uint64_t *ms, uint32_t nm, uint32_t r, uint64_t *tmp,
				 int relaxed)
{
	struct layout l = { .r = r, .cuts = malloc((nm + 1) * sizeof(uint32_t)) };
	const uint64_t *x = ms;
	if (!l.cuts)
		return l;
	if (r) {
		for (uint32_t i = 0; i < nm; i++)
			tmp[i] = ms[(i + r) % nm];
		x = tmp;
	}
	l.p = layers_of(x, nm, l.cuts, &l.nl, relaxed);
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
static struct layout best_layout(const uint64_t *ms, uint32_t nm, int relaxed)
{
	struct layout best = at_rotation(ms, nm, 0, NULL, relaxed);
	uint64_t *tmp = nm > 1 ? malloc(nm * sizeof(*tmp)) : NULL;
	if (!tmp)
		return best;
	uint32_t big = 0;
	for (uint32_t i = 1; i < nm; i++)
		if (ms[i] > ms[big])
			big = i;
	uint32_t cand[3] = { best.p ? best.cuts[0] : 0, big, (big + 1) % nm };
	for (int c = 0; c < 3; c++) {
		if (!cand[c])
			continue;
		struct layout l = at_rotation(ms, nm, cand[c], tmp, relaxed);
		if (covered(&l) > covered(&best)) {
			free(best.cuts);
			best = l;
		} else {
			free(l.cuts);
		}
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

/* Layers outside the layout's chain, in x[lo, hi): a weight read out of
 * place cuts a pass's chain of layers in two (a kernel's parameter word
 * that held the embedding's address without reading it made the embedding
 * first read between two layers of a PIECEWISE decode on the H200, a
 * different layer in each run), and in a pass that began mid-forward the
 * head lies between two chains.  Each run of layers like ref (the
 * chain's first, p sizes) there, two or more (or one of exactly ref's
 * sizes, p >= 3: a single one of a short layer may be chance), is layers
 * too: their starts are appended to out (*n of them). */
static void more_layers(const uint64_t *x, uint32_t lo, uint32_t hi, const uint64_t *ref,
			uint32_t p, uint32_t *out, uint32_t *n)
{
	for (uint32_t c = lo; p >= 2 && c + p <= hi;) {
		uint32_t k = 0;
		while (c + (k + 1) * p <= hi && like_layer(x + c + k * p, ref, p))
			k++;
		if (k < 2 && !(k == 1 && p >= 3 && strict_like(x + c, ref, p) == p)) {
			c++;
			continue;
		}
		for (uint32_t i = 0; i < k; i++)
			out[(*n)++] = c + i * p;
		c += k * p;
	}
}

/* The cuts of the weights x[g0, g1) between two layers: each larger than
 * any of the layer's (top) is a trap of its own (role "other": the
 * embedding or head read where a layer was), each run of the others one
 * (the parts of a layer on either side of them). */
static uint32_t gap_cuts(const uint64_t *x, uint32_t g0, uint32_t g1, uint64_t top,
			 struct cut *c)
{
	uint32_t nc = 0;
	for (uint32_t m = g0; m < g1;) {
		int big = x[m] > top;
		c[nc++] = (struct cut){ m++, big ? "other" : "layer" };
		while (!big && m < g1 && x[m] <= top)
			m++;
	}
	return nc;
}

/* The layer period among the major weights (ms, at[]: nm of them; at NULL:
 * every weight): embedding, layers, head, read from the layout's rotation
 * on; in the order of the pass, a trap that spans its start is cut there.
 * In a rotated pass the head and the embedding lie between layers, read at
 * the two ends of a forward (of a CUDA graph's, whose boundary is not the
 * pass's): when they are at most three major weights (lm_head, the
 * embedding, perhaps a norm), each is a trap of its own, so that a forward
 * does not load a trap of both twice; more (layers of another shape outside
 * the pattern) stay one trap on each side of the rotation.  Layers like the
 * chain's outside it are layers too (more_layers), the weights between
 * them cut by gap_cuts.  A minor weight belongs to the trap of the major
 * one before it.  Returns the traps made, 0 without a period, -1 when out
 * of memory. */
static int by_period(const uint64_t *s, uint32_t n, const uint64_t *ms, const uint32_t *at,
		     uint32_t nm, int relaxed, struct ft_trap *t)
{
	struct layout l = best_layout(ms, nm, relaxed);
	if (!l.p) {
		free(l.cuts);
		return l.cuts ? 0 : -1;
	}
	struct cut *c = malloc((nm + 2) * sizeof(*c));
	uint64_t *x = malloc(nm * sizeof(*x));
	uint32_t *more = malloc(nm * sizeof(*more));
	if (!c || !x || !more) {
		free(c), free(x), free(more);
		free(l.cuts);
		return -1;
	}
	for (uint32_t i = 0; i < nm; i++)
		x[i] = ms[(i + l.r) % nm];
	/* boundaries in the rotated sequence of major weights */
	uint32_t nc = 0, wrap = (nm - l.r) % nm, k = 0, start = l.cuts[0], end = l.cuts[l.nl];
	const uint64_t *ref = x + start;
	uint64_t top = layer_top(ref, l.p);
	uint32_t nmore = 0, before;
	more_layers(x, 0, start, ref, l.p, more, &nmore);
	before = nmore;
	more_layers(x, end, nm, ref, l.p, more, &nmore);
	uint32_t lo = before ? more[0] : start, hi = nmore > before ? more[nmore - 1] + l.p : end;
	int each = l.r && lo + (nm - hi) <= 3;
	const char *first = NULL;
	for (uint32_t m = 0; m < lo; m += each ? 1 : lo)
		c[nc++] = (struct cut){ m, "embedding" };
	/* the layers in order, the gaps between them cut */
	uint32_t prev = lo;
	for (uint32_t i = 0; i < nmore + l.nl; i++) {
		uint32_t a = i < before ? more[i] : i < before + l.nl ? l.cuts[i - before] :
			     more[i - l.nl];
		uint32_t b = i < before ? a + l.p : i < before + l.nl ? l.cuts[i - before + 1] :
			     a + l.p;
		nc += gap_cuts(x, prev, a, top, c + nc);
		c[nc++] = (struct cut){ a, "layer" };
		prev = b;
	}
	for (uint32_t m = hi; m < nm; m += each ? 1 : nm)
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
	free(c), free(x), free(more);
	free(l.cuts);
	return (int)k;
}

int ft_traps_group(const uint64_t *s, uint32_t n, uint64_t target, struct ft_trap **out)
{
	struct ft_trap *t = calloc(n + 2, sizeof(*t));
	uint32_t k = 0;
	if (!t)
		return -1;
	/* Small regions that discovery found in some layers only (norm
	 * weights packed in a shared small segment, seen on the H200) break
	 * the period: it is also sought among the weights of at least a
	 * sixteenth of the median size (the major ones); then, with both,
	 * allowing for weights missing from some layers (enough_runs). */
	uint64_t *sorted = malloc((n + 1) * sizeof(*sorted)), *ms = malloc((n + 1) * sizeof(*ms));
	uint32_t *at = malloc((n + 1) * sizeof(*at)), nm = 0;
	int r = sorted && ms && at ? 0 : -1;
	if (!r && n) {
		memcpy(sorted, s, n * sizeof(*s));
		qsort(sorted, n, sizeof(*sorted), ft_cmp_u64);
		uint64_t floor = sorted[n / 2] / 16;
		for (uint32_t i = 0; i < n; i++)
			if (s[i] >= floor) {
				at[nm] = i;
				ms[nm++] = s[i];
			}
	}
	for (int relaxed = 0; !r && n && relaxed < 2; relaxed++) {
		r = by_period(s, n, s, NULL, n, relaxed, t);
		if (!r && n >= 3 && nm < n)
			r = by_period(s, n, ms, at, nm, relaxed, t);
	}
	free(sorted), free(ms), free(at);
	if (r > 0)
		k = (uint32_t)r;
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

int ft_traps_join(struct ft_trap **traps, uint32_t n, const uint64_t *sizes,
		  const uint32_t (*pairs)[2], uint32_t npairs)
{
	uint32_t nw = 0;
	for (uint32_t t = 0; t < n; t++)
		if ((*traps)[t].first_weight + (*traps)[t].nweights > nw)
			nw = (*traps)[t].first_weight + (*traps)[t].nweights;
	uint32_t *trap = malloc((nw + 1) * sizeof(*trap));
	int32_t *d = calloc(n + 1, sizeof(*d)); /* boundaries t|t+1 joined: a difference array */
	if (!trap || !d) {
		free(trap), free(d);
		return -1;
	}
	for (uint32_t w = 0; w < nw; w++)
		trap[w] = UINT32_MAX;
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t k = 0; k < (*traps)[t].nweights; k++)
			trap[(*traps)[t].first_weight + k] = t;
	int any = 0;
	for (uint32_t k = 0; k < npairs; k++) {
		uint32_t a = pairs[k][0] < nw ? trap[pairs[k][0]] : UINT32_MAX;
		uint32_t b = pairs[k][1] < nw ? trap[pairs[k][1]] : UINT32_MAX;
		if (a >= b || b == UINT32_MAX)
			continue;
		d[a]++; /* boundaries a .. b - 1 */
		d[b]--;
		any = 1;
	}
	free(trap);
	struct ft_trap *t = any ? calloc(n + 1, sizeof(*t)) : NULL;
	if (!any || !t) {
		free(d);
		return any ? -1 : (int)n;
	}
	uint32_t k = 0;
	int32_t open = 0;
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i, layer = 0;
		for (;;) {
			layer |= !strcmp((*traps)[j].role, "layer");
			open += d[j];
			if (!open || j + 1 == n)
				break;
			j++;
		}
		const struct ft_trap *x = &(*traps)[i], *y = &(*traps)[j];
		fill(&t[k], k, layer ? "layer" : x->role, sizes, x->first_weight,
		     y->first_weight + y->nweights - x->first_weight);
		k++;
		i = j + 1;
	}
	free(d);
	free(*traps);
	*traps = t;
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
