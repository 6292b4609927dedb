/*
 * DISCOVERY (include/ft/learn.h): the regions launches read, content
 * samples at pass boundaries, and at its end the weights, the traps they
 * form (cut for a small budget, never between weights read together), the
 * traps read together, and the copy curve.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/search.h"
#include "ft/traps.h"
#include "learn_int.h"

/* Regions from this size up that are not weights are named in the log. */
#define FT_BIG_REGION (64ull << 20)

/* Regions read (one launch's when launch is set: read together too; a
 * replay's are its capture's, of many launches). */
void ft_learn_feed(struct ft_discover *d, const struct ft_region_ref *r, unsigned n, int launch)
{
	uint64_t ids[FT_MAX_REFS], offs[FT_MAX_REFS];
	for (unsigned i = 0; i < n; i++) {
		ft_disc_read(d, r[i].alloc_id, r[i].offset, r[i].alloc_base, r[i].alloc_size);
		if (i < FT_MAX_REFS) {
			ids[i] = r[i].alloc_id;
			offs[i] = r[i].offset;
		}
	}
	if (launch && n > 1)
		ft_disc_together(d, ids, offs, n < FT_MAX_REFS ? n : FT_MAX_REFS);
}

static int alive(struct ft_learn *L, const struct ft_disc_region *r)
{
	struct ft_alloc a;
	return !ft_registry_lookup(L->env.reg, r->alloc_base, &a) && a.id == r->alloc_id;
}

void ft_learn_sample(struct ft_learn *L)
{
	if (atomic_load(L->env.captures)) {
		ft_info("pass boundary during a stream capture: no content sample this pass");
		return;
	}
	if (ft_gpu_start(&L->gpu, L->env.real)) {
		ft_warn_once("cannot load the checksum kernel: weights cannot be told from "
			     "buffers written by kernels; nothing will be classified as a weight");
		return;
	}
	ft_disc_extents(&L->disc);
	uint32_t n = 0, *idx = malloc((L->disc.n + 1) * sizeof(*idx));
	uint64_t *addr = malloc((L->disc.n + 1) * sizeof(*addr));
	uint64_t *bytes = malloc((L->disc.n + 1) * sizeof(*bytes));
	uint64_t *sums = malloc((L->disc.n + 1) * sizeof(*sums));
	if (idx && addr && bytes && sums) {
		for (uint32_t i = 0; i < L->disc.n; i++) {
			enum ft_disc_reason r = ft_disc_classify(&L->disc, i);
			const struct ft_disc_region *x = &L->disc.r[i];
			/* a part over its own bytes: a view's never change */
			if ((r == FT_DISC_WEIGHT || r == FT_DISC_UNCHECKED || r == FT_DISC_PART) &&
			    alive(L, x)) {
				idx[n] = i;
				addr[n] = x->alloc_base + x->offset;
				bytes[n++] = x->extent;
			}
		}
		if (ft_gpu_checksums(&L->gpu, addr, bytes, n, sums))
			ft_warn_once("checksumming candidate weights failed; they stay unclassified");
		else
			for (uint32_t k = 0; k < n; k++)
				ft_disc_sum(&L->disc, idx[k], sums[k]);
	}
	free(idx);
	free(addr);
	free(bytes);
	free(sums);
}

