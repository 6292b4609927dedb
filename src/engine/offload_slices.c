/* FT_EXPERT_PAGING: the slices of a stacked tensor (a mixture-of-experts
 * layer's experts, one tensor of E experts) that launches read one at a
 * time are loaded one at a time, on demand, so that a decode step moves
 * its routed experts' bytes and not every expert of the layer.
 *
 * Discovery gives each such weight the starts of the views the data chose
 * into it (ft_disc_slices: two or more read in some passes, not all, and
 * any an always-routed expert read every pass, their offsets multiples of
 * at least 1 MiB).  Slice i of a weight runs from its i-th
 * start (the weight's own start first) to the next, the last to the
 * weight's end: a kernel handed a slice's start reads within it, since the
 * next start seen is the next expert's or another tensor's; where most
 * slices are one stride long (the experts' size), each but the last is
 * cut at the stride (cut_count).  A trap's load (and prefetch) copies
 * its dense part, the runs outside its slices (or the whole trap, where
 * launches referred to more than half its slices in its last residency: a
 * prefill's); a launch that refers to a slice's start, from a parameter
 * word that reads one slice at a time, copies that slice when it is not
 * in the block yet, on a stream of its own (o->demand: not behind the
 * prefetches on the copy stream), after the trap's load, and waits for
 * it.  A word reads one slice at a time once it has referred to two
 * slices of one tensor in turn: from one stream, with no weight read
 * whole in between (o->slice_epoch: a loop
 * over routed experts, ft_kernel_slicer).  Until then, and from a word
 * that refers to one slice a layer (transformers' grouped GEMM is handed
 * one expert, and reads the routed others through a pointer array in
 * device memory), a reference loads every slice of the trap (a stacked
 * tensor discovery split in two lies in one trap), as does one anywhere
 * else in a sliced weight (a start discovery never saw, a launch without
 * a known layout, a capture): a wrong guess costs a copy, not results.
 * Captures, coded and NVMe traps, and strategy mode load traps whole. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ft/discover.h"
#include "ft/kernels.h"
#include "ft/log.h"
#include "ft/search.h"
#include "offload_int.h"

/* A trap's per-slice bits (sl_in, sl_asked): its words, bit i, set it. */
static size_t mask_words(const struct ft_off_trap *x)
{
	return (x->nsl + 63) / 64;
}

static int bit(const uint64_t *m, uint32_t i)
{
	return (int)(m[i / 64] >> (i % 64) & 1);
}

static void set_bit(uint64_t *m, uint32_t i)
{
	m[i / 64] |= 1ull << (i % 64);
}

/* Slice i of weight w's n (i < n): from the i-th start discovery saw (the
 * weight's own first) to the next, the last to the weight's end. */
static struct ft_off_slice seen_slice(const struct ft_off_weight *w, uint32_t i, uint32_t n)
{
	uint64_t lo = i ? w->lo + w->slices[i - 1] : w->lo;
	uint64_t hi = i + 1 < n ? w->lo + w->slices[i] : w->hi;
	return (struct ft_off_slice){ lo, hi < lo ? lo : hi, 1 };
}

/* How many slices weight w's n slices seen become when each is cut at the
 * stride g (0: not cut).  Where more than half are one stride long, the
 * stride is the experts' size and a longer slice between two starts holds
 * experts no pass routed to (on the H100 a Mixtral's 14 stacked tensors
 * had 10 such): cut, a launch reading one of them loads it alone, not the
 * slice that holds it.  The last slice stays whole: no start bounds it,
 * and it may be a tensor of any length after the experts (discovery takes
 * one read every pass at their stride into the weight).  Otherwise (views
 * of other lengths: not whole experts) the slices stay as seen. */
static uint32_t cut_count(const struct ft_off_weight *w, uint32_t n, uint64_t g)
{
	uint32_t even = 0;
	uint64_t pieces = 0;
	for (uint32_t i = 0; g && i < n; i++) {
		struct ft_off_slice sl = seen_slice(w, i, n);
		even += sl.hi - sl.lo == g;
		pieces += i + 1 < n ? (sl.hi - sl.lo + g - 1) / g : 1;
	}
	return g && 2 * even > n && pieces > n && pieces <= FT_OFF_SLICES_MAX ? (uint32_t)pieces
									  : 0;
}

