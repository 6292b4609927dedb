/* The block engine's state and what its files share beyond
 * include/ft/offload.h (private: only src/engine/ and the engine's own
 * unit test include it). */
#ifndef FT_OFFLOAD_INT_H
#define FT_OFFLOAD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "ft/codec.h"
#include "ft/offload.h"
#include "ft/shm.h"

/* FT_OFFLOAD_TIMING events of one trap, in eager passes or in one graph */
struct ft_off_tev {
	CUevent cs, ce, ws, we, ts[2], te[2];
	CUevent tc[2];                      /* a coded load's copy end (decode: tc..te) */
	unsigned char coded[2];             /* the load of that slot was coded */
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
	unsigned char *host;                /* the store: nchunks x chunk bytes, or
					       z's image when coded */
	uint64_t disk_off, disk_bytes;      /* the store is in the NVMe tier's file
					       (disk_bytes of it, raw or z's image, at
					       disk_off; host, and z.data when coded, are
					       a ring buffer while a load copies from
					       it); 0: not */
	unsigned char ring_gpu;             /* host is that ring buffer in GPU memory
					       (FT_NVME_TRANSFER_MODE=cufile; z.data
					       stays NULL) */
	size_t shm_len;                     /* host is mapped from a shared segment
					       (this many bytes, at shm_off); 0: private */
	uint64_t shm_off;
	uint8_t shm_seg;                    /* that segment: 0 o->shm, k o->shm_more[k - 1] */
	struct ft_z_image z;                /* the coded store; z.data NULL: raw */
	CUdeviceptr zdesc;                  /* z's descriptors on the GPU */
	CUdeviceptr dhost;                  /* its device mapping (copier); 0: none */
	/* FT_EXPERT_PAGING (offload_slices.c): its weights' slices, ascending,
	 * and two bits per slice: copied into the block since the trap's load
	 * (the rest of its runs, its dense part, is copied by the load), and
	 * referred to by a launch since then (ft_off_slice_at) */
	struct ft_off_slice *sl;
	uint32_t nsl;                       /* 0: the trap loads whole */
	uint64_t *sl_in, *sl_asked;
	uint64_t *sums;                     /* FT_VERIFY: per run, of the store */
	struct ft_off_vsum *vsums;          /* FT_VERIFY: the store's sums of the
					       pieces checked in part so far (open
					       addressing, vcap entries; p.lo 0: free) */
	uint32_t vcap;
	uint64_t loads;                     /* copies into its block so far */
	int pending;                        /* comes back to the GPU for good when no
					       capture is under way (it had to while one
					       was: ft_off_demote) */
};

/* FT_TRANSFER_COMPRESSION: coded pieces are copied into staging slots on
 * the copy stream and decoded from them on the decode stream; a slot is
 * refilled after its decode.  Captures get their own events (as ready).
 * Four slots of 64 MiB, not two of 16: where the model's kernels fill the
 * GPU a decode launch waits for one of them to end, and with little
 * staging the copies wait for those decodes and fall behind (H100, run72:
 * a pass of GEMMs paid 68 ms for its decodes with 2 x 16 MiB, 23 ms with
 * 4 x 64 MiB; docs/compression.md). */
#ifndef FT_OFF_SLOTS /* (-D for a measurement's build) */
#define FT_OFF_SLOTS 4
#endif
_Static_assert(FT_OFF_SLOTS >= 2, "the GPU encoder alternates two slots");
#ifndef FT_OFF_SLOT_BYTES
#define FT_OFF_SLOT_BYTES (64u << 20)
#endif
struct ft_off_ring {
	CUevent full[FT_OFF_SLOTS], free[FT_OFF_SLOTS];
	int used[FT_OFF_SLOTS];
	int next;
};

#define FT_OFF_READERS 8
#define FT_OFF_TOUCHED 8 /* traps one launch reads, at most */

