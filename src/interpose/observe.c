/*
 * Observation: what the hooks saw, turned into registry updates, launch
 * scans, counters and trace records.  Called only when observing; never
 * changes what the driver is asked or what the caller gets back.
 */
#include <cjson/cJSON.h>

#include "ft/gate.h"
#include "lib.h"

static int current_device(void)
{
	CUdevice dev = -1;
	if (!ft_g.real.cuCtxGetDevice || ft_g.real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		return -1;
	return dev;
}

static void add_alloc_ref(cJSON *rec, const char *id_key, const char *off_key,
			  uint64_t addr)
{
	struct ft_alloc a;
	if (!ft_registry_maybe(&ft_g.reg, addr) ||
	    ft_registry_lookup(&ft_g.reg, addr, &a))
		return;
	ft_trace_num(rec, id_key, (double)a.id);
	ft_trace_num(rec, off_key, (double)(addr - a.base));
}

void ft_obs_alloc(const char *api, uint64_t base, uint64_t size, int kind,
		  CUstream stream)
{
	unsigned evicted = 0;
	int dev = current_device();
	uint64_t id = ft_registry_add(&ft_g.reg, base, size, kind, dev, &evicted);
	FT_STAT_INC(&ft_g.stats, allocs);
	ft_learn_alloc(&ft_g.learn, id);
	if (evicted) {
		FT_STAT_ADD(&ft_g.stats, stale_evicted, evicted);
		ft_debug("%s at 0x%llx overlaps %u tracked range(s) whose free was not seen",
			 api, (unsigned long long)base, evicted);
	}
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin("alloc");
	ft_trace_str(rec, "api", api);
	ft_trace_num(rec, "id", (double)id);
	ft_trace_str(rec, "kind", ft_alloc_kind_name(kind));
	ft_trace_hex(rec, "ptr", base);
	ft_trace_num(rec, "size", (double)size);
	ft_trace_num(rec, "device", dev);
	if (stream)
		ft_trace_hex(rec, "stream", (uint64_t)(uintptr_t)stream);
	ft_trace_emit(&ft_g.trace, rec);
}

static void trace_free(const char *api, const struct ft_alloc *a)
{
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin("free");
	ft_trace_str(rec, "api", api);
	ft_trace_num(rec, "id", (double)a->id);
	ft_trace_hex(rec, "ptr", a->base);
	ft_trace_num(rec, "size", (double)a->size);
	ft_trace_emit(&ft_g.trace, rec);
}

void ft_obs_free(const char *api, uint64_t base)
{
	struct ft_alloc a;
	if (ft_registry_remove(&ft_g.reg, base, &a))
		return;
	FT_STAT_INC(&ft_g.stats, frees);
	trace_free(api, &a);
}

struct unmap_ctx {
	const char *api;
	struct ft_alloc gone[16];
	unsigned n;
};

static void collect(void *ud, const struct ft_alloc *a)
{
	struct unmap_ctx *c = ud;
	if (c->n < 16)
		c->gone[c->n++] = *a;
}

void ft_obs_unmap(const char *api, uint64_t base, uint64_t size)
{
	struct unmap_ctx c = { .api = api };
	size_t n = ft_registry_remove_range(&ft_g.reg, base, size, collect, &c);
	FT_STAT_ADD(&ft_g.stats, frees, n);
	for (unsigned i = 0; i < c.n; i++)
		trace_free(api, &c.gone[i]);
}

static void trace_range_op(const char *ev, const char *api, uint64_t dst,
			   uint64_t src, uint64_t bytes, CUstream stream)
{
	cJSON *rec = ft_trace_begin(ev);
	ft_trace_str(rec, "api", api);
	ft_trace_hex(rec, "dst", dst);
	add_alloc_ref(rec, "dst_id", "dst_off", dst);
	if (src) {
		ft_trace_hex(rec, "src", src);
		add_alloc_ref(rec, "src_id", "src_off", src);
	}
	ft_trace_num(rec, "bytes", (double)bytes);
	if (stream)
		ft_trace_hex(rec, "stream", (uint64_t)(uintptr_t)stream);
	ft_trace_emit(&ft_g.trace, rec);
}

/* A write into tracked memory: discovery's "destination of a copy". */
static void written(uint64_t dst, uint64_t bytes)
{
	struct ft_alloc a;
	if (ft_learn_phase(&ft_g.learn) == FT_PHASE_DISCOVERY &&
	    ft_registry_maybe(&ft_g.reg, dst) && !ft_registry_lookup(&ft_g.reg, dst, &a))
		ft_learn_write(&ft_g.learn, a.id, dst - a.base, bytes);
}

void ft_obs_copy(const char *api, uint64_t dst, uint64_t src, uint64_t bytes,
		 CUstream stream)
{
	FT_STAT_INC(&ft_g.stats, copies);
	written(dst, bytes);
	if (ft_trace_on(&ft_g.trace))
		trace_range_op("copy", api, dst, src, bytes, stream);
}

void ft_obs_memset(const char *api, uint64_t dst, uint64_t bytes, CUstream stream)
{
	FT_STAT_INC(&ft_g.stats, memsets);
	written(dst, bytes);
	if (ft_trace_on(&ft_g.trace))
		trace_range_op("memset", api, dst, 0, bytes, stream);
}

uint64_t ft_obs_capture_id(CUstream s, int ptsz)
{
	if (!atomic_load_explicit(&ft_g.active_captures, memory_order_relaxed))
		return 0;
	/* Asking about the legacy stream while another stream captures in
	 * global mode would invalidate that capture. */
	if ((!s && !ptsz) || s == CU_STREAM_LEGACY)
		return 0;
	__typeof__(ft_g.real.cuStreamGetCaptureInfo_v3) fn =
		ptsz ? ft_g.real.cuStreamGetCaptureInfo_v3_ptsz
		     : ft_g.real.cuStreamGetCaptureInfo_v3;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t id = 0;
	if (!fn || fn(s, &st, &id, NULL, NULL, NULL, NULL) != CUDA_SUCCESS)
		return 0;
	return st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? id : 0;
}

static void trace_launch(const struct ft_launch *l, const struct ft_kernel *k,
			 const struct ft_refs *refs, uint64_t seq, uint64_t cap,
			 CUresult rc)
{
	cJSON *rec = ft_trace_begin("launch");
	ft_trace_num(rec, "seq", (double)seq);
	ft_trace_str(rec, "api", l->api);
	ft_trace_str(rec, "kernel", k ? k->name : "?");
	ft_trace_hex(rec, "fn", (uint64_t)(uintptr_t)l->f);
	ft_trace_hex(rec, "stream", (uint64_t)(uintptr_t)l->stream);
	cJSON_AddItemToObject(rec, "grid", cJSON_CreateIntArray((const int *)l->grid, 3));
	cJSON_AddItemToObject(rec, "block", cJSON_CreateIntArray((const int *)l->block, 3));
	ft_trace_num(rec, "smem", l->smem);
	if (cap)
		ft_trace_num(rec, "capture", (double)cap);
	if (!refs)
		cJSON_AddBoolToObject(rec, "scanned", 0);
	cJSON *arr = cJSON_AddArrayToObject(rec, "refs");
	for (unsigned i = 0; refs && i < refs->n; i++) {
		cJSON *r = cJSON_CreateObject();
		ft_trace_num(r, "id", (double)refs->v[i].alloc_id);
		ft_trace_num(r, "off", (double)refs->v[i].offset);
		ft_trace_num(r, "param", refs->v[i].param);
		ft_trace_num(r, "word", refs->v[i].word);
		if (refs->v[i].stale)
			cJSON_AddBoolToObject(r, "stale", 1);
		if (refs->v[i].via == FT_VIA_TENSORMAP)
			ft_trace_str(r, "via", "tensormap");
		cJSON_AddItemToArray(arr, r);
	}
	if (refs && refs->dropped)
		ft_trace_num(rec, "refs_dropped", refs->dropped);
	if (rc != CUDA_SUCCESS)
		ft_trace_num(rec, "result", rc);
	ft_trace_emit(&ft_g.trace, rec);
}

unsigned ft_obs_addrs(const struct ft_refs *refs, uint64_t *a, uint16_t *word)
{
	unsigned n = 0, m = refs->n;
	for (unsigned i = 0; i < refs->n; i++) {
		unsigned j = refs->v[i].stale ? --m : n++;
		a[j] = refs->v[i].alloc_base + refs->v[i].offset;
		word[j] = refs->v[i].word;
	}
	return n;
}

void ft_obs_launch_before(const struct ft_launch *l, struct ft_seen *s)
{
	s->paged = 0;
	s->k = ft_kernels_get(&ft_g.kernels, l->f);
	s->scanned = ft_scan_launch(&ft_g.reg, ft_g.tmaps, s->k && s->k->known ? &s->k->layout : NULL,
				    l->params, l->extra, &s->refs) == 0;
	if (s->scanned && s->k && s->refs.n) {
		ft_kernel_count((struct ft_kernel *)s->k, &s->refs);
		unsigned stale = ft_kernel_mark_stale(s->k, &s->refs);
		if (stale)
			FT_STAT_ADD(&ft_g.stats, refs_stale, stale);
	}
	FT_STAT_INC(&ft_g.stats, launches);
	s->cap = ft_obs_capture_id(l->stream, l->ptsz);
	/* a captured launch runs in its replays, which number their launches
	 * then: it takes no number of its own (the latest one, for the trace) */
	s->seq = s->cap ? atomic_load(&ft_g.learn.seq) : ft_learn_seq(&ft_g.learn, 1);
	if (s->scanned && !s->cap)
		ft_learn_before(&ft_g.learn, l->stream, l->ptsz, &s->refs, s->seq);
	/* from the executor's step to the enqueued launch, the plan is not
	 * applied under it (learning, which takes its lock, stays outside) */
	ft_gate_enter(); /* left in ft_obs_launch_after */
	if (!ft_off_active(ft_g.off))
		return;
	const char *name = s->k ? s->k->name : "?";
	if (!s->scanned) {
		ft_warn_once("kernel %s cannot be scanned while weights are offloaded: if it reads "
			     "one, it reads whatever the block holds", name);
	} else if (s->refs.n || ft_off_verifying(ft_g.off)) {
		/* (any launch with FT_VERIFY: it releases the blocks it does
		 * not read) */
		uint64_t a[FT_MAX_REFS];
		uint16_t word[FT_MAX_REFS];
		unsigned n = ft_obs_addrs(&s->refs, a, word);
		struct ft_kernel *kern = (struct ft_kernel *)s->k;
		int trap;
		uint64_t w;
		if (!s->cap) {
			ft_off_launch(ft_g.off, l->stream, a, word, n, s->refs.n - n, kern, name);
		} else if (ft_g.opt.graph_paging == FT_GP_INSTANTIATE) {
			/* planned at instantiation, as a graph captured before
			 * the plan (graph_sub.c): a piece of a pass is paged at
			 * its launch boundaries, a whole pass by a substitute */
		} else {
			/* the copies and waits go into the capture */
			int paged = ft_off_capture_launch(ft_g.off, l->stream, s->cap, a, word, n,
							  s->refs.n - n, kern, name);
			/* the engine is held until the launch is enqueued: the
			 * graphs' lock comes after (fork takes them the other
			 * way round) */
			if (paged > 0)
				s->paged = (uint32_t)paged;
			else if (paged < 0 && ft_off_offloaded(ft_g.off, a, n, &trap, &w))
				ft_obs_hidden("a captured launch the executor cannot page (another "
					      "capture pages weights, or the host store is pageable)",
					      name, trap, w);
		}
	}
}

void ft_obs_launch_after(const struct ft_launch *l, const struct ft_seen *s, CUresult rc)
{
	ft_off_launched(ft_g.off); /* the launch is on its stream now */
	ft_gate_leave();
	if (s->paged)
		ft_graphs_capture_paged(ft_g.graphs, s->cap, s->paged);
	if (s->scanned) {
		if (s->refs.n)
			FT_STAT_ADD(&ft_g.stats, launch_refs, s->refs.n);
		if (s->refs.dropped)
			FT_STAT_ADD(&ft_g.stats, refs_dropped, s->refs.dropped);
	} else {
		FT_STAT_INC(&ft_g.stats, launches_unscanned);
		ft_debug_once("kernel %s: parameter layout unknown; its launches are not scanned",
			      s->k ? s->k->name : "?");
	}
	if (s->cap) {
		FT_STAT_INC(&ft_g.stats, captured_launches);
		if (s->scanned) { /* every launch counts, read or not */
			struct ft_region_ref r[FT_MAX_REFS];
			unsigned n = ft_learn_regions(&s->refs, r);
			ft_graphs_capture_read(ft_g.graphs, s->cap, r, n);
		}
	}
	if (ft_trace_on(&ft_g.trace))
		trace_launch(l, s->k, s->scanned ? &s->refs : NULL, s->seq, s->cap, rc);
	if (s->scanned && !s->cap && rc == CUDA_SUCCESS)
		ft_learn_after(&ft_g.learn, l->stream, l->ptsz, &s->refs, s->seq);
}

void ft_obs_event(const char *ev, const char *api, CUresult rc, const char *k1,
		  uint64_t h1, const char *k2, uint64_t h2)
{
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin(ev);
	ft_trace_str(rec, "api", api);
	if (k1)
		ft_trace_hex(rec, k1, h1);
	if (k2)
		ft_trace_hex(rec, k2, h2);
	if (rc != CUDA_SUCCESS)
		ft_trace_num(rec, "result", rc);
	ft_trace_emit(&ft_g.trace, rec);
}

void ft_obs_tensormap(const char *api, const CUtensorMap *map, uint64_t addr)
{
	ft_tmaps_put(ft_g.tmaps, map, addr);
	FT_STAT_INC(&ft_g.stats, tensormaps);
	if (!ft_trace_on(&ft_g.trace))
		return;
	cJSON *rec = ft_trace_begin("tensormap");
	ft_trace_str(rec, "api", api);
	ft_trace_hex(rec, "addr", addr);
	add_alloc_ref(rec, "id", "off", addr);
	ft_trace_emit(&ft_g.trace, rec);
}

void ft_obs_hidden(const char *what, const char *name, int trap, uint64_t weight)
{
	static _Atomic int reports;
	FT_STAT_INC(&ft_g.stats, hidden_readers);
	if (atomic_fetch_add(&reports, 1) < 8)
		ft_error("%s (%s) reads offloaded trap %d (weight at 0x%llx) where the executor "
			 "cannot page it: it reads whatever the block holds then (NaN with "
			 "FT_VERIFY=1). Graphs are paged only when captured after offloading "
			 "began (in INFERENCE), one capture at a time: capture later, or run with "
			 "FT_VMM_MIN_BYTES=0 (nothing offloaded)", what, name, trap,
			 (unsigned long long)weight);
}
