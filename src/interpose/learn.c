/*
 * Learning in a live process.  Passes come from pass detection (eager
 * launches), graph replays and ft_mark_pass (passes.c); this file decides
 * what each pass boundary means in each phase:
 *
 *   start            discovery starts once two consecutive passes had about
 *                    the same number of launches (both forwards; weight
 *                    initialisation and loading repeat differently);
 *                    allocations made since the first of them are not
 *                    weights
 *   DISCOVERY        regions read are recorded; at each boundary the
 *                    candidate weights are checksummed on the GPU; at the
 *                    end (max(2, FT_DISCOVERY_ITERS) passes: two samples
 *                    prove content unchanged) weights are identified and
 *                    grouped into traps, and the copy curve is measured
 *   PROFILING        each launch is bracketed by two events; at each
 *                    boundary the pass's launches are attributed to traps
 *                    (a launch belongs to the highest trap whose weights
 *                    it or an earlier launch of the pass read) and each
 *                    trap's compute time is one sample
 *   INFERENCE        median / min / max per trap; the plan is made and
 *                    applied (apply.c); profile.json is written to
 *                    FT_PROFILE_STORAGE_DIR unless FT_PROFILE_READ_ONLY.  A
 *                    profile.json read at start that describes the model
 *                    discovery found, on this device, replaces profiling,
 *                    and its plan is applied as it is.
 *
 * Everything here runs under ft_g.learn_lock and fails open: a driver call
 * that fails is logged once and the step is skipped.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/copy_curve.h"
#include "ft/plan.h"
#include "ft/traps.h"
#include "lib.h"

#define L (ft_g.learning)

static const char *const pass_sources[] = { "none", "eager", "graph", "mark" };

/* ---------------------------------------------------------------- DISCOVERY */

/* Regions read (one launch's when launch is set: read together too; a
 * replay's are its capture's, of many launches). */
static void disc_feed(const struct ft_region_ref *r, unsigned n, int launch)
{
	uint64_t ids[FT_MAX_REFS], offs[FT_MAX_REFS];
	for (unsigned i = 0; i < n; i++) {
		ft_disc_read(&L.disc, r[i].alloc_id, r[i].offset, r[i].alloc_base, r[i].alloc_size);
		if (i < FT_MAX_REFS) {
			ids[i] = r[i].alloc_id;
			offs[i] = r[i].offset;
		}
	}
	if (launch && n > 1)
		ft_disc_together(&L.disc, ids, offs, n < FT_MAX_REFS ? n : FT_MAX_REFS);
}

/* The launches that began the new pass before it was confirmed. */
static void feed_moved(int source)
{
	if (source != FT_PASS_EAGER)
		return;
	const struct ft_region_ref *refs;
	const uint32_t *ends;
	unsigned n = ft_passes_moved(&ft_g.passes, &refs, &ends);
	for (unsigned i = 0, from = 0; i < n; from = ends[i], i++)
		disc_feed(refs + from, ends[i] - from, 1);
}

/* Regions from this size up that are not weights are named in the log. */
#define FT_BIG_REGION (64ull << 20)

static int alive(const struct ft_disc_region *r)
{
	struct ft_alloc a;
	return !ft_registry_lookup(&ft_g.reg, r->alloc_base, &a) && a.id == r->alloc_id;
}

static void sample_checksums(void)
{
	if (atomic_load(&ft_g.active_captures)) {
		ft_info("pass boundary during a stream capture: no content sample this pass");
		return;
	}
	if (ft_gpu_start(&L.gpu, &ft_g.real)) {
		ft_warn_once("cannot load the checksum kernel: weights cannot be told from "
			     "buffers written by kernels; nothing will be classified as a weight");
		return;
	}
	ft_disc_extents(&L.disc);
	uint32_t n = 0, *idx = malloc((L.disc.n + 1) * sizeof(*idx));
	uint64_t *addr = malloc((L.disc.n + 1) * sizeof(*addr));
	uint64_t *bytes = malloc((L.disc.n + 1) * sizeof(*bytes));
	uint64_t *sums = malloc((L.disc.n + 1) * sizeof(*sums));
	if (idx && addr && bytes && sums) {
		for (uint32_t i = 0; i < L.disc.n; i++) {
			enum ft_disc_reason r = ft_disc_classify(&L.disc, i);
			const struct ft_disc_region *x = &L.disc.r[i];
			if ((r == FT_DISC_WEIGHT || r == FT_DISC_UNCHECKED) && alive(x)) {
				idx[n] = i;
				addr[n] = x->alloc_base + x->offset;
				bytes[n++] = x->extent;
			}
		}
		if (ft_gpu_checksums(&L.gpu, addr, bytes, n, sums))
			ft_warn_once("checksumming candidate weights failed; they stay unclassified");
		else
			for (uint32_t k = 0; k < n; k++)
				ft_disc_sum(&L.disc, idx[k], sums[k]);
	}
	free(idx);
	free(addr);
	free(bytes);
	free(sums);
}

