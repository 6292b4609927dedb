/* VMM-backed device allocations (include/ft/vmm.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ft/vmm.h"
#include "ft/plan.h"
#include "ft/log.h"
#include "ft/search.h"

void ft_vmm_init(struct ft_vmm *v, const struct ft_real *real, size_t min_bytes,
		 double fraction, int device)
{
	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->lock, NULL);
	v->real = real;
	v->min_bytes = min_bytes;
	v->fraction = fraction;
	v->want = device;
}

static CUmemAllocationProp prop(int device)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = device;
	return p;
}

/* Kernel parameter blocks hold packed pairs of 32-bit integers and stale
 * words.  At cuMemAddressReserve's default addresses (4-64 GiB on the
 * H200) those read as pointers into weights: (4 << 32) | 2 was "2 bytes
 * into a weight" of a 16 GB model, which split weights and made kernels
 * that never read them look like readers.  The driver's own allocations
 * sit near the top of the address space (0x7f...), where no such words
 * fall: one reservation there, at least 4x the device, holds every
 * VMM-backed allocation. */
#define HIGH_VA(a) ((a) >> 40 != 0)
static void reserve_arena(struct ft_vmm *v, size_t total)
{
	const struct ft_real *r = v->real;
	size_t size = 4 * total > (64ull << 30) ? 4 * total : (64ull << 30);
	size = (size + v->chunk - 1) / v->chunk * v->chunk;
	CUdeviceptr probe = 0;
	if (r->cuMemAlloc_v2 && r->cuMemFree_v2 && !r->cuMemAlloc_v2(&probe, v->chunk))
		r->cuMemFree_v2(probe);
	const CUdeviceptr hints[] = {
		HIGH_VA(probe) && probe > 2 * size ? (probe - 2 * size) & ~((1ull << 30) - 1) : 0,
		0x600000000000ull, 0 };
	for (unsigned i = 0; i < sizeof(hints) / sizeof(*hints); i++) {
		CUdeviceptr a = 0;
		if (r->cuMemAddressReserve(&a, size, v->chunk, hints[i], 0))
			continue;
		if (HIGH_VA(a)) {
			v->arena = a;
			v->arena_size = size;
			return;
		}
		r->cuMemAddressFree(a, size);
	}
	ft_info("VMM: no high address range could be reserved: allocations get the driver's "
		"default addresses, where integers in kernel parameters can look like pointers");
}

static int in_arena(const struct ft_vmm *v, CUdeviceptr p)
{
	return v->arena && p >= v->arena && p < v->arena + v->arena_size;
}

/* Address space for an allocation: the first gap of the arena that holds
 * it (v->a is sorted), else a reservation of its own.  Under v->lock. */
static int reserve_va(struct ft_vmm *v, size_t size, CUdeviceptr *base)
{
	if (v->arena) {
		CUdeviceptr at = v->arena, end = v->arena + v->arena_size;
		for (uint32_t i = 0; i < v->n && v->a[i].base < end; i++) {
			if (v->a[i].base < at)
				continue;
			if (v->a[i].base - at >= size)
				break;
			at = v->a[i].base + v->a[i].size;
		}
		if (end - at >= size) {
			*base = at;
			return 0;
		}
		ft_info_once("VMM: the reserved address range is full: further allocations get "
			     "reservations of their own");
	}
	return v->real->cuMemAddressReserve(base, size, v->chunk, 0, 0) ? -1 : 0;
}

/* First use: the device and its granularity; -1 when VMM cannot serve. */
/* ft_plan_budget for weights totalling `weights` bytes, with the memory
 * free on the device now (unknown: no cap).  Under v->lock, or at start. */
static uint64_t budget_now(const struct ft_vmm *v, uint64_t weights)
{
	size_t free_b = SIZE_MAX / 2, t;
	if (v->real->cuMemGetInfo_v2 && v->real->cuMemGetInfo_v2(&free_b, &t))
		free_b = SIZE_MAX / 2;
	return ft_plan_budget(v->fraction, v->total, free_b, weights);
}

