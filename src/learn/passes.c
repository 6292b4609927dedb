/*
 * Learning's glue to pass detection (include/ft/learn.h): set-up, the
 * events observation hands over (launches, replays, allocations, writes),
 * when discovery starts, and what each pass boundary means in each phase.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/shm.h"
#include "learn_int.h"

static const char *const pass_sources[] = { "none", "eager", "graph", "mark" };

void ft_learn_alloc(struct ft_learn *L, uint64_t id)
{
	if (atomic_load_explicit(&L->phase, memory_order_relaxed) != FT_PHASE_DISCOVERY)
		return;
	pthread_mutex_lock(&L->lock);
	uint32_t i = L->nallocs++ % FT_ALLOC_EVENTS;
	L->allocs[i].seq = atomic_load(&L->seq);
	L->allocs[i].id = id;
	pthread_mutex_unlock(&L->lock);
}

/* The launches that began the new pass before it was confirmed were read
 * into the pass before it, all but the last (the one that confirmed it):
 * what they read first is taken back from that pass.  (Once they made a
 * region read once, right after a boundary, look read in both passes: an
 * expert of a mixture-of-experts model, taken for a weight.) */
static void unfeed_moved(struct ft_learn *L, int source)
{
	const struct ft_region_ref *refs;
	const uint32_t *ends;
	unsigned n = source == FT_PASS_EAGER ? ft_passes_moved(&L->passes, &refs, &ends) : 0;
	if (n >= 2 && ends[n - 2] <= L->disc.feeds)
		ft_disc_unread_since(&L->disc, L->disc.feeds - ends[n - 2]);
}

/* The launches that began the new pass before it was confirmed. */
static void feed_moved(struct ft_learn *L, int source)
{
	if (source != FT_PASS_EAGER)
		return;
	const struct ft_region_ref *refs;
	const uint32_t *ends;
	unsigned n = ft_passes_moved(&L->passes, &refs, &ends);
	for (unsigned i = 0, from = 0; i < n; from = ends[i], i++)
		ft_learn_feed(&L->disc, refs + from, ends[i] - from, 1);
}

/* Whatever was allocated after launch `first` began the first forward is not
 * a weight (activation segments made by the first forward, workspaces made
 * at the first GEMM). */
static void cutoff_since(struct ft_learn *L, uint64_t first)
{
	uint32_t n = L->nallocs < FT_ALLOC_EVENTS ? L->nallocs : FT_ALLOC_EVENTS;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (L->nallocs - n + k) % FT_ALLOC_EVENTS;
		if (L->allocs[i].seq > first) {
			if (L->allocs[i].id < L->disc.cutoff_id)
				L->disc.cutoff_id = L->allocs[i].id;
			break;
		}
	}
}

static int since_cutoff(void *arg, CUdeviceptr base)
{
	struct ft_learn *L = arg;
	struct ft_alloc a;
	return !ft_registry_lookup(L->env.reg, base, &a) && a.id >= L->disc.cutoff_id;
}

/* What was allocated since the first forward began is no weight
 * (activations, workspaces, caches), nor is anything allocated from now on:
 * over a budget that the weights filled before any plan, it got host
 * memory, and every kernel would read and write it over the bus through
 * discovery and profiling (a Qwen2-7B layer timed at 20 times its compute
 * on the H200).  It moves to the GPU; the budget is the weights'. */
static void activations_to_gpu(struct ft_learn *L)
{
	ft_vmm_exempt_new(L->env.vmm);
	ft_learn_to_gpu(L, since_cutoff, "allocated during the passes so far (not weights)");
}

void ft_learn_to_gpu(struct ft_learn *L, int (*pick)(void *L, CUdeviceptr base),
		     const char *what)
{
	/* moving waits for the device, which would invalidate a capture
	 * (any thread's): what stays in host memory moves with the plan */
	if (!ft_vmm_host_bytes(L->env.vmm) || atomic_load(L->env.captures) > 0)
		return;
	uint64_t moved = ft_vmm_migrate_if(L->env.vmm, pick, L);
	if (moved) {
		FT_STAT_ADD(L->env.stats, vmm_migrated_bytes, moved);
		ft_info("discovery: %.1f MiB %s moved from host memory to the GPU; %.1f MiB stay "
			"in host memory until the plan", (double)moved / 1048576.0, what,
			(double)ft_vmm_host_bytes(L->env.vmm) / 1048576.0);
	}
}

