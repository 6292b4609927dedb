/*
 * Launch parameter scan: which tracked allocations a kernel launch refers to.
 * Every 8-byte-aligned word of the parameter block that falls inside a
 * tracked allocation is a reference (interior pointers included); a 128-byte
 * parameter that matches an encoded CUtensorMap contributes the map's global
 * address.  Works on both launch forms: kernelParams (one host pointer per
 * parameter) and extra (one packed buffer, CU_LAUNCH_PARAM_BUFFER_POINTER).
 */
#ifndef FT_SCAN_H
#define FT_SCAN_H

#include <pthread.h>
#include <stdint.h>

#include "ft/registry.h"

#define FT_MAX_REFS 64

enum ft_ref_via { FT_VIA_WORD, FT_VIA_TENSORMAP };

struct ft_ref {
	uint64_t alloc_id;
	uint64_t offset;   /* address - allocation base */
	uint64_t alloc_base, alloc_size;
	uint32_t param;    /* parameter index, or byte offset / 8 in an extra buffer */
	uint16_t word;     /* byte offset in the parameter block / 8 (capped) */
	uint8_t via;
	uint8_t stale;     /* from a word that is seldom a pointer (ft_kernel_mark_stale) */
};

struct ft_refs {
	unsigned n;
	unsigned dropped;  /* references beyond FT_MAX_REFS */
	struct ft_ref v[FT_MAX_REFS];
};

struct ft_param {
	uint32_t offset;
	uint32_t size;
};

/* Parameter layout as the driver reports it (cuFuncGetParamInfo). */
struct ft_layout {
	uint32_t nparams;
	const struct ft_param *p;
};

/* CUtensorMap encodings seen by the hooks, keyed by the 128 bytes' hash. */
#define FT_TMAP_SLOTS 4096
struct ft_tmaps {
	pthread_mutex_t lock;
	unsigned used;
	struct {
		uint64_t hash;
		uint64_t addr;
	} slot[FT_TMAP_SLOTS];
};

void ft_tmaps_init(struct ft_tmaps *t);
void ft_tmaps_put(struct ft_tmaps *t, const void *map128, uint64_t global_addr);
/* Global address of an encoded map with these 128 bytes, or 0. */
uint64_t ft_tmaps_get(struct ft_tmaps *t, const void *map128);

/* Scans one launch.  layout may be NULL (unknown): then only an extra buffer
 * can be scanned.  Returns 0, or -1 when nothing could be scanned.  Takes the
 * registry's read lock itself. */
int ft_scan_launch(struct ft_registry *r, struct ft_tmaps *t,
		   const struct ft_layout *layout, void **params, void **extra,
		   struct ft_refs *out);

/* The packed buffer of an extra array, or NULL. */
const void *ft_scan_extra_buffer(void **extra, uint64_t *size);

#endif
