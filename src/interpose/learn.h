/*
 * Learning in a live process (learn.c): passes, DISCOVERY (weights, traps),
 * PROFILING (per-trap compute time, copy curve), profile.json at the move to
 * INFERENCE.  Called from the observation code under no lock; takes the
 * learning lock itself.
 */
#ifndef FT_INTERPOSE_LEARN_H
#define FT_INTERPOSE_LEARN_H

#include <stdint.h>

#include "ft/discover.h"
#include "ft/gpu.h"
#include "ft/passes.h"
#include "ft/profile.h"
#include "ft/refresh.h"

struct ft_launch;
struct ft_refs;

struct ft_prof_launch {
	uint64_t seq;
	int32_t trap;             /* highest trap whose weights it reads, -1 none */
	uint32_t w[4];            /* weights (L.wmap) it reads whose bytes can leave */
	uint32_t nw;
	CUevent before, after;
};

#define FT_ALLOC_EVENTS 4096

struct ft_learning {
	int started;              /* discovery collects (see ft_obs_pass) */
	uint64_t bounds[2];       /* the last two boundaries before it started */
	uint32_t nbounds;
	/* (launch number, allocation id) of recent allocations: where the pass
	 * before the first boundary began is estimated later, and allocations
	 * made since then are not weights */
	struct { uint64_t seq, id; } allocs[FT_ALLOC_EVENTS];
	uint32_t nallocs;         /* total recorded; ring of FT_ALLOC_EVENTS */
	int skip_sample;          /* the first PROFILING pass began unobserved */
	struct ft_discover disc;
	struct ft_gpu gpu;
	struct ft_profile prof;   /* weights, traps, curve, device */
	struct ft_profile saved;  /* FT_PROFILE_STORAGE_DIR/profile.json, if loaded */
	int have_saved;
	int skip_tried;           /* FT_SKIP_DISCOVERY was tried (once) */
	struct ft_wmap {
		uint64_t alloc_id, offset;
		uint64_t va, extent;  /* address and extent when discovered */
		uint32_t trap;
		uint32_t order;       /* first-touch index (L.prof.weights) */
		uint8_t movable;      /* bytes of it would leave the GPU with its trap */
	} *wmap;                  /* weights sorted by (alloc_id, offset) */
	uint32_t nwmap;
	/* regions read in every discovery pass, never written by copies, but
	 * not checksummed twice at one extent: unknown content, so never
	 * offloaded, but on the GPU, so counted against the budget */
	uint64_t unchecked_bytes;
	/* profiling */
	struct ft_prof_launch *pl;
	uint32_t npl, cappl;
	CUevent *pool;
	uint32_t npool, pool_next;
	float *samples;           /* [trap * samples_cap + k] */
	uint32_t *revisited;      /* per weight (L.wmap): profiled passes in which
				   * it was read again after a later trap began */
	uint32_t nsamples, samples_cap;
	int prof_failed;
	int adopted;              /* the traps and timings came from profile.json */
	int timed_over_budget;    /* profiled while weights were in host memory */
	struct ft_refresh refresh; /* its timings, refreshed while serving */
};

/* At start: loads FT_PROFILE_STORAGE_DIR/profile.json if there is one. */
void ft_learn_start(void);
/* Before a launch runs (scanned, not captured): PROFILING's "before" event. */
void ft_learn_before(const struct ft_launch *l, const struct ft_refs *refs, uint64_t seq);
/* After it: PROFILING's "after" event, pass detection, DISCOVERY's reads. */
void ft_learn_after(const struct ft_launch *l, const struct ft_refs *refs, uint64_t seq);
/* A graph whose capture read tracked memory was replayed: one pass, whose
 * reads are those of the capture. */
void ft_learn_replay(uint64_t exec);
/* An allocation got id (before INFERENCE). */
void ft_learn_alloc(uint64_t id);
/* The scan's references as the regions pass detection, discovery and the
 * graph bookkeeping take (out has room for refs->n), without the stale ones
 * (ft_kernel_mark_stale: they would make regions in the middle of weights
 * and read weights out of their turn).  Returns how many. */
unsigned ft_learn_regions(const struct ft_refs *refs, struct ft_region_ref *out);
/* ft_save_profile / ft_load_profile (dir NULL: FT_PROFILE_STORAGE_DIR),
 * under the learning lock: 0 or -1. */
int ft_learn_save(const char *dir);
/* At exit: says when a refresh of the profile's timings did not complete. */
void ft_learn_exit(void);
int ft_learn_load(const char *dir);
/* Memory mode's GPU budget for the weights (resident + blocks) when they
 * total weights bytes: FT_MAX_GPU_MEM_FRACTION of the device, capped by
 * what is free plus the weights; 0 in latency mode (apply.c). */
uint64_t ft_learn_budget(uint64_t weights);
/* INFERENCE begins: the plan (made now, or the saved profile's) is applied
 * (apply.c).  Under the learning lock. */
void ft_learn_offload(void);
/* A copy or memset wrote [dst, dst + bytes): DISCOVERY's written flag. */
void ft_learn_write(uint64_t alloc_id, uint64_t offset, uint64_t bytes);

#endif
