/*
 * Learning in a live process (src/learn/): the phase machine.  Passes come
 * from pass detection (eager launches), graph replays and ft_mark_pass;
 * each boundary means something in each phase:
 *
 *   start            discovery starts once two consecutive passes had about
 *                    the same number of launches (both forwards; weight
 *                    initialisation and loading repeat differently);
 *                    allocations made since the first of them are not
 *                    weights
 *   DISCOVERY        regions read are recorded; at each boundary the
 *                    candidate weights are checksummed on the GPU; at the
 *                    end (max(2, FT_DISCOVERY_ITERS) passes) weights are
 *                    identified and grouped into traps, and the copy curve
 *                    is measured (discovery.c)
 *   PROFILING        each launch is bracketed by two events; at each
 *                    boundary the pass's launches are attributed to traps
 *                    and each trap's compute time is one sample
 *                    (profiling.c)
 *   INFERENCE        the plan is made (or taken from a saved profile) and
 *                    applied (apply.c); profile.json is written; timings
 *                    may be refreshed from passes after the plan
 *                    (refresh.c)
 *
 * A saved profile.json of the same model on the same device replaces
 * profiling (saved.c).  All state is in struct ft_learn, which the caller
 * owns and passes to every entry point; what learning drives (the driver,
 * through the real-function table only; the registry, VMM, block engine,
 * trace) comes in its env.  Entry points take L->lock themselves unless
 * said otherwise; everything fails open (a driver call that fails is
 * logged once and the step skipped).
 */
#ifndef FT_LEARN_H
#define FT_LEARN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ft/discover.h"
#include "ft/offload.h"
#include "ft/gpu.h"
#include "ft/graphs.h"
#include "ft/options.h"
#include "ft/passes.h"
#include "ft/phase.h"
#include "ft/profile.h"
#include "ft/real.h"
#include "ft/refresh.h"
#include "ft/registry.h"
#include "ft/scan.h"
#include "ft/stats.h"
#include "ft/timing.h"
#include "ft/trace.h"

/* What learning reads and drives; owned by the caller. */
struct ft_learn_env {
	const struct ft_real *real;
	const struct ft_options *opt;
	struct ft_stats *stats;
	struct ft_registry *reg;
	struct ft_graphs *graphs;
	struct ft_trace *trace;
	struct ft_vmm *vmm;
	struct ft_offload *off;
	struct ft_timing_store *timing, *timing_window; /* FT_OFFLOAD_TIMING */
	_Atomic int *captures;    /* stream captures in progress, any thread */
	/* offloading just began: graphs captured before it are made to page
	 * what they read (NULL: none) */
	void (*graphs_planned)(void);
	/* the real dlsym, for libraries the library loads itself (libcufile) */
	void *(*dlsym)(void *handle, const char *symbol);
};

struct ft_prof_launch {
	uint64_t seq;
	int32_t trap;             /* highest trap whose weights it reads, -1 none */
	uint32_t w[4];            /* weights (wmap) it reads whose bytes can leave */
	uint32_t nw;
	CUevent before, after;
};

#define FT_ALLOC_EVENTS 4096