int ft_learn_wmap_cmp(const void *a, const void *b)
{
	const struct ft_wmap *x = a, *y = b;
	if (x->alloc_id != y->alloc_id)
		return x->alloc_id < y->alloc_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void trace_discovery(struct ft_learn *L, const unsigned *reasons, uint64_t total)
{
	if (!ft_trace_on(L->env.trace))
		return;
	cJSON *rec = ft_trace_begin("discovery");
	ft_trace_num(rec, "weights", L->prof.nweights);
	ft_trace_num(rec, "weight_bytes", (double)total);
	ft_trace_num(rec, "traps", L->prof.ntraps);
	cJSON *rej = cJSON_AddObjectToObject(rec, "regions");
	for (int r = 0; r < FT_DISC_REASONS; r++)
		ft_trace_num(rej, ft_disc_reason_name(r), reasons[r]);
	cJSON *w = cJSON_AddArrayToObject(rec, "weights_in_order");
	for (uint32_t i = 0; i < L->nwmap && i < 4096; i++) {
		cJSON *o = cJSON_CreateObject();
		ft_trace_num(o, "id", (double)L->wmap[i].alloc_id);
		ft_trace_num(o, "off", (double)L->wmap[i].offset);
		ft_trace_num(o, "trap", L->wmap[i].trap);
		cJSON_AddItemToArray(w, o);
	}
	ft_trace_emit(L->env.trace, rec);
}

void ft_learn_coread(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	uint32_t (*keep)[2] = malloc((L->nwpairs + 1) * sizeof(*keep)), n = 0;
	for (uint32_t k = 0; keep && k < L->nwpairs; k++)
		if (!ft_learn_shared(p, L->wpairs[k][0]) && !ft_learn_shared(p, L->wpairs[k][1]))
			memcpy(keep[n++], L->wpairs[k], sizeof(*keep));
	if (!keep || ft_coread_from_weights(p, (const uint32_t (*)[2])keep, n))
		ft_warn_once("out of memory for the traps read together");
	free(keep);
}

static void drop_discovery(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	free(p->weights);
	free(p->sums);
	free(p->traps);
	free(p->coread);
	free(p->shared);
	free(p->nslices);
	free(p->slices);
	free(L->wmap);
	free(L->slices);
	L->slices = NULL;
	L->nslices = 0;
	free(L->wpairs);
	L->wpairs = NULL;
	L->nwpairs = 0;
	p->weights = NULL;
	p->sums = NULL;
	p->traps = NULL;
	p->coread = NULL;
	p->shared = NULL;
	p->nshared = 0;
	p->nslices = NULL;
	p->slices = NULL;
	L->wmap = NULL;
	p->nweights = p->ntraps = p->ncoread = L->nwmap = 0;
}

/* Memory mode: when FT_MIN_BLOCKS blocks of the largest layer would take
 * more than half of the budget (ft_learn_budget, as the plan counts it)
 * less the traps that are not layers and the unchecked regions, the blocks
 * leave little or no room for resident layers (or whole layers could never
 * be offloaded): every layer is then offloaded and the pass runs at the copy
 * floor of nearly the whole decoder.  Layers are cut into traps small
 * enough that the blocks take at most half of what is left (the layer's
 * weights are still loaded in the order they are read), never between
 * weights one launch reads together (pairs[0..npairs),
 * ft_disc_weight_pairs).  (On the H200, 8 layers of 416 MiB with 1660 MiB
 * left: 4 whole-layer blocks took it all, 3914 MiB were offloaded and the
 * pass ran at 75 ms; cut, 2128 MiB and 41 ms.) */
static void split_for_budget(struct ft_learn *L, struct ft_profile *p,
			     const uint32_t (*pairs)[2], uint32_t npairs)
{
	uint64_t weights = L->unchecked_bytes, other = L->unchecked_bytes, big = 0;
	for (uint32_t k = 0; k < p->ntraps; k++) {
		weights += p->traps[k].bytes;
		if (strcmp(p->traps[k].role, "layer"))
			other += p->traps[k].bytes;
		else if (p->traps[k].bytes > big)
			big = p->traps[k].bytes;
	}
	uint64_t budget = p->ntraps ? ft_learn_budget(L, weights) : 0;
	if (!budget)
		return;
	uint64_t b = L->env.opt->min_blocks < 2 ? 2 : (uint64_t)L->env.opt->min_blocks;
	if (!big || budget <= other || 2 * big * b <= budget - other)
		return;
	uint64_t piece = (budget - other) / (2 * b);
	uint8_t *nocut = ft_traps_nocut(p->traps, p->ntraps, p->nweights, pairs, npairs);
	int k = nocut ? ft_traps_split(&p->traps, p->ntraps, p->weights, piece, nocut) : -1;
	free(nocut);
	if (k <= 0)
		return;
	ft_info("the budget leaves %.0f MiB beside the traps that are not layers: %llu blocks of a "
		"%.0f MiB layer would take more than half of it; layers are cut into traps of at most "
		"%.0f MiB (%d traps)",
		(double)(budget - other) / 1048576.0, (unsigned long long)b, (double)big / 1048576.0,
		(double)piece / 1048576.0, k);
	p->ntraps = (uint32_t)k;
}

/* Traps whose weights' reads interleave are one (ft_traps_join).  (On the
 * H200, transformers' loop over a Mixtral layer's routed experts read expert
 * e's slice of the stacked up projection, then of the down projection, then
 * the next expert's: in two traps, the first was read again after the
 * second began, in every pass, and stayed on the GPU.) */
static void join_interleaved(struct ft_profile *p, const uint32_t (*pairs)[2], uint32_t npairs)
{
	if (!npairs || !p->ntraps)
		return;
	int k = ft_traps_join(&p->traps, p->ntraps, p->weights, pairs, npairs);
	if (k <= 0 || (uint32_t)k == p->ntraps)
		return;
	ft_info("discovery: weights whose reads interleave (a loop over routed experts reads "
		"one expert's slices of two stacked tensors in turn) joined %u traps into %d",
		p->ntraps, k);
	p->ntraps = (uint32_t)k;
}

/* The traps of the weights (L->wmap, first-touch order) as L->prof.traps
 * says, and whether any byte of each would leave the GPU with its trap
 * (ft_off_movable) into L->wmap[].movable. */
static void movable_weights(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	struct ft_off_weight *w = malloc((p->nweights + 1) * sizeof(*w));
	uint8_t *m = malloc(p->nweights + 1);
	for (uint32_t t = 0; t < p->ntraps; t++)
		for (uint32_t j = 0; j < p->traps[t].nweights; j++)
			L->wmap[p->traps[t].first_weight + j].trap = t;
	if (w && m) {
		for (uint32_t k = 0; k < p->nweights; k++)
			w[k] = (struct ft_off_weight){ .lo = L->wmap[k].va,
						       .hi = L->wmap[k].va + L->wmap[k].extent,
						       .trap = L->wmap[k].trap };
		ft_off_movable(L->env.vmm, w, p->nweights, m);
	}
	for (uint32_t k = 0; k < p->nweights; k++)
		L->wmap[k].movable = !w || !m || m[k]; /* out of memory: as if all were */
	free(w);
	free(m);
}

/* Of pairs of weights read together, those whose weights both have bytes
 * that can leave the GPU with the traps as they are now. */
static uint32_t keep_movable(struct ft_learn *L, uint32_t (*pairs)[2], uint32_t n)
{
	movable_weights(L);
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (L->wmap[pairs[i][0]].movable && L->wmap[pairs[i][1]].movable)
			memcpy(pairs[k++], pairs[i], sizeof(*pairs));
	return k;
}

int ft_learn_unsettled(struct ft_learn *L)
{
	uint64_t weights = 0, once = 0, unread = 0;
	ft_disc_extents(&L->disc);
	for (uint32_t i = 0; i < L->disc.n; i++) {
		const struct ft_disc_region *r = &L->disc.r[i];
		enum ft_disc_reason why = ft_disc_classify(&L->disc, i);
		if (r->extent < FT_WEIGHT_MIN_BYTES || !alive(L, r))
			continue;
		if (why == FT_DISC_WEIGHT)
			weights += r->extent;
		else if (why == FT_DISC_UNCHECKED && r->views && r->nsums &&
			 r->sum_extent == r->extent)
			once += r->extent; /* (a region read through views) */
		/* (a region that is its whole allocation has its bounds: the
		 * experts not read yet change nothing of them) */
		if (r->owner == i && r->alloc_id < L->disc.cutoff_id &&
		    (r->offset || r->extent != r->alloc_size))
			unread += ft_disc_unread_slices(&L->disc, i, r->extent);
	}
	if (once && once >= (weights + once) / 32)
		return FT_UNSETTLED_ONCE;
	/* experts keep being routed to for the first time: the tensors'
	 * starts and sizes may still move (a routed expert picked for the
	 * first time after two passes without one, on the H200) */
	return unread || ft_disc_new_slices(&L->disc, 3) ? FT_UNSETTLED_SLICES : 0;
}

/* Every region's verdict, counted in reasons; the bytes of the regions
 * whose content could not be checked (they stay, and count against the
 * budget); large regions that are not weights are named. */
static void classify(struct ft_learn *L, unsigned *reasons)
{
	ft_disc_extents(&L->disc);
	L->unchecked_bytes = 0;
	for (uint32_t i = 0; i < L->disc.n; i++) {
		enum ft_disc_reason why = ft_disc_classify(&L->disc, i);
		reasons[why]++;
		const struct ft_disc_region *r = &L->disc.r[i];
		if (why == FT_DISC_UNCHECKED && r->extent >= FT_WEIGHT_MIN_BYTES && alive(L, r))
			L->unchecked_bytes += r->extent;
		/* a large region that is not a weight: say why (a weight
		 * discovery missed stays resident and costs budget) */
		if (why != FT_DISC_WEIGHT && why != FT_DISC_TOO_NEW && r->extent >= FT_BIG_REGION &&
		    alive(L, r))
			ft_info("discovery: %.1f MiB at allocation %llu + %llu is not a weight: %s",
				(double)r->extent / 1048576.0, (unsigned long long)r->alloc_id,
				(unsigned long long)r->offset, ft_disc_reason_name(why));
	}
}

/* The weights, regions idx[0..n) in first-touch order, into the profile
 * and L->wmap (in that order for now); their bytes. */
/* The slices of weight m (discovery's region i) into L->slices, when the
 * data chooses views into it (ft_disc_slices): the executor can load one
 * routed expert of a stacked tensor rather than all of it. */
static void take_slices(struct ft_learn *L, struct ft_wmap *m, uint32_t i)
{
	uint32_t n = ft_disc_slices(&L->disc, i, m->extent, NULL, 0);
	uint64_t *s = n ? realloc(L->slices, (L->nslices + n) * sizeof(*s)) : NULL;
	if (!s)
		return; /* (out of memory: the weight loads whole) */
	L->slices = s;
	ft_disc_slices(&L->disc, i, m->extent, s + L->nslices, n);
	m->sl_first = L->nslices;
	m->nsl = n;
	L->nslices += n;
}

/* The weights' slices into the profile, where it has none: profile.json
 * keeps them for a restart, whose one discovery pass cannot tell them.
 * (L->wmap is in weight order still, and L->slices theirs, weight after
 * weight: take_slices.) */
static void profile_slices(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	if (p->nslices || !L->nslices)
		return;
	p->nslices = calloc(p->nweights + 1, sizeof(*p->nslices));
	p->slices = malloc(L->nslices * sizeof(*p->slices));
	if (!p->nslices || !p->slices) {
		free(p->nslices);
		free(p->slices);
		p->nslices = NULL;
		p->slices = NULL;
		return;
	}
	memcpy(p->slices, L->slices, L->nslices * sizeof(*p->slices));
	for (uint32_t k = 0; k < p->nweights; k++)
		p->nslices[k] = L->wmap[k].nsl;
}

/* An adopted profile's slices, where this run's discovery found none (a
 * restart after one pass): the weights are the saved ones, in order. */
static void saved_slices(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	uint32_t total = 0;
	for (uint32_t k = 0; p->nslices && k < p->nweights; k++)
		total += p->nslices[k];
	if (!total || L->nslices)
		return;
	uint64_t *s = malloc(total * sizeof(*s));
	if (!s)
		return; /* (out of memory: the weights load whole) */
	memcpy(s, p->slices, total * sizeof(*s));
	free(L->slices);
	L->slices = s;
	L->nslices = total;
	for (uint32_t k = 0, at = 0; k < p->nweights; k++) {
		L->wmap[k].sl_first = at;
		L->wmap[k].nsl = p->nslices[k];
		at += p->nslices[k];
		/* the experts this run's one pass did not read are views too
		 * (else a read of one would be a foreign tensor's) */
		if (p->nslices[k])
			L->wmap[k].views = L->wmap[k].extent;
	}
}

static uint64_t take_weights(struct ft_learn *L, const uint32_t *idx, uint32_t n)
{
	struct ft_profile *p = &L->prof;
	p->schema = FT_PROFILE_SCHEMA;
	snprintf(p->library, sizeof(p->library), "%s", FT_VERSION);
	ft_gpu_device(&L->gpu, p->device.name, sizeof(p->device.name), &p->device.total_bytes,
		      &p->device.driver);
	p->weights = calloc(n + 1, sizeof(*p->weights));
	p->sums = calloc(n + 1, sizeof(*p->sums));
	L->wmap = calloc(n + 1, sizeof(*L->wmap));
	uint64_t total = 0;
	for (uint32_t k = 0; k < n && p->weights && L->wmap; k++) {
		const struct ft_disc_region *r = &L->disc.r[idx[k]];
		p->weights[k] = r->extent;
		/* the checksum of its contents, when one covers them all */
		if (p->sums && r->nsums && r->sum_extent == r->extent) {
			p->sums[k] = r->sum;
		} else {
			free(p->sums);
			p->sums = NULL;
		}
		L->wmap[k] = (struct ft_wmap){ r->alloc_id, r->offset, r->alloc_base + r->offset,
					      r->extent, 0, k, 1, r->views, 0, 0 };
		total += r->extent;
		take_slices(L, &L->wmap[k], idx[k]);
	}
	p->nweights = p->weights && L->wmap ? n : 0;
	p->fingerprint = ft_profile_fingerprint(p->weights, p->nweights);
	return total;
}

/* Regions of one size, four or more, read in some passes and not all,
 * never written by copies, in allocations older than the passes: the
 * experts of a mixture-of-experts model in allocations of their own, most
 * likely.  They are not weights (only regions read every pass, and views
 * into them, are), so they stay on the GPU: said at warn, once. */
static void warn_sometimes(struct ft_learn *L)
{
	const struct ft_discover *d = &L->disc;
	uint64_t *ext = malloc((d->n + 1) * sizeof(*ext));
	uint32_t n = 0, best = 0;
	uint64_t size = 0;
	for (uint32_t i = 0; ext && i < d->n; i++) {
		const struct ft_disc_region *r = &d->r[i];
		if (ft_disc_classify(d, i) == FT_DISC_NOT_EVERY && !r->written && r->mtouched &&
		    r->extent >= FT_WEIGHT_MIN_BYTES && alive(L, r))
			ext[n++] = r->extent;
	}
	if (ext)
		qsort(ext, n, sizeof(*ext), ft_cmp_u64);
	for (uint32_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && ext[j] == ext[i]; j++)
			;
		if (j - i > best) {
			best = j - i;
			size = ext[i];
		}
	}
	free(ext);
	if (best >= 4)
		ft_warn("discovery: %u regions of %.1f MiB each (%.1f MiB), there before the first "
			"pass and never written by copies, were read in some passes but not in all "
			"(a mixture-of-experts model's experts, each in an allocation of its own?): "
			"they stay on the GPU; only what every pass reads, or views into it, is "
			"offloaded", best, (double)size / 1048576.0,
			(double)size * best / 1048576.0);
}