/* FT_EXPERT_PAGING (offload_slices.c).  A slice of a trap: [lo, hi).  A
 * weight's slices: o->t[its trap].sl[first..first + n) (first UINT32_MAX:
 * none).  What a launch reads of a sliced trap beyond its dense part:
 * ranges of slices (first, count), or all of them. */
struct ft_off_slice {
	uint64_t lo, hi;
	int seen;                           /* lo is a start discovery saw, not a cut */
};
struct ft_off_wsl {
	uint32_t first, n;
	uint64_t stride;                    /* the gcd of its slices' offsets */
	/* the last reference to one of its slices' starts: kernel, word,
	 * stream, slice, and the epoch it was in (ft_off_slice_at) */
	uint64_t kid, epoch;
	CUstream stream;
	uint32_t word, slice;
};
#define FT_OFF_NEED 8
/* slices a weight's seen ones may be cut into at its stride, at most (an
 * expert of 1 MiB in a tensor of 1 GiB) */
#define FT_OFF_SLICES_MAX 1024u
struct ft_off_need {
	int all;                            /* every slice: why (enum ft_sl_why); 0 not */
	uint32_t n;
	uint32_t first[FT_OFF_NEED], count[FT_OFF_NEED];
};
#define FT_SL_DENSE (-1) /* a weight that is not sliced: the dense part */
/* Why a launch loads every slice of a trap (said at the first loads). */
enum ft_sl_why {
	FT_SLW_START = 1,   /* a reference at no slice's start */
	FT_SLW_LAYOUT,      /* a kernel of unknown layout, or a capture */
	FT_SLW_UNLEARNT,    /* a word not seen reading one slice at a time */
	FT_SLW_EXTENT,      /* a reference past the views discovery saw */
	FT_SLW_MANY,        /* more slice ranges than a launch keeps */
	FT_SLW_COPY,        /* a copy reads the trap */
	FT_SLW_IGNORED,     /* a reference judged stale or roaming, off a slice's start */
	FT_SLW_N
};
#define FT_SL_ALL(why) (-1 - (int)(why)) /* every slice of the trap */

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
	uint32_t gen;                       /* slices copied in since the occupant's
					       load (ready covers them) */
	uint32_t reader_gen[FT_OFF_READERS];/* the gen each reader waited for */
	CUevent release[FT_OFF_READERS];
	const char *last_kernel;            /* the latest launch that read the occupant */
};

