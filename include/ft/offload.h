/*
 * The block engine: what the library does with a plan (DESIGN.md sections
 * 2 and 6).  Everything reaches the driver through the real table only;
 * the engine's state is private (src/engine/offload_int.h).
 *
 * Offloading (offload.c).  Applying a plan, once (ft_off_init, then ft_off_stage): for every offloaded trap,
 * the chunks its weights cover entirely (a chunk that also holds bytes of
 * something else stays resident) are copied to the host store (pageable
 * memory registered with the driver, one buffer per trap: host RAM equals
 * the offloaded bytes), their own handles are released, and they are mapped
 * onto the chunks of the trap's block.  Traps sharing a block alias the same
 * physical memory; which one's bytes it holds is the executor's business.
 * Mappings never change after that.
 *
 * The executor (executor.c, ft_off_launch): before each launch, the traps
 * whose weights it reads are looked up; an offloaded trap not in its block
 * is loaded (the copy stream waits until the block's previous occupant's
 * readers are done, then copies), the launch stream waits on the trap's
 * ready event once per load, and the next offloaded traps, cyclically
 * across the pass boundary, are loaded as far as their blocks are free.
 * strategy mode copies on the launch stream itself at first use and
 * prefetches nothing.  FT_EXPERT_PAGING (offload_slices.c): a trap's
 * weights with slices (a stacked tensor's routed experts) leave them out
 * of its load; a launch copies the slices it reads.
 *
 * Guards (offload_back.c).  A copy or memset that writes into an offloaded
 * trap's chunks, or a launch that reads two traps of one block, brings a
 * trap back to the GPU for good before it runs (own memory, filled from
 * the host store); a launch that refers into offloaded chunks at an
 * address discovery never saw (a tensor the allocator later placed in a
 * weight's free tail) brings back only the chunks from there to the end of
 * that weight: nothing but the weights may live in a block.  While a
 * capture is under way these wait for its end (pending).  A copy that
 * reads an offloaded weight (a checkpoint save) waits for its trap.
 *
 * FT_VERIFY (config.verify set): nothing is prefetched, and before
 * every launch (outside captures) each block whose trap the launch does not
 * read is released: its contents are checksummed against the host store (a
 * kernel that wrote to an offloaded weight is reported with the weight and
 * the last kernel that read it) and poisoned with 0xFF bytes (NaN in every
 * float format), so that a reader the executor does not see reads NaN
 * instead of another trap's plausible numbers.
 */
#ifndef FT_OFFLOAD_H
#define FT_OFFLOAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "ft/gpu.h"
#include "ft/options.h" /* FT_TM_*: the transfer modes (FT_TRANSFER_MODE) */
#include "ft/passes.h"  /* FT_PASS_EAGER, FT_PASS_GRAPH: kinds of timed passes */
#include "ft/real.h"
#include "ft/stats.h"
#include "ft/timing.h"
#include "ft/vmm.h"

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
struct ft_offload; /* the engine (src/engine/offload_int.h) */

/* A weight: its extent and trap (UINT32_MAX: none, it stays). */
struct ft_off_weight {
	uint64_t lo, hi;
	uint32_t trap;
	uint32_t link;              /* 1 + the trap of the weight that begins where
				       this one ends, in its allocation
				       (ft_off_links); 0: none */
	uint64_t views;             /* reads in [lo, views) are views of the
				       weight that discovery saw (a token's
				       row, a routed expert): they read its
				       trap; 0 or lo: none */
	const uint64_t *slices;     /* FT_EXPERT_PAGING: the starts of the
				       views the data chooses into it after its
				       own (a stacked tensor's routed experts),
				       offsets from lo, ascending; read by
				       ft_off_init only */
	uint32_t nslices;
};

