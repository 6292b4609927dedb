/*
 * PROFILING (include/ft/learn.h): each launch is bracketed by two events;
 * at each pass boundary the pass's launches are attributed to traps (a
 * launch belongs to the highest trap whose weights it, or an earlier launch
 * of the pass, read) and each trap's compute time is one sample; the traps
 * each launch reads are read together; weights read again after later
 * traps began are shared across the pass.  At its end the median times,
 * without the reads over the bus of weights that were in host memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/traps.h"
#include "learn_int.h"

/* The weight a read at (id, off) reads (index into L->wmap): the one that
 * begins there, or one of whose views discovery saw the data choose (a
 * routed expert's slice: a launch that reads only those reads the weight's
 * trap, whose compute it is); -1 when none. */
static int weight_at(struct ft_learn *L, uint64_t id, uint64_t off)
{
	uint32_t lo = 0, hi = L->nwmap;
	while (lo < hi) { /* the first weight after (id, off) */
		uint32_t mid = (lo + hi) / 2;
		const struct ft_wmap *w = &L->wmap[mid];
		if (w->alloc_id < id || (w->alloc_id == id && w->offset <= off))
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct ft_wmap *w = lo ? &L->wmap[lo - 1] : NULL;
	if (!w || w->alloc_id != id || (off != w->offset && off - w->offset >= w->views))
		return -1;
	return (int)lo - 1;
}

/* Events come from a free stack; created on demand, recycled after each
 * pass is analysed. */
static CUevent take_event(struct ft_learn *L)
{
	if (L->pool_next)
		return L->pool[--L->pool_next];
	CUevent e;
	if (!L->env.real->cuEventCreate ||
	    L->env.real->cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
		return NULL;
	return e;
}

static void give_event(struct ft_learn *L, CUevent e)
{
	if (L->pool_next == L->npool) {
		uint32_t cap = L->npool ? L->npool * 2 : 2048;
		CUevent *pool = realloc(L->pool, cap * sizeof(*pool));
		if (!pool)
			return; /* leaked, not reused */
		L->pool = pool;
		L->npool = cap;
	}
	L->pool[L->pool_next++] = e;
}

static int record(struct ft_learn *L, CUevent e, CUstream s, int ptsz)
{
	CUresult rc = ptsz ? L->env.real->cuEventRecord_ptsz(e, s) : L->env.real->cuEventRecord(e, s);
	return rc == CUDA_SUCCESS ? 0 : -1;
}

void ft_learn_timed(struct ft_learn *L, CUstream s, int ptsz, uint64_t seq)
{
	if (L->npl && L->pl[L->npl - 1].seq == seq && record(L, L->pl[L->npl - 1].after, s, ptsz))
		L->prof_failed = 1;
}

void ft_learn_before(struct ft_learn *L, CUstream s, int ptsz, const struct ft_refs *refs,
		     uint64_t seq)
{
	if (atomic_load_explicit(&L->phase, memory_order_relaxed) != FT_PHASE_PROFILING)
		return;
	pthread_mutex_lock(&L->lock);
	if (!L->prof_failed && L->phases.phase == FT_PHASE_PROFILING) {
		int trap = -1, seen[FT_MAX_REFS], nseen = 0; /* movable weights read */
		struct ft_prof_launch pl = { .seq = seq };
		for (unsigned i = 0; i < refs->n; i++) {
			if (refs->v[i].stale)
				continue;
			int k = weight_at(L, refs->v[i].alloc_id, refs->v[i].offset);
			int t = k < 0 ? -1 : (int)L->wmap[k].trap;
			if (t > trap)
				trap = t;
			/* what stays on the GPU anyway (a bias in a segment all
			 * layers share) can be read anywhere in the pass, and
			 * with anything */
			if (k < 0 || !L->wmap[k].movable)
				continue;
			if (pl.nw < 4)
				pl.w[pl.nw++] = (uint32_t)k;
			int j = 0;
			while (j < nseen && seen[j] != k)
				j++;
			if (j == nseen)
				seen[nseen++] = k;
		}
		/* the weights of two traps one launch reads together: the traps
		 * never get one block, unless one of the weights turns out to
		 * be read all over the pass (ft_learn_finish_profiling) */
		for (int a = 0; a < nseen; a++)
			for (int b = a + 1; b < nseen; b++) {
				const struct ft_wmap *x = &L->wmap[seen[a]], *y = &L->wmap[seen[b]];
				if (x->trap != y->trap &&
				    ft_pairs_add(&L->wpairs, &L->nwpairs, x->order, y->order) > 0)
					ft_debug("profiling: weights of traps %u and %u are read by "
						 "one launch (%llu)", x->trap, y->trap,
						 (unsigned long long)seq);
			}
		if (L->npl == L->cappl) {
			uint32_t cap = L->cappl ? L->cappl * 2 : 1024;
			struct ft_prof_launch *pl = realloc(L->pl, cap * sizeof(*pl));
			if (pl) {
				L->pl = pl;
				L->cappl = cap;
			}
		}
		CUevent b = take_event(L), a = b ? take_event(L) : NULL;
		if (L->npl < L->cappl && a && !record(L, b, s, ptsz)) {
			pl.trap = trap;
			pl.before = b;
			pl.after = a;
			L->pl[L->npl++] = pl;
		} else {
			L->prof_failed = 1;
			ft_warn("cannot record profiling events; trap timings will be missing");
		}
	}
	pthread_mutex_unlock(&L->lock);
}

/* The launches of the pass that ended before `end` (a launch number) are
 * one sample per trap; later ones stay for the next pass. */
void ft_learn_analyse(struct ft_learn *L, uint64_t end)
{
	uint32_t k = 0;
	while (k < L->npl && L->pl[k].seq < end)
		k++;
	uint32_t ntraps = L->prof.ntraps;
	/* Waiting on an event while another thread captures in global mode
	 * would invalidate that capture: no sample then. */
	int capturing = atomic_load(L->env.captures) > 0;
	if (L->skip_sample || capturing) {
		/* profiling began inside this pass (its first launches are
		 * missing), or a capture is in progress */
		if (!capturing)
			L->skip_sample = 0;
	} else if (k && ntraps && L->nsamples < L->samples_cap && !L->prof_failed &&
	    L->env.real->cuEventSynchronize(L->pl[k - 1].after) == CUDA_SUCCESS) {
		int cur = -1;
		uint32_t *first = calloc(ntraps, sizeof(*first)), *last = calloc(ntraps, sizeof(*last));
		char *seen = calloc(ntraps, 1), *again = calloc(L->nwmap + 1, 1);
		for (uint32_t i = 0; first && last && seen && again && i < k; i++) {
			/* a weight read again after a later trap began: offloading
			 * it with its trap would reload the trap within every pass */
			for (uint32_t j = 0; j < L->pl[i].nw; j++)
				if ((int)L->wmap[L->pl[i].w[j]].trap < cur)
					again[L->pl[i].w[j]] = 1;
			if (L->pl[i].trap > cur) {
				cur = L->pl[i].trap;
				first[cur] = i;
				seen[cur] = 1;
			}
			if (cur >= 0)
				last[cur] = i;
		}
		for (uint32_t t = 0; seen && t < ntraps; t++) {
			float ms = NAN;
			if (seen[t] && L->env.real->cuEventElapsedTime_v2(&ms, L->pl[first[t]].before,
								      L->pl[last[t]].after) != CUDA_SUCCESS)
				ms = NAN;
			/* a trap's first and last launches on two streams (another
			 * thread's forward in the pass) can end before they begin:
			 * no sample (the fake driver's stress run once planned
			 * from -78 ms) */
			if (ms < 0)
				ms = NAN;
			L->samples[(size_t)t * L->samples_cap + L->nsamples] = ms;
		}
		for (uint32_t j = 0; again && L->revisited && j < L->nwmap; j++)
			L->revisited[j] += again[j];
		L->nsamples++;
		free(first);
		free(last);
		free(seen);
		free(again);
	}
	for (uint32_t i = 0; i < k; i++) {
		give_event(L, L->pl[i].before);
		give_event(L, L->pl[i].after);
	}
	if (L->npl > k) /* L->pl is NULL before the first timed launch */
		memmove(L->pl, L->pl + k, (L->npl - k) * sizeof(*L->pl));
	L->npl -= k;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* The weights read again after later traps began in most profiled passes
 * (a table every layer reads, biases packed in one segment) into the
 * profile: they stay on the GPU, out of their traps (apply.c). */
static void shared_weights(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	free(p->shared);
	p->shared = NULL;
	p->nshared = 0;
	uint32_t n = 0;
	for (uint32_t j = 0; L->revisited && j < L->nwmap; j++)
		n += L->revisited[j] * 2 > L->nsamples;
	p->shared = n ? malloc(n * sizeof(*p->shared)) : NULL;
	for (uint32_t j = 0; p->shared && j < L->nwmap; j++)
		if (L->revisited[j] * 2 > L->nsamples)
			p->shared[p->nshared++] = L->wmap[j].order;
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
 * and replaced by the first eager passes after the plan (refresh.c). */
static void exclude_bus(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	L->timed_over_budget = ft_vmm_host_bytes(L->env.vmm) > 0;
	if (!L->timed_over_budget || !p->ntraps)
		return;
	uint64_t *host = calloc(p->ntraps, sizeof(*host));
	double *was = calloc(p->ntraps, sizeof(*was));
	if (!host || !was) {
		free(host);
		free(was);
		return;
	}
	for (uint32_t i = 0; i < L->nwmap; i++)
		if (L->wmap[i].trap < p->ntraps)
			host[L->wmap[i].trap] += ft_vmm_host_in(L->env.vmm, L->wmap[i].va,
							       L->wmap[i].va + L->wmap[i].extent);
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
	FT_STAT_ADD(L->env.stats, estimated_traps, n);
	if (n)
		ft_info("profiling: %u traps were timed with weights in host memory (the budget "
			"was full before the plan): their compute is estimated without the bus "
			"reads, and the first eager passes after the plan replace the estimates", n);
	free(host);
	free(was);
}

void ft_learn_finish_profiling(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	float *v = malloc((L->nsamples + 1) * sizeof(*v));
	double sum = 0;
	uint32_t untimed = 0;
	for (uint32_t t = 0; v && t < p->ntraps; t++) {
		uint32_t n = 0;
		for (uint32_t k = 0; k < L->nsamples; k++) {
			float ms = L->samples[(size_t)t * L->samples_cap + k];
			if (!isnan(ms))
				v[n++] = ms;
		}
		untimed += !n;
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
	ft_info("profiling: %u passes timed, %.3f ms of trap compute per pass", L->nsamples, sum);
	if (L->nsamples && untimed && !(L->env.opt->max_gpu_mem_fraction > 0))
		ft_warn("profiling timed %u of %u traps in no pass (they were read only in CUDA "
			"graph replays, which are not timed trap by trap): latency mode plans them "
			"with no compute time to hide copies behind. Set FT_MAX_GPU_MEM_FRACTION "
			"(memory mode), or keep a profile.json from a run with eager passes",
			untimed, p->ntraps);
	if (!L->nsamples && !(L->env.opt->max_gpu_mem_fraction > 0)) /* NaN: unset */
		ft_warn("profiling timed no pass (its passes were CUDA graph replays, which are not "
			"timed trap by trap): latency mode has no compute time to hide copies behind "
			"and offloads nothing. Set FT_MAX_GPU_MEM_FRACTION (memory mode), or keep a "
			"profile.json from a run with eager passes (FT_PROFILE_STORAGE_DIR)");
	shared_weights(L);
	ft_learn_recheck_declared(L);
	/* the traps read together, once more without those weights */
	L->prof.ncoread = 0;
	ft_learn_coread(L);
	exclude_bus(L);
	ft_learn_offload(L);
	if (ft_learn_profile_dir(L))
		ft_learn_save(L, NULL);
}