static int start(struct ft_vmm *v)
{
	const struct ft_real *r = v->real;
	if (v->state)
		return v->state > 0 ? 0 : -1;
	v->state = -1;
	CUdevice d;
	if (!r->cuMemAddressReserve || !r->cuMemAddressFree || !r->cuMemCreate ||
	    !r->cuMemRelease || !r->cuMemMap || !r->cuMemUnmap || !r->cuMemSetAccess ||
	    !r->cuMemGetAllocationGranularity || !r->cuCtxGetDevice || r->cuCtxGetDevice(&d))
		return -1;
	v->device = (int)d;
	CUmemAllocationProp p = prop(v->device);
	size_t g = 0;
	if (r->cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || !g)
		return -1;
	v->chunk = g;
	size_t total = 0;
	if (r->cuDeviceTotalMem_v2 && !r->cuDeviceTotalMem_v2(&total, d))
		v->total = total;
	/* before a plan nothing tells weights apart: every chunk counts */
	v->budget = budget_now(v, 0);
	reserve_arena(v, total);
	v->state = 1;
	return 0;
}

/* A physical chunk of host memory the device can map: 0 or -1. */
static int host_chunk(struct ft_vmm *v, CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp p = prop(v->device);
	p.location.type = CU_MEM_LOCATION_TYPE_HOST;
	p.location.id = 0;
	if (!v->real->cuMemCreate(h, v->chunk, &p, 0))
		return 0;
	p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	return v->real->cuMemCreate(h, v->chunk, &p, 0) ? -1 : 0;
}

/* The first entry with base > p. */
static uint32_t find(const struct ft_vmm *v, CUdeviceptr p)
{
	return ft_upper_bound(v->a, v->n, sizeof(*v->a), offsetof(struct ft_vmm_alloc, base), p);
}

/* Maps the physical chunk h at c, read-write for the device: 0 or -1. */
static int map_chunk(const struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle h)
{
	CUmemAllocationProp p = prop(v->device);
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof(acc));
	acc.location = p.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return v->real->cuMemMap(c, v->chunk, 0, h, 0) ||
			       v->real->cuMemSetAccess(c, v->chunk, &acc, 1)
		       ? -1
		       : 0;
}

/* The chunk at c puts h in place of what it mapped: 0, or -1 with back
 * (when not 0) mapped there again. */
static int remap(const struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle h,
		 CUmemGenericAllocationHandle back)
{
	if (v->real->cuMemUnmap(c, v->chunk))
		return -1;
	if (!map_chunk(v, c, h))
		return 0;
	if (back)
		map_chunk(v, c, back);
	return -1;
}

/* The VMM allocation whose chunk k begins at c (chunk aligned); NULL when
 * c is no chunk of one.  Under v->lock. */
static struct ft_vmm_alloc *chunk_of(struct ft_vmm *v, CUdeviceptr c, uint32_t *k)
{
	uint32_t i = find(v, c);
	if (!i || c >= v->a[i - 1].base + v->a[i - 1].size || (c - v->a[i - 1].base) % v->chunk)
		return NULL;
	*k = (uint32_t)((c - v->a[i - 1].base) / v->chunk);
	return &v->a[i - 1];
}

/* Releases chunk k's own memory, out of the accounts. */
static void release_own(struct ft_vmm *v, struct ft_vmm_alloc *a, uint32_t k)
{
	v->real->cuMemRelease(a->own[k]);
	if (a->host[k])
		v->host_bytes -= v->chunk;
	else
		v->device_bytes -= v->chunk;
	a->own[k] = 0;
	a->host[k] = 0;
}

/* Unmaps and releases chunks [0, k) of a and its reservation. */
static void undo(struct ft_vmm *v, struct ft_vmm_alloc *a, uint32_t k)
{
	const struct ft_real *r = v->real;
	size_t chunk = v->chunk;
	for (uint32_t i = 0; i < k; i++) {
		r->cuMemUnmap(a->base + i * chunk, chunk);
		if (a->own[i])
			release_own(v, a, i);
	}
	if (!in_arena(v, a->base))
		r->cuMemAddressFree(a->base, a->size);
	free(a->own);
	free(a->host);
}

