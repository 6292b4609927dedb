/*
 * Interposer-private state and helpers shared by the hook files: the one
 * library context, lazy initialisation, the call-through macro and the
 * observation entry points (observe.c) that turn hook arguments into
 * registry updates, scans, counters and trace records.
 */
#ifndef FT_INTERPOSE_LIB_H
#define FT_INTERPOSE_LIB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ft/cuda.h"
#include "ft/offload.h"
#include "ft/learn.h"
#include "ft/kernels.h"
#include "ft/log.h"
#include "ft/graphs.h"
#include "ft/options.h"
#include "ft/passthrough.h"
#include "ft/passes.h"
#include "ft/phase.h"
#include "ft/real.h"
#include "ft/registry.h"
#include "ft/scan.h"
#include "ft/stats.h"
#include "ft/trace.h"

#define FT_EXPORT __attribute__((visibility("default")))

struct ft_lib {
	_Atomic int ready;      /* initialisation finished (successfully or not) */
	int enabled;            /* FT_ENABLED=1 and the driver was found */
	struct ft_options opt;
	struct ft_real real;
	void *libcuda;
	const void *libcuda_base;
	struct ft_registry reg;
	struct ft_kernels kernels;
	struct ft_tmaps *tmaps;
	struct ft_trace trace;
	struct ft_stats stats;
	_Atomic int active_captures;

	struct ft_graphs *graphs;
	struct ft_learn learn;      /* pass detection and the phase machine */
	struct ft_vmm vmm;
	struct ft_offload *off;     /* the block engine (ft_off_new) */
	struct ft_timing_store timing, timing_window; /* FT_OFFLOAD_TIMING */
};

extern struct ft_lib ft_g;

void ft_lib_init_slow(void);
/* Nonzero while this thread runs the initialisation (re-entry guard). */
int ft_lib_in_init(void);

static inline void ft_lib_ensure(void)
{
	if (__builtin_expect(!atomic_load_explicit(&ft_g.ready, memory_order_acquire), 0))
		ft_lib_init_slow();
}

static inline int ft_observing(void)
{
	return ft_g.enabled && !ft_passthrough; /* (ft/passthrough.h) */
}

/* Calls the real driver function sym; CUDA_ERROR_NOT_FOUND when the driver
 * lacks it (only reachable through our direct export). */
#define FT_CALL(sym, ...)                                                     \
	(ft_lib_ensure(), ft_g.real.sym ? ft_g.real.sym(__VA_ARGS__)          \
					: CUDA_ERROR_NOT_FOUND)

/* routes.c */
void ft_routes_build(const struct ft_real *real);
/* The hook for the exact symbol the driver's pointer p implements, when that
 * symbol belongs to the family of requested (base names equal); else p. */
void *ft_route(void *p, const char *requested);
/* Hook exported under exactly this name, or NULL (FT_HOOK and FT_RT_HOOK). */
void *ft_hook_by_name(const char *name);
/* Real libcuda pointer for this exact hooked name, or NULL. */
void *ft_real_by_name(const char *name);
int ft_is_runtime_hook(const char *name);

/* dlsym.c: the real dlsym, never our override. */
void *ft_real_dlsym(void *handle, const char *symbol);

/* observe.c */
void ft_obs_alloc(const char *api, uint64_t base, uint64_t size, int kind,
		  CUstream stream);
void ft_obs_free(const char *api, uint64_t base);
void ft_obs_unmap(const char *api, uint64_t base, uint64_t size);
void ft_obs_copy(const char *api, uint64_t dst, uint64_t src, uint64_t bytes,
		 CUstream stream);
void ft_obs_memset(const char *api, uint64_t dst, uint64_t bytes, CUstream stream);
struct ft_launch {
	const char *api;
	CUfunction f;
	CUstream stream;
	int ptsz;
	unsigned grid[3], block[3], smem;
	void **params, **extra;
};
/* What observation learnt about one launch, from before it to after it. */
struct ft_seen {
	struct ft_refs refs;
	const struct ft_kernel *k;
	uint64_t seq, cap;
	int scanned;
	uint32_t paged; /* a captured launch paged so (its tag), said after it */
};
/* The addresses refs point to: the ones read first (how many: the return
 * value), then the stale ones; word[i]: the parameter word of a[i]. */
unsigned ft_obs_addrs(const struct ft_refs *refs, uint64_t *a, uint16_t *word);
void ft_obs_launch_before(const struct ft_launch *l, struct ft_seen *s);
void ft_obs_launch_after(const struct ft_launch *l, const struct ft_seen *s, CUresult rc);
/* Generic record for capture, graph, context, module and VMM handle events:
 * h1/h2 are named handles (NULL name = absent). */
void ft_obs_event(const char *ev, const char *api, CUresult rc,
		  const char *k1, uint64_t h1, const char *k2, uint64_t h2);
/* what (a launch, a replay; name: the kernel or API) reads offloaded trap
 * trap at weight where the executor cannot page it: counted, reported. */
void ft_obs_hidden(const char *what, const char *name, int trap, uint64_t weight);
/* Capture id of the capture stream s belongs to, or 0. */
uint64_t ft_obs_capture_id(CUstream s, int ptsz);
void ft_obs_tensormap(const char *api, const CUtensorMap *map, uint64_t addr);

/* graph_sub.c: graphs captured before the plan (include/ft/graphs.h). */
void ft_sub_init(void);
/* At instantiation of g with flags: a clone kept to page it later (0: none
 * needed, or it could never be paged: said). */
uint64_t ft_sub_keep(CUgraph g, unsigned long long flags, const char **unkept);
/* Once offloading is in effect: how exec's replays page what it reads
 * (substitute, launch boundary, or kept on the GPU), decided and set up. */
void ft_sub_plan(CUgraphExec exec);
/* exec can no longer be paged (why): what it reads comes back to the GPU
 * for good (its substitute goes). */
void ft_sub_unpageable(CUgraphExec exec, const char *why);
/* Kernel node n of exec, an executable with no clone to plan it again
 * from (captured with its loads, kept resident, made by a rescued update,
 * or reading nothing tracked when captured), is about to get parameters p:
 * the offloaded traps they read that n's parameters at capture did not
 * (the graph's loads, if any, put only those in their blocks) come back to
 * the GPU for good, before the setter runs. */
void ft_sub_params_unkept(CUgraphExec exec, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p);
/* Kernel node n of an application's graph is about to get parameters p:
 * an executable made from the graph may take them later (its setter is
 * then compared with these, not with its capture's), so the offloaded
 * traps they read that n's present parameters do not come back to the
 * GPU for good now (costs memory, never results). */
void ft_sub_graph_params(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p);
/* Every executable kept so far (the plan was just applied). */
void ft_sub_plan_all(void);
/* cuGraphLaunch / cuGraphUpload of exec on s, paged as decided. */
CUresult ft_sub_launch(CUgraphExec exec, CUstream s, int upload, int ptsz);

#endif