struct ft_offload {
	pthread_mutex_t lock;
	const struct ft_real *real;
	struct ft_vmm *vmm;
	struct ft_stats *stats;             /* offload_copies, offload_misses */
	struct ft_gpu *gpu;                 /* FT_VERIFY's checksums; NULL = no verify */
	const struct ft_gpu *copier;        /* copies in captures: its kernel; NULL = memcpy */
	int timed;                          /* per-trap events around launches and copies */
	int events;                         /* those events exist */
	struct ft_off_tev *etev;            /* per trap, eager passes */
	int graph_timing;                   /* captures get events too */
	int graph_timing_kept;              /* FT_OFFLOAD_TIMING=cuda_graph: they
					       keep them after a refresh's passes */
	struct ft_off_gtime *gt;            /* per timed capture */
	uint32_t ngt;
	int gcur;                           /* gt of the capture in progress, -1 */
	struct ft_timing_store *timing;     /* FT_OFFLOAD_TIMING=eager; NULL = none */
	struct ft_timing_store *window;     /* the last FT_TIMING_LOG_EVERY passes */
	/* ft_off_on_pass's observer of timed passes */
	int (*pass_done)(void *arg, const float *v, uint32_t ntraps, int kind);
	void *pass_arg;
	CUstream last_stream;               /* of the latest launch that read a trap */
	CUstream cur_stream;                /* of the latest launch that placed cur */
	/* a capture in progress that reads offloaded weights: the executor
	 * works for it with the graph's own block state (every block unknown
	 * at its start); the eager state waits in saved */
	uint64_t cap_id;
	int cap_tag;                        /* what ft_off_capture_launch returns for it */
	uint64_t broken_cap;                /* a capture whose copy or record the driver
					       refused (ft_off_capture_broken) */
	CUevent fork, join;
	int cap_first;                      /* the capture's first position, -1 */
	int saved_cur, saved_cur_sure;
	CUstream saved_cur_stream;
	CUstream saved_last_stream;         /* last_stream before the capture (its
					       stream may be gone after it) */
	struct ft_off_saved {
		int occupant;
		uint32_t nreaders;
		CUstream readers[FT_OFF_READERS];
		uint32_t gen, reader_gen[FT_OFF_READERS];
	} *saved;
	const _Atomic int *captures;        /* captures in progress, any thread */
	int active, mode;
	int pageable;                       /* FT_PINNED_MEMORY=0: the store is not registered */
	int hold;                           /* FT_HOLD_IGNORED (ft_off_config) */
	size_t chunk;
	uint32_t ntraps, nblocks;
	struct ft_off_trap *t;
	struct ft_off_block *b;
	CUstream copy;
	/* FT_EXPERT_PAGING: the stream of the slices a launch waits for, at
	 * the highest priority: on the copy stream they would queue behind
	 * the prefetches of the traps after theirs (the launch waits for all
	 * of it); the copy stream where no trap is sliced, or in strategy mode */
	CUstream demand;
	/* FT_TRANSFER_COMPRESSION (offload_codec.c) */
	const struct ft_gpu *codec;         /* NULL: raw stores */
	struct ft_curve_point *zcopy, *zdec; /* the copy and decode curves a
					       trap is coded by (ft_off_config's) */
	uint32_t nzcopy, nzdec;             /* nzdec 0: coded wherever it saves */
	uint32_t zslow;                     /* traps kept raw: their decode is slower
					       than the copy it saves */
	int zauto;                          /* FT_TRANSFER_COMPRESSION=auto */
	uint32_t zsliced;                   /* traps kept raw: paged per expert */
	uint32_t slw_said[FT_SLW_N];        /* whole slice loads said, per why */
	uint32_t slw_refs[FT_SLW_N];        /* their references said, per why */
	uint32_t links_said;                /* links judged two tensors, said */
	uint64_t zenc_ns, zenc_bytes;       /* the encoder's time and input at staging */
	uint32_t zgpu;                      /* traps coded by the GPU encoder */
	double zpred_ms, zpred_raw_ms;      /* by the curves: the coded traps' loads a
					       pass as stored, and raw */
	CUstream decode;
	CUdeviceptr slot[FT_OFF_SLOTS];
	size_t slot_bytes;                  /* FT_OFF_SLOT_BYTES, or the largest
					       block where that is less (no trap's
					       image is larger) */
	struct ft_off_ring ring, ring_cap;
	CUevent zfork, zjoin;
	int zjoined;                        /* the decode stream is in the capture */
	uint64_t store_bytes;
	/* FT_SHM_ENABLED (offload_shm.c): the segment, and the offloaded
	 * traps' run checksums (trap and run order) it is keyed and checked by */
	const char *shm_dir, *shm_ns;       /* shm_dir NULL: a private store */
	double shm_wait;
	uint64_t shm_settings;              /* what the plan depends on, hashed */
	struct ft_gpu *sums_gpu;
	struct ft_shm shm;
	struct ft_shm *shm_more;            /* other keys' segments traps are mapped from */
	uint32_t nshm_more;
	uint64_t *shm_sums;
	uint32_t nsums;
	int shm_full;                       /* the creator could not add to it: not shared */
	/* FT_NVME_OFFLOAD_ENABLED (offload_disk.c): NULL, no NVMe tier */
	struct ft_off_disk *disk;
	const char *nvme_dir;               /* NULL: off */
	size_t nvme_align;
	uint64_t nvme_host_bytes;
	int nvme_cufile;                    /* FT_NVME_TRANSFER_MODE=cufile */
	void *(*dlsym)(void *handle, const char *symbol);
	double pass_ms;                     /* the plan's predicted pass, 0 unknown */
	uint32_t nw;
	struct ft_off_weight *w;            /* every weight, sorted by lo */
	struct ft_off_wsl *wsl;             /* per weight: its slices (FT_EXPERT_PAGING) */
	int cur;                            /* trap of the latest launch that read one */
	/* the traps the latest eager launch that read any read, with its
	 * launch number and stream (executor.c: follow_table) */
	int prev[FT_OFF_TOUCHED];
	int nprev;
	uint64_t prev_seq;
	CUstream prev_stream;
	pthread_t prev_thread;
	int cur_sure;                       /* cur is confirmed (executor.c: sure_after):
					       references are judged in or out of turn */
	int alt;                            /* while cur is sure: the trap of the latest
					       reference out of its turn, where the pass
					       may really be (executor.c: shadow); -1 none */
	uint32_t alt_steps;                 /* launches that stepped alt one or two traps
					       on, none placing the pass meanwhile */
	/* FT_EXPERT_PAGING: bumped by every eager reference to a weight that
	 * is read whole (no views: a layer's dense weights), and wherever the
	 * eager position is lost (captures, replays): a loop over routed
	 * experts refers to two slices of one tensor within one epoch */
	uint64_t slice_epoch;
	/* the slices the launch being served referred to (trap, slice),
	 * marked asked for once its traps are loaded (a miss's load begins a
	 * residency: the asks are that one's) */
	struct { uint32_t t, i; } asks[FT_OFF_NEED];
	uint32_t nasks;
	unsigned char *seen;                /* per trap, this pass: 1 read, 2 referred to
					       only by ignored references while not in
					       its block (executor.c) */
	const char *ignored_kernel;         /* the latest such reference's kernel */
	int replayed;                       /* a graph replayed this pass: seen tells
					       nothing of what the pass read */
	uint64_t offloaded_bytes, block_bytes;
	uint32_t npending;                  /* traps pending */
	int all_kept;                       /* ft_off_keep_all: offloading stopped */
	int quiet;                          /* demotions said at info level (the
					       caller said why once) */
};


