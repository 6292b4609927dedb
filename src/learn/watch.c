/*
 * A restart's profile taken at the end of the first forward (learn_int.h).
 *
 * Pass detection needs a few forwards before discovery starts: a serving
 * engine captures its CUDA graphs after its first (profile) forward, so
 * with the plan after the first discovery pass half of the H200
 * start-up harness's graphs were captured before it.  With a saved profile
 * that has its weights' checksums, discovery's evidence is not needed:
 * every launch's regions are watched from the first, and once the saved
 * weights may all have been read (the watch's regions can hold their sizes)
 * they are sought by size and checksum, as after one pass.  Found, the
 * watch becomes discovery's first pass and the profile is taken; the
 * allocation cutoff does not apply (weights and the launches that
 * initialise them interleave while a model is built; the checksums
 * vouch for the weights).  Not found, the watch tries again when enough
 * new regions came to hold the missing weights, or after WATCH_RETRY
 * launches a weight (contents change without new regions: weights
 * initialised by kernels, then loaded by copies), and never during a
 * capture (a checksum waits for the device).  A try that found more
 * weights than every try before it is progress: the forward is still
 * reading them, in order.  Only tries without progress count: after
 * WATCH_TRIES, new regions and launches no longer bring a try, but the
 * beginning of a stream capture does (up to WATCH_TRIES more).  A serving
 * engine captures right after its profile forward, and a weight's bytes
 * may be final only at that forward's end: on the H200's restart, the
 * activations of the profile forward passed through a v_proj's segment
 * tail, which its extent holds, and every try during the forward found
 * 113 of 114 weights, the profile taken only at the first pass boundary,
 * after the first graphs were captured.  Discovery runs as before either
 * way.
 */
#include <stdlib.h>
#include <string.h>

#include "learn_int.h"

#define WATCH_TRIES 8
#define WATCH_RETRY 2

void ft_learn_watch_start(struct ft_learn *L)
{
	if (L->watching || L->started || !L->have_saved || !L->saved.sums ||
	    !L->saved.nweights || ft_learn_skip_discovery(L) ||
	    ft_disc_init(&L->watch, UINT64_MAX))
		return;
	L->watching = 1;
	L->watch_next = L->saved.nweights;
	L->watch_launches = 0;
	L->watch_retry_at = UINT64_MAX;
	L->watch_tries = 0;
	L->watch_found = 0;
	L->watch_tried_at = 0;
}

void ft_learn_watch_stop(struct ft_learn *L)
{
	if (!L->watching)
		return;
	ft_disc_destroy(&L->watch);
	memset(&L->watch, 0, sizeof(L->watch));
	L->watching = 0;
}

static int desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The candidates (regions of at least FT_WEIGHT_MIN_BYTES) in first-touch
 * order into idx, when their extents can hold the saved sizes, one region
 * each: how many, or 0 when they cannot, with in *need the fewest new
 * regions that could change that (each new region adds at most one to the
 * regions that can hold a size: the saved sizes from the largest, the j-th
 * needs j + 1 such regions). */
static uint32_t candidates(struct ft_learn *L, uint32_t *idx, uint32_t *need)
{
	const struct ft_discover *d = &L->watch;
	uint32_t n = 0, m = L->saved.nweights;
	uint64_t *ext = malloc((d->n + 1) * sizeof(*ext)), *sz = malloc((m + 1) * sizeof(*sz));
	*need = 1;
	if (!ext || !sz) {
		free(ext);
		free(sz);
		return 0;
	}
	/* up to the allocation's end: views into a weight (a token's row)
	 * split it into regions that only together hold its saved size */
	for (uint32_t i = 0; i < d->n; i++)
		if (d->r[i].alloc_size - d->r[i].offset >= FT_WEIGHT_MIN_BYTES) {
			ext[n] = d->r[i].alloc_size - d->r[i].offset;
			idx[n++] = i;
		}
	memcpy(sz, L->saved.weights, m * sizeof(*sz));
	qsort(ext, n, sizeof(*ext), desc);
	qsort(sz, m, sizeof(*sz), desc);
	uint32_t short_by = 0;
	for (uint32_t j = 0, held = 0; j < m; j++) {
		while (held < n && ext[held] >= sz[j])
			held++;
		if (j + 1 > held + short_by)
			short_by = j + 1 - held;
	}
	free(ext);
	free(sz);
	if (short_by) {
		*need = short_by;
		return 0;
	}
	/* first-touch order (one pass: the watch never ended one) */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && d->r[idx[j - 1]].order > d->r[idx[j]].order; j--) {
			uint32_t t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	return n;
}