int ft_off_slices_init(struct ft_offload *o)
{
	o->wsl = calloc(o->nw + 1, sizeof(*o->wsl));
	if (!o->wsl)
		return -1;
	for (uint32_t k = 0; k < o->nw; k++) {
		const struct ft_off_weight *w = &o->w[k];
		o->wsl[k].first = UINT32_MAX;
		if (!w->nslices || w->trap >= o->ntraps || o->t[w->trap].block < 0)
			continue;
		struct ft_off_trap *x = &o->t[w->trap];
		uint32_t seen = w->nslices + 1;
		uint64_t g = 0;
		for (uint32_t i = 0; i < seen; i++)
			g = ft_gcd64(g, seen_slice(w, i, seen).lo - w->lo);
		uint32_t cut = cut_count(w, seen, g), n = cut ? cut : seen;
		struct ft_off_slice *sl = realloc(x->sl, (x->nsl + n) * sizeof(*sl));
		if (!sl)
			return -1;
		x->sl = sl;
		sl += x->nsl;
		for (uint32_t i = 0, j = 0; i < seen; i++) {
			struct ft_off_slice s = seen_slice(w, i, seen);
			for (uint64_t a = s.lo; cut && i + 1 < seen && a < s.hi; a += g)
				sl[j++] = (struct ft_off_slice){ a, a + g < s.hi ? a + g : s.hi,
								 a == s.lo };
			if (!cut || i + 1 == seen)
				sl[j++] = s;
		}
		o->wsl[k] = (struct ft_off_wsl){ .first = x->nsl, .n = n, .stride = g,
						 .kid = UINT64_MAX };
		x->nsl += n;
	}
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (x->nsl && (!(x->sl_in = calloc(mask_words(x), sizeof(*x->sl_in))) ||
				!(x->sl_asked = calloc(mask_words(x), sizeof(*x->sl_asked)))))
			return -1;
	}
	return 0;
}

/* Trap t loads whole from now on. */
static void unslice(struct ft_offload *o, uint32_t t)
{
	struct ft_off_trap *x = &o->t[t];
	free(x->sl);
	free(x->sl_in);
	free(x->sl_asked);
	x->sl = NULL;
	x->sl_in = NULL;
	x->sl_asked = NULL;
	x->nsl = 0;
	for (uint32_t k = 0; k < o->nw; k++)
		if (o->w[k].trap == t)
			o->wsl[k].first = UINT32_MAX;
}

void ft_off_slices_staged(struct ft_offload *o)
{
	uint32_t traps = 0, slices = 0;
	uint64_t bytes = 0;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (!x->nsl)
			continue;
		/* a coded store decodes whole pieces, the NVMe tier reads
		 * whole traps, strategy mode copies at first use anyway */
		if (x->block < 0 || x->z.desc || x->disk_bytes || o->mode == FT_TM_STRATEGY) {
			unslice(o, t);
			continue;
		}
		traps++;
		slices += x->nsl;
		for (uint32_t i = 0; i < x->nsl; i++)
			bytes += x->sl[i].hi - x->sl[i].lo;
	}
	FT_STAT_ADD(o->stats, offload_sliced_bytes, bytes);
	if (traps)
		ft_info("FT_EXPERT_PAGING: %u offloaded traps hold %u slices of stacked tensors "
			"(routed experts, %.1f MiB): a launch loads the slices it reads, the rest "
			"of a trap is loaded and prefetched as a whole", traps, slices,
			(double)bytes / 1048576.0);
}

void ft_off_slices_release(struct ft_offload *o)
{
	for (uint32_t t = 0; o->t && t < o->ntraps; t++) {
		free(o->t[t].sl);
		free(o->t[t].sl_in);
		free(o->t[t].sl_asked);
	}
	free(o->wsl);
	o->wsl = NULL;
}

