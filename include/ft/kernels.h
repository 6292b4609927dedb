/*
 * Kernel metadata cache: parameter layout and name per launch handle.  The
 * handle given to cuLaunchKernel(Ex) is a CUfunction or a CUkernel (ATen
 * launches CUkernels); the layout comes from cuFuncGetParamInfo, falling back
 * to cuKernelGetParamInfo.  Entries are immutable once published; lookups
 * take no lock.  Thread-safe.
 */
#ifndef FT_KERNELS_H
#define FT_KERNELS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ft/real.h"
#include "ft/scan.h"

#define FT_KERNEL_SLOTS 65536 /* power of two */
#define FT_MAX_PARAMS 4096

#define FT_KERNEL_WORDS 512

struct ft_kernel {
	const void *handle;
	const char *name;       /* mangled, as the driver gives it; "?" if unknown */
	uint64_t id;            /* order of first sight, > 0 */
	int known;              /* layout known (nparams may be 0) */
	int is_kernel;          /* CUkernel rather than CUfunction */
	struct ft_layout layout;
	struct ft_kernel *next_retired;
	/* Per word of the parameter block, how many of the counted launches
	 * held a tracked address there (ft_kernel_count) */
	_Atomic uint32_t launches;
	_Atomic(_Atomic uint32_t *) hits;   /* FT_KERNEL_WORDS counters */
	/* Per word, while offloading: references to offloaded traps in
	 * their turn and out of it (ft_kernel_turn) */
	_Atomic(_Atomic uint32_t *) turns;  /* 2 x FT_KERNEL_WORDS counters */
	/* Per word: it reads one slice of a stacked tensor at a time
	 * (ft_kernel_slicer) */
	_Atomic uint64_t slicer[FT_KERNEL_WORDS / 64];
	struct ft_param params[];
};

#define FT_KERNEL_COUNTED 1024 /* launches counted per kernel, at most */


struct ft_kernels {
	const struct ft_real *real;
	_Atomic(struct ft_kernel *) *slot;
	pthread_mutex_t lock;
	unsigned used;
	uint64_t next_id;
	struct ft_kernel *retired; /* flushed entries, freed at destroy */
};

int ft_kernels_init(struct ft_kernels *k, const struct ft_real *real);
void ft_kernels_destroy(struct ft_kernels *k);
/* Metadata for a handle, queried from the driver on first sight.  Never NULL
 * except when out of memory or the table is full (then the launch is not
 * scanned). */
const struct ft_kernel *ft_kernels_get(struct ft_kernels *k, const void *handle);
/* Forgets every handle (a module or library was unloaded: handles may be
 * reused).  Entries stay allocated until destroy, for concurrent readers. */
void ft_kernels_flush(struct ft_kernels *k);

/* Counts one launch's references, for its first FT_KERNEL_COUNTED launches
 * that refer to tracked memory. */
void ft_kernel_count(struct ft_kernel *k, const struct ft_refs *refs);
/* Marks the references of refs made from stale words (ft_ref.stale): words
 * that held a tracked address in under 9 of 10 of k's counted launches
 * (none while fewer than 8 were counted).  A pointer the kernel reads is
 * there in every launch; bytes that only sometimes look like one are
 * integers or uninitialised slots of a by-value struct (ATen's offset
 * calculators and cat metadata carry stale pointers to other layers'
 * weights on the H200).  Returns how many were marked. */
unsigned ft_kernel_mark_stale(const struct ft_kernel *k, struct ft_refs *refs);
/* Counts (count != 0) a reference from word w of k to an offloaded trap,
 * in its turn (the trap the pass is in, or one of the next two) or not;
 * references to resident traps are not counted (a weight shared across the
 * pass is resident and read out of turn by a word that reads in turn
 * otherwise).  Returns -1
 * when the word roams: at least 4 of its references were out of turn,
 * more than in turn; 1 when it reads in turn: at least 4 were in turn, no
 * fewer than out; 0 while it is not known yet.  Once FT_KERNEL_COUNTED
 * references are counted, both counts are halved: the verdict follows the
 * word's latest references.  A word that held a pointer in almost every launch
 * but to traps all over the pass is a slot of a by-value struct that
 * stale pointers always fill (ATen's cat metadata in a long prefill): the
 * kernel does not read through it.  Only a word the kernel really reads
 * through points, mostly, where the pass is. */
int ft_kernel_turn(struct ft_kernel *k, unsigned w, int in_turn, int count);
/* Whether word w of k reads one slice of a stacked tensor (a routed
 * expert) at a time, marked so first when mark is nonzero
 * (FT_EXPERT_PAGING, offload_slices.c). */
int ft_kernel_slicer(struct ft_kernel *k, unsigned w, int mark);

#endif
