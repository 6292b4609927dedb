/*
 * The block engine: what the library does with a plan (DESIGN.md sections
 * 2 and 6).  Everything reaches the driver through the real table only.
 *
 * VMM-backed allocations (vmm.c).  Device allocations of at least
 * FT_VMM_MIN_BYTES are served as a reserved address range mapped chunk by
 * chunk (2 MiB, the VMM granularity) onto physical handles of their own.
 * The caller gets an ordinary device pointer; any chunk can later be
 * re-backed by a block's chunk without the address changing.
 *
 * Offloading (offload.c).  Applying a plan, once: for every offloaded trap,
 * the chunks its weights cover entirely (a chunk that also holds bytes of
 * something else stays resident) are copied to the host store (pageable
 * memory registered with the driver, one buffer per trap: host RAM equals
 * the offloaded bytes), their own handles are released, and they are mapped
 * onto the chunks of the trap's block.  Traps sharing a block alias the same
 * physical memory; which one's bytes it holds is the executor's business.
 * Mappings never change after that.
 *
 * The executor (offload.c, ft_off_launch): before each launch, the traps
 * whose weights it reads are looked up; an offloaded trap not in its block
 * is loaded (the copy stream waits until the block's previous occupant's
 * readers are done, then copies), the launch stream waits on the trap's
 * ready event once per load, and the next offloaded traps, cyclically
 * across the pass boundary, are loaded as far as their blocks are free.
 * strategy mode copies on the launch stream itself at first use and
 * prefetches nothing.
 *
 * Guards.  A launch that refers into an offloaded trap's chunks at an
 * address discovery never saw (a tensor the allocator later placed in a
 * weight's free tail), or a copy or memset that writes into them, brings the
 * trap back to the GPU for good before it runs (own memory, filled from the
 * host store): nothing but the weights may live in a block.  A copy that
 * reads an offloaded weight (a checkpoint save) waits for its trap.
 *
 * FT_VERIFY (gpu non-NULL at apply): nothing is prefetched, and before
 * every launch (outside captures) each block whose trap the launch does not
 * read is released: its contents are checksummed against the host store (a
 * kernel that wrote to an offloaded weight is reported with the weight and
 * the last kernel that read it) and poisoned with 0xFF bytes (NaN in every
 * float format), so that a reader the executor does not see reads NaN
 * instead of another trap's plausible numbers.
 */
#ifndef FT_ENGINE_H
#define FT_ENGINE_H

#include <pthread.h>
#include <stdint.h>

#include "ft/gpu.h"
#include "ft/options.h" /* FT_TM_*: the transfer modes (FT_TRANSFER_MODE) */
#include "ft/passes.h" /* FT_PASS_EAGER, FT_PASS_GRAPH: kinds of timed passes */
#include "ft/real.h"
#include "ft/stats.h"
#include "ft/timing.h"

/* ------------------------------------------------------------------- VMM */

struct ft_vmm_alloc {
	CUdeviceptr base;
	size_t size;                        /* reserved: chunks x chunk */
	uint32_t nchunks;
	CUmemGenericAllocationHandle *own;  /* per chunk; 0 once re-backed by a block */
	unsigned char *host;                /* per chunk: own memory is host memory */
};

struct ft_vmm {
	pthread_mutex_t lock;
	const struct ft_real *real;
	size_t min_bytes;                   /* FT_VMM_MIN_BYTES; 0 = off */
	double fraction;                    /* FT_MAX_GPU_MEM_FRACTION, NAN = none */
	uint64_t total;                     /* the device's memory (once started) */
	uint64_t budget;                    /* device bytes VMM may hold; 0 = no limit */
	int exempt;                         /* new allocations are not limited (no weights) */
	uint64_t device_bytes;              /* device-backed chunks held now */
	uint64_t host_bytes;                /* host-backed chunks held now */
	size_t chunk;
	CUdeviceptr arena;                  /* the high address range allocations come from */
	size_t arena_size;                  /* (0: each has a reservation of its own) */
	int device;                         /* the one served (once started) */
	int want;                           /* FT_GPU_DEVICE; -1: the first allocated on */
	int state;                          /* 0 untried, 1 usable, -1 unusable */
	uint32_t n, cap;
	struct ft_vmm_alloc *a;             /* sorted by base */
};

