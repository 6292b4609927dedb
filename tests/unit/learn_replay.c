/*
 * The phase machine (src/learn/) driven by the events of a recording made
 * on the H200, with no fake driver: the allocations go into a registry in
 * their recorded order (so ids match the recording's), every launch's
 * recorded references (words, stale flags) go to ft_learn_before and
 * ft_learn_after in sequence, copies and memsets to ft_learn_write; the
 * driver calls learning makes (events, the checksum kernel, the copy
 * curve) are stubs (every checksum 0: contents never change).  Checks that
 * learning reaches INFERENCE, and that the weights it finds and their
 * traps are those the library found there (the recording's discovery
 * record), ordered the same.  With "capture-profiling", a CUDA graph
 * capture (another thread's) is under way from profiling's first launch
 * to the recording's end: the plan, ready during it, must wait for its
 * end (staging waits for the device), and be applied at the first launch
 * after it.
 * usage: learn_replay TRACE.jsonl [capture-profiling]
 * For study, not the tests: LR_STABLE=1 makes every region's contents
 * stable (not only the recording's weights: a recording whose regions
 * began elsewhere, a stacked tensor's experts), LR_DISCOVERY_ITERS=n sets
 * FT_DISCOVERY_ITERS, LEARN_REPLAY_INFO=1 logs at info level, LR_DUMP=id
 * prints the regions of allocation id (0: all) with their extents, views
 * and owners when discovery ends.
 */
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/learn.h"
#include "ft/log.h"

