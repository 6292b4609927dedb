/*
 * INFERENCE begins (include/ft/learn.h): the plan is made (or taken from
 * the saved profile) and applied by the block engine (include/ft/offload.h).
 * Runs under the learning lock, once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft/gate.h"
#include "ft/plan.h"
#include "learn_int.h"

/* Memory mode's budget for the weights (ft_plan_budget): KV caches,
 * activations and workspaces are not in it (a server sizes its KV cache
 * from what the model leaves).  0: latency mode. */
uint64_t ft_learn_budget(struct ft_learn *L, uint64_t weights)
{
	double f = L->env.opt->max_gpu_mem_fraction;
	uint64_t total = ft_vmm_total(L->env.vmm);
	uint64_t budget = ft_vmm_budget(L->env.vmm, weights);
	if (budget && budget < (uint64_t)(f * (double)total))
		ft_info("capping the GPU budget from %.0f to %.0f MiB (free memory plus the weights)",
			f * (double)total / 1048576.0, (double)budget / 1048576.0);
	return budget;
}

/* FT_ENABLE_DIAGNOSTICS: the plan, trap by trap (at warn level, so that it
 * shows whatever FT_LOG_LEVEL says). */
static void diagnostics(const struct ft_profile *q, const uint64_t *cov, const struct ft_plan *plan)
{
	ft_warn("plan diagnostics: %u traps, %u blocks, peak %.1f MiB, predicted pass %.3f ms "
		"(resident %.3f, floor %.3f, stall %.3f)", plan->ntraps, plan->nblocks,
		(double)plan->peak_bytes / 1048576.0, plan->pass_ms, plan->compute_ms,
		plan->floor_ms, plan->stall_ms);
	ft_warn("plan diagnostics: %-10s %-9s %10s %6s %9s %9s %9s %9s", "trap", "role",
		"MiB", "block", "compute", "copy ms", "issue ms", "wait ms");
	for (uint32_t t = 0; t < plan->ntraps; t++) {
		const struct ft_plan_trap *x = &plan->t[t];
		ft_warn("plan diagnostics: %-10s %-9s %10.2f %6d %9.3f %9.3f %9.3f %9.3f",
			q->traps[t].label, q->traps[t].role, (double)cov[t] / 1048576.0, x->block,
			q->traps[t].compute.median, x->offloaded ? x->copy_ms : 0.0,
			x->offloaded ? x->issue_ms : 0.0, x->wait_ms);
	}
}