/* What the engine works with, for ft_off_init. */
struct ft_off_config {
	const struct ft_real *real;
	struct ft_vmm *vmm;
	struct ft_stats *stats;             /* offload_* counters */
	struct ft_gpu *verify;              /* FT_VERIFY's checksums; NULL: no verify */
	const struct ft_gpu *copier;        /* FT_GRAPH_COPY=kernel: copies in captures
					       run its copy kernel; NULL: memcpy nodes */
	const struct ft_gpu *codec;         /* FT_TRANSFER_COMPRESSION: the store is
					       coded and decoded by its kernel; NULL: raw */
	int codec_auto;                     /* FT_TRANSFER_COMPRESSION=auto: a trap whose
					       stacked experts are paged per expert
					       (FT_EXPERT_PAGING) stays raw */
	/* a trap is coded only where its coded load (the image's copies beside
	 * its decode) takes less than its raw copy; NULL decode: wherever the
	 * image is smaller (FT_TRANSFER_COMPRESSION=always, or no curve) */
	const struct ft_curve_point *copy_curve, *decode_curve;
	uint32_t ncopy, ndecode;
	int mode;                           /* FT_TM_* (FT_TRANSFER_MODE) */
	int pinned;                         /* FT_PINNED_MEMORY: the store is registered */
	int hold_ignored;                   /* FT_HOLD_IGNORED */
	const _Atomic int *captures;        /* stream captures in progress, any thread */
	/* FT_SHM_ENABLED: the store in a segment of shm_dir shared with the
	 * host's other processes that plan the same weights; NULL: private */
	const char *shm_dir, *shm_ns;       /* FT_SHM_DIR, FT_SHM_NAMESPACE (NULL: ft) */
	double shm_wait;                    /* FT_SHM_WAIT_TIMEOUT, s; 0: no limit */
	const char *shm_settings;           /* the settings the plan depends on: part
					       of the segment's key */
	struct ft_gpu *sums;                /* checksums of the weights to key and
					       check it by (the learning's) */
	/* FT_NVME_OFFLOAD_ENABLED: the traps beyond nvme_host_bytes of host
	 * store keep it in a file in nvme_dir; NULL: host memory only */
	const char *nvme_dir;
	uint64_t nvme_align, nvme_host_bytes;
	int nvme_cufile;                    /* FT_NVME_TRANSFER_MODE=cufile: read with
					       GPUDirect Storage where it is present */
	void *(*dlsym)(void *handle, const char *symbol); /* the real one (libcufile's
					       entry points); NULL: no cuFile */
	double pass_ms;                     /* the plan's predicted pass (0: unknown):
					       what the disk's reads are held against */
};

/* A new engine, inactive (every call passes through): NULL when out of
 * memory. */
struct ft_offload *ft_off_new(void);
/* The plan's executor: block[t] for trap t (-1 resident) over nblocks
 * blocks; weights w[0..nw) with their traps (any order).  Which chunks each
 * offloaded trap gives up (the runs its weights cover whole), the links
 * (ft_off_links), the blocks (chunk handles, events; raw mode: contiguous
 * addresses) and the copy stream are made; nothing moves yet.  0, or -1
 * with why (everything undone). */
int ft_off_init(struct ft_offload *o, const struct ft_off_config *c, const int *block,
		uint32_t ntraps, uint32_t nblocks, const struct ft_off_weight *w, uint32_t nw,
		char *why, uint32_t len);
/* After ft_off_init: the offloaded traps' chunks go to the host store and
 * are re-backed by their blocks; from now on the executor pages them.  0,
 * or -1 with why (everything undone: every weight stays on the GPU). */
int ft_off_stage(struct ft_offload *o, char *why, uint32_t len);
/* At the process's exit: the shared store is left (the last user removes
 * it). */
void ft_off_exit(struct ft_offload *o);
/* Frees an engine that is not in effect (tests; a failed set-up undoes
 * itself). */
void ft_off_destroy(struct ft_offload *o);
/* Whether offloading is in effect (staged). */
int ft_off_active(const struct ft_offload *o);
/* Whether FT_VERIFY checks the blocks (then every launch is shown to
 * ft_off_launch, with references or not). */
int ft_off_verifying(const struct ft_offload *o);