static int by_key(const void *a, const void *b)
{
	const struct ft_wmap *x = a, *y = b;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void trace_discovery(const unsigned *reasons, uint64_t total)
{
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin("discovery");
	ft_trace_num(rec, "weights", L.prof.nweights);
	ft_trace_num(rec, "weight_bytes", (double)total);
	ft_trace_num(rec, "traps", L.prof.ntraps);
	cJSON *rej = cJSON_AddObjectToObject(rec, "regions");
	for (int r = 0; r < FT_DISC_REASONS; r++)
		ft_trace_num(rej, ft_disc_reason_name(r), reasons[r]);
	cJSON *w = cJSON_AddArrayToObject(rec, "weights_in_order");
	for (uint32_t i = 0; i < L.nwmap && i < 4096; i++) {
		cJSON *o = cJSON_CreateObject();
		ft_trace_num(o, "id", (double)L.wmap[i].alloc_id);
		ft_trace_num(o, "off", (double)L.wmap[i].offset);
		ft_trace_num(o, "trap", L.wmap[i].trap);
		cJSON_AddItemToArray(w, o);
	}
	ft_trace_emit(&ft_g.trace, rec);
}

/* A saved profile of the same model on the same device: its traps and
 * timings are taken, and profiling is skipped.  Returns 1 when adopted. */
static int adopt_saved(int trial)
{
	struct ft_profile *p = &L.prof;
	char why[512];
	enum ft_profile_refusal r = ft_profile_check_compatible(&L.saved, p, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		if (trial)
			ft_warn("FT_SKIP_DISCOVERY=1: the first pass does not match %s/%s (%s); "
				"discovery runs", ft_g.opt.profile_storage_dir, FT_PROFILE_FILE, why);
		else
			ft_warn("%s/%s not used: %s; profiling runs and the file will be rewritten",
				ft_g.opt.profile_storage_dir, FT_PROFILE_FILE, why);
		return 0;
	}
	free(p->traps);
	free(p->curve);
	free(p->plan_json);
	free(p->coread);
	p->traps = L.saved.traps;
	p->ntraps = L.saved.ntraps;
	p->curve = L.saved.curve;
	p->ncurve = L.saved.ncurve;
	p->plan_json = L.saved.plan_json;
	p->coread = L.saved.coread;
	p->ncoread = L.saved.ncoread;
	free(p->shared);
	p->shared = L.saved.shared;
	p->nshared = L.saved.nshared;
	L.saved.shared = NULL;
	L.saved.nshared = 0;
	L.saved.traps = NULL;
	L.saved.curve = NULL;
	L.saved.plan_json = NULL;
	L.saved.coread = NULL;
	L.saved.ncoread = 0;
	L.adopted = 1;
	ft_info("%s/%s describes this model on this device: %u traps and their timings "
		"taken, profiling skipped", ft_g.opt.profile_storage_dir, FT_PROFILE_FILE, p->ntraps);
	return 1;
}

/* Reads dir's profile.json as the one to adopt when discovery ends. */
static int load_saved(const char *dir)
{
	char why[512];
	ft_profile_free(&L.saved);
	L.have_saved = 0;
	enum ft_profile_refusal r = ft_profile_load(dir, &L.saved, why, sizeof(why));
	if (r == FT_PROFILE_OK) {
		L.have_saved = 1;
		ft_info("loaded %s/%s (%u weights, %u traps); it is used if discovery finds the "
			"same model on the same device", dir, FT_PROFILE_FILE, L.saved.nweights,
			L.saved.ntraps);
		return 0;
	}
	if (r == FT_PROFILE_MISSING) {
		if (ft_g.opt.skip_discovery)
			ft_warn("FT_SKIP_DISCOVERY=1 but there is no %s in %s: discovery runs, and "
				"the file is written when INFERENCE begins", FT_PROFILE_FILE, dir);
		else
			ft_info("no %s in %s yet: it is written when INFERENCE begins",
				FT_PROFILE_FILE, dir);
	} else {
		ft_warn("%s/%s refused (%s): %s; discovery and profiling run as without it", dir,
			FT_PROFILE_FILE, ft_profile_refusal_name(r), why);
	}
	return -1;
}

void ft_learn_start(void)
{
	const char *dir = ft_g.opt.profile_storage_dir;
	if (!dir) {
		if (ft_g.opt.skip_discovery)
			ft_warn("FT_SKIP_DISCOVERY=1 needs FT_PROFILE_STORAGE_DIR with a profile.json "
				"of this model on this device: discovery runs");
		return;
	}
	load_saved(dir);
}

int ft_learn_load(const char *dir)
{
	dir = dir ? dir : ft_g.opt.profile_storage_dir;
	if (!dir || L.nwmap || ft_g.phases.phase != FT_PHASE_DISCOVERY) {
		ft_warn("ft_load_profile: %s", !dir ? "no directory given and FT_PROFILE_STORAGE_DIR "
			"is not set" : "discovery has already ended");
		return -1;
	}
	return load_saved(dir);
}

static void drop_discovery(void)
{
	struct ft_profile *p = &L.prof;
	free(p->weights);
	free(p->traps);
	free(p->coread);
	free(p->shared);
	free(L.wmap);
	p->weights = NULL;
	p->traps = NULL;
	p->coread = NULL;
	p->shared = NULL;
	p->nshared = 0;
	L.wmap = NULL;
	p->nweights = p->ntraps = p->ncoread = L.nwmap = 0;
}

/* Memory mode: when the budget (ft_learn_budget, as the plan counts it),
 * less the traps that are not layers and the unchecked regions, cannot hold
 * FT_MIN_BLOCKS blocks of the largest layer, whole layers could never be
 * offloaded; they are cut into traps small enough that the blocks take at
 * most half of what is left (the layer's weights are still loaded in the
 * order they are read), never between weights one launch reads together
 * (pairs[0..npairs), ft_disc_weight_pairs). */
static void split_for_budget(struct ft_profile *p, const uint32_t (*pairs)[2], uint32_t npairs)
{
	uint64_t weights = L.unchecked_bytes, other = L.unchecked_bytes, big = 0;
	for (uint32_t k = 0; k < p->ntraps; k++) {
		weights += p->traps[k].bytes;
		if (strcmp(p->traps[k].role, "layer"))
			other += p->traps[k].bytes;
		else if (p->traps[k].bytes > big)
			big = p->traps[k].bytes;
	}
	uint64_t budget = p->ntraps ? ft_learn_budget(weights) : 0;
	if (!budget)
		return;
	uint64_t b = ft_g.opt.min_blocks < 2 ? 2 : (uint64_t)ft_g.opt.min_blocks;
	if (!big || budget <= other || big * b <= budget - other)
		return;
	uint64_t piece = (budget - other) / (2 * b);
	uint8_t *nocut = ft_traps_nocut(p->traps, p->ntraps, p->nweights, pairs, npairs);
	int k = nocut ? ft_traps_split(&p->traps, p->ntraps, p->weights, piece, nocut) : -1;
	free(nocut);
	if (k <= 0)
		return;
	ft_info("the budget leaves %.0f MiB beside the traps that are not layers: too little for %llu "
		"blocks of a %.0f MiB layer; layers are cut into traps of at most %.0f MiB (%d traps)",
		(double)(budget - other) / 1048576.0, (unsigned long long)b, (double)big / 1048576.0,
		(double)piece / 1048576.0, k);
	p->ntraps = (uint32_t)k;
}

/* The traps of the weights (L.wmap, first-touch order) as L.prof.traps
 * says, and whether any byte of each would leave the GPU with its trap
 * (ft_off_movable) into L.wmap[].movable. */
static void movable_weights(void)
{
	struct ft_profile *p = &L.prof;
	struct ft_off_weight *w = malloc((p->nweights + 1) * sizeof(*w));
	uint8_t *m = malloc(p->nweights + 1);
	for (uint32_t t = 0; t < p->ntraps; t++)
		for (uint32_t j = 0; j < p->traps[t].nweights; j++)
			L.wmap[p->traps[t].first_weight + j].trap = t;
	if (w && m) {
		for (uint32_t k = 0; k < p->nweights; k++)
			w[k] = (struct ft_off_weight){ .lo = L.wmap[k].va,
						       .hi = L.wmap[k].va + L.wmap[k].extent,
						       .trap = L.wmap[k].trap };
		ft_off_movable(&ft_g.vmm, w, p->nweights, m);
	}
	for (uint32_t k = 0; k < p->nweights; k++)
		L.wmap[k].movable = !w || !m || m[k]; /* out of memory: as if all were */
	free(w);
	free(m);
}

/* Of pairs of weights read together, those whose weights both have bytes
 * that can leave the GPU with the traps as they are now. */
static uint32_t keep_movable(uint32_t (*pairs)[2], uint32_t n)
{
	movable_weights();
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (L.wmap[pairs[i][0]].movable && L.wmap[pairs[i][1]].movable)
			memcpy(pairs[k++], pairs[i], sizeof(*pairs));
	return k;
}

/* Returns 1 when a saved profile was adopted (INFERENCE comes now).  trial:
 * FT_SKIP_DISCOVERY after one pass, contents taken on the saved profile's
 * word; when it does not match, nothing is kept and discovery goes on
 * (returns -1). */
static int finish_discovery(int trial)
{
	struct ft_profile *p = &L.prof;
	unsigned reasons[FT_DISC_REASONS] = { 0 };
	ft_disc_extents(&L.disc);
	L.unchecked_bytes = 0;
	for (uint32_t i = 0; i < L.disc.n; i++) {
		enum ft_disc_reason why = ft_disc_classify(&L.disc, i);
		reasons[why]++;
		const struct ft_disc_region *r = &L.disc.r[i];
		if (why == FT_DISC_UNCHECKED && r->extent >= FT_WEIGHT_MIN_BYTES && alive(r))
			L.unchecked_bytes += r->extent;
		/* a large region that is not a weight: say why (a weight
		 * discovery missed stays resident and costs budget) */
		if (why != FT_DISC_WEIGHT && why != FT_DISC_TOO_NEW && r->extent >= FT_BIG_REGION &&
		    alive(r))
			ft_info("discovery: %.1f MiB at allocation %llu + %llu is not a weight: %s",
				(double)r->extent / 1048576.0, (unsigned long long)r->alloc_id,
				(unsigned long long)r->offset, ft_disc_reason_name(why));
	}
	uint32_t *idx;
	uint32_t n = ft_disc_weights(&L.disc, &idx);
	if (trial && idx) {
		/* one pass proves nothing about contents: take exactly the saved
		 * sizes, in order, from what the pass read */
		uint32_t m = ft_disc_match(&L.disc, idx, n, L.saved.weights, L.saved.nweights);
		if (!m)
			ft_warn("FT_SKIP_DISCOVERY=1: the first pass did not read regions of the "
				"%u sizes %s/%s lists, in its order; discovery runs",
				L.saved.nweights, ft_g.opt.profile_storage_dir, FT_PROFILE_FILE);
		n = m;
	}

	p->schema = FT_PROFILE_SCHEMA;
	snprintf(p->library, sizeof(p->library), "%s", FT_VERSION);
	ft_gpu_device(&L.gpu, p->device.name, sizeof(p->device.name), &p->device.total_bytes,
		      &p->device.driver);
	p->weights = calloc(n + 1, sizeof(*p->weights));
	L.wmap = calloc(n + 1, sizeof(*L.wmap));
	uint64_t total = 0;
	for (uint32_t k = 0; k < n && p->weights && L.wmap; k++) {
		const struct ft_disc_region *r = &L.disc.r[idx[k]];
		p->weights[k] = r->extent;
		L.wmap[k] = (struct ft_wmap){ r->alloc_id, r->offset, r->alloc_base + r->offset,
					      r->extent, 0, k, 1 };
		total += r->extent;
	}
	p->nweights = p->weights && L.wmap ? n : 0;
	p->fingerprint = ft_profile_fingerprint(p->weights, p->nweights);
	uint32_t (*pairs)[2] = NULL;
	uint32_t npairs = p->nweights ? ft_disc_weight_pairs(&L.disc, idx, n, &pairs) : 0;
	if (L.disc.pairs_full)
		ft_info("discovery: too many regions read together to keep them all; launches "
			"that read two traps of one block then bring one back to the GPU");
	int t = ft_traps_group(p->weights, p->nweights, total / 16 + 1, &p->traps);
	p->ntraps = t > 0 ? (uint32_t)t : 0;
	/* only weights with bytes that can leave the GPU are read together
	 * in a way that matters: a small one in a shared segment stays */
	npairs = keep_movable(pairs, npairs);
	split_for_budget(p, (const uint32_t (*)[2])pairs, npairs);
	int adopted = L.have_saved && p->nweights && adopt_saved(trial);
	if (trial && !adopted) {
		free(pairs);
		drop_discovery();
		free(idx);
		return -1;
	}
	npairs = keep_movable(pairs, npairs); /* with the final traps */
	/* traps read together (with a saved profile's, when adopted) */
	if (ft_coread_from_weights(p, (const uint32_t (*)[2])pairs, npairs))
		ft_warn_once("out of memory for the traps read together");
	free(pairs);
	L.nwmap = p->nweights;
	trace_discovery(reasons, total);
	qsort(L.wmap, L.nwmap, sizeof(*L.wmap), by_key);
	free(idx);

	uint32_t layers = 0, period = 0;
	for (uint32_t k = 0; k < p->ntraps; k++)
		if (!strcmp(p->traps[k].role, "layer") && ++layers == 1)
			period = p->traps[k].nweights;
	ft_info("discovery: %u weights, %.1f MiB, in %u traps (%u layer traps, the first of %u weights); "
		"regions not weights: %u allocated during passes, %u not read every pass, "
		"%u written by copies, %u changed, %u unchecked (%.1f MiB, stay on the GPU), %u small",
		p->nweights, (double)total / 1048576.0, p->ntraps, layers, period,
		reasons[FT_DISC_TOO_NEW], reasons[FT_DISC_NOT_EVERY], reasons[FT_DISC_WRITTEN],
		reasons[FT_DISC_CHANGED], reasons[FT_DISC_UNCHECKED],
		(double)L.unchecked_bytes / 1048576.0, reasons[FT_DISC_SMALL]);
	if (!p->nweights)
		ft_warn("discovery found no weights (nothing read every pass with unchanged "
			"content); there is nothing to offload or profile");

	if (adopted)
		return 1;
	/* The host-to-device copy curve, as upstream measures it: pinned memory. */
	static const uint64_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
					  64 << 20 };
	p->curve = atomic_load(&ft_g.active_captures) ? NULL : calloc(6, sizeof(*p->curve));
	if (p->curve) {
		for (int i = 0; i < 6; i++)
			p->curve[i].bytes = sizes[i];
		if (ft_gpu_copy_curve(&L.gpu, p->curve, 6)) {
			ft_warn_once("could not measure the copy curve; profile.json will lack it");
			free(p->curve);
			p->curve = NULL;
		} else {
			p->ncurve = 6;
		}
	}
	L.skip_sample = 1;
	L.samples_cap = (uint32_t)ft_g.phases.profiling;
	L.samples = calloc((size_t)p->ntraps * L.samples_cap + 1, sizeof(*L.samples));
	L.revisited = calloc(L.nwmap + 1, sizeof(*L.revisited));
	if (!L.samples)
		L.prof_failed = 1;
	return 0;
}