int ft_learn_shared(const struct ft_profile *p, uint32_t k)
{
	uint32_t lo = 0, hi = p->nshared;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (p->shared[mid] < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < p->nshared && p->shared[lo] == k;
}

/* The settings a plan depends on, as recorded with it in profile.json. */
static void plan_settings(struct ft_learn *L, char *buf, size_t n)
{
	const struct ft_options *o = L->env.opt;
	double f = isnan(o->max_gpu_mem_fraction) ? 0 : o->max_gpu_mem_fraction;
	snprintf(buf, n, "FT_MAX_GPU_MEM_FRACTION=%g FT_TRANSFER_MODE=%s FT_NUM_BLOCKS=%ld "
		 "FT_MIN_BLOCKS=%ld FT_TRANSFER_BUDGET_SCALE=%g", f,
		 ft_options_choice(FT_OPT_transfer_mode, (int)o->transfer_mode), (long)o->num_blocks,
		 (long)o->min_blocks, o->transfer_budget_scale);
}

/* FT_NVME_OFFLOAD_ENABLED: the disk's read rate, measured now, and the
 * host's share of the store, for the planner (a pass lasts at least the
 * disk's reads).  Not measured: the planner leaves the disk out (said). */
static void disk_rate(struct ft_learn *L, struct ft_plan_input *in)
{
	const struct ft_options *o = L->env.opt;
	if (!o->nvme_offload_enabled)
		return;
	in->disk_rate = ft_off_disk_probe(o->nvme_offload_path, (size_t)o->nvme_alignment_bytes);
	in->host_bytes = (uint64_t)o->nvme_host_bytes;
	if (in->disk_rate > 0)
		ft_info("FT_NVME_OFFLOAD_PATH=%s reads at %.2f GB/s (64 MiB written and read "
			"back): the plan counts the disk's reads", o->nvme_offload_path,
			in->disk_rate / 1e9);
	else
		ft_warn("FT_NVME_OFFLOAD_PATH=%s: cannot measure the disk's read rate: the plan "
			"leaves it out (the pass may be slower than predicted)",
			o->nvme_offload_path);
}

/* A new plan, into profile.json: what can leave the GPU is what whole
 * chunks of VMM-backed allocations hold (cov[t] per trap), so the planner
 * sees those bytes as the traps' and the rest as staying resident. */
static void make_plan(struct ft_learn *L, const uint64_t *cov)
{
	struct ft_profile *p = &L->prof;
	uint64_t weights = 0, coverable = 0;
	for (uint32_t i = 0; i < p->nweights; i++)
		weights += p->weights[i];
	for (uint32_t t = 0; t < p->ntraps; t++)
		coverable += cov[t];
	if (!p->ntraps || !p->ncurve || p->plan)
		return;
	struct ft_profile q = *p;
	q.traps = malloc(p->ntraps * sizeof(*q.traps));
	if (!q.traps)
		return;
	memcpy(q.traps, p->traps, p->ntraps * sizeof(*q.traps));
	for (uint32_t t = 0; t < p->ntraps; t++)
		q.traps[t].bytes = cov[t];
	/* regions whose content discovery could not check may be weights it
	 * missed: they stay, and count against the budget like weights */
	uint64_t budget = ft_learn_budget(L, weights + L->unchecked_bytes);
	uint64_t stays = weights + L->unchecked_bytes - coverable;
	if (budget && budget <= stays) {
		ft_error("FT_MAX_GPU_MEM_FRACTION=%g leaves %.0f MiB for the weights, but %.0f MiB of "
			 "them cannot leave the GPU (not in whole 2 MiB chunks of their own, or content "
			 "not checked); nothing is offloaded: raise the fraction",
			 L->env.opt->max_gpu_mem_fraction,
			 (double)budget / 1048576.0, (double)stays / 1048576.0);
		free(q.traps);
		return;
	}
	FT_STAT_ADD(L->env.stats, plan_budget_bytes, budget);
	struct ft_plan_input in = {
		.profile = &q, .budget = budget ? budget - stays : 0,
		.num_blocks = (uint32_t)L->env.opt->num_blocks, .min_blocks = (uint32_t)L->env.opt->min_blocks,
		.scale = L->env.opt->transfer_budget_scale,
		.raw = L->env.opt->transfer_mode == FT_TM_RAW_BLOCK,
		.one_block = L->env.opt->transfer_mode == FT_TM_STRATEGY,
	};
	disk_rate(L, &in);
	struct ft_plan plan;
	char why[512];
	int rc = ft_plan_make(&in, &plan, why, sizeof(why));
	free(q.traps);
	if (rc) {
		ft_error("no plan, nothing is offloaded: %s", why);
		return;
	}
	plan.budget = in.budget;
	plan_settings(L, plan.settings, sizeof(plan.settings));
	ft_info("plan (%s mode): offload %.1f of %.1f MiB in %u blocks, predicted pass %.3f ms "
		"(resident %.3f, floor %.3f)",
		in.budget ? "memory" : "latency", (double)plan.offloaded_bytes / 1048576.0,
		(double)weights / 1048576.0, plan.nblocks, plan.pass_ms, plan.compute_ms,
		plan.floor_ms);
	if (plan.disk_ms > 0)
		ft_info("plan: the NVMe tier reads %.1f MiB a pass beyond the host's %.1f MiB, "
			"%.3f ms at %.2f GB/s%s", (double)(plan.offloaded_bytes - in.host_bytes) /
			1048576.0, (double)in.host_bytes / 1048576.0, plan.disk_ms,
			in.disk_rate / 1e9, plan.disk_ms >= plan.pass_ms - 1e-9 ?
			": the disk sets the pass" : "");
	if (L->env.opt->enable_diagnostics)
		diagnostics(p, cov, &plan);
	p->plan = malloc(sizeof(*p->plan));
	if (p->plan)
		*p->plan = plan;
	else
		ft_plan_free(&plan);
}

/* A saved plan is applied only under the settings it was made with (the
 * current settings and scan are authoritative): otherwise it is dropped and
 * the traps are planned again from the saved timings. */
static void check_saved_plan(struct ft_learn *L, struct ft_profile *p)
{
	char now[256];
	plan_settings(L, now, sizeof(now));
	if (strcmp(p->plan->settings, now)) {
		ft_info("the saved plan was made for %s; now %s: planning again from the saved "
			"timings", p->plan->settings[0] ? p->plan->settings : "other settings", now);
		ft_profile_drop_plan(p);
	}
}

/* Whether a saved plan gives two traps that one launch reads together one
 * block (made before they were known to be; said once): then it is made
 * again. */
static int shares_a_block(const struct ft_profile *p, const int *block)
{
	for (uint32_t k = 0; k < p->ncoread; k++) {
		uint32_t a = p->coread[k][0], b = p->coread[k][1];
		if (block[a] >= 0 && block[a] == block[b]) {
			ft_info("the saved plan gives %s and %s, which one launch reads, one block: "
				"planning again", p->traps[a].label, p->traps[b].label);
			return 1;
		}
	}
	return 0;
}

/* Blocks per trap from the plan. */
static void plan_blocks(const struct ft_plan *pl, int *block, uint32_t *nblocks)
{
	for (uint32_t t = 0; t < pl->ntraps; t++)
		block[t] = pl->t[t].block;
	*nblocks = pl->nblocks;
}

/* The weights for the engine, w[0..L->nwmap): those read all over the
 * pass stay on the GPU, out of their traps (the executor never takes a
 * reference to one for a read of its trap).  0, or -1 when out of memory. */
static int engine_weights(struct ft_learn *L, struct ft_off_weight *w)
{
	struct ft_profile *p = &L->prof;
	uint32_t *kept = calloc(p->ntraps + 1, sizeof(*kept));
	uint64_t *kept_bytes = calloc(p->ntraps + 1, sizeof(*kept_bytes));
	int rc = kept && kept_bytes ? 0 : -1;
	for (uint32_t i = 0; !rc && i < L->nwmap; i++) {
		uint32_t t = L->wmap[i].trap;
		w[i] = (struct ft_off_weight){ .lo = L->wmap[i].va,
					       .hi = L->wmap[i].va + L->wmap[i].extent,
					       .views = L->wmap[i].va + L->wmap[i].views, .trap = t };
		if (L->env.opt->expert_paging && L->wmap[i].nsl) {
			w[i].slices = L->slices + L->wmap[i].sl_first;
			w[i].nslices = L->wmap[i].nsl;
		}
		if (t >= p->ntraps)
			continue;
		/* read all over the pass: offloading it with its trap would
		 * reload the trap within every pass */
		if (ft_learn_shared(p, L->wmap[i].order)) {
			w[i].trap = UINT32_MAX;
			FT_STAT_INC(L->env.stats, shared_weights);
			kept[t]++;
			kept_bytes[t] += L->wmap[i].extent;
		}
	}
	for (uint32_t t = 0; !rc && t < p->ntraps; t++) {
		if (kept[t])
			ft_info("%s: %u of its weights (%.1f MiB) are read again after later traps "
				"began (shared across the pass): they stay on the GPU", p->traps[t].label,
				kept[t], (double)kept_bytes[t] / 1048576.0);
	}
	free(kept);
	free(kept_bytes);
	return rc;
}

/* cov[t]: the bytes of trap t that can leave the GPU (whole chunks of
 * VMM-backed allocations), 0 for a trap a graph captured before offloading
 * began reads (it reads its weights where they are now). */
static void coverable(struct ft_learn *L, const struct ft_off_weight *w, uint64_t *cov)
{
	struct ft_profile *p = &L->prof;
	unsigned char *in_graph = calloc(p->ntraps, 1);
	struct ft_region_ref *gr = NULL;
	uint32_t ngr = ft_graphs_unpaged_refs(L->env.graphs, &gr);
	for (uint32_t i = 0; in_graph && i < ngr; i++) {
		uint64_t a = gr[i].alloc_base + gr[i].offset;
		for (uint32_t k = 0; k < L->nwmap; k++)
			if (a >= w[k].lo && a < w[k].hi && w[k].trap < p->ntraps)
				in_graph[w[k].trap] = 1;
	}
	free(gr);
	for (uint32_t t = 0; t < p->ntraps; t++) {
		cov[t] = ft_off_coverable(L->env.vmm, w, L->nwmap, t);
		if (in_graph && in_graph[t] && cov[t]) {
			ft_info("%s is read by a CUDA graph captured before offloading began: it "
				"stays on the GPU (graphs captured from now on page their weights)",
				p->traps[t].label);
			cov[t] = 0;
			FT_STAT_INC(L->env.stats, graph_kept_traps);
		}
	}
	free(in_graph);
}

/* The plan's block per trap (-1: resident), the saved profile's when it
 * still holds (same settings, no two traps read together in one block),
 * else a new one.  Returns how many traps it offloads; *saved: the saved
 * plan was taken. */
static uint32_t choose_plan(struct ft_learn *L, const uint64_t *cov, int *block,
			    uint32_t *nblocks, int *saved)
{
	struct ft_profile *p = &L->prof;
	if (p->plan)
		check_saved_plan(L, p);
	*saved = p->plan != NULL;
	if (!*saved)
		make_plan(L, cov);
	if (!p->plan)
		return 0;
	plan_blocks(p->plan, block, nblocks);
	/* strategy mode's executor has one block: a saved plan made for
	 * more (before 73458e1) would keep traps read together outside it */
	int one = L->env.opt->transfer_mode == FT_TM_STRATEGY;
	if (*saved && (shares_a_block(p, block) || (one && *nblocks != 1))) {
		ft_profile_drop_plan(p);
		*saved = 0;
		make_plan(L, cov);
		if (!p->plan)
			return 0;
		plan_blocks(p->plan, block, nblocks);
	}
	uint32_t off = 0;
	for (uint32_t t = 0; t < p->ntraps; t++) {
		if (!cov[t])
			block[t] = -1; /* nothing of it can leave, or it must stay */
		off += block[t] >= 0;
	}
	return off;
}

/* FT_OFFLOAD_TIMING: the stores and the engine's events. */
static void start_timing(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	char (*labels)[FT_LABEL_MAX] = calloc(p->ntraps, sizeof(*labels));
	for (uint32_t t = 0; labels && t < p->ntraps; t++)
		snprintf(labels[t], sizeof(labels[t]), "%s", p->traps[t].label);
	if (!labels || ft_timing_init(L->env.timing, p->ntraps, (const char (*)[FT_LABEL_MAX])labels) ||
	    ft_timing_init(L->env.timing_window, p->ntraps, (const char (*)[FT_LABEL_MAX])labels) ||
	    ft_off_timing(L->env.off, L->env.timing, L->env.timing_window,
			  L->env.opt->offload_timing == FT_TIMING_CUDA_GRAPH))
		ft_warn("FT_OFFLOAD_TIMING: cannot set up the timing events; no timing");
	free(labels);
}

/* FT_TRANSFER_COMPRESSION=auto: the decoder timed on pieces of 1 to 16 MiB
 * (L->zdec; the engine's slots of up to 64 MiB are judged by its rate at
 * 16 MiB, which understates a larger launch's), said beside the link's
 * rate. */
static void decode_curve(struct ft_learn *L)
{
	static const uint64_t sizes[] = { 1 << 20, 4 << 20, 16 << 20 };
	const struct ft_profile *p = &L->prof;
	L->nzdec = 0;
	for (uint32_t i = 0; i < 3; i++)
		L->zdec[i] = (struct ft_curve_point){ .bytes = sizes[i] };
	if (!p->ncurve || ft_gpu_decode_curve(&L->gpu, L->zdec, 3)) {
		ft_info("FT_TRANSFER_COMPRESSION=auto: %s: every trap whose image is smaller is "
			"coded", p->ncurve ? "the decoder could not be timed" : "no copy curve");
		return;
	}
	L->nzdec = 3;
	const struct ft_curve_point *c = &p->curve[p->ncurve - 1], *d = &L->zdec[2];
	ft_info("FT_TRANSFER_COMPRESSION=auto: the decoder writes %.1f GB/s (16 MiB pieces), "
		"the link copies %.1f GB/s: a trap is coded where its coded load is faster",
		d->ms > 0 ? (double)d->bytes / d->ms / 1e6 : 0.0,
		c->ms > 0 ? (double)c->bytes / c->ms / 1e6 : 0.0);
}

/* FT_TRANSFER_COMPRESSION: the decoder that coded stores need, or NULL
 * (raw stores).  auto codes them when the plan's copies take longer than
 * the pass's compute: then the copy stream bounds the pass, and fewer
 * bytes shorten it; otherwise the copies hide already and decoding would
 * only take the model's multiprocessors; and then only the traps whose
 * coded load is faster by the copy and decode curves (decode_curve). */
static const struct ft_gpu *codec_for(struct ft_learn *L)
{
	int mode = (int)L->env.opt->transfer_compression;
	const struct ft_plan *pl = L->prof.plan;
	if (mode <= FT_TC_NONE || L->env.opt->transfer_mode == FT_TM_STRATEGY) /* none: -1 */
		return NULL;
	if (mode == FT_TC_AUTO && pl) {
		double copies = ft_plan_copies(pl, L->prof.curve, L->prof.ncurve);
		if (copies <= pl->compute_ms) {
			ft_info("FT_TRANSFER_COMPRESSION=auto: the plan's copies (%.2f ms a pass) hide "
				"behind its compute (%.2f ms): the store stays raw", copies,
				pl->compute_ms);
			return NULL;
		}
	}
	if (ft_gpu_start(&L->gpu, L->env.real) || !L->gpu.decode) {
		ft_warn("FT_TRANSFER_COMPRESSION=%s: the decoder cannot be loaded on this GPU (its "
			"driver JIT-compiles PTX 7.0 for sm_75 and later); the store stays raw",
			ft_options_choice(FT_OPT_transfer_compression, mode));
		return NULL;
	}
	if (mode == FT_TC_AUTO)
		decode_curve(L);
	return &L->gpu;
}

/* The block engine set up for the plan and staged: 0, or -1 (said; every
 * weight stays on the GPU). */
static int start_engine(struct ft_learn *L, const int *block, uint32_t nblocks,
			const struct ft_off_weight *w, int saved)
{
	struct ft_profile *p = &L->prof;
	struct ft_gpu *verify = NULL;
	if (L->env.opt->verify) {
		if (ft_gpu_start(&L->gpu, L->env.real))
			ft_warn("FT_VERIFY=1: the checksum kernel cannot be loaded; blocks are "
				"poisoned but not checked");
		else
			verify = &L->gpu;
	}
	const struct ft_gpu *copier = NULL;
	if (L->env.opt->graph_copy == FT_GC_KERNEL) {
		if (ft_gpu_start(&L->gpu, L->env.real) || !L->gpu.copy)
			ft_warn("FT_GRAPH_COPY=kernel: the copy kernel cannot be loaded; CUDA graphs "
				"copy with memcpy nodes");
		else
			copier = &L->gpu;
	}
	/* FT_SHM_ENABLED: the segment is keyed and checked by checksums of
	 * the weights, made on the GPU */
	int shm = L->env.opt->shm_enabled && L->env.opt->shm_dir;
	if (shm && ft_gpu_start(&L->gpu, L->env.real)) {
		ft_warn("FT_SHM_ENABLED=1: the checksum kernel cannot be loaded; this process keeps "
			"a private store");
		shm = 0;
	}
	/* the segment is one per model and these settings */
	char settings[512];
	plan_settings(L, settings, sizeof(settings));
	snprintf(settings + strlen(settings), sizeof(settings) - strlen(settings),
		 " FT_TRANSFER_COMPRESSION=%d", (int)L->env.opt->transfer_compression);
	L->nzdec = 0;
	const struct ft_gpu *codec = codec_for(L);
	const struct ft_off_config c = {
		.real = L->env.real, .vmm = L->env.vmm, .stats = L->env.stats, .verify = verify,
		.copier = copier, .codec = codec,
		.codec_auto = L->env.opt->transfer_compression == FT_TC_AUTO,
		.copy_curve = p->curve, .ncopy = p->ncurve,
		.decode_curve = L->nzdec ? L->zdec : NULL, .ndecode = L->nzdec,
		.mode = (int)L->env.opt->transfer_mode, .pinned = L->env.opt->pinned_memory,
		.hold_ignored = L->env.opt->hold_ignored,
		.captures = L->env.captures,
		.shm_dir = shm ? L->env.opt->shm_dir : NULL, .shm_ns = L->env.opt->shm_namespace,
		.shm_wait = L->env.opt->shm_wait_timeout, .shm_settings = settings,
		.sums = shm ? &L->gpu : NULL,
		.nvme_dir = L->env.opt->nvme_offload_enabled ? L->env.opt->nvme_offload_path : NULL,
		.nvme_align = (uint64_t)L->env.opt->nvme_alignment_bytes,
		.nvme_host_bytes = (uint64_t)L->env.opt->nvme_host_bytes,
		.nvme_cufile = L->env.opt->nvme_transfer_mode == FT_NVME_CUFILE,
		.dlsym = L->env.dlsym,
		.pass_ms = p->plan ? p->plan->pass_ms : 0,
	};
	char why[256];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ft_off_init(L->env.off, &c, block, p->ntraps, nblocks, w, L->nwmap, why, sizeof(why)) ||
	    ft_off_stage(L->env.off, why, sizeof(why))) {
		ft_error("offloading failed, every weight stays on the GPU: %s", why);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double stage_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	FT_STAT_ADD(L->env.stats, offload_stage_us, (uint64_t)(stage_s * 1e6));
	uint64_t moved, blocks;
	uint32_t nb;
	ft_off_sizes(L->env.off, &moved, &blocks, &nb);
	FT_STAT_ADD(L->env.stats, offloaded_bytes, moved);
	FT_STAT_ADD(L->env.stats, block_bytes, blocks);
	ft_info("offloading (%s%s%s): %.1f MiB of weights moved to the host store, %u blocks of "
		"%.1f MiB in all on the GPU, in %.2f s",
		ft_options_choice(FT_OPT_transfer_mode, (int)L->env.opt->transfer_mode),
		saved ? ", plan from the saved profile" : "", verify ? ", FT_VERIFY" : "",
		(double)moved / 1048576.0, nb, (double)blocks / 1048576.0, stage_s);
	return 0;
}

void ft_learn_offload(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	if (!p->ntraps || !L->nwmap)
		return;
	if (atomic_load(L->env.captures) > 0) {
		/* staging waits for the device, which would invalidate the
		 * capture (any thread's, in global mode) */
		if (!atomic_exchange(&L->offload_deferred, 1))
			ft_info("the plan is ready while a CUDA graph capture is under way: "
				"offloading begins at the first launch after it");
		return;
	}
	atomic_store(&L->offload_deferred, 0);
	/* no other thread enqueues work while the weights are remapped (and
	 * what went to host memory comes back): ft/gate.h */
	ft_gate_close();
	struct ft_off_weight *w = malloc(L->nwmap * sizeof(*w));
	uint64_t *cov = calloc(p->ntraps, sizeof(*cov));
	int *block = malloc(p->ntraps * sizeof(*block));
	uint32_t nblocks = 0;
	int saved = 0;
	if (!w || !cov || !block || engine_weights(L, w))
		goto out;
	coverable(L, w, cov);
	if (!choose_plan(L, cov, block, &nblocks, &saved)) {
		if (p->plan)
			ft_info("the plan offloads nothing: every weight stays on the GPU");
		goto out;
	}
	if (start_engine(L, block, nblocks, w, saved))
		goto out;
	/* the planner keeps the weights within the budget from here on: the
	 * limit on all large allocations, which stood in for it while weights
	 * could not be told apart, ends */
	ft_vmm_unlimit(L->env.vmm);
	if (L->env.opt->offload_timing != FT_TIMING_OFF)
		start_timing(L);
	/* before the graphs are planned: a refresh from replays times the
	 * traps their substitutes read, resident ones too */
	ft_learn_arm_refresh(L, p);
	if (L->env.graphs_planned)
		L->env.graphs_planned();
out:
	free(w);
	free(cov);
	free(block);
	/* what went to host memory while the budget was full, before the
	 * plan, comes to the GPU as far as the budget now allows */
	if (ft_vmm_host_bytes(L->env.vmm)) {
		uint64_t moved = ft_vmm_migrate(L->env.vmm);
		FT_STAT_ADD(L->env.stats, vmm_migrated_bytes, moved);
		ft_info("%.1f MiB that were in host memory while the GPU budget was full moved to "
			"the GPU; %.1f MiB stay in host memory", (double)moved / 1048576.0,
			(double)ft_vmm_host_bytes(L->env.vmm) / 1048576.0);
	}
	ft_gate_open();
}