/* Discovery starts once two consecutive passes had about the same number of
 * launches: then both were forwards (what comes before, weight
 * initialisation or loading, repeats differently), the first of them began
 * at bounds[0], and what was allocated since is not a weight. */
static void start_discovery(struct ft_learn *L, int source, uint64_t at)
{
	if (L->nbounds >= 2) {
		uint64_t a = L->bounds[1] - L->bounds[0], b = at - L->bounds[1];
		if (2 * a <= 3 * b && 2 * b <= 3 * a &&
		    !ft_disc_init(&L->disc, ft_registry_next_id(L->env.reg))) {
			cutoff_since(L, L->bounds[0]);
			L->started = 1;
			ft_learn_watch_stop(L);
			activations_to_gpu(L);
			feed_moved(L, source);
			return;
		}
	}
	if (L->nbounds == 2)
		L->bounds[0] = L->bounds[1];
	L->bounds[L->nbounds == 2 ? 1 : L->nbounds++] = at;
}


/* Discovery's last pass ends unsettled (ft_learn_unsettled): regions
 * checked once only at an extent that changed, or stacked tensors with
 * experts not read yet (their weights' starts and sizes are not known, and
 * layers of unequal sizes have no period).  Up to DISC_EXTRA more passes,
 * said at info; still unsettled after them, said at warn level, and
 * discovery ends.  A decode step routes each token to 2 of 8 experts a
 * layer, and alike tokens pick alike experts: in the H200 recording of a
 * Mixtral, experts were still read for the first time at the 13th pass,
 * and some never (4 more passes left no layer period; 12 found them). */
#define DISC_EXTRA 16
static void extend_discovery(struct ft_learn *L)
{
	if (L->phases.in_phase + 1 < L->phases.discovery || L->disc_extra > DISC_EXTRA)
		return;
	int why = ft_learn_unsettled(L);
	if (!why)
		return;
	if (L->disc_extra++ == DISC_EXTRA) {
		ft_warn("discovery: after %u more passes, %s; weights are taken as found, and "
			"what was not read as part of one stays on the GPU (FT_DISCOVERY_ITERS sets "
			"more passes)", DISC_EXTRA,
			why == FT_UNSETTLED_ONCE ? "regions still change extent (views into them keep "
						   "appearing)"
						 : "stacked tensors still have slices never read "
						   "(experts never routed to?)");
		return;
	}
	L->phases.discovery++;
	if (why == FT_UNSETTLED_ONCE)
		ft_info("discovery: regions whose extent changed in the last pass (views became "
			"parts of them: routed experts' slices of a stacked tensor?) were checked "
			"once only: one more pass (%u of at most %u)", L->disc_extra, DISC_EXTRA);
	else
		ft_info("discovery: tensors read through slices at a stride (stacked experts) "
			"have slices no pass read yet (experts not routed to yet): one more pass "
			"(%u of at most %u)", L->disc_extra, DISC_EXTRA);
}