/* Weight k's slices (w's), and the index of the first that begins after
 * a (w->n when none does). */
static const struct ft_off_slice *slices_after(const struct ft_offload *o,
					       const struct ft_off_wsl *w, int k, uint64_t a,
					       uint32_t *i)
{
	const struct ft_off_slice *sl = o->t[o->w[k].trap].sl + w->first;
	*i = ft_upper_bound(sl, w->n, sizeof(*sl), offsetof(struct ft_off_slice, lo), a);
	return sl;
}

/* The slice of weight k that holds a (its index among k's slices), or
 * w->n when none does; *at: whether a is its start. */
static uint32_t slice_in(const struct ft_offload *o, const struct ft_off_wsl *w, uint64_t a,
			 int k, int *at)
{
	uint32_t i;
	const struct ft_off_slice *sl = slices_after(o, w, k, a, &i);
	*at = i && sl[i - 1].lo == a;
	return i && a < sl[i - 1].hi ? i - 1 : w->n;
}

/* The slice of weight k that begins at a, or w->n when none does. */
static uint32_t slice_from(const struct ft_offload *o, const struct ft_off_wsl *w, uint64_t a,
			   int k)
{
	int at;
	uint32_t i = slice_in(o, w, a, k, &at);
	return at ? i : w->n;
}

void ft_off_slice_said(struct ft_offload *o, int k, uint64_t a, enum ft_sl_why why,
		       const struct ft_kernel *kern, uint32_t word, CUstream s)
{
	const struct ft_off_weight *w = &o->w[k];
	const struct ft_off_wsl *l = o->wsl ? &o->wsl[k] : NULL;
	if (!l || why >= FT_SLW_N || o->slw_refs[why]++ >= 3)
		return;
	if (l->first == UINT32_MAX) { /* a weight beside the slices in their trap */
		uint32_t n = (uint32_t)k + 1;
		ft_info("FT_EXPERT_PAGING: weight %d (trap %u, %.1f MiB, not sliced, views to +%llu; "
			"weight %u after it %s) referred to at +%llu by %.80s word %u", k, w->trap,
			(double)(w->hi - w->lo) / 1048576.0,
			(unsigned long long)(w->views > w->lo ? w->views - w->lo : 0), n,
			n < o->nw && o->w[n].trap == w->trap
				? o->wsl[n].first != UINT32_MAX ? "sliced, in its trap" : "in its trap"
				: "in another trap",
			(unsigned long long)(a - w->lo), kern ? kern->name : "?", word);
		return;
	}
	uint32_t i;
	const struct ft_off_slice *sl = slices_after(o, l, k, a, &i);
	uint64_t below = i ? a - sl[i - 1].lo : 0, above = i < l->n ? sl[i].lo - a : 0;
	ft_info("FT_EXPERT_PAGING: weight %d (trap %u, %.1f MiB, %u slices, views to +%llu) "
		"referred to at +%llu (%llu past slice %u's start, %llu before the next) by "
		"%.80s word %u%s%s%s%s", k, w->trap, (double)(w->hi - w->lo) / 1048576.0, l->n,
		(unsigned long long)(w->views > w->lo ? w->views - w->lo : 0),
		(unsigned long long)(a - w->lo), (unsigned long long)below, i ? i - 1 : 0,
		(unsigned long long)above, kern ? kern->name : "?", word,
		why != FT_SLW_UNLEARNT ? "" : l->kid != (kern ? kern->id : 0) ? "; another kernel before"
		: l->word != word ? "; another word before" : "",
		why == FT_SLW_UNLEARNT && l->stream != s ? "; another stream before" : "",
		why == FT_SLW_UNLEARNT && l->epoch != o->slice_epoch ? "; a whole weight read since" : "",
		why == FT_SLW_UNLEARNT && l->slice == i - 1 ? "; the same slice before" : "");
}