int ft_vmm_alloc(struct ft_vmm *v, CUdeviceptr *out, size_t size, uint64_t *host)
{
	*host = 0;
	if (!v->min_bytes || size < v->min_bytes)
		return -1;
	pthread_mutex_lock(&v->lock);
	const struct ft_real *r = v->real;
	int rc = -1;
	/* one device per process: FT_GPU_DEVICE, else the first one allocated
	 * on; allocations on another are the driver's own (never offloaded) */
	CUdevice d;
	if (!r->cuCtxGetDevice || r->cuCtxGetDevice(&d))
		goto out;
	int want = v->want >= 0 ? v->want : v->state > 0 ? v->device : (int)d;
	if ((int)d != want) {
		v->other_device++;
		ft_info_once("allocations on CUDA device %d are left to the driver: the library "
			     "offloads on device %d only (%s)", (int)d, want,
			     v->want >= 0 ? "FT_GPU_DEVICE" : "the first this process allocated on");
		goto out;
	}
	if (start(v))
		goto out;
	struct ft_vmm_alloc a = { 0 };
	a.nchunks = (uint32_t)((size + v->chunk - 1) / v->chunk);
	a.size = (size_t)a.nchunks * v->chunk;
	a.own = calloc(a.nchunks, sizeof(*a.own));
	a.host = calloc(a.nchunks, 1);
	if (!a.own || !a.host) {
		free(a.own);
		free(a.host);
		goto out;
	}
	if (reserve_va(v, a.size, &a.base)) {
		free(a.own);
		free(a.host);
		goto out;
	}
	CUmemAllocationProp p = prop(v->device);
	for (uint32_t i = 0; i < a.nchunks; i++) {
		CUdeviceptr c = a.base + i * v->chunk;
		/* over the budget before a plan exists: host memory at this
		 * address (ft_vmm_migrate brings it over later) */
		int over = !v->exempt && v->budget && v->device_bytes + v->chunk > v->budget;
		if (over && !host_chunk(v, &a.own[i])) {
			a.host[i] = 1;
			v->host_bytes += v->chunk;
			*host += v->chunk;
		} else if (r->cuMemCreate(&a.own[i], v->chunk, &p, 0)) {
			a.own[i] = 0;
			undo(v, &a, i);
			goto out;
		} else {
			if (over)
				ft_warn_once("the GPU budget is full and host memory cannot be mapped "
					     "for the device: allocations go on the GPU");
			v->device_bytes += v->chunk;
		}
		if (map_chunk(v, c, a.own[i])) {
			undo(v, &a, i + 1);
			goto out;
		}
	}
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? v->cap * 2 : 64;
		struct ft_vmm_alloc *t = realloc(v->a, cap * sizeof(*t));
		if (!t) {
			undo(v, &a, a.nchunks);
			goto out;
		}
		v->a = t;
		v->cap = cap;
	}
	uint32_t at = find(v, a.base);
	memmove(&v->a[at + 1], &v->a[at], (v->n - at) * sizeof(*v->a));
	v->a[at] = a;
	v->n++;
	*out = a.base;
	rc = 0;
out:
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ft_vmm_free(struct ft_vmm *v, CUdeviceptr p, CUresult *rc)
{
	if (!v->n)
		return 0;
	pthread_mutex_lock(&v->lock);
	uint32_t i = find(v, p);
	if (!i || v->a[i - 1].base != p) {
		pthread_mutex_unlock(&v->lock);
		return 0;
	}
	struct ft_vmm_alloc a = v->a[--i];
	memmove(&v->a[i], &v->a[i + 1], (v->n - i - 1) * sizeof(*v->a));
	v->n--;
	/* cuMemFree waits for the device; so does this (unmapping memory a
	 * pending kernel reads would fault it) */
	CUresult s = v->real->cuCtxSynchronize ? v->real->cuCtxSynchronize() : CUDA_SUCCESS;
	undo(v, &a, a.nchunks);
	pthread_mutex_unlock(&v->lock);
	*rc = s;
	return 1;
}