/* ---- the driver, stubbed ---- */
static uintptr_t next_handle = 1;
static CUresult s_event(CUevent *e, unsigned f) { (void)f; *e = (CUevent)next_handle++; return CUDA_SUCCESS; }
static CUresult s_record(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
static CUresult s_event_sync(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult s_elapsed(float *ms, CUevent a, CUevent b) { (void)a, (void)b; *ms = 0.25f; return CUDA_SUCCESS; }
static CUresult s_sync(void) { return CUDA_SUCCESS; }
static CUresult s_stream_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult s_module(CUmodule *m, const void *img) { (void)img; *m = (CUmodule)next_handle++; return CUDA_SUCCESS; }
static CUresult s_function(CUfunction *f, CUmodule m, const char *n) { (void)m, (void)n; *f = (CUfunction)next_handle++; return CUDA_SUCCESS; }
static CUresult s_stream(CUstream *s, unsigned f) { (void)f; *s = (CUstream)next_handle++; return CUDA_SUCCESS; }
/* The GPU's contents: the regions the recording found to be weights never
 * change; every other region's checksum changes at every sample (on the
 * H200 some were activations whose content changed). */
static uint64_t *weights_at;
static uint32_t nweights_at;
static uint64_t changing;

static CUresult s_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			 unsigned by, unsigned bz, unsigned sm, CUstream s, void **p, void **e)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sm, (void)s,
		(void)e;
	/* the checksum kernel: (start, words, slot) */
	uint64_t start = *(const uint64_t *)p[0], *slot = *(uint64_t **)p[2];
	int weight = 0;
	for (uint32_t i = 0; i < nweights_at && !weight; i++) /* (8-byte aligned up) */
		weight = ((weights_at[i] + 7) & ~(uint64_t)7) == start;
	*slot = weight || getenv("LR_STABLE") ? 0 : ++changing;
	return CUDA_SUCCESS;
}
static CUresult s_alloc(CUdeviceptr *p, size_t n) { *p = (CUdeviceptr)(uintptr_t)calloc(1, n); return CUDA_SUCCESS; }
static CUresult s_alloc_host(void **p, size_t n) { *p = calloc(1, n); return CUDA_SUCCESS; }
static CUresult s_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
static CUresult s_free_host(void *p) { free(p); return CUDA_SUCCESS; }
static CUresult s_memset(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
	(void)s;
	memset((void *)(uintptr_t)d, v, n);
	return CUDA_SUCCESS;
}
static CUresult s_dtoh(void *d, CUdeviceptr s, size_t n, CUstream st)
{
	(void)st;
	memcpy(d, (const void *)(uintptr_t)s, n);
	return CUDA_SUCCESS;
}
static CUresult s_htod(CUdeviceptr d, const void *s, size_t n, CUstream st) { (void)d, (void)s, (void)n, (void)st; return CUDA_SUCCESS; }
static CUresult s_ctx_device(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
static CUresult s_name(char *n, int len, CUdevice d) { (void)d; snprintf(n, (size_t)len, "recorded H200"); return CUDA_SUCCESS; }
static CUresult s_total(size_t *b, CUdevice d) { (void)d; *b = 150754820096ULL; return CUDA_SUCCESS; }

static struct ft_real real;

static void stub_driver(void)
{
	real.cuEventCreate = s_event;
	real.cuEventRecord = s_record;
	real.cuEventRecord_ptsz = s_record;
	real.cuEventSynchronize = s_event_sync;
	real.cuEventElapsedTime_v2 = s_elapsed;
	real.cuCtxSynchronize = s_sync;
	real.cuStreamSynchronize = s_stream_sync;
	real.cuModuleLoadData = s_module;
	real.cuModuleGetFunction = s_function;
	real.cuStreamCreate = s_stream;
	real.cuLaunchKernel = s_launch;
	real.cuMemAlloc_v2 = s_alloc;
	real.cuMemAllocHost_v2 = s_alloc_host;
	real.cuMemFree_v2 = s_free;
	real.cuMemFreeHost = s_free_host;
	real.cuMemsetD8Async = s_memset;
	real.cuMemcpyDtoHAsync_v2 = s_dtoh;
	real.cuMemcpyHtoDAsync_v2 = s_htod;
	real.cuCtxGetDevice = s_ctx_device;
	real.cuDeviceGetName = s_name;
	real.cuDeviceTotalMem_v2 = s_total;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);
	return v ? v->valuedouble : -1;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "capture-profiling")))
		return 2;
	int capture_profiling = argc == 3;
	FILE *f = fopen(argv[1], "r");
	if (!f)
		return 2;
	stub_driver();
	static struct ft_options opt;
	static struct ft_stats stats;
	static struct ft_registry reg;
	static struct ft_graphs graphs;
	static struct ft_trace trace;
	static struct ft_vmm vmm;
	static struct ft_timing_store timing, window;
	static _Atomic int captures;
	static struct ft_learn L;
	ft_options_defaults(&opt);
	opt.profiling_iters = 3; /* as the recording was made */
	if (getenv("LR_DISCOVERY_ITERS"))
		opt.discovery_iters = atol(getenv("LR_DISCOVERY_ITERS"));
	ft_log_configure(getenv("LEARN_REPLAY_INFO") ? FT_LOG_INFO : FT_LOG_WARN, NULL);
	trace.fd = -1;
	ft_registry_init(&reg);
	ft_graphs_init(&graphs);
	ft_vmm_init(&vmm, &real, 0, opt.max_gpu_mem_fraction, -1); /* no VMM: nothing moves */
	struct ft_offload *off = ft_off_new();
	const struct ft_learn_env env = { .real = &real, .opt = &opt, .stats = &stats, .reg = &reg,
					  .graphs = &graphs, .trace = &trace, .vmm = &vmm, .off = off,
					  .timing = &timing, .timing_window = &window,
					  .captures = &captures };
	if (ft_learn_init(&L, &env))
		return 2;
	static uint64_t base[1 << 16], size[1 << 16];
	char *line = malloc(1 << 20);
	/* first the allocations' addresses and the weights the recording found */
	while (fgets(line, 1 << 20, f)) {
		if (strstr(line, "\"ev\":\"alloc\"")) {
			cJSON *r = cJSON_Parse(line);
			int id = (int)num(r, "id");
			if (id > 0 && id < (1 << 16))
				base[id] = strtoull(cJSON_GetObjectItem(r, "ptr")->valuestring, NULL, 16);
			cJSON_Delete(r);
		} else if (strstr(line, "\"ev\":\"discovery\"")) {
			cJSON *r = cJSON_Parse(line);
			const cJSON *x, *ws = cJSON_GetObjectItem(r, "weights_in_order");
			weights_at = calloc((size_t)cJSON_GetArraySize(ws) + 1, sizeof(*weights_at));
			cJSON_ArrayForEach(x, ws) {
				int id = (int)num(x, "id");
				if (id > 0 && id < (1 << 16))
					weights_at[nweights_at++] = base[id] + (uint64_t)num(x, "off");
			}
			cJSON_Delete(r);
		}
	}
	rewind(f);
	cJSON *disc = NULL;
	unsigned launches = 0;
	while (fgets(line, 1 << 20, f)) {
		cJSON *r = cJSON_Parse(line);
		const char *ev = cJSON_GetObjectItem(r, "ev")->valuestring;
		if (!strcmp(ev, "alloc")) {
			int id = (int)num(r, "id");
			uint64_t p = strtoull(cJSON_GetObjectItem(r, "ptr")->valuestring, NULL, 16);
			uint64_t got = ft_registry_add(&reg, p, (uint64_t)num(r, "size"), 0, 0, NULL);
			if ((int)got != id) {
				fprintf(stderr, "FAIL: allocation %d registered as %llu\n", id,
					(unsigned long long)got);
				return 1;
			}
			if (id < (1 << 16))
				base[id] = p, size[id] = (uint64_t)num(r, "size");
			ft_learn_alloc(&L, (uint64_t)id);
		} else if (!strcmp(ev, "launch")) {
			struct ft_refs refs = { 0 };
			const cJSON *x;
			cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "refs")) {
				int id = (int)num(x, "id");
				if (refs.n == FT_MAX_REFS || id <= 0 || id >= (1 << 16))
					continue;
				refs.v[refs.n++] = (struct ft_ref){
					.alloc_id = (uint64_t)id, .offset = (uint64_t)num(x, "off"),
					.alloc_base = base[id], .alloc_size = size[id],
					.param = (uint32_t)num(x, "param"), .word = (uint16_t)num(x, "word"),
					.stale = cJSON_GetObjectItem(x, "stale") != NULL };
			}
			uint64_t seq = (uint64_t)num(r, "seq");
			atomic_store(&stats.v[FT_STAT_launches], seq); /* as observation counts */
			atomic_store(&L.seq, seq);
			CUstream s = (CUstream)(uintptr_t)strtoull(
				cJSON_GetObjectItem(r, "stream")->valuestring, NULL, 16);
			ft_learn_before(&L, s, 0, &refs, seq);
			if (capture_profiling && ft_learn_phase(&L) == FT_PHASE_PROFILING)
				atomic_store(&captures, 1); /* until the recording ends */
			int was = ft_learn_phase(&L);
			ft_learn_after(&L, s, 0, &refs, seq);
			if (getenv("LR_DUMP") && was == FT_PHASE_DISCOVERY &&
			    ft_learn_phase(&L) != FT_PHASE_DISCOVERY) {
				int want = atoi(getenv("LR_DUMP"));
				for (uint32_t i = 0; i < L.disc.n; i++) {
					const struct ft_disc_region *g = &L.disc.r[i];
					if ((int)g->alloc_id != want && want)
						continue;
					printf("region %u alloc %llu off %llu extent %llu views %llu owner %u touched %llx written %d differ %d\n",
					       i, (unsigned long long)g->alloc_id, (unsigned long long)g->offset,
					       (unsigned long long)g->extent, (unsigned long long)g->views,
					       g->owner, (unsigned long long)g->touched, g->written, g->sums_differ);
				}
			}
			launches++;
		} else if (!strcmp(ev, "copy") || !strcmp(ev, "memset")) {
			const cJSON *d = cJSON_GetObjectItem(r, "dst_id");
			if (d)
				ft_learn_write(&L, (uint64_t)d->valueint, (uint64_t)num(r, "dst_off"),
					       (uint64_t)num(r, "bytes"));
		} else if (!strcmp(ev, "discovery")) {
			cJSON_Delete(disc);
			disc = cJSON_Duplicate(r, 1);
		}
		cJSON_Delete(r);
	}
	fclose(f);
	int failures = 0;
	printf("%u launches: phase %d, %u weights in %u traps, %u pairs of traps read together\n",
	       launches, ft_learn_phase(&L), L.prof.nweights, L.prof.ntraps, L.prof.ncoread);
	if (ft_learn_phase(&L) != FT_PHASE_INFERENCE) {
		fprintf(stderr, "FAIL: learning did not reach INFERENCE\n");
		failures++;
	}
	if (capture_profiling) {
		/* the plan waits for the capture's end, then for a launch */
		int waited = atomic_load(&L.offload_deferred);
		atomic_store(&captures, 0);
		struct ft_refs none = { 0 };
		ft_learn_after(&L, NULL, 0, &none, launches + 1);
		printf("plan during a capture: %s, then %s\n", waited ? "deferred" : "applied",
		       atomic_load(&L.offload_deferred) ? "still deferred" : "applied");
		if (!waited || atomic_load(&L.offload_deferred)) {
			fprintf(stderr, "FAIL: a plan ready during a capture must wait for its end\n");
			failures++;
		}
	}
	const cJSON *ws = disc ? cJSON_GetObjectItem(disc, "weights_in_order") : NULL;
	if (!ws || (uint32_t)cJSON_GetArraySize(ws) != L.prof.nweights ||
	    (uint32_t)num(disc, "traps") != L.prof.ntraps) {
		fprintf(stderr, "FAIL: %u weights in %u traps; the recording found %d in %d\n",
			L.prof.nweights, L.prof.ntraps, ws ? cJSON_GetArraySize(ws) : -1,
			disc ? (int)num(disc, "traps") : -1);
		return 1;
	}
	/* the same weights, in the same order, in the same traps */
	uint32_t k = 0, wrong = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, ws) {
		uint32_t t = 0;
		while (t < L.prof.ntraps && !(L.prof.traps[t].first_weight <= k &&
					      k < L.prof.traps[t].first_weight + L.prof.traps[t].nweights))
			t++;
		uint32_t j = 0;
		while (j < L.nwmap && L.wmap[j].order != k)
			j++;
		if (j == L.nwmap || L.wmap[j].alloc_id != (uint64_t)num(x, "id") ||
		    L.wmap[j].offset != (uint64_t)num(x, "off") || t != (uint32_t)num(x, "trap"))
			wrong++;
		k++;
	}
	if (wrong) {
		fprintf(stderr, "FAIL: %u of %u weights differ from the recording's\n", wrong, k);
		failures++;
	}
	return failures ? 1 : 0;
}