struct ft_learn {
	struct ft_learn_env env;
	pthread_mutex_t lock;
	struct ft_passes passes;
	struct ft_phases phases;
	/* launch numbers: the last one given (ft_learn_seq); eager launches
	 * take one each, a replay one per launch of its capture */
	_Atomic uint64_t seq;
	_Atomic int phase;        /* phases.phase, readable without the lock */
	int started;              /* discovery collects (see ft_learn_pass) */
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
	struct ft_curve_point zdec[3]; /* FT_TRANSFER_COMPRESSION=auto: the decoder's
					  curve (nzdec 0: not measured) */
	uint32_t nzdec;
	struct ft_profile prof;   /* weights, traps, curve, device, plan */
	struct ft_profile saved;  /* FT_PROFILE_STORAGE_DIR/profile.json, if loaded */
	int have_saved;
	int resave;               /* the adopted profile lacks this run's checksums */
	int skip_tried;           /* a saved profile was tried after one pass (once) */
	/* FT_SHM_ENABLED with FT_PROFILE_STORAGE_DIR left at its default: the
	 * namespace's profile directory beside the segments ("": none) */
	char shm_prof[4200];
	int shm_prof_bad;         /* it was refused (said once) */
	/* a saved profile with checksums, before discovery starts: the regions
	 * every launch read, where its weights are sought as soon as they may
	 * all have been read (the end of the first forward; watch.c) */
	struct ft_discover watch;
	int watching;
	uint32_t watch_next;      /* try when the watch holds this many regions, */
	uint64_t watch_launches;  /* or after this many launches fed to it */
	uint64_t watch_retry_at;
	uint32_t watch_tries;     /* tries that found no more than the best before */
	uint32_t watch_found;     /* the most weights a try found */
	uint64_t watch_tried_at;  /* watch_launches at the last try */
	int sums_refused;         /* a region checksum was refused: a capture began */
	uint32_t disc_extra;      /* discovery passes added for unsettled regions */
	/* the plan was ready while a capture was under way (staging waits for
	 * the device): it is applied at the first launch or replay after */
	_Atomic int offload_deferred;
	struct ft_wmap {
		uint64_t alloc_id, offset;
		uint64_t va, extent;  /* address and extent when discovered */
		uint32_t trap;
		uint32_t order;       /* first-touch index (prof.weights) */
		uint8_t movable;      /* bytes of it would leave the GPU with its trap */
		uint64_t views;       /* bytes from va within which reads inside
					 it are views of it (ft_disc_region) */
		uint32_t sl_first, nsl; /* its slices' starts (ft_disc_slices):
					   slices[sl_first..+nsl); nsl 0: none */
	} *wmap;                  /* weights sorted by (alloc_id, offset) */
	uint32_t nwmap;
	uint64_t *slices;         /* offsets from their weights' va */
	uint32_t nslices;
	/* pairs of weights one launch read (first-touch indices, sorted):
	 * discovery's and profiling's, kept until the weights read all over
	 * the pass are known (ft_learn_coread) */
	uint32_t (*wpairs)[2];
	uint32_t nwpairs;
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
	uint32_t *revisited;      /* per weight (wmap): profiled passes in which
				   * it was read again after a later trap began */
	uint32_t nsamples, samples_cap;
	int prof_failed;
	int adopted;              /* the traps and timings came from profile.json */
	int timed_over_budget;    /* profiled while weights were in host memory */
	/* tensors the framework declared (declared.c): sorted and merged when
	 * discovery takes them (ft_learn_declare_done), names by decl[].name */
	struct ft_disc_decl *decl;
	char **decl_names;
	uint32_t ndecl, capdecl;
	uint32_t nsorted;         /* decl[0..nsorted): sorted, merged (the rest new) */
	uint32_t nnames;          /* decl_names[0..nnames) */
	int decl_new;             /* declared since discovery took them */
	int declared;             /* discovery takes declarations, passes are marks */
	uint64_t unmarked_from;   /* passes.launches at the last mark or declaration */
	/* the profile's timings, refreshed from passes after the plan */
	struct ft_refresh refresh;
	int refresh_kind;         /* FT_PASS_EAGER or FT_PASS_GRAPH */
	int refresh_file;         /* profile.json gets them too */
};

/* Sets L up over env (phases from the options, the saved profile.json if
 * FT_PROFILE_STORAGE_DIR has one): 0 or -1 (out of memory). */
int ft_learn_init(struct ft_learn *L, const struct ft_learn_env *env);
/* In a forked child: what the parent learnt does not describe it. */
void ft_learn_after_fork(struct ft_learn *L);
/* The passes DISCOVERY and PROFILING take, from the options and whether
 * tensors were declared (under the lock, or before any pass). */