/* fraction: FT_MAX_GPU_MEM_FRACTION (NAN: none).  With one, allocations
 * that would take the chunks VMM holds on the device over fraction x the
 * device's memory, before any plan exists, get host memory mapped at their
 * address instead (kernels read it over the bus, slowly, but correctly);
 * ft_vmm_migrate brings it to the device later. */
void ft_vmm_init(struct ft_vmm *v, const struct ft_real *real, size_t min_bytes,
		 double fraction, int device);
/* Serves a device allocation of size bytes: 0 (*host: how many of its
 * bytes got host memory), or -1 when the caller should ask the driver
 * instead (too small, VMM unusable, out of memory). */
int ft_vmm_alloc(struct ft_vmm *v, CUdeviceptr *out, size_t size, uint64_t *host);
/* Frees p if it is a VMM-backed allocation's base: 1 (freed, with rc in
 * *rc), else 0 (not ours). */
int ft_vmm_free(struct ft_vmm *v, CUdeviceptr p, CUresult *rc);
/* The VMM-backed allocation holding p: 1 with its base and size, else 0. */
int ft_vmm_range(struct ft_vmm *v, CUdeviceptr p, CUdeviceptr *base, size_t *size);

/* Moves host-backed chunks that still have their own memory to the
 * device, as far as the budget allows (after a plan freed room): the bytes
 * moved. */
uint64_t ft_vmm_migrate(struct ft_vmm *v);
/* A plan is applied: the budget governs the weights only (the planner's
 * job), so new allocations and ft_vmm_migrate are no longer limited. */
void ft_vmm_unlimit(struct ft_vmm *v);
/* No allocation made from now on is a weight (discovery has begun): none
 * is limited; ft_vmm_migrate still keeps to the budget. */
void ft_vmm_exempt_new(struct ft_vmm *v);
/* Moves the host-backed chunks of the allocations pick(arg, base) chooses
 * to the device, whatever the budget (they are not weights): the bytes
 * moved.  pick runs under no lock of the VMM's. */
uint64_t ft_vmm_migrate_if(struct ft_vmm *v, int (*pick)(void *arg, CUdeviceptr base),
			   void *arg);
/* Bytes of [lo, hi) that are host memory now. */
uint64_t ft_vmm_host_in(struct ft_vmm *v, CUdeviceptr lo, CUdeviceptr hi);
/* The served device's total memory, bytes (0 until VMM serves one). */
uint64_t ft_vmm_total(struct ft_vmm *v);
/* Bytes of host memory VMM-backed allocations hold now (offloaded chunks,
 * re-backed by blocks, no longer count). */
uint64_t ft_vmm_host_bytes(struct ft_vmm *v);
/* Re-backs the chunk at c (chunk aligned, in a VMM-backed allocation) by
 * the physical handle h, releasing the chunk's own memory: 0, or -1 with
 * the chunk unchanged. */
int ft_vmm_rebind(struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle h);
/* The reverse: the chunk at c gets physical memory of its own again (its
 * contents are undefined): 0 or -1 (then it may be unmapped: the caller
 * has nowhere to put the bytes). */
int ft_vmm_own(struct ft_vmm *v, CUdeviceptr c);
/* A new physical chunk on the device (counted against the budget): 0 or
 * -1; and its release. */
int ft_vmm_chunk_handle(struct ft_vmm *v, CUmemGenericAllocationHandle *h);
void ft_vmm_chunk_release(struct ft_vmm *v, CUmemGenericAllocationHandle h);
/* Maps n chunk handles contiguously at a new address *va: 0 or -1. */
int ft_vmm_map_block(struct ft_vmm *v, const CUmemGenericAllocationHandle *h, uint32_t n,
		     CUdeviceptr *va);

/* ------------------------------------------------------------ coverage */

struct ft_span {
	uint64_t lo, hi;                    /* [lo, hi) */
};