int ft_vmm_range(struct ft_vmm *v, CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
	if (!v->n)
		return 0;
	pthread_mutex_lock(&v->lock);
	uint32_t i = find(v, p);
	int ours = i && p < v->a[i - 1].base + v->a[i - 1].size;
	if (ours) {
		*base = v->a[i - 1].base;
		*size = v->a[i - 1].size;
	}
	pthread_mutex_unlock(&v->lock);
	return ours;
}

int ft_vmm_rebind(struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&v->lock);
	uint32_t k;
	struct ft_vmm_alloc *a = chunk_of(v, c, &k);
	int rc = -1;
	if (a && !remap(v, c, h, a->own[k])) {
		if (a->own[k])
			release_own(v, a, k);
		rc = 0;
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ft_vmm_chunk_handle(struct ft_vmm *v, CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp p = prop(v->device);
	if (v->real->cuMemCreate(h, v->chunk, &p, 0))
		return -1;
	pthread_mutex_lock(&v->lock);
	v->device_bytes += v->chunk;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

void ft_vmm_chunk_release(struct ft_vmm *v, CUmemGenericAllocationHandle h)
{
	v->real->cuMemRelease(h);
	pthread_mutex_lock(&v->lock);
	v->device_bytes -= v->chunk;
	pthread_mutex_unlock(&v->lock);
}

int ft_vmm_map_block(struct ft_vmm *v, const CUmemGenericAllocationHandle *h, uint32_t n,
		     CUdeviceptr *va)
{
	const struct ft_real *r = v->real;
	size_t size = (size_t)n * v->chunk;
	if (r->cuMemAddressReserve(va, size, v->chunk, 0, 0))
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if (map_chunk(v, *va + i * v->chunk, h[i])) {
			for (uint32_t k = 0; k < i; k++)
				r->cuMemUnmap(*va + k * v->chunk, v->chunk);
			r->cuMemAddressFree(*va, size);
			*va = 0;
			return -1;
		}
	return 0;
}

int ft_vmm_own(struct ft_vmm *v, CUdeviceptr c, CUmemGenericAllocationHandle back)
{
	pthread_mutex_lock(&v->lock);
	uint32_t k;
	struct ft_vmm_alloc *a = chunk_of(v, c, &k);
	CUmemAllocationProp p = prop(v->device);
	CUmemGenericAllocationHandle h;
	int rc = -1;
	if (a && a->own[k]) {
		rc = 1;
	} else if (a && !v->real->cuMemCreate(&h, v->chunk, &p, 0)) {
		if (remap(v, c, h, back)) {
			v->real->cuMemRelease(h);
		} else {
			a->own[k] = h;
			v->device_bytes += v->chunk;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

uint64_t ft_vmm_budget(struct ft_vmm *v, uint64_t weights)
{
	pthread_mutex_lock(&v->lock);
	uint64_t b = budget_now(v, weights);
	pthread_mutex_unlock(&v->lock);
	return b;
}

uint64_t ft_vmm_total(struct ft_vmm *v)
{
	pthread_mutex_lock(&v->lock);
	uint64_t n = v->total;
	pthread_mutex_unlock(&v->lock);
	return n;
}

uint64_t ft_vmm_host_bytes(struct ft_vmm *v)
{
	pthread_mutex_lock(&v->lock);
	uint64_t n = v->host_bytes;
	pthread_mutex_unlock(&v->lock);
	return n;
}

void ft_vmm_unlimit(struct ft_vmm *v)
{
	pthread_mutex_lock(&v->lock);
	v->budget = 0;
	pthread_mutex_unlock(&v->lock);
}

/* Moves host-backed chunk k of a to the device, through the scratch
 * address tmp: 0, or -1 (nothing changed).  Under v->lock. */
static int move_chunk(struct ft_vmm *v, struct ft_vmm_alloc *a, uint32_t k, CUdeviceptr tmp)
{
	const struct ft_real *r = v->real;
	CUmemAllocationProp p = prop(v->device);
	CUdeviceptr c = a->base + k * v->chunk;
	CUmemGenericAllocationHandle h;
	if (r->cuMemCreate(&h, v->chunk, &p, 0))
		return -1;
	/* the device chunk at a scratch address, filled, then put in the
	 * host chunk's place (a copy between device pointers returns before
	 * it is done: it must be over before the scratch mapping and the host
	 * chunk go) */
	if (map_chunk(v, tmp, h) || r->cuMemcpyDtoD_v2(tmp, c, v->chunk) ||
	    r->cuCtxSynchronize() || r->cuMemUnmap(tmp, v->chunk)) {
		r->cuMemUnmap(tmp, v->chunk);
		r->cuMemRelease(h);
		return -1;
	}
	if (remap(v, c, h, a->own[k])) {
		r->cuMemRelease(h);
		return -1;
	}
	release_own(v, a, k);
	a->own[k] = h;
	v->device_bytes += v->chunk;
	return 0;
}

/* Moves the host-backed chunks of the allocations whose bases are
 * base[0..n) (NULL: all), within the budget unless any; the bytes moved.
 * Under no lock. */
static uint64_t migrate(struct ft_vmm *v, const CUdeviceptr *base, uint32_t n, int any)
{
	const struct ft_real *r = v->real;
	uint64_t moved = 0;
	pthread_mutex_lock(&v->lock);
	CUdeviceptr tmp = 0;
	if (!v->host_bytes || v->state <= 0 || r->cuMemAddressReserve(&tmp, v->chunk, v->chunk, 0, 0))
		goto out;
	r->cuCtxSynchronize();
	for (uint32_t i = 0; i < (base ? n : v->n); i++) {
		uint32_t j = base ? find(v, base[i]) : i + 1;
		if (base && (!j || v->a[j - 1].base != base[i]))
			continue; /* freed meanwhile */
		struct ft_vmm_alloc *a = &v->a[j - 1];
		for (uint32_t k = 0; k < a->nchunks; k++) {
			if (!a->host[k] || !a->own[k])
				continue;
			if (!any && v->budget && v->device_bytes + v->chunk > v->budget)
				goto done;
			if (move_chunk(v, a, k, tmp))
				goto done;
			moved += v->chunk;
		}
	}
done:
	r->cuMemAddressFree(tmp, v->chunk);
out:
	pthread_mutex_unlock(&v->lock);
	return moved;
}

uint64_t ft_vmm_migrate(struct ft_vmm *v)
{
	return migrate(v, NULL, 0, 0);
}

uint64_t ft_vmm_migrate_if(struct ft_vmm *v, int (*pick)(void *arg, CUdeviceptr base),
			   void *arg)
{
	/* the candidates first, then the caller's verdicts without the lock
	 * (pick may take locks of its own) */
	pthread_mutex_lock(&v->lock);
	uint32_t n = 0;
	CUdeviceptr *base = malloc((v->n + 1) * sizeof(*base));
	for (uint32_t i = 0; base && i < v->n; i++)
		for (uint32_t k = 0; k < v->a[i].nchunks; k++)
			if (v->a[i].host[k] && v->a[i].own[k]) {
				base[n++] = v->a[i].base;
				break;
			}
	pthread_mutex_unlock(&v->lock);
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++)
		if (pick(arg, base[i]))
			base[m++] = base[i];
	uint64_t moved = m ? migrate(v, base, m, 1) : 0;
	free(base);
	return moved;
}

void ft_vmm_exempt_new(struct ft_vmm *v)
{
	pthread_mutex_lock(&v->lock);
	v->exempt = 1;
	pthread_mutex_unlock(&v->lock);
}

uint64_t ft_vmm_host_in(struct ft_vmm *v, CUdeviceptr lo, CUdeviceptr hi)
{
	uint64_t n = 0;
	pthread_mutex_lock(&v->lock);
	uint32_t first = find(v, lo);
	for (uint32_t i = first ? first - 1 : 0; i < v->n && v->a[i].base < hi; i++) {
		const struct ft_vmm_alloc *a = &v->a[i];
		for (uint32_t k = 0; k < a->nchunks; k++) {
			CUdeviceptr c = a->base + k * v->chunk;
			if (c + v->chunk > lo && c < hi && a->host[k] && a->own[k])
				n += (c + v->chunk < hi ? c + v->chunk : hi) - (c > lo ? c : lo);
		}
	}
	pthread_mutex_unlock(&v->lock);
	return n;
}