/* ---------------------------------------------------------------- PROFILING */

/* The weight at (id, off) (index into L.wmap), -1 when none. */
static int weight_at(uint64_t id, uint64_t off)
{
	struct ft_wmap key = { .alloc_id = id, .offset = off };
	const struct ft_wmap *w = bsearch(&key, L.wmap, L.nwmap, sizeof(*L.wmap), by_key);
	return w ? (int)(w - L.wmap) : -1;
}

/* Events come from a free stack; created on demand, recycled after each
 * pass is analysed. */
static CUevent take_event(void)
{
	if (L.pool_next)
		return L.pool[--L.pool_next];
	CUevent e;
	if (!ft_g.real.cuEventCreate ||
	    ft_g.real.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
		return NULL;
	return e;
}

static void give_event(CUevent e)
{
	if (L.pool_next == L.npool) {
		uint32_t cap = L.npool ? L.npool * 2 : 2048;
		CUevent *pool = realloc(L.pool, cap * sizeof(*pool));
		if (!pool)
			return; /* leaked, not reused */
		L.pool = pool;
		L.npool = cap;
	}
	L.pool[L.pool_next++] = e;
}

static int record(CUevent e, const struct ft_launch *l)
{
	CUresult rc = l->ptsz ? ft_g.real.cuEventRecord_ptsz(e, l->stream)
			      : ft_g.real.cuEventRecord(e, l->stream);
	return rc == CUDA_SUCCESS ? 0 : -1;
}

void ft_learn_before(const struct ft_launch *l, const struct ft_refs *refs, uint64_t seq)
{
	if (atomic_load_explicit(&ft_g.phase, memory_order_relaxed) != FT_PHASE_PROFILING)
		return;
	pthread_mutex_lock(&ft_g.learn_lock);
	if (!L.prof_failed && ft_g.phases.phase == FT_PHASE_PROFILING) {
		int trap = -1, seen[8], nseen = 0;
		struct ft_prof_launch pl = { .seq = seq };
		for (unsigned i = 0; i < refs->n; i++) {
			if (refs->v[i].stale)
				continue;
			int k = weight_at(refs->v[i].alloc_id, refs->v[i].offset);
			int t = k < 0 ? -1 : (int)L.wmap[k].trap;
			if (t > trap)
				trap = t;
			/* what stays on the GPU anyway (a bias in a segment all
			 * layers share) can be read anywhere in the pass, and
			 * with anything */
			if (k < 0 || !L.wmap[k].movable)
				continue;
			if (pl.nw < 4)
				pl.w[pl.nw++] = (uint32_t)k;
			/* the traps one launch reads together: never one block */
			int j = 0;
			while (j < nseen && seen[j] != t)
				j++;
			if (j == nseen && nseen < 8)
				seen[nseen++] = t;
		}
		for (int a = 0; a < nseen; a++)
			for (int b = a + 1; b < nseen; b++)
				if (ft_coread_add(&L.prof, (uint32_t)seen[a], (uint32_t)seen[b]) > 0)
					ft_debug("profiling: traps %d and %d are read by one launch "
						 "(%llu)", seen[a], seen[b], (unsigned long long)seq);
		if (L.npl == L.cappl) {
			uint32_t cap = L.cappl ? L.cappl * 2 : 1024;
			struct ft_prof_launch *pl = realloc(L.pl, cap * sizeof(*pl));
			if (pl) {
				L.pl = pl;
				L.cappl = cap;
			}
		}
		CUevent b = take_event(), a = b ? take_event() : NULL;
		if (L.npl < L.cappl && a && !record(b, l)) {
			pl.trap = trap;
			pl.before = b;
			pl.after = a;
			L.pl[L.npl++] = pl;
		} else {
			L.prof_failed = 1;
			ft_warn("cannot record profiling events; trap timings will be missing");
		}
	}
	pthread_mutex_unlock(&ft_g.learn_lock);
}

/* The launches of the pass that ended before `end` (a launch number) are
 * one sample per trap; later ones stay for the next pass. */
static void analyse(uint64_t end)
{
	uint32_t k = 0;
	while (k < L.npl && L.pl[k].seq < end)
		k++;
	uint32_t ntraps = L.prof.ntraps;
	/* Waiting on an event while another thread captures in global mode
	 * would invalidate that capture: no sample then. */
	int capturing = atomic_load(&ft_g.active_captures) > 0;
	if (L.skip_sample || capturing) {
		/* profiling began inside this pass (its first launches are
		 * missing), or a capture is in progress */
		if (!capturing)
			L.skip_sample = 0;
	} else if (k && ntraps && L.nsamples < L.samples_cap && !L.prof_failed &&
	    ft_g.real.cuEventSynchronize(L.pl[k - 1].after) == CUDA_SUCCESS) {
		int cur = -1;
		uint32_t *first = calloc(ntraps, sizeof(*first)), *last = calloc(ntraps, sizeof(*last));
		char *seen = calloc(ntraps, 1), *again = calloc(L.nwmap + 1, 1);
		for (uint32_t i = 0; first && last && seen && again && i < k; i++) {
			/* a weight read again after a later trap began: offloading
			 * it with its trap would reload the trap within every pass */
			for (uint32_t j = 0; j < L.pl[i].nw; j++)
				if ((int)L.wmap[L.pl[i].w[j]].trap < cur)
					again[L.pl[i].w[j]] = 1;
			if (L.pl[i].trap > cur) {
				cur = L.pl[i].trap;
				first[cur] = i;
				seen[cur] = 1;
			}
			if (cur >= 0)
				last[cur] = i;
		}
		for (uint32_t t = 0; seen && t < ntraps; t++) {
			float ms = NAN;
			if (seen[t] && ft_g.real.cuEventElapsedTime_v2(&ms, L.pl[first[t]].before,
								      L.pl[last[t]].after) != CUDA_SUCCESS)
				ms = NAN;
			L.samples[(size_t)t * L.samples_cap + L.nsamples] = ms;
		}
		for (uint32_t j = 0; again && L.revisited && j < L.nwmap; j++)
			L.revisited[j] += again[j];
		L.nsamples++;
		free(first);
		free(last);
		free(seen);
		free(again);
	}
	for (uint32_t i = 0; i < k; i++) {
		give_event(L.pl[i].before);
		give_event(L.pl[i].after);
	}
	memmove(L.pl, L.pl + k, (L.npl - k) * sizeof(*L.pl));
	L.npl -= k;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* The weights read again after later traps began in most profiled passes
 * (a table every layer reads, biases packed in one segment) into the
 * profile: they stay on the GPU, out of their traps (apply.c). */
static void shared_weights(void)
{
	struct ft_profile *p = &L.prof;
	free(p->shared);
	p->shared = NULL;
	p->nshared = 0;
	uint32_t n = 0;
	for (uint32_t j = 0; L.revisited && j < L.nwmap; j++)
		n += L.revisited[j] * 2 > L.nsamples;
	p->shared = n ? malloc(n * sizeof(*p->shared)) : NULL;
	for (uint32_t j = 0; p->shared && j < L.nwmap; j++)
		if (L.revisited[j] * 2 > L.nsamples)
			p->shared[p->nshared++] = L.wmap[j].order;
	for (uint32_t i = 1; i < p->nshared; i++) /* by first-touch index */
		for (uint32_t j = i; j > 0 && p->shared[j - 1] > p->shared[j]; j--) {
			uint32_t x = p->shared[j];
			p->shared[j] = p->shared[j - 1];
			p->shared[j - 1] = x;
		}
}

/* Weights in host memory while timed (over the budget before a plan): the
 * times of their traps include reads over the bus, which the plan must not
 * take for compute; they are estimated without them (ft_traps_exclude_bus)
 * and replaced by the first eager passes after the plan (apply.c). */
static void exclude_bus(void)
{
	struct ft_profile *p = &L.prof;
	L.timed_over_budget = ft_vmm_host_bytes(&ft_g.vmm) > 0;
	if (!L.timed_over_budget || !p->ntraps)
		return;
	uint64_t *host = calloc(p->ntraps, sizeof(*host));
	double *was = calloc(p->ntraps, sizeof(*was));
	if (!host || !was) {
		free(host);
		free(was);
		return;
	}
	for (uint32_t i = 0; i < L.nwmap; i++)
		if (L.wmap[i].trap < p->ntraps)
			host[L.wmap[i].trap] += ft_vmm_host_in(&ft_g.vmm, L.wmap[i].va,
							       L.wmap[i].va + L.wmap[i].extent);
	for (uint32_t t = 0; t < p->ntraps; t++)
		was[t] = p->traps[t].compute.median;
	/* the bus: the copy curve's largest copy */
	double bus = p->ncurve ? (double)p->curve[p->ncurve - 1].bytes /
				 (p->curve[p->ncurve - 1].ms > 0 ? p->curve[p->ncurve - 1].ms : 1)
			       : 0;
	uint32_t n = ft_traps_exclude_bus(p->traps, p->ntraps, host, bus);
	for (uint32_t t = 0; t < p->ntraps; t++)
		if (host[t] && was[t] != p->traps[t].compute.median)
			ft_info("profile %s: %.3f ms measured with %.1f MiB of its weights in host "
				"memory; planned with %.3f ms", p->traps[t].label, was[t],
				(double)host[t] / 1048576.0, p->traps[t].compute.median);
	if (n)
		ft_info("profiling: %u traps were timed with weights in host memory (the budget "
			"was full before the plan): their compute is estimated without the bus "
			"reads, and the first eager passes after the plan replace the estimates", n);
	free(host);
	free(was);
}

static void finish_profiling(void)
{
	struct ft_profile *p = &L.prof;
	float *v = malloc((L.nsamples + 1) * sizeof(*v));
	double sum = 0;
	for (uint32_t t = 0; v && t < p->ntraps; t++) {
		uint32_t n = 0;
		for (uint32_t k = 0; k < L.nsamples; k++) {
			float ms = L.samples[(size_t)t * L.samples_cap + k];
			if (!isnan(ms))
				v[n++] = ms;
		}
		if (!n)
			continue;
		qsort(v, n, sizeof(*v), cmp_float);
		p->traps[t].compute = (struct ft_stat_ms){ v[n / 2], v[0], v[n - 1], n };
		sum += v[n / 2];
		ft_info("profile %-9s %-9s %8.2f MiB  compute %.3f ms (min %.3f, max %.3f, %u samples)",
			p->traps[t].label, p->traps[t].role, (double)p->traps[t].bytes / 1048576.0,
			v[n / 2], v[0], v[n - 1], n);
	}
	free(v);
	ft_info("profiling: %u passes timed, %.3f ms of trap compute per pass", L.nsamples, sum);
	shared_weights();
	exclude_bus();
	ft_learn_offload();
	if (ft_g.opt.profile_storage_dir)
		ft_learn_save(NULL);
}

int ft_learn_save(const char *dir)
{
	struct ft_profile *p = &L.prof;
	dir = dir ? dir : ft_g.opt.profile_storage_dir;
	if (!dir || !p->nweights || ft_g.phases.phase != FT_PHASE_INFERENCE) {
		ft_warn("profile not saved: %s", !dir ? "no directory given and "
			"FT_PROFILE_STORAGE_DIR is not set" : "nothing learnt yet (not in INFERENCE, "
			"or no weights found)");
		return -1;
	}
	if (ft_g.opt.profile_read_only) {
		ft_info("FT_PROFILE_READ_ONLY=1: %s/%s not written", dir, FT_PROFILE_FILE);
		return -1;
	}
	int rc = ft_profile_save(p, dir);
	if (rc)
		ft_warn("cannot write %s/%s: %s", dir, FT_PROFILE_FILE, strerror(-rc));
	else
		ft_info("profile written to %s/%s", dir, FT_PROFILE_FILE);
	if (ft_trace_on(&ft_g.trace)) {
		cJSON *rec = ft_trace_begin("profile");
		ft_trace_str(rec, "dir", dir);
		ft_trace_num(rec, "result", rc);
		ft_trace_emit(&ft_g.trace, rec);
	}
	return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ passes */

void ft_learn_alloc(uint64_t id)
{
	if (atomic_load_explicit(&ft_g.phase, memory_order_relaxed) != FT_PHASE_DISCOVERY)
		return;
	pthread_mutex_lock(&ft_g.learn_lock);
	uint32_t i = L.nallocs++ % FT_ALLOC_EVENTS;
	L.allocs[i].seq = atomic_load(&ft_g.stats.v[FT_STAT_launches]);
	L.allocs[i].id = id;
	pthread_mutex_unlock(&ft_g.learn_lock);
}

/* Whatever was allocated after launch `first` began the first forward is not
 * a weight (activation segments made by the first forward, workspaces made
 * at the first GEMM). */
static void cutoff_since(uint64_t first)
{
	uint32_t n = L.nallocs < FT_ALLOC_EVENTS ? L.nallocs : FT_ALLOC_EVENTS;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (L.nallocs - n + k) % FT_ALLOC_EVENTS;
		if (L.allocs[i].seq > first) {
			if (L.allocs[i].id < L.disc.cutoff_id)
				L.disc.cutoff_id = L.allocs[i].id;
			break;
		}
	}
}

static int since_cutoff(void *arg, CUdeviceptr base)
{
	(void)arg;
	struct ft_alloc a;
	return !ft_registry_lookup(&ft_g.reg, base, &a) && a.id >= L.disc.cutoff_id;
}

/* What was allocated since the first forward began is no weight
 * (activations, workspaces, caches), nor is anything allocated from now on:
 * over a budget that the weights filled before any plan, it got host
 * memory, and every kernel would read and write it over the bus through
 * discovery and profiling (a Qwen2-7B layer timed at 20 times its compute
 * on the H200).  It moves to the GPU; the budget is the weights'. */
static void activations_to_gpu(void)
{
	ft_vmm_exempt_new(&ft_g.vmm);
	if (!ft_vmm_host_bytes(&ft_g.vmm))
		return;
	uint64_t moved = ft_vmm_migrate_if(&ft_g.vmm, since_cutoff, NULL);
	if (moved) {
		FT_STAT_ADD(&ft_g.stats, vmm_migrated_bytes, moved);
		ft_info("discovery: %.1f MiB allocated during the passes so far (not weights) moved "
			"from host memory to the GPU; %.1f MiB stay in host memory until the plan",
			(double)moved / 1048576.0, (double)ft_vmm_host_bytes(&ft_g.vmm) / 1048576.0);
	}
}

/* Discovery starts once two consecutive passes had about the same number of
 * launches: then both were forwards (what comes before, weight
 * initialisation or loading, repeats differently), the first of them began
 * at bounds[0], and what was allocated since is not a weight. */
static void start_discovery(int source, uint64_t at)
{
	if (L.nbounds >= 2) {
		uint64_t a = L.bounds[1] - L.bounds[0], b = at - L.bounds[1];
		if (2 * a <= 3 * b && 2 * b <= 3 * a &&
		    !ft_disc_init(&L.disc, ft_registry_next_id(&ft_g.reg))) {
			cutoff_since(L.bounds[0]);
			L.started = 1;
			activations_to_gpu();
			feed_moved(source);
			return;
		}
	}
	if (L.nbounds == 2)
		L.bounds[0] = L.bounds[1];
	L.bounds[L.nbounds == 2 ? 1 : L.nbounds++] = at;
}

/* FT_SKIP_DISCOVERY with a loaded profile: after the first discovery pass,
 * the regions read in it (not written, large enough, in first-touch order)
 * are taken as the weights if they match the saved profile exactly; then
 * INFERENCE begins at once.  Returns 1 when it did. */
static int skip_discovery(void)
{
	if (!ft_g.opt.skip_discovery || !L.have_saved || L.skip_tried)
		return 0;
	L.skip_tried = 1;
	L.disc.content_known = 1;
	int adopted = finish_discovery(1) > 0;
	L.disc.content_known = 0;
	if (!adopted)
		return 0;
	ft_g.phases.phase = FT_PHASE_INFERENCE;
	atomic_store_explicit(&ft_g.phase, FT_PHASE_INFERENCE, memory_order_relaxed);
	ft_info("pass %llu: FT_SKIP_DISCOVERY=1 and the first pass matches the saved profile: "
		"entering INFERENCE", (unsigned long long)ft_g.phases.total);
	ft_learn_offload();
	return 1;
}

void ft_obs_pass(int source, uint64_t start)
{
	static const int stat[] = { 0, FT_STAT_passes_eager, FT_STAT_passes_graph,
				    FT_STAT_passes_marked };
	if (source <= FT_PASS_NONE || source > FT_PASS_MARK)
		return;
	atomic_fetch_add_explicit(&ft_g.stats.v[stat[source]], 1, memory_order_relaxed);
	int phase = ft_g.phases.phase, changed = 0;
	uint64_t at = source == FT_PASS_EAGER ? start : atomic_load(&ft_g.stats.v[FT_STAT_launches]);
	if (!L.started) {
		start_discovery(source, at);
	} else {
		if (phase == FT_PHASE_DISCOVERY) {
			ft_disc_pass_end(&L.disc);
			feed_moved(source);
			if (skip_discovery()) {
				ft_g.phases.total++;
				goto trace;
			}
			sample_checksums();
		} else if (phase == FT_PHASE_PROFILING) {
			analyse(source == FT_PASS_EAGER ? start : UINT64_MAX);
		}
		changed = ft_phases_pass(&ft_g.phases);
	}
	if (changed) {
		atomic_store_explicit(&ft_g.phase, ft_g.phases.phase, memory_order_relaxed);
		ft_info("pass %llu (%s): entering %s", (unsigned long long)ft_g.phases.total,
			pass_sources[source], ft_phase_name(ft_g.phases.phase));
		if (ft_g.phases.phase == FT_PHASE_INFERENCE) {
			finish_profiling();
		} else if (finish_discovery(0) > 0) {
			ft_g.phases.phase = FT_PHASE_INFERENCE;
			atomic_store_explicit(&ft_g.phase, FT_PHASE_INFERENCE, memory_order_relaxed);
			ft_info("pass %llu: entering INFERENCE", (unsigned long long)ft_g.phases.total);
			ft_learn_offload();
		}
	}
trace:
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin("pass");
	ft_trace_str(rec, "source", pass_sources[source]);
	ft_trace_num(rec, "passes", (double)ft_g.phases.total);
	if (source == FT_PASS_EAGER)
		ft_trace_num(rec, "start_seq", (double)start);
	ft_trace_str(rec, "phase", ft_phase_name(ft_g.phases.phase));
	ft_trace_emit(&ft_g.trace, rec);
}

unsigned ft_learn_regions(const struct ft_refs *refs, struct ft_region_ref *out)
{
	unsigned n = 0;
	for (unsigned i = 0; i < refs->n; i++)
		if (!refs->v[i].stale)
			out[n++] = (struct ft_region_ref){ refs->v[i].alloc_id, refs->v[i].offset,
							   refs->v[i].alloc_base, refs->v[i].alloc_size };
	return n;
}

void ft_learn_after(const struct ft_launch *l, const struct ft_refs *refs, uint64_t seq)
{
	int phase = atomic_load_explicit(&ft_g.phase, memory_order_relaxed);
	if (phase == FT_PHASE_INFERENCE)
		return;
	struct ft_region_ref r[FT_MAX_REFS];
	unsigned nr = ft_learn_regions(refs, r);
	pthread_mutex_lock(&ft_g.learn_lock);
	if (phase == FT_PHASE_PROFILING && L.npl && L.pl[L.npl - 1].seq == seq &&
	    record(L.pl[L.npl - 1].after, l))
		L.prof_failed = 1;
	uint64_t start = 0;
	int src = ft_passes_launch(&ft_g.passes, seq, r, nr, &start);
	if (src != FT_PASS_NONE)
		ft_obs_pass(src, start); /* feeds this launch to the new pass */
	else if (L.started && ft_g.phases.phase == FT_PHASE_DISCOVERY)
		disc_feed(r, nr, 1);
	pthread_mutex_unlock(&ft_g.learn_lock);
}

void ft_learn_replay(uint64_t exec)
{
	struct ft_region_ref *r = NULL;
	uint32_t n = ft_graphs_exec_refs(ft_g.graphs, exec, &r);
	pthread_mutex_lock(&ft_g.learn_lock);
	int src = ft_passes_graph(&ft_g.passes, n > 0);
	if (src != FT_PASS_NONE) {
		ft_obs_pass(src, 0);
		/* the replay is the new pass: it reads what its capture read */
		if (L.started && ft_g.phases.phase == FT_PHASE_DISCOVERY)
			disc_feed(r, n, 0);
	}
	pthread_mutex_unlock(&ft_g.learn_lock);
	free(r);
}

void ft_learn_write(uint64_t alloc_id, uint64_t offset, uint64_t bytes)
{
	if (atomic_load_explicit(&ft_g.phase, memory_order_relaxed) != FT_PHASE_DISCOVERY)
		return;
	pthread_mutex_lock(&ft_g.learn_lock);
	if (L.started)
		ft_disc_write(&L.disc, alloc_id, offset, bytes);
	pthread_mutex_unlock(&ft_g.learn_lock);
}