/* Slice i of weight k's trap is asked for by a launch (at its start, or
 * on the slices' stride inside it), whether or not the launch's word is
 * trusted with that one alone: the guess of the trap's next load (a
 * prefill's first references to each expert come from GEMM kernels new to
 * the learning, one per shape of the expert's tokens).  Marked once the
 * trap is loaded for the launch (ft_off_slices_asked); beyond what a
 * launch keeps, at once. */
static void asked(struct ft_offload *o, int k, uint32_t i)
{
	struct ft_off_trap *x = &o->t[o->w[k].trap];
	if (i >= x->nsl)
		return;
	if (o->nasks < FT_OFF_NEED)
		o->asks[o->nasks].t = o->w[k].trap, o->asks[o->nasks++].i = i;
	else
		set_bit(x->sl_asked, i);
}

void ft_off_slices_asked(struct ft_offload *o, int t)
{
	struct ft_off_trap *x = &o->t[t];
	for (uint32_t r = 0; r < o->nasks; r++)
		if (o->asks[r].t == (uint32_t)t && o->asks[r].i < x->nsl)
			set_bit(x->sl_asked, o->asks[r].i);
}

/* Whether weight k is paged per slice. */
static int sliced(const struct ft_offload *o, uint32_t k)
{
	return o->wsl && o->wsl[k].first != UINT32_MAX;
}

/* Whether a read from address from (weight k's start, k before sliced
 * weight n in its allocation) that runs on into n may read n's slices.
 * Were the bytes from there on one tensor of stacked experts, each
 * expert's size (FT_DISC_SLICE_MIN bytes or more) would divide the offsets
 * of the starts discovery saw (so their gcd, the slices' stride, which is
 * a multiple of it where some experts were never seen) and n's distance
 * from there.  Only where the two have no common divisor that large can
 * no expert size do so: two tensors, and the read reads none of n's
 * slices (on the H100 a Mixtral's decode steps loaded every expert of
 * seven traps a step, each for the weight before it in one allocation).
 * One slice alone (no stride): they may be one. */
static int slices_joined(const struct ft_offload *o, uint64_t from, uint32_t n)
{
	uint64_t g = o->wsl[n].stride;
	return !g || ft_gcd64(g, o->w[n].lo - from) >= FT_DISC_SLICE_MIN;
}

/* Whether a read from address from, at or before weight k, that may run
 * on to k's end reads k's trap's dense part only: k is not sliced, nor is
 * the weight after it in its trap that begins where k ends in k's
 * allocation, where the read might run on into it (slices_joined). */
static int dense_from(struct ft_offload *o, uint64_t from, uint32_t k)
{
	uint32_t n = k + 1;
	return !sliced(o, k) && !(n < o->nw && o->w[n].trap == o->w[k].trap && sliced(o, n) &&
				  ft_off_runs_on(o, k) && slices_joined(o, from, n));
}

int ft_off_dense_view(struct ft_offload *o, int k)
{
	return dense_from(o, o->w[k].lo, (uint32_t)k);
}

int ft_off_link_need(struct ft_offload *o, int k)
{
	uint32_t n = (uint32_t)k + 1;
	if (!sliced(o, n))
		return dense_from(o, o->w[k].lo, n) ? FT_SL_DENSE : FT_SL_ALL(FT_SLW_EXTENT);
	if (slices_joined(o, o->w[k].lo, n))
		return FT_SL_ALL(FT_SLW_EXTENT);
	if (o->links_said++ < 3)
		ft_info("FT_EXPERT_PAGING: weight %d (trap %u, %.1f MiB) runs on into weight %u "
			"(trap %u, %u slices %llu bytes apart) in one allocation, too far from them "
			"for whole experts: two tensors, a read of it loads none of the slices", k,
			o->w[k].trap, (double)(o->w[k].hi - o->w[k].lo) / 1048576.0, n,
			o->w[n].trap, o->wsl[n].n, (unsigned long long)o->wsl[n].stride);
	return FT_SL_DENSE;
}