/* The eager pass's position is no longer known (a capture begins, a
 * replay ran, the timing flushed): the next launch places it, and
 * FT_EXPERT_PAGING's slicer learning starts a new epoch. */
static inline void ft_off_position_lost(struct ft_offload *o)
{
	o->cur = -1;
	o->cur_sure = 0;
	o->alt = -1;
	o->alt_steps = 0;
	o->slice_epoch++;
}

/* Synchronising calls would invalidate a capture in progress (any
 * thread's, in global mode): the steps that need one wait for none. */
static inline int ft_off_capturing(const struct ft_offload *o)
{
	return o->cap_id || (o->captures && atomic_load(o->captures) > 0);
}

/* FT_VERIFY (executor.c): block k gives up its occupant, checked against
 * the host store and poisoned (eager, no capture under way), or poisoned
 * in the capture on s (o->cap_id). */
void ft_off_verify_release(struct ft_offload *o, uint32_t k);

/* FT_VERIFY's journal (offload_journal.c): a line per executor step, the
 * latest kept; nothing without FT_VERIFY.  Under o->lock or not: it has its
 * own.  _addr and _occ say an address and the blocks' occupants in buf. */
void ft_off_journal(const struct ft_offload *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *ft_off_journal_addr(const struct ft_offload *o, uint64_t a, char *buf, size_t len);
const char *ft_off_journal_occ(const struct ft_offload *o, char *buf, size_t len);
void ft_off_poison_captured(struct ft_offload *o, uint32_t k, CUstream s);

/* Weights back on the GPU (offload_back.c).  Trap t leaves its block for
 * good: its chunks get memory of their own, filled from the host store
 * (the device is idle first); while a capture is under way, only once
 * none is (pending; ft_off_demote_pending brings pending traps back when
 * none is).  A reference a inside weight k's extent, past its start, in
 * chunks that left the GPU: 1 (a tensor placed in the extent's tail,
 * perhaps).  Whether bytes of weight k from address from on left the
 * GPU.  The tail of weight k from a's chunk on comes back to the GPU and
 * the weight ends at a. */
/* Trap x's store p of n bytes registered with the driver (flags, with a
 * device mapping for the copy kernel; not a pageable store), and its
 * device address for that kernel: 0, or -1 (offload.c). */
int ft_off_register(struct ft_offload *o, struct ft_off_trap *x, void *p, size_t n,
		    unsigned flags);
/* CLOCK_MONOTONIC, ns. */
/* Trap x's runs as addresses and byte counts, into addr[0..x->nruns) and
 * bytes[...] (for ft_gpu_checksums): how many. */
static inline uint32_t ft_off_spans(const struct ft_off_trap *x, uint64_t *addr, uint64_t *bytes)
{
	for (uint32_t i = 0; i < x->nruns; i++) {
		addr[i] = x->runs[i].lo;
		bytes[i] = x->runs[i].hi - x->runs[i].lo;
	}
	return x->nruns;
}

static inline uint64_t ft_off_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* Stream s waits for event e; a refused wait is made good (executor.c). */
/* n bytes of trap t's store at src to dst on cs (executor.c, copy_in). */
void ft_off_copy_in(struct ft_offload *o, CUdeviceptr dst, const unsigned char *src, size_t n,
		    CUstream cs, int t);
/* Event e recorded on s; a refused record is made good (executor.c). */
void ft_off_order(struct ft_offload *o, CUevent e, CUstream s);
/* Whether the driver's refusal of work on s broke the capture (counted;
 * executor.c). */
int ft_off_refused(struct ft_offload *o, CUstream s);

/* FT_TRANSFER_COMPRESSION (offload_codec.c).  The decode stream, slots and
 * events (where they cannot be made, the store stays raw: o->codec NULL).  Codes trap t's store from raw[0..bytes)
 * (filled; whole: the trap loads whole whatever its slices, as the NVMe
 * tier's file's do): 1 coded (x->host is the image), 0 left raw, -1 out of
 * memory.  ft_off_code_gpu codes trap t's store from the trap's bytes on
 * the GPU (the plan is being applied: they are there) into a pinned image
 * (registered with flags): 1 coded, 0 left raw (nothing kept: the caller
 * fills a raw store), -1 not done (no GPU encoder, the driver refused,
 * out of memory: the caller codes on the host).
 * Loads coded trap t into its block: copies on cs, decodes on the decode
 * stream; returns the stream the block is ready on.  The store's raw bytes
 * [off, off + n) into device memory at dst, synchronously (bringing a trap
 * back; landed when this returns, whatever memory the store is in), or
 * into host memory at out.  Captures and replays: the decode
 * stream joins a capture as the copy stream does (begin 1), and leaves it
 * (begin 0, with origin); a replay waits for eager decodes.  Frees it. */
void ft_off_codec_init(struct ft_offload *o);
int ft_off_code_trap(struct ft_offload *o, int t, const unsigned char *raw, size_t bytes,
		     int whole);
int ft_off_code_gpu(struct ft_offload *o, int t, unsigned flags);
CUstream ft_off_load_coded(struct ft_offload *o, int t, CUstream cs);
void ft_off_store_put(struct ft_offload *o, int t, size_t off, size_t n, CUdeviceptr dst);
void ft_off_store_read(const struct ft_offload *o, int t, size_t off, size_t n, void *out);
void ft_off_codec_capture(struct ft_offload *o, int begin, CUstream origin);
void ft_off_codec_replay(struct ft_offload *o, CUstream s);
void ft_off_codec_release(struct ft_offload *o);
void ft_off_wait(struct ft_offload *o, CUstream s, CUevent e);
void ft_off_demote(struct ft_offload *o, int t, const char *why);
void ft_off_demote_pending(struct ft_offload *o);
int ft_off_foreign(const struct ft_offload *o, uint64_t a, int k);
/* The weight whose extent holds a (index into o->w), or -1 (executor.c). */
int ft_off_weight_of(const struct ft_offload *o, uint64_t a);
/* Whether a run of x that still leaves the GPU (not dead) meets [lo, hi). */
int ft_off_live(const struct ft_off_trap *x, uint64_t lo, uint64_t hi);
int ft_off_weight_offloaded(const struct ft_offload *o, int k, uint64_t from);
void ft_off_return_tail(struct ft_offload *o, int t, int k, uint64_t a, const char *by);
/* FT_VERIFY's sum of the store's raw bytes [at, at + n) of trap t. */
uint64_t ft_off_store_sum(const struct ft_offload *o, int t, size_t at, size_t n);

/* FT_SHM_ENABLED (offload_shm.c).  Before the store is filled: the segment
 * of this model and settings is opened; when this process follows, the
 * offloaded traps it holds are mapped from it; the traps it does not hold
 * are mapped from the other published segments of the namespace that do
 * (at most FT_OFF_SHM_MORE: processes whose discovery found other weights
 * or another plan); the others, whose host stays NULL, are filled
 * privately, or into the segment when this process creates it.  Memory for
 * trap x's store of n bytes (the segment's while this process creates it,
 * else private), and its release.  After the fill, the creator publishes
 * the segment.  ft_off_shm_leave: every segment left (drop: forgotten, as
 * a forked child does; its locks are its parent's), at exit (ft_off_exit)
 * and on failure (the last user of a segment removes it). */
#define FT_OFF_SHM_MORE 16
void ft_off_shm_begin(struct ft_offload *o);
void ft_off_shm_leave(struct ft_offload *o, int drop);
uint64_t ft_off_text_key(const char *text);
unsigned char *ft_off_store_alloc(struct ft_offload *o, struct ft_off_trap *x, size_t n);
void ft_off_store_free(struct ft_offload *o, struct ft_off_trap *x, void *p);
void ft_off_shm_end(struct ft_offload *o);

/* The NVMe tier (offload_disk.c).  Set up (file, ring of pinned buffers
 * for traps of at most most bytes), or -1 with why; a trap's store (its
 * bytes bytes at buf, raw or a coded image) written to the file (the ring's
 * first buffer serves staging: ft_off_disk_bounce); the reader started once staging is over, stopped
 * (at exit: loads read the file themselves then), not in a forked child
 * (it is the parent's); released.
 * A load takes the ring buffer holding trap t (read there and then when
 * the reader is behind): x->host (and a coded image) point at it until it
 * gives it back after the copies it enqueued on cs; in a capture trap t
 * is promoted instead (NULL; its host store is its own); NULL and host
 * NULL when neither can be (said).  A load of another trap tells
 * the reader where the loads are (it reads the file's next traps after
 * the latest).  A trap back on the GPU leaves the reader's sight.  The
 * reader's lock, around fork.  Bytes [off, off + n) of t's store read from the file.  Trap t
 * moved to host memory for good (a graph copies it): 0, or -1. */
int ft_off_disk_init(struct ft_offload *o, size_t most, char *why, uint32_t len);
/* The tier reads with cuFile into a ring in GPU memory (GPUDirect
 * Storage): 1, or 0. */
int ft_off_disk_gds(const struct ft_offload *o);
unsigned char *ft_off_disk_bounce(struct ft_offload *o);
int ft_off_disk_spill(struct ft_offload *o, int t, const unsigned char *buf, size_t bytes,
		      char *why, uint32_t len);
int ft_off_disk_start(struct ft_offload *o);
/* The disk's read rate, bytes/s, from an O_DIRECT read of trap t's file
 * store (0: not measured: the file is read through the page cache). */
double ft_off_disk_rate(struct ft_offload *o, int t);
void ft_off_disk_stop(struct ft_offload *o);
void ft_off_disk_after_fork(struct ft_offload *o);
void ft_off_disk_release(struct ft_offload *o);
unsigned char *ft_off_disk_take(struct ft_offload *o, int t);
void ft_off_disk_put(struct ft_offload *o, int t, CUstream cs);
void ft_off_disk_loaded(struct ft_offload *o, int t);
void ft_off_disk_forget(struct ft_offload *o, int t);
void ft_off_disk_lock(struct ft_offload *o, int lock);
int ft_off_disk_read(const struct ft_offload *o, int t, size_t off, size_t n, void *out);
int ft_off_disk_promote(struct ft_offload *o, int t);

/* FT_EXPERT_PAGING (offload_slices.c).  The traps' slices from the
 * weights' (after their runs are known): 0, or -1 out of memory.  After
 * staging: traps that load whole anyway (coded, NVMe, strategy mode) give
 * theirs up; said.  Freed.  The slices a reference at a into weight k
 * (from word words[i] of kern; NULL: unknown) reads: the first, and
 * *count of them, or FT_SL_ALL(why) (every slice of its trap); FT_SL_DENSE
 * when k is not sliced.  The reference is remembered: a word that refers
 * to two slices of k from one stream in one epoch (o->slice_epoch) reads
 * one at a time.  The slices a reference at a into weight k would read if
 * it read (a reference judged stale): the one beginning there, else
 * FT_SL_ALL(why) (nothing learnt).  Whether x's block holds what n names.  Added to a launch's
 * needs of trap t (FT_SL_ALL(why): all).  The slices of trap t the launch
 * being served referred to are marked asked for (after its load).  A load
 * of a sliced trap: its dense part into the block (no slice in it any
 * more), or the whole trap where launches asked for more than half its
 * slices while it was last in its block (every slice then in it): bytes
 * copied.  Whether every slice is in x's block.  The slices n names that are not in
 * the block yet copied on cs for by (a kernel's name, or a copy): bytes
 * copied (counted; the first loads of every slice said, with why). */
int ft_off_slices_init(struct ft_offload *o);
void ft_off_slices_staged(struct ft_offload *o);
void ft_off_slices_release(struct ft_offload *o);
int ft_off_slice_at(struct ft_offload *o, int k, uint64_t a, CUstream s,
		    struct ft_kernel *kern, const uint16_t *words, unsigned i, uint32_t *count);
int ft_off_slice_of(const struct ft_offload *o, int k, uint64_t a, uint32_t *count);
/* Whether a view into weight k reads its trap's dense part only: k is not
 * sliced, nor is the weight after it in its trap that begins where k ends
 * in k's allocation, into which the view might read on (a view does not
 * read past its allocation: on the H100 a Mixtral's decode GEMMs loaded
 * every expert of a trap, each step, for references past the views of a
 * weight beside stacked experts that PyTorch allocates on their own), or
 * too far from k's start for whole experts (two tensors).  What a read of
 * weight k loads of the trap of weight k + 1, which begins where k ends in
 * k's allocation (ft_off_links): its dense part, or every slice where the
 * read may run on into them.  Whether weight k + 1 begins where k ends,
 * in k's allocation. */
int ft_off_dense_view(struct ft_offload *o, int k);
int ft_off_link_need(struct ft_offload *o, int k);
int ft_off_runs_on(struct ft_offload *o, uint32_t k);
int ft_off_slices_have(const struct ft_off_trap *x, const struct ft_off_need *n);
void ft_off_need_add(struct ft_off_need *n, const struct ft_offload *o, int t, int first,
		     uint32_t count);
void ft_off_slices_asked(struct ft_offload *o, int t);
/* Says (the first three of each why) where a reference at a into weight k
 * (sliced, or beside slices in its trap) of kernel kern (NULL: unknown)
 * that needs every slice points, and what it was held against. */
void ft_off_slice_said(struct ft_offload *o, int k, uint64_t a, enum ft_sl_why why,
		       const struct ft_kernel *kern, uint32_t word, CUstream s);
size_t ft_off_load_sliced(struct ft_offload *o, int t, CUstream cs);
int ft_off_slices_whole(const struct ft_off_trap *x);
/* Whether every slice of x that meets [lo, hi) is copied into its block
 * (1 for a trap without slices). */
int ft_off_slices_in(const struct ft_off_trap *x, uint64_t lo, uint64_t hi);
/* FT_VERIFY: a piece of a trap's block that holds its bytes: [lo, hi) at
 * byte at of its store. */
struct ft_off_piece {
	uint64_t lo, hi;
	size_t at;
};
/* The pieces of sliced trap x's live runs that its block holds since its
 * load: its dense part and the slices copied in (8-byte aligned inwards,
 * as the checksums count words); a malloc'd array (*n of them), or NULL. */
struct ft_off_piece *ft_off_slices_loaded(const struct ft_off_trap *x, uint32_t *n);
/* FT_VERIFY: a piece's sum of the store (ft_off_trap.vsums): a piece of
 * the same bounds at the same store offset holds the same bytes, whatever
 * runs were split or freed since. */
struct ft_off_vsum {
	struct ft_off_piece p;
	uint64_t sum;
};
size_t ft_off_load_slices(struct ft_offload *o, int t, const struct ft_off_need *n,
			  CUstream cs, const char *by);

/* Timing (offload_timing.c).  Trap t's events where the executor works
 * now: the timed capture's, else the eager passes'. */
static inline struct ft_off_tev *ft_off_tev(struct ft_offload *o, int t)
{
	return o->cap_id ? &o->gt[o->gcur].tev[t] : &o->etev[t];
}
/* Whether the executor's work now is timed: a timed capture, or an eager
 * launch (capturing: any capture in progress) while timing is on. */
static inline int ft_off_timing_now(struct ft_offload *o, int capturing)
{
	return o->cap_id ? o->gcur >= 0 : o->timed && !capturing;
}
/* Records a timing event on s (in a capture, as an external event node). */
void ft_off_record(struct ft_offload *o, CUevent e, CUstream s);
/* Around the launch about to run on stream s. */
void ft_off_timing_before(struct ft_offload *o, CUstream s, const int *touched, int nt, int cur);
/* A capture begins paging: its tag (ft_off_capture_launch), with its own
 * events when graphs are timed.  Before its end, the traps still open end
 * (capture_end); after the join, the replay's last event (captured). */
int ft_off_timing_capture(struct ft_offload *o);
void ft_off_timing_capture_end(struct ft_offload *o, CUstream origin);
void ft_off_timing_captured(struct ft_offload *o, CUstream origin);
/* Before (after = 0) and after a replay of a graph tagged tag. */
void ft_off_timing_replay(struct ft_offload *o, uint32_t tag, int after);
/* Whether one of addr[0..n) lies in a trap, offloaded or not (executor.c). */
int ft_off_reads_trap(struct ft_offload *o, const uint64_t *addr, unsigned n);
/* The GPU checksum kernel's sum over n bytes of the store at p (offload.c). */
uint64_t ft_off_host_checksum(const unsigned char *p, size_t n);

/* The engine whose lock this thread kept after ft_off_launch, until its
 * launch was enqueued (ft_off_launched), or NULL (executor.c). */
extern _Thread_local struct ft_offload *ft_off_held;

/* o->lock for an entry point of the engine: taken, or taken over from this
 * thread's launch that kept it. */
static inline void ft_off_lock(struct ft_offload *o)
{
	if (ft_off_held == o) {
		ft_off_held = NULL;
		return;
	}
	pthread_mutex_lock(&o->lock);
}

#endif
