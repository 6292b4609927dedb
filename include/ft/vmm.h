/*
 * VMM-backed allocations (src/engine/vmm.c).  Device allocations of at
 * least FT_VMM_MIN_BYTES are served as a reserved address range mapped
 * chunk by chunk (2 MiB, the VMM granularity) onto physical handles of
 * their own.  The caller gets an ordinary device pointer; any chunk can
 * later be re-backed by a block's chunk (include/ft/offload.h) without the
 * address changing.  Everything reaches the driver through the real table
 * only.
 */
#ifndef FT_VMM_H
#define FT_VMM_H

#include <pthread.h>
#include <stdint.h>

#include "ft/real.h"

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
	uint64_t other_device;              /* allocations left to the driver: another device */
	uint32_t n, cap;
	struct ft_vmm_alloc *a;             /* sorted by base */
};

/* fraction: FT_MAX_GPU_MEM_FRACTION (NAN: none).  With one, allocations
 * that would take the chunks VMM holds on the device over the budget
 * (fraction x the device's memory, at most what was free when VMM began:
 * ft_plan_budget, as the plan counts it), before any plan exists, get host
 * memory mapped at their address instead (kernels read it over the bus,
 * slowly, but correctly); ft_vmm_migrate brings it to the device later. */
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
/* The budget (ft_plan_budget, FT_MAX_GPU_MEM_FRACTION as given to
 * ft_vmm_init) for weights totalling `weights` bytes on the device, with
 * what is free there now; 0 in latency mode. */
uint64_t ft_vmm_budget(struct ft_vmm *v, uint64_t weights);
/* Bytes of host memory VMM-backed allocations hold now (offloaded chunks,
 * re-backed by blocks, no longer count). */
uint64_t ft_vmm_host_bytes(struct ft_vmm *v);
/* Re-backs the chunk at c (chunk aligned, in a VMM-backed allocation) by
 * the physical handle h, releasing the chunk's own memory: 0, or -1 with
 * the chunk unchanged. */
int ft_vmm_rebind(struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle h);
/* The reverse: the chunk at c, now backed by the handle back, gets
 * physical memory of its own again (its contents are undefined): 0; 1 when
 * it had its own already (nothing changed); -1 with the chunk still backed
 * by back. */
int ft_vmm_own(struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle back);
/* A new physical chunk on the device (counted against the budget): 0 or
 * -1; and its release. */
int ft_vmm_chunk_handle(struct ft_vmm *v, CUmemGenericAllocationHandle *h);
void ft_vmm_chunk_release(struct ft_vmm *v, CUmemGenericAllocationHandle h);
/* Maps n chunk handles contiguously at a new address *va: 0 or -1. */
int ft_vmm_map_block(struct ft_vmm *v, const CUmemGenericAllocationHandle *h, uint32_t n,
		     CUdeviceptr *va);

#endif