void ft_learn_pass(struct ft_learn *L, int source, uint64_t start)
{
	static const int stat[] = { 0, FT_STAT_passes_eager, FT_STAT_passes_graph,
				    FT_STAT_passes_marked };
	if (source <= FT_PASS_NONE || source > FT_PASS_MARK)
		return;
	atomic_fetch_add_explicit(&L->env.stats->v[stat[source]], 1, memory_order_relaxed);
	int phase = L->phases.phase, changed = 0;
	uint64_t at = source == FT_PASS_EAGER ? start : atomic_load(&L->seq);
	if (!L->started) {
		start_discovery(L, source, at);
	} else {
		if (phase == FT_PHASE_DISCOVERY) {
			unfeed_moved(L, source);
			ft_disc_pass_end(&L->disc);
			feed_moved(L, source);
			ft_disc_lead_slices(&L->disc);
			ft_learn_sample(L);
			if (ft_learn_after_first_pass(L, "the first pass")) {
				L->phases.total++;
				goto trace;
			}
			extend_discovery(L);
		} else if (phase == FT_PHASE_PROFILING) {
			ft_learn_analyse(L, source == FT_PASS_EAGER ? start : UINT64_MAX);
		}
		changed = ft_phases_pass(&L->phases);
	}
	if (changed) {
		atomic_store_explicit(&L->phase, L->phases.phase, memory_order_relaxed);
		ft_info("pass %llu (%s): entering %s", (unsigned long long)L->phases.total,
			pass_sources[source], ft_phase_name(L->phases.phase));
		if (L->phases.phase == FT_PHASE_INFERENCE) {
			ft_learn_finish_profiling(L);
		} else if (ft_learn_finish_discovery(L, FT_END_PASSES) > 0) {
			L->phases.phase = FT_PHASE_INFERENCE;
			atomic_store_explicit(&L->phase, FT_PHASE_INFERENCE, memory_order_relaxed);
			ft_info("pass %llu: entering INFERENCE", (unsigned long long)L->phases.total);
			ft_learn_offload(L);
			if (L->resave && ft_learn_profile_dir(L))
				ft_learn_save(L, NULL);
		}
	}
trace:
	ft_learn_trace_pass(L, pass_sources[source], source == FT_PASS_EAGER ? start : 0);
}