static void log_discovery(struct ft_learn *L, const unsigned *reasons, uint64_t total)
{
	const struct ft_profile *p = &L->prof;
	uint32_t layers = 0, period = 0;
	for (uint32_t k = 0; k < p->ntraps; k++)
		if (!strcmp(p->traps[k].role, "layer") && ++layers == 1)
			period = p->traps[k].nweights;
	ft_info("discovery: %u weights, %.1f MiB, in %u traps (%u layer traps, the first of %u weights); "
		"regions not weights: %u allocated during passes, %u not read every pass, "
		"%u written by copies, %u changed, %u unchecked (%.1f MiB, stay on the GPU), %u small, "
		"%u views into a region before them (a row, an expert: parts of it)",
		p->nweights, (double)total / 1048576.0, p->ntraps, layers, period,
		reasons[FT_DISC_TOO_NEW], reasons[FT_DISC_NOT_EVERY], reasons[FT_DISC_WRITTEN],
		reasons[FT_DISC_CHANGED], reasons[FT_DISC_UNCHECKED],
		(double)L->unchecked_bytes / 1048576.0, reasons[FT_DISC_SMALL],
		reasons[FT_DISC_PART]);
	if (L->declared) {
		uint32_t params = 0;
		for (uint32_t i = 0; i < L->ndecl; i++)
			params += !L->decl[i].buffer;
		ft_info("declared: %u of %u declared parameters are weights (read in every "
			"pass); %u regions read were not declared, %u were declared buffers "
			"(neither is offloaded)", p->nweights, params, reasons[FT_DISC_UNDECLARED],
			reasons[FT_DISC_BUFFER]);
		if (!p->nweights)
			ft_warn("no declared parameter was read in the passes of discovery (the model "
				"was moved or converted after offload(), or another model ran?): "
				"there is nothing to offload; call offload() after the model is "
				"where it runs");
	} else if (!p->nweights) {
		ft_warn("discovery found no weights (nothing read every pass with unchanged "
			"content); there is nothing to offload or profile");
	}
}