int ft_off_slice_of(const struct ft_offload *o, int k, uint64_t a, uint32_t *count)
{
	const struct ft_off_wsl *w = o->wsl ? &o->wsl[k] : NULL;
	if (!w || w->first == UINT32_MAX)
		return FT_SL_DENSE;
	uint32_t i = slice_from(o, w, a, k);
	const struct ft_off_slice *sl = o->t[o->w[k].trap].sl + w->first;
	*count = 1;
	/* (a cut's start, not seen: as inside a slice before the cut) */
	return i < w->n && sl[i].seen ? (int)(w->first + i) : FT_SL_ALL(FT_SLW_START);
}

int ft_off_slice_at(struct ft_offload *o, int k, uint64_t a, CUstream s,
		    struct ft_kernel *kern, const uint16_t *words, unsigned i, uint32_t *count)
{
	struct ft_off_wsl *w = o->wsl ? &o->wsl[k] : NULL;
	if (!w || w->first == UINT32_MAX)
		return FT_SL_DENSE;
	int at;
	uint32_t lo = slice_in(o, w, a, k, &at);
	/* every slice of the trap, unless the reference can read one only: a
	 * kernel handed a slice may read others through device memory (a
	 * grouped GEMM's pointer array), also those of a weight beside it in
	 * the trap (one stacked tensor that discovery split in two) */
	if (!kern || !words || o->cap_id || lo == w->n)
		return lo == w->n || !at ? FT_SL_ALL(FT_SLW_START) : FT_SL_ALL(FT_SLW_LAYOUT);
	/* inside a slice, not at its start, on the slices' stride (the gcd of
	 * their offsets): an expert that discovery's passes never routed to,
	 * whose start it did not see (on the H100 a Mixtral's decode steps
	 * loaded the whole of five of seven stacked tensors a step for them).
	 * A word known to read one slice at a time reads that expert; no view
	 * crosses a start discovery saw (the next expert's), so it reads
	 * within the slice that holds it.  Off the stride (a row, a tile of an
	 * expert, which may read on past the slice), every slice */
	if (!at) {
		int stride = w->stride && (a - o->w[k].lo) % w->stride == 0;
		if (stride)
			asked(o, k, w->first + lo);
		if (stride && ft_kernel_slicer(kern, words[i], 0)) {
			*count = 1;
			return (int)(w->first + lo);
		}
		ft_off_slice_said(o, k, a, FT_SLW_START, kern, words[i], s);
		return FT_SL_ALL(FT_SLW_START);
	}
	/* a loop over routed experts refers to two slices of this tensor
	 * through one word, from one stream, with no whole weight read in
	 * between (the layer's own work); a kernel handed one expert that
	 * reads the others through device memory refers to one a layer, and
	 * other layers' weights come between */
	asked(o, k, w->first + lo);
	int learnt = ft_kernel_slicer(kern, words[i], 0);
	if (w->kid == kern->id && w->word == words[i] && w->stream == s &&
	    w->epoch == o->slice_epoch && w->slice != lo)
		ft_kernel_slicer(kern, words[i], 1);
	else if (!learnt && w->kid)
		ft_off_slice_said(o, k, a, FT_SLW_UNLEARNT, kern, words[i], s);
	w->kid = kern->id;
	w->word = words[i];
	w->stream = s;
	w->slice = lo;
	w->epoch = o->slice_epoch;
	if (!ft_kernel_slicer(kern, words[i], 0))
		return FT_SL_ALL(FT_SLW_UNLEARNT);
	*count = 1;
	return (int)(w->first + lo);
}

void ft_off_need_add(struct ft_off_need *n, const struct ft_offload *o, int t, int first,
		     uint32_t count)
{
	if (first == FT_SL_DENSE || n->all || !o->t[t].nsl)
		return;
	if (first < FT_SL_DENSE || n->n == FT_OFF_NEED) {
		n->all = first < FT_SL_DENSE ? -1 - first : FT_SLW_MANY;
		return;
	}
	for (uint32_t i = 0; i < n->n; i++)
		if (n->first[i] == (uint32_t)first && n->count[i] >= count)
			return;
	n->first[n->n] = (uint32_t)first;
	n->count[n->n++] = count;
}