/* The chunk-aligned runs that spans (one trap's weights, any order) cover
 * entirely within the allocations allocs[0..nallocs) (VMM-backed, chunk
 * aligned): chunks holding anything else are left out.  Writes up to cap
 * runs to out; returns how many there are. */
uint32_t ft_cover(const struct ft_span *spans, uint32_t n, const struct ft_span *allocs,
		  uint32_t nallocs, uint64_t chunk, struct ft_span *out, uint32_t cap);

struct ft_kernel;

/* ------------------------------------------------------------ offloading */


/* FT_OFFLOAD_TIMING events of one trap, in eager passes or in one graph */
struct ft_off_tev {
	CUevent cs, ce, ws, we, ts[2], te[2];
	int slot;                           /* transfer events of the latest load */
	int served;                         /* slot that served this pass, -1 none */
	int entered, waited, ended;
	uint64_t reported;                  /* loads when a transfer was last reported */
};

/* A captured graph's timing (FT_OFFLOAD_TIMING=cuda_graph): its events are
 * recorded as external event nodes, so each replay re-records them; done
 * is recorded last. */
#define FT_OFF_TIMED_GRAPHS 512 /* captures timed at most (a server captures one per
				  batch size; vLLM about 70) */

struct ft_off_gtime {
	struct ft_off_tev *tev;             /* per trap */
	CUevent done;
	int pending;                        /* replayed, not read yet */
};

struct ft_off_trap {
	int block;                          /* -1: resident */
	uint32_t nchunks;
	uint32_t nruns;
	struct ft_span *runs;               /* covered address runs, in order */
	unsigned char *dead;                /* per run: its allocation was freed */
	unsigned char *host;                /* the store: nchunks x chunk bytes */
	uint64_t *sums;                     /* FT_VERIFY: per run, of the store */
	uint64_t loads;                     /* copies into its block so far */
	int shared;                         /* read all over the pass (resident): its
					       references never place the pass */
	int pending;                        /* comes back to the GPU for good when the
					       capture in progress ends (a launch of it
					       read this trap with another of its block) */
};

#define FT_OFF_READERS 8

struct ft_off_block {
	uint32_t nchunks;
	CUmemGenericAllocationHandle *h;
	CUdeviceptr va;                     /* the chunks mapped contiguously (raw mode) */
	int occupant;                       /* trap whose bytes it holds or will; -1 */
	CUevent ready;                      /* recorded after the occupant's copies */
	/* ready's stand-in while a capture pages: an event last recorded in
	 * a capture cannot be waited on once it is over, so a capture gets
	 * its own and the eager one keeps the eager copies' record */
	CUevent ready_cap;
	uint32_t nreaders;
	CUstream readers[FT_OFF_READERS];   /* streams that waited for this occupant */
	CUevent release[FT_OFF_READERS];
	const char *last_kernel;            /* the latest launch that read the occupant */
};

struct ft_offload {
	pthread_mutex_t lock;
	const struct ft_real *real;
	struct ft_vmm *vmm;
	struct ft_stats *stats;             /* offload_copies, offload_misses */
	struct ft_gpu *gpu;                 /* FT_VERIFY's checksums; NULL = no verify */
	int timed;                          /* per-trap events around launches and copies */
	int events;                         /* those events exist */
	struct ft_off_tev *etev;            /* per trap, eager passes */
	int graph_timing;                   /* captures get events too */
	struct ft_off_gtime *gt;            /* per timed capture */
	uint32_t ngt;
	int gcur;                           /* gt of the capture in progress, -1 */
	struct ft_timing_store *timing;     /* FT_OFFLOAD_TIMING=eager; NULL = none */
	struct ft_timing_store *window;     /* the last FT_TIMING_LOG_EVERY passes */
	/* ft_off_on_pass's observer of timed passes */
	int (*pass_done)(void *arg, const float *v, uint32_t ntraps, int kind);
	void *pass_arg;
	CUstream last_stream;               /* of the latest launch that read a trap */
	/* a capture in progress that reads offloaded weights: the executor
	 * works for it with the graph's own block state (every block unknown
	 * at its start); the eager state waits in saved */
	uint64_t cap_id;
	int cap_tag;                        /* what ft_off_capture_launch returns for it */
	CUevent fork, join;
	int cap_first;                      /* the capture's first position, -1 */
	int saved_cur;
	struct ft_off_saved {
		int occupant;
		uint32_t nreaders;
		CUstream readers[FT_OFF_READERS];
	} *saved;
	const _Atomic int *captures;        /* captures in progress, any thread */
	int active, mode;
	int pageable;                       /* FT_PINNED_MEMORY=0: the store is not registered */
	size_t chunk;
	uint32_t ntraps, nblocks;
	struct ft_off_trap *t;
	struct ft_off_block *b;
	CUstream copy;
	uint32_t nw;
	struct ft_off_weight {
		uint64_t lo, hi;
		uint32_t trap;
		uint32_t link;              /* 1 + the trap of the weight that begins
					       where this one ends, in its allocation
					       (ft_off_links); 0: none */
	} *w;                               /* every weight, sorted by lo */
	int cur;                            /* trap of the latest launch that read one */
	uint64_t offloaded_bytes, block_bytes;
};