void ft_learn_phase_counts(struct ft_learn *L);
/* The phase (FT_PHASE_*), without the lock. */
static inline int ft_learn_phase(struct ft_learn *L)
{
	return atomic_load_explicit(&L->phase, memory_order_relaxed);
}
/* Passes from the start until INFERENCE with the options in effect. */
unsigned long long ft_learn_iters_before_inference(struct ft_learn *L);
/* ft_declare_tensor: [va, va + bytes) is a parameter (buffer 0) or a
 * buffer of the framework's, called name; 0, or -1 (after discovery, out
 * of memory).  ft_declare_done: discovery (re)starts now and takes the
 * declarations, passes are the program's marks; 0, or -1 when there is
 * nothing new or it is too late (declared.c). */
int ft_learn_declare(struct ft_learn *L, uint64_t va, uint64_t bytes, const char *name,
		     int buffer);
int ft_learn_declare_done(struct ft_learn *L);
/* The declared name of the tensor holding va, or NULL. */
const char *ft_learn_decl_name(const struct ft_learn *L, uint64_t va);
/* ft_mark_pass: a pass the program marks; the number of passes. */
long long ft_learn_mark(struct ft_learn *L);
/* A launch on stream s (ptsz: a per-thread-stream launch) is about to run
 * (scanned, not captured): PROFILING's "before" event. */
void ft_learn_before(struct ft_learn *L, CUstream s, int ptsz, const struct ft_refs *refs,
		     uint64_t seq);
/* After it: PROFILING's "after" event, pass detection, DISCOVERY's reads. */
void ft_learn_after(struct ft_learn *L, CUstream s, int ptsz, const struct ft_refs *refs,
		    uint64_t seq);
/* n new launch numbers: the first of them (the rest follow it). */
static inline uint64_t ft_learn_seq(struct ft_learn *L, uint64_t n)
{
	return atomic_fetch_add_explicit(&L->seq, n, memory_order_relaxed) + 1;
}
/* A graph whose capture read tracked memory was replayed: its captured
 * launches, in order, are launches as eager ones are (pass detection and
 * discovery take them one by one: a graph may be a whole pass, as a decode
 * step, or a piece of one, as vLLM's PIECEWISE graphs with attention run
 * eagerly between them), except that they are not timed.  Where they are
 * not known, the replay is one pass reading what the capture read. */
void ft_learn_replay(struct ft_learn *L, uint64_t exec);
/* A stream capture is about to begin (no capture of it is under way): with
 * a saved profile, a try to take it first, so that the capture pages from
 * the start (watch.c). */
void ft_learn_capture_begins(struct ft_learn *L);
/* A plan that was ready while a capture was under way is applied now, if
 * none is (a flag's load when there is no such plan). */
void ft_learn_deferred(struct ft_learn *L);
/* An allocation got id (before INFERENCE). */
void ft_learn_alloc(struct ft_learn *L, uint64_t id);
/* A copy or memset wrote [offset, offset + bytes) of an allocation. */
void ft_learn_write(struct ft_learn *L, uint64_t alloc_id, uint64_t offset, uint64_t bytes);
/* The scan's references as the regions pass detection, discovery and the
 * graph bookkeeping take (out has room for refs->n), without the stale ones
 * (ft_kernel_mark_stale: they would make regions in the middle of weights
 * and read weights out of their turn).  Returns how many. */
unsigned ft_learn_regions(const struct ft_refs *refs, struct ft_region_ref *out);
/* ft_save_profile / ft_load_profile (dir NULL: FT_PROFILE_STORAGE_DIR):
 * 0 or -1. */
int ft_learn_save(struct ft_learn *L, const char *dir);
int ft_learn_load(struct ft_learn *L, const char *dir);
/* At exit: says when a refresh of the profile's timings did not complete. */
void ft_learn_exit(struct ft_learn *L);

#endif
