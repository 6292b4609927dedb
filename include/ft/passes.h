/*
 * Pass detection without framework help.  A pass is one forward (one
 * iteration of the program's loop).  Three sources, in order of authority:
 *
 *  1. ft_mark_pass() from the program: once called, it alone counts passes.
 *  2. A graph replay whose capture read tracked memory is one pass.
 *  3. Eager launches: the first-touch order of weight-like regions repeats
 *     every pass.  A region is one (allocation, offset) a launch referred
 *     to.  Weight-like regions are touched by few launches per pass; the
 *     activation buffers a layer reuses are touched by every layer and are
 *     left out.  When a weight-like region among the first few of the pass
 *     is touched again, a new pass may have begun there; it is confirmed
 *     once the next weight-like regions touched follow the order this pass
 *     learned (and cancelled when they do not).  The boundary is placed at
 *     the candidate launch, retroactively.
 *
 * Pure C on plain data, no CUDA, no locks: the caller serialises.
 */
#ifndef FT_PASSES_H
#define FT_PASSES_H

#include <stdint.h>

#define FT_PASS_ANCHORS 4        /* first regions of a pass that may start the next */
#define FT_PASS_CONFIRM 8        /* in-order regions that confirm a boundary */
#define FT_PASS_MAX_TOUCH 4      /* touches per pass above which a region is not weight-like */

struct ft_region_ref {
	uint64_t alloc_id;
	uint64_t offset;
};

enum ft_pass_source { FT_PASS_NONE, FT_PASS_EAGER, FT_PASS_GRAPH, FT_PASS_MARK };

struct ft_pass_slot;

struct ft_passes {
	uint64_t passes;          /* boundaries seen (the first pass starts at 0) */
	uint64_t launches;        /* launches fed */
	uint64_t pass_start;      /* launch index where the current pass began */
	uint64_t generation;      /* bumps each pass: slots of older passes are stale */
	int marked;               /* ft_mark_pass() was called: heuristics off */

	/* current pass: weight-like regions in first-touch order */
	uint32_t norder;
	uint32_t order_cap;
	struct ft_region_ref *order;

	/* candidate boundary */
	int pending;
	uint64_t cand_launch;
	uint32_t cand_pos;        /* position of the anchor in order */
	uint32_t last_pos;        /* highest order position matched since */
	uint32_t matched;
	uint64_t cand_gen;        /* regions first seen since the candidate */

	/* open-addressing table of regions */
	uint32_t slots_cap;
	struct ft_pass_slot *slots;
};

int ft_passes_init(struct ft_passes *p);
void ft_passes_destroy(struct ft_passes *p);

/* Feeds one eager launch and the regions it referenced.  Returns the
 * source of a pass boundary this launch confirmed (FT_PASS_EAGER; *start is
 * then the launch index where the new pass began), or FT_PASS_NONE. */
enum ft_pass_source ft_passes_launch(struct ft_passes *p, const struct ft_region_ref *r,
				     unsigned n, uint64_t *start);
/* A graph replay (reads_memory: its capture referenced tracked memory). */
enum ft_pass_source ft_passes_graph(struct ft_passes *p, int reads_memory);
/* The program marked a pass boundary. */
enum ft_pass_source ft_passes_mark(struct ft_passes *p);

#endif