/* Applies a plan: block[t] for trap t (-1 resident) over nblocks blocks;
 * weights w[0..nw) with their traps (any order).  0, or -1 with why (nothing
 * changed then, or everything undone). */
int ft_off_apply(struct ft_offload *o, const struct ft_real *real, struct ft_vmm *vmm,
		 struct ft_stats *stats, struct ft_gpu *verify, int mode, int pinned,
		 const int *block, uint32_t ntraps, uint32_t nblocks, const struct ft_off_weight *w,
		 uint32_t nw, char *why, uint32_t len);
/* FT_OFFLOAD_TIMING, after ft_off_apply: events per trap, passes into st
 * (and a window logged every FT_TIMING_LOG_EVERY passes); graphs nonzero
 * (cuda_graph): captures that page weights from now on get their own
 * events, and each replay is a pass, published when the next replay of it
 * begins, at ft_off_timing_update, or at a flush.  0 or -1. */
int ft_off_timing(struct ft_offload *o, struct ft_timing_store *st,
		  struct ft_timing_store *window, int graphs);
/* Ends the pass in progress for the timing (collect flushes it) and
 * publishes every replay not read yet (waiting for it). */
void ft_off_timing_flush(struct ft_offload *o);
/* Publishes the replays not read yet (waiting for them): how many, or -1
 * when graphs are not timed. */
int ft_off_timing_update(struct ft_offload *o);
/* Drops the eager pass in progress and the replays not read yet. */
void ft_off_timing_reset(struct ft_offload *o);
/* After ft_off_apply: times passes (as ft_off_timing; graphs: replays too)
 * and gives each timed pass, v[trap * FT_T_COLS + column] and its kind
 * (FT_PASS_EAGER or FT_PASS_GRAPH), to fn(arg, v, ntraps, kind) under the
 * executor's lock, until fn returns nonzero; then the timing stops unless
 * FT_OFFLOAD_TIMING keeps it.  0 or -1. */
int ft_off_on_pass(struct ft_offload *o,
		   int (*fn)(void *arg, const float *v, uint32_t ntraps, int kind), void *arg,
		   int graphs);
/* Links (after the blocks are chosen, before any is made): a weight that
 * ends exactly where a weight of another trap begins, in the same
 * allocation, may be one tensor the
 * scan saw two pointers into (a stale pointer left in a parameter block):
 * a launch reading that weight then reads the second's bytes too, so the
 * second's trap is loaded with it (a read of the trap's other weights
 * loads nothing more); when both would share a block the second stays
 * resident (the planner gives linked traps blocks of their own: they are
 * read together).  Returns how many traps were kept resident so. */
uint32_t ft_off_links(struct ft_offload *o);
/* Bytes of trap t's weights that can be offloaded (whole chunks in VMM-backed
 * allocations), for the planner. */
uint64_t ft_off_coverable(struct ft_vmm *vmm, const struct ft_off_weight *w, uint32_t nw,
			  uint32_t trap);
