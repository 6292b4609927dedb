/*
 * Allocation registry: the tracked device-visible ranges of the process
 * (driver allocations, stream-ordered allocations, VMM mappings, host-mapped
 * memory) and the question "which allocation holds this address".
 *
 * A sorted array of non-overlapping ranges under a reader-writer lock.
 * Lookups (every pointer-sized word of every launch) binary-search it after a
 * lock-free min/max reject; inserts and removals (allocator events, far
 * rarer) shift the array.  Thread-safe.
 */
#ifndef FT_REGISTRY_H
#define FT_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FT_ALLOC_KINDS(X)                                                     \
	X(DEVICE, "device")     /* cuMemAlloc */                              \
	X(PITCH, "pitch")       /* cuMemAllocPitch */                         \
	X(ASYNC, "async")       /* cuMemAllocAsync */                         \
	X(POOL, "pool")         /* cuMemAllocFromPoolAsync */                 \
	X(VMM, "vmm")           /* cuMemMap of a physical handle */           \
	X(MANAGED, "managed")   /* cuMemAllocManaged */                       \
	X(HOST, "host")         /* cuMemHostAlloc / cuMemAllocHost */         \
	X(HOST_REG, "host_registered") /* cuMemHostRegister */

enum ft_alloc_kind {
#define X(k, s) FT_ALLOC_##k,
	FT_ALLOC_KINDS(X)
#undef X
};

const char *ft_alloc_kind_name(int kind);

struct ft_alloc {
	uint64_t base;
	uint64_t size;
	uint64_t id;   /* unique for the life of the process, > 0 */
	int32_t device;
	uint8_t kind;
};

struct ft_registry {
	pthread_rwlock_t *lock; /* &own, or a new one in a forked child */
	pthread_rwlock_t own;
	struct ft_alloc *v; /* sorted by base, non-overlapping */
	size_t n, cap;
	_Atomic uint64_t lo, hi; /* [lo, hi) covers every entry; lo > hi when empty */
	uint64_t next_id;
};

int ft_registry_init(struct ft_registry *r);
void ft_registry_destroy(struct ft_registry *r);
/* Drops every entry (after fork: the parent's memory is not the child's). */
void ft_registry_clear(struct ft_registry *r);

/* Registers [base, base + size).  Entries overlapping it are stale (their
 * free was not seen) and are removed; *evicted (may be NULL) counts them.
 * Returns the new id, or 0 when out of memory or size is 0. */
uint64_t ft_registry_add(struct ft_registry *r, uint64_t base, uint64_t size,
			 int kind, int device, unsigned *evicted);
/* Removes the entry that starts at base.  0, or -ENOENT. */
int ft_registry_remove(struct ft_registry *r, uint64_t base, struct ft_alloc *out);
/* Removes every entry that lies inside [base, base + size) (VMM unmap).
 * Calls fn for each, under the write lock (fn must not call the registry).
 * Returns how many were removed. */
size_t ft_registry_remove_range(struct ft_registry *r, uint64_t base, uint64_t size,
				void (*fn)(void *ud, const struct ft_alloc *a), void *ud);
/* Copies the entry holding addr into *out.  0, or -ENOENT. */
int ft_registry_lookup(struct ft_registry *r, uint64_t addr, struct ft_alloc *out);
size_t ft_registry_count(struct ft_registry *r);
/* The id the next allocation will get (ids grow: a smaller id is older). */
uint64_t ft_registry_next_id(struct ft_registry *r);

/* Around fork (pthread_atfork): step 0 takes the lock for reading
 * (prepare), 1 gives it back (parent), 2 gives it back and the child a new
 * lock and no entries. */
void ft_registry_fork(struct ft_registry *r, int step);
/* For batch lookups (a launch's words): take the read lock once, call
 * ft_registry_find_locked per word, release. */
void ft_registry_rdlock(struct ft_registry *r);
void ft_registry_unlock(struct ft_registry *r);

static inline int ft_registry_maybe(const struct ft_registry *r, uint64_t addr)
{
	return addr >= atomic_load_explicit(&r->lo, memory_order_relaxed) &&
	       addr < atomic_load_explicit(&r->hi, memory_order_relaxed);
}

const struct ft_alloc *ft_registry_find_locked(const struct ft_registry *r,
					       uint64_t addr);

#endif