/* Seeks the saved weights among the watched regions; 1 when the profile
 * was taken (INFERENCE began). */
static int try_match(struct ft_learn *L, int capture)
{
	struct ft_discover *d = &L->watch;
	uint32_t *idx = malloc((d->n + 1) * sizeof(*idx)), found = 0, missing = 0;
	if (!idx)
		return 0;
	ft_disc_extents(d);
	uint32_t need, n = candidates(L, idx, &need);
	if (!n) {
		free(idx);
		L->watch_next = d->n + need; /* only new regions can change that */
		L->watch_retry_at = UINT64_MAX;
		return 0;
	}
	if (!L->saved.sums || ft_gpu_start(&L->gpu, L->env.real)) {
		free(idx);
		ft_learn_watch_stop(L); /* no checksums: discovery's passes decide */
		return 0;
	}
	L->sums_refused = 0;
	/* (mid-forward: only weights the launches read, no split ones) */
	uint32_t m = ft_disc_match(d, &idx, n, L->saved.weights, L->saved.sums, L->saved.nweights,
				   ft_learn_region_sum, L, 0, &found, &missing);
	free(idx);
	if (!m && L->sums_refused) {
		L->watch_next = d->n + 1; /* a capture began: not a try */
		return 0;
	}
	ft_debug("watch: %u of the %u saved weights found after %llu launches%s", found,
		 L->saved.nweights, (unsigned long long)L->watch_launches,
		 capture ? ", as a stream capture begins" : "");
	L->watch_tried_at = L->watch_launches;
	if (!m) {
		uint32_t need = L->saved.nweights - found;
		L->watch_next = d->n + (need ? need : 1);
		L->watch_retry_at = L->watch_launches + (uint64_t)WATCH_RETRY * L->saved.nweights;
		if (found > L->watch_found)
			L->watch_found = found; /* progress: not counted */
		else if (++L->watch_tries >= 2 * WATCH_TRIES) {
			ft_info("the launches so far did not read the %u weights of the saved profile "
				"with their contents (%u found, %u tries without finding more): "
				"discovery's passes decide", L->saved.nweights, found, L->watch_tries);
			ft_learn_watch_stop(L);
		}
		if (L->watch_tries >= WATCH_TRIES) {
			/* from now on only when a capture begins */
			L->watch_next = UINT32_MAX;
			L->watch_retry_at = UINT64_MAX;
		}
		return 0;
	}
	/* the watch is discovery's first pass, complete */
	ft_disc_pass_end(d);
	L->disc = *d;
	memset(d, 0, sizeof(*d));
	L->watching = 0;
	L->started = 1;
	if (ft_learn_after_first_pass(L, capture ? "the launches before the first stream capture"
						 : "the launches before pass detection (the first forward)")) {
		L->phases.total++;
		ft_learn_trace_pass(L, "watch", 0);
		return 1;
	}
	/* not taken (another device, other settings the file cannot serve):
	 * the watch's pass is no discovery pass (it began at the first launch,
	 * ended mid-forward, without the allocation cutoff or the writes), so
	 * discovery starts as it would have, at pass detection's boundaries */
	ft_disc_destroy(&L->disc);
	memset(&L->disc, 0, sizeof(L->disc));
	L->started = 0;
	return 0;
}

void ft_learn_watch(struct ft_learn *L, const struct ft_region_ref *r, unsigned n, int launch)
{
	if (L->started || L->phases.phase != FT_PHASE_DISCOVERY) {
		ft_learn_watch_stop(L);
		return;
	}
	ft_learn_feed(&L->watch, r, n, launch);
	L->watch_launches++;
	if ((L->watch.n >= L->watch_next || L->watch_launches >= L->watch_retry_at) &&
	    !atomic_load(L->env.captures))
		try_match(L, 0);
}

void ft_learn_capture_begins(struct ft_learn *L)
{
	if (ft_learn_phase(L) != FT_PHASE_DISCOVERY)
		return;
	pthread_mutex_lock(&L->lock);
	if (L->watching && !L->started && L->phases.phase == FT_PHASE_DISCOVERY &&
	    L->watch_launches > L->watch_tried_at && !atomic_load(L->env.captures))
		try_match(L, 1);
	pthread_mutex_unlock(&L->lock);
}