/* The bytes of [lo, hi) in trap t's runs that leave the GPU, from its
 * store into its block on cs; how many. */
static size_t copy_span(struct ft_offload *o, int t, uint64_t lo, uint64_t hi, CUstream cs)
{
	const struct ft_off_trap *x = &o->t[t];
	size_t off = 0, moved = 0;
	for (uint32_t i = 0; i < x->nruns && lo < hi; i++) {
		const struct ft_span *r = &x->runs[i];
		uint64_t a = lo > r->lo ? lo : r->lo, e = hi < r->hi ? hi : r->hi;
		if (a < e && !x->dead[i]) {
			size_t at = off + (size_t)(a - r->lo);
			CUdeviceptr dst = o->mode == FT_TM_RAW_BLOCK ? o->b[x->block].va + at : a;
			ft_off_copy_in(o, dst, x->host + at, (size_t)(e - a), cs, t);
			moved += (size_t)(e - a);
		}
		off += (size_t)(r->hi - r->lo);
	}
	return moved;
}

/* A prefill routes tokens to most experts of a layer, a decode step to a
 * few: a trap whose launches asked for more than half its slices while it
 * was last in its block is loaded whole, its slices with its prefetch
 * (each on demand, behind the launch that reads it, stalled the copies:
 * transformers' loop over routed experts waits on the host for each
 * expert's tokens).  A wrong guess moves bytes no launch reads, once: the
 * next load guesses from that residency's launches. */
static int most_asked(struct ft_off_trap *x)
{
	uint32_t asked = 0;
	for (size_t i = 0; i < mask_words(x); i++)
		asked += (uint32_t)__builtin_popcountll(x->sl_asked[i]);
	memset(x->sl_asked, 0, mask_words(x) * sizeof(*x->sl_asked));
	return 2 * asked > x->nsl;
}

size_t ft_off_load_sliced(struct ft_offload *o, int t, CUstream cs)
{
	struct ft_off_trap *x = &o->t[t];
	size_t moved = 0;
	uint64_t from = 0;
	if (most_asked(x)) {
		moved = copy_span(o, t, 0, UINT64_MAX, cs);
		memset(x->sl_in, 0xff, mask_words(x) * sizeof(*x->sl_in));
		FT_STAT_INC(o->stats, offload_slice_aheads);
		return moved;
	}
	for (uint32_t i = 0; i <= x->nsl; i++) {
		uint64_t to = i < x->nsl ? x->sl[i].lo : UINT64_MAX;
		if (from < to)
			moved += copy_span(o, t, from, to, cs);
		if (i < x->nsl && x->sl[i].hi > from)
			from = x->sl[i].hi;
	}
	memset(x->sl_in, 0, mask_words(x) * sizeof(*x->sl_in));
	return moved;
}

int ft_off_slices_have(const struct ft_off_trap *x, const struct ft_off_need *n)
{
	if (!x->nsl)
		return 1;
	if (n->all)
		return ft_off_slices_whole(x);
	for (uint32_t r = 0; r < n->n; r++)
		for (uint32_t i = n->first[r]; i < n->first[r] + n->count[r] && i < x->nsl; i++)
			if (!bit(x->sl_in, i))
				return 0;
	return 1;
}

int ft_off_slices_in(const struct ft_off_trap *x, uint64_t lo, uint64_t hi)
{
	for (uint32_t i = 0; i < x->nsl; i++)
		if (x->sl[i].lo < hi && x->sl[i].hi > lo && !bit(x->sl_in, i))
			return 0;
	return 1;
}

int ft_off_slices_whole(const struct ft_off_trap *x)
{
	for (uint32_t i = 0; i < x->nsl; i++)
		if (!bit(x->sl_in, i))
			return 0;
	return 1;
}

/* Piece [lo, hi) of a run, at byte `at` of the store, into out[*n],
 * aligned inwards to 8 bytes. */