/* Whether the allocation at base holds no weight (L->wmap is sorted by
 * allocation). */
static int holds_no_weight(void *arg, CUdeviceptr base)
{
	struct ft_learn *L = arg;
	struct ft_alloc a;
	if (ft_registry_lookup(L->env.reg, base, &a))
		return 0; /* not known: it stays where it is */
	uint32_t k = ft_upper_bound(L->wmap, L->nwmap, sizeof(*L->wmap),
				    offsetof(struct ft_wmap, alloc_id), a.id);
	return !k || L->wmap[k - 1].alloc_id != a.id;
}

/* Weights are known: whatever else got host memory while the budget was
 * full (the first forward's activations, allocated before discovery could
 * tell them from weights: on the H200 every other Qwen2-7B layer timed at
 * 5x its compute) moves to the GPU, so that profiling times compute and
 * the reads over the bus of weights alone. */
static void non_weights_to_gpu(struct ft_learn *L)
{
	ft_learn_to_gpu(L, holds_no_weight, "that hold no weight");
}

/* Profiling comes next: the copy curve (pinned memory, as upstream
 * measures it) and room for the samples. */
static void prepare_profiling(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	static const uint64_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
					  64 << 20 };
	p->curve = atomic_load(L->env.captures) ? NULL : calloc(6, sizeof(*p->curve));
	if (p->curve) {
		for (int i = 0; i < 6; i++)
			p->curve[i].bytes = sizes[i];
		if (ft_gpu_copy_curve(&L->gpu, p->curve, 6)) {
			ft_warn_once("could not measure the copy curve; profile.json will lack it");
			free(p->curve);
			p->curve = NULL;
		} else {
			p->ncurve = 6;
		}
	}
	L->skip_sample = !L->declared; /* marked passes: none began unobserved */
	L->samples_cap = (uint32_t)L->phases.profiling;
	L->samples = calloc((size_t)p->ntraps * L->samples_cap + 1, sizeof(*L->samples));
	L->revisited = calloc(L->nwmap + 1, sizeof(*L->revisited));
	if (!L->samples)
		L->prof_failed = 1;
}