/* movable[i] (nw entries): whether any byte of weight w[i] would leave the
 * GPU were its trap offloaded (it lies in a chunk its trap's weights cover
 * whole): a read of the others needs nothing loaded. */
void ft_off_movable(struct ft_vmm *vmm, const struct ft_off_weight *w, uint32_t nw,
		    uint8_t *movable);
/* Before a launch of kernel (its name; kern, its entry, or NULL) on
 * stream s reading the addresses addr[0..n), found at parameter words
 * words[0..n) (or NULL), with addr[n..n + nstale) from stale parameter
 * words (ft_kernel_mark_stale).  A stale address loads nothing and moves
 * the pass nowhere: it only keeps a trap the launch reads anyway, or the
 * one the pass is in, from being reloaded under it.  A word that points
 * mostly out of the pass's turn (ft_kernel_turn) is stale too.  A launch
 * that reads two traps sharing a block (read together, which the plan did
 * not know) cannot read both from it: the smaller comes back to the GPU
 * for good first (inside a capture, where the device cannot be waited
 * for, when the capture ends, before any replay; the capture does not
 * load it).  FT_VERIFY: every block whose trap the launch does not read is
 * released (checked and poisoned) before it runs, so a read the executor
 * does not see reads NaN. */
void ft_off_launch(struct ft_offload *o, CUstream s, const uint64_t *addr,
		   const uint16_t *words, unsigned n, unsigned nstale, struct ft_kernel *kern,
		   const char *kernel);
/* Graphs.  A launch being captured (capture id cap, on stream s) that reads
 * offloaded traps: the executor adds its copies and waits to the capture
 * (the copy stream joins it through an event recorded on s; every block is
 * unknown at the capture's start, so each replay loads what it reads and
 * assumes nothing).  Returns the capture's tag (> 0: 1, or 2 + its timing
 * slot when its replays are timed) when paged so, 0 when it reads none, -1
 * when it cannot be (another capture already has the executor, or the host
 * store is pageable). */
int ft_off_capture_launch(struct ft_offload *o, CUstream s, uint64_t cap, const uint64_t *addr,
			  const uint16_t *words, unsigned n, unsigned nstale,
			  struct ft_kernel *kern, const char *kernel);
/* Before the capture on origin ends: the copy stream joins back, the eager
 * state returns. */
void ft_off_capture_end(struct ft_offload *o, CUstream origin, uint64_t cap);
/* After a capture ended (no capture in progress any more): the traps it
 * found read with another of their block come back to the GPU, before any
 * replay of it. */
void ft_off_capture_over(struct ft_offload *o);
/* Around a replay, on stream s, of a graph that pages itself (tag, as
 * ft_off_capture_launch returned): before, the replay waits for the eager
 * readers of every block (and the previous replay of a timed graph is
 * published if it is done, else dropped); after, every block is unknown to
 * the eager executor and its copies wait for the replay. */
void ft_off_replay(struct ft_offload *o, CUstream s, int after, uint32_t tag);
/* Whether FT_VERIFY checks the blocks (then every launch is shown to
 * ft_off_launch, with references or not). */
static inline int ft_off_verifying(const struct ft_offload *o)
{
	return o->active && o->gpu;
}
/* The first of addr[0..n) that lies in an offloaded trap: 1 with the trap
 * and the weight's address, else 0 (a reader the executor cannot serve). */
int ft_off_offloaded(struct ft_offload *o, const uint64_t *addr, unsigned n, int *trap,
		     uint64_t *weight);
/* Before a copy or memset on stream s writing [dst, dst + dbytes) and
 * reading [src, src + sbytes) (0 bytes: no device side): an offloaded trap
 * written to comes back to the GPU for good (the write must not be lost to
 * the next load), one read from is loaded first. */
void ft_off_copy(struct ft_offload *o, CUstream s, uint64_t dst, uint64_t dbytes, uint64_t src,
		 uint64_t sbytes);
/* A VMM allocation [base, base + size) is being freed: its chunks leave the
 * plan (their traps are no longer copied there). */
void ft_off_freed(struct ft_offload *o, uint64_t base, uint64_t size);

#endif