static void piece(struct ft_off_piece *out, uint32_t *n, uint64_t lo, uint64_t hi, size_t at)
{
	uint64_t a = (lo + 7) & ~7ull, e = hi & ~7ull;
	if (a < e)
		out[(*n)++] = (struct ft_off_piece){ a, e, at + (size_t)(a - lo) };
}

struct ft_off_piece *ft_off_slices_loaded(const struct ft_off_trap *x, uint32_t *n)
{
	/* each run splits at most at every slice's two ends */
	struct ft_off_piece *out = malloc(((size_t)x->nruns + 2 * (size_t)x->nsl + 1) * sizeof(*out));
	*n = 0;
	if (!out)
		return NULL;
	size_t off = 0;
	uint32_t i = 0;
	for (uint32_t j = 0; j < x->nruns; off += x->runs[j].hi - x->runs[j].lo, j++) {
		uint64_t p = x->runs[j].lo, hi = x->runs[j].hi;
		while (p < hi) {
			while (i < x->nsl && x->sl[i].hi <= p)
				i++;
			int in = i < x->nsl && x->sl[i].lo <= p;
			uint64_t q = in ? x->sl[i].hi : i < x->nsl ? x->sl[i].lo : hi;
			if (q > hi)
				q = hi;
			/* the dense part between slices, or a slice copied in */
			if (!x->dead[j] && (!in || bit(x->sl_in, i)))
				piece(out, n, p, q, off + (size_t)(p - x->runs[j].lo));
			p = q;
		}
	}
	return out;
}

/* The first loads of every slice of a trap, said with why: where a decode
 * step moves more than its routed experts, the cause is in the log. */
static void say_all(struct ft_offload *o, int t, const struct ft_off_need *n, size_t moved,
		    const char *by)
{
	static const char *const why[FT_SLW_N] = {
		[FT_SLW_START] = "it refers to no slice's start",
		[FT_SLW_LAYOUT] = "its parameters' layout is not known, or it is captured",
		[FT_SLW_UNLEARNT] = "its word was not seen reading one slice at a time yet",
		[FT_SLW_EXTENT] = "it refers past the views discovery saw in the weight",
		[FT_SLW_MANY] = "it reads more slice ranges than a launch keeps",
		[FT_SLW_COPY] = "a copy reads the trap",
		[FT_SLW_IGNORED] = "a reference it carries, judged stale or roaming, is at no "
				   "slice's start (it is read as if it were not ignored)",
	};
	int w = n->all > 0 && n->all < FT_SLW_N ? n->all : FT_SLW_START;
	if (o->slw_said[w]++ < 3)
		ft_info("FT_EXPERT_PAGING: every slice of trap %d loaded (%.1f MiB) for %.80s: %s",
			t, (double)moved / 1048576.0, by ? by : "a copy", why[w]);
}

size_t ft_off_load_slices(struct ft_offload *o, int t, const struct ft_off_need *n, CUstream cs,
			  const char *by)
{
	struct ft_off_trap *x = &o->t[t];
	size_t moved = 0;
	uint32_t copies = 0;
	for (uint32_t r = 0; r < (n->all ? 1 : n->n); r++) {
		uint32_t first = n->all ? 0 : n->first[r], count = n->all ? x->nsl : n->count[r];
		uint32_t before = copies;
		for (uint32_t i = first; i < first + count && i < x->nsl; i++) {
			if (bit(x->sl_in, i))
				continue;
			set_bit(x->sl_in, i);
			moved += copy_span(o, t, x->sl[i].lo, x->sl[i].hi, cs);
			copies++;
		}
		if (count > 1 && copies > before)
			FT_STAT_INC(o->stats, offload_slice_wholes);
	}
	if (n->all && copies > 1)
		say_all(o, t, n, moved, by);
	FT_STAT_ADD(o->stats, offload_slice_copies, copies);
	FT_STAT_ADD(o->stats, offload_slice_bytes, moved);
	FT_STAT_ADD(o->stats, offload_copy_bytes, moved);
	return moved;
}