uint64_t ft_learn_region_sum(void *ctx, const struct ft_disc_region *r, uint64_t bytes)
{
	struct ft_learn *L = ctx;
	uint64_t addr = r->alloc_base + r->offset, sum = 0;
	/* a checksum waits for the device, which would invalidate a capture
	 * another thread began meanwhile */
	if (atomic_load(L->env.captures)) {
		L->sums_refused = 1;
		return 0;
	}
	if (!alive(L, r) || ft_gpu_checksums(&L->gpu, &addr, &bytes, 1, &sum))
		return 0;
	return sum;
}

/* Returns 1 when a saved profile was adopted (INFERENCE comes now).  After
 * one pass (end not FT_END_PASSES), when it does not match, nothing is kept
 * and discovery goes on (returns -1). */
int ft_learn_finish_discovery(struct ft_learn *L, enum ft_disc_end end)
{
	int trial = end != FT_END_PASSES;
	struct ft_profile *p = &L->prof;
	unsigned reasons[FT_DISC_REASONS] = { 0 };
	classify(L, reasons);
	uint32_t *idx;
	uint32_t n = ft_disc_weights(&L->disc, &idx);
	if (idx)
		ft_learn_order_declared(L, idx, n);
	if (trial && idx) {
		/* one pass proves nothing about contents by itself: take exactly
		 * the saved sizes, in order, from what the pass read (with the
		 * saved checksums: the same bytes as the weights discovery found
		 * before, which no buffer written by kernels holds) */
		int content = end == FT_END_CONTENT;
		uint32_t found, missing;
		uint32_t m = ft_disc_match(&L->disc, &idx, n, L->saved.weights,
					   content ? L->saved.sums : NULL, L->saved.nweights,
					   ft_learn_region_sum, L, 1, &found, &missing);
		if (!m && content)
			ft_info("the first pass did not read the %u weights %s/%s lists with their "
				"contents (%u were found; not weight %u, %llu bytes, checksum "
				"%016llx): discovery runs its passes", L->saved.nweights,
				ft_learn_profile_name(L), FT_PROFILE_FILE, found, missing,
				(unsigned long long)L->saved.weights[missing],
				(unsigned long long)L->saved.sums[missing]);
		else if (!m)
			ft_warn("FT_SKIP_DISCOVERY=1: the first pass did not read regions of the "
				"%u sizes %s/%s lists, in its order; discovery runs",
				L->saved.nweights, ft_learn_profile_name(L), FT_PROFILE_FILE);
		n = m;
	}
	uint64_t total = take_weights(L, idx, n);
	uint32_t (*pairs)[2] = NULL;
	uint32_t (*inter)[2] = NULL;
	uint32_t ninter = p->nweights ? ft_disc_interleaved(&L->disc, idx, n, &inter) : 0;
	uint32_t npairs = p->nweights ? ft_disc_weight_pairs(&L->disc, idx, n,
							     (const uint32_t (*)[2])inter, ninter,
							     &pairs) : 0;
	free(idx);
	if (L->disc.pairs_full)
		ft_info("discovery: too many regions read together to keep them all; launches "
			"that read two traps of one block then bring one back to the GPU");
	int t = ft_learn_group_declared(L);
	if (t == 0)
		t = ft_traps_group(p->weights, p->nweights, total / 16 + 1, &p->traps);
	p->ntraps = t > 0 ? (uint32_t)t : 0;
	join_interleaved(p, (const uint32_t (*)[2])inter, ninter);
	free(inter);
	/* only weights with bytes that can leave the GPU are read together
	 * in a way that matters: a small one in a shared segment stays */
	npairs = keep_movable(L, pairs, npairs);
	split_for_budget(L, p, (const uint32_t (*)[2])pairs, npairs);
	ft_learn_label_declared(L);
	int adopted = L->have_saved && p->nweights && ft_learn_adopt_saved(L, end);
	if (trial && !adopted) {
		free(pairs);
		drop_discovery(L);
		return -1;
	}
	npairs = keep_movable(L, pairs, npairs); /* with the final traps */
	/* traps read together (with a saved profile's, when adopted) */
	for (uint32_t k = 0; k < npairs; k++)
		if (ft_pairs_add(&L->wpairs, &L->nwpairs, pairs[k][0], pairs[k][1]) < 0)
			ft_warn_once("out of memory for the weights read together");
	free(pairs);
	ft_learn_coread(L);
	L->nwmap = p->nweights;
	if (adopted)
		saved_slices(L);
	profile_slices(L);
	trace_discovery(L, reasons, total);
	qsort(L->wmap, L->nwmap, sizeof(*L->wmap), ft_learn_wmap_cmp);
	log_discovery(L, reasons, total);
	warn_sometimes(L);
	non_weights_to_gpu(L);
	if (adopted)
		return 1;
	prepare_profiling(L);
	return 0;
}