/* FT_VERIFY's journal of the executor's latest steps, one line each, to
 * path (offload_journal.c); -1 when there is none (no FT_VERIFY, or no
 * step yet) or path cannot be written. */
int ft_off_journal_write(const char *path);
/* Whether a captured launch reading addr[0..n) is timed in its graph's
 * replays though it may read nothing offloaded: graphs are timed
 * (FT_OFFLOAD_TIMING=cuda_graph, or a profile refreshed from replays) and
 * it reads a trap, resident ones too. */
int ft_off_graph_timed(struct ft_offload *o, const uint64_t *addr, unsigned n);
/* Whether graphs captured now get timing events: FT_OFFLOAD_TIMING=
 * cuda_graph, or until the observer of ft_off_on_pass(graphs) has its
 * passes.  A substitute built with events (its tag 2 or more) while this
 * is 0 is to be rebuilt without them. */
int ft_off_graphs_timed(struct ft_offload *o);
/* Whether FT_OFFLOAD_TIMING's store is attached (ft_off_timing). */
int ft_off_timed(const struct ft_offload *o);
/* FT_NVME_OFFLOAD_ENABLED, before the plan: the read rate, bytes/s, of a
 * 64 MiB file written to dir and read back as the NVMe tier reads
 * (O_DIRECT where the file system takes it, else after dropping its
 * pages); 0 when it cannot be measured. */
double ft_off_disk_probe(const char *dir, size_t align);
/* Bytes moved to the host store, bytes of the blocks, and the blocks. */
void ft_off_sizes(const struct ft_offload *o, uint64_t *offloaded, uint64_t *blocks,
		  uint32_t *nblocks);
/* Around fork: done 0 takes the engine's lock (pthread_atfork's prepare),
 * done 1 gives it back (in the parent and in the child). */
void ft_off_fork(struct ft_offload *o, int done);
/* In a forked child, after ft_off_fork(o, 1): the parent's blocks do not
 * exist there (CUDA does not cross fork): every call passes through. */
void ft_off_after_fork(struct ft_offload *o);
/* FT_OFFLOAD_TIMING, after ft_off_stage: events per trap, passes into st
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
/* After ft_off_stage: times passes (as ft_off_timing; graphs: replays too)
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
/* After ft_off_launch (or ft_off_capture_launch), once the launch is
 * enqueued (or refused): a launch that read offloaded traps holds the
 * engine from ft_off_launch until then, so that no other thread's load into
 * a block it reads can record its release events on its stream before the
 * launch is there.  Nothing when the call held nothing. */
void ft_off_launched(struct ft_offload *o);
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
/* Whether the driver refused a copy or an event record that the executor
 * put into capture cap (a capturing stream cannot be synchronised, so the
 * graph's replays could read a block before or without its copy): the
 * capture's graph is not to be replayed with what it reads offloaded. */
int ft_off_capture_broken(struct ft_offload *o, uint64_t cap);
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
/* Graphs captured before the plan (graph_sub.c).  The offloaded traps that
 * addr[0..n) read bytes of that left the GPU, once each in first-read
 * order: up to cap of them into out (trap, its block, the start of the
 * first of its weights read); how many there are. */
struct ft_off_read {
	int trap, block;
	uint64_t addr;
};
unsigned ft_off_graph_traps(struct ft_offload *o, const uint64_t *addr, unsigned n,
			    struct ft_off_read *out, unsigned cap);
/* Every offloaded trap addr[0..n) read comes back to the GPU for good (why:
 * said in the log): a reader that cannot be paged. */
void ft_off_keep(struct ft_offload *o, const uint64_t *addr, unsigned n, const char *why);
/* Every offloaded trap comes back to the GPU for good (offloading stops),
 * said once with why: what some launch reads is no longer known (the
 * library ran out of host memory recording it).  Cheap when done before. */
void ft_off_keep_all(struct ft_offload *o, const char *why);
/* The first of addr[0..n) that lies in an offloaded trap's weight, in or
 * before bytes of it that left the GPU: 1 with the trap and the address,
 * else 0 (a reader the executor cannot serve). */
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