void ft_learn_trace_pass(struct ft_learn *L, const char *source, uint64_t start)
{
	if (!ft_trace_on(L->env.trace))
		return;
	cJSON *rec = ft_trace_begin("pass");
	ft_trace_str(rec, "source", source);
	ft_trace_num(rec, "passes", (double)L->phases.total);
	if (start)
		ft_trace_num(rec, "start_seq", (double)start);
	ft_trace_str(rec, "phase", ft_phase_name(L->phases.phase));
	ft_trace_emit(L->env.trace, rec);
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

void ft_learn_deferred(struct ft_learn *L)
{
	if (!atomic_load_explicit(&L->offload_deferred, memory_order_relaxed) ||
	    atomic_load(L->env.captures) > 0)
		return;
	pthread_mutex_lock(&L->lock);
	if (atomic_load(&L->offload_deferred)) {
		ft_learn_offload(L);
		/* the profile was saved without the plan */
		if (!atomic_load(&L->offload_deferred) && ft_learn_profile_dir(L))
			ft_learn_save(L, NULL);
	}
	pthread_mutex_unlock(&L->lock);
}

void ft_learn_after(struct ft_learn *L, CUstream s, int ptsz, const struct ft_refs *refs,
		    uint64_t seq)
{
	int phase = atomic_load_explicit(&L->phase, memory_order_relaxed);
	if (phase == FT_PHASE_INFERENCE) {
		ft_learn_deferred(L);
		return;
	}
	struct ft_region_ref r[FT_MAX_REFS];
	unsigned nr = ft_learn_regions(refs, r);
	pthread_mutex_lock(&L->lock);
	if (phase == FT_PHASE_PROFILING)
		ft_learn_timed(L, s, ptsz, seq);
	uint64_t start = 0;
	int src = ft_passes_launch(&L->passes, seq, r, nr, &start);
	if (src != FT_PASS_NONE)
		ft_learn_pass(L, src, start); /* feeds this launch to the new pass */
	else if (L->started && L->phases.phase == FT_PHASE_DISCOVERY)
		ft_learn_feed(&L->disc, r, nr, 1);
	if (L->watching)
		ft_learn_watch(L, r, nr, 1);
	if (L->declared)
		ft_learn_check_marks(L);
	pthread_mutex_unlock(&L->lock);
}

void ft_learn_replay(struct ft_learn *L, uint64_t exec)
{
	ft_learn_deferred(L);
	struct ft_region_ref *r = NULL;
	uint32_t *ends = NULL;
	uint32_t n = ft_graphs_exec_refs(L->env.graphs, exec, &r);
	uint32_t nl = n ? ft_graphs_exec_launches(L->env.graphs, exec, &ends) : 0;
	if (nl && ends[nl - 1] != n)
		nl = 0; /* not the launches of these references */
	uint64_t seq = nl ? ft_learn_seq(L, nl) : 0;
	pthread_mutex_lock(&L->lock);
	if (!nl) {
		if (ft_passes_graph(&L->passes, n > 0) != FT_PASS_NONE) {
			ft_learn_pass(L, FT_PASS_GRAPH, 0);
			/* the replay is the new pass: it reads what its capture read */
			if (L->started && L->phases.phase == FT_PHASE_DISCOVERY)
				ft_learn_feed(&L->disc, r, n, 0);
		}
	}
	for (uint32_t i = 0, from = 0; i < nl; from = ends[i], i++) {
		uint64_t start = 0;
		int src = ft_passes_launch(&L->passes, seq + i, r + from, ends[i] - from, &start);
		if (src != FT_PASS_NONE)
			ft_learn_pass(L, src, start); /* feeds this launch to the new pass */
		else if (L->started && L->phases.phase == FT_PHASE_DISCOVERY)
			ft_learn_feed(&L->disc, r + from, ends[i] - from, 1);
		if (L->watching)
			ft_learn_watch(L, r + from, ends[i] - from, 1);
	}
	pthread_mutex_unlock(&L->lock);
	free(ends);
	free(r);
}

void ft_learn_write(struct ft_learn *L, uint64_t alloc_id, uint64_t offset, uint64_t bytes)
{
	if (atomic_load_explicit(&L->phase, memory_order_relaxed) != FT_PHASE_DISCOVERY)
		return;
	pthread_mutex_lock(&L->lock);
	if (L->started)
		ft_disc_write(&L->disc, alloc_id, offset, bytes);
	pthread_mutex_unlock(&L->lock);
}

int ft_learn_init(struct ft_learn *L, const struct ft_learn_env *env)
{
	memset(L, 0, sizeof(*L));
	L->env = *env;
	pthread_mutex_init(&L->lock, NULL);
	if (ft_passes_init(&L->passes))
		return -1;
	ft_phases_init(&L->phases, 1, 1);
	ft_learn_phase_counts(L);
	const struct ft_options *o = env->opt;
	if (o->shm_enabled && o->shm_dir && !o->profile_storage_dir &&
	    o->source[FT_OPT_profile_storage_dir] == FT_SRC_DEFAULT) {
		if (ft_shm_profile_path(o->shm_dir, o->shm_namespace, L->shm_prof, sizeof(L->shm_prof)))
			L->shm_prof[0] = 0;
		else
			ft_info("FT_SHM_ENABLED: profiles in %s (FT_PROFILE_STORAGE_DIR unset): a "
				"process that starts after another planned the same model takes its "
				"plan after one pass", L->shm_prof);
	}
	ft_learn_saved_start(L);
	return 0;
}

void ft_learn_phase_counts(struct ft_learn *L)
{
	/* Two content samples prove a buffer unchanged: discovery needs two
	 * passes whatever FT_DISCOVERY_ITERS says.  Profiling starts inside a
	 * pass (a boundary is confirmed a few launches late), so it takes one
	 * pass more than the FT_PROFILING_ITERS it times.  Neither holds for
	 * declared tensors, whose passes are the program's marks. */
	const struct ft_options *o = L->env.opt;
	long least = L->declared ? 1 : 2;
	L->phases.discovery = (uint64_t)(o->discovery_iters > least ? o->discovery_iters : least);
	L->phases.profiling = (uint64_t)(o->profiling_iters > 1 ? o->profiling_iters : 1) +
			      (L->declared ? 0 : 1);
}

void ft_learn_after_fork(struct ft_learn *L)
{
	/* what the parent was learning does not describe the child */
	atomic_store(&L->phase, FT_PHASE_INFERENCE);
	L->phases.phase = FT_PHASE_INFERENCE;
	atomic_store(&L->offload_deferred, 0);
}

unsigned long long ft_learn_iters_before_inference(struct ft_learn *L)
{
	/* + the two passes before discovery starts (start_discovery), unless
	 * the program declared its tensors: it starts then */
	return (L->declared ? 0 : 2) + ft_phases_iters_before_inference(&L->phases);
}

long long ft_learn_mark(struct ft_learn *L)
{
	ft_learn_deferred(L);
	pthread_mutex_lock(&L->lock);
	ft_learn_pass(L, ft_passes_mark(&L->passes), 0);
	L->unmarked_from = L->passes.launches;
	long long n = (long long)L->passes.passes;
	pthread_mutex_unlock(&L->lock);
	return n;
}
