/*
 * Pass detection without framework help.  A pass is one forward (one
 * iteration of the program's loop).  Sources, in order of authority:
 *
 *  1. ft_mark_pass() from the program: once called, it alone counts passes.
 *  2. A replay of a graph whose capture referenced tracked memory.
 *  3. Eager launches: the first-touch order of the regions (allocation,
 *     offset) that launches refer to repeats every pass.  A region touched
 *     once so far, first touched in the first tenth of the pass, that is
 *     touched again is a candidate anchor: a new pass may begin at this
 *     launch.  A later touch of a region nearer the start of the order
 *     moves the candidate there.  It is confirmed when eight regions touched
 *     once so far and lying after the anchor in the order are touched again
 *     before more than matched + 4 new regions appear (a false candidate in
 *     the middle of a pass meets mostly new regions: the next layers'
 *     weights); the boundary is then placed at the candidate launch and the
 *     launches since are replayed into the new pass.  Nothing repeating for
 *     max(256, 3 x the last pass) launches restarts the learning (a new
 *     model, or a first pass polluted by weight initialisation).
 *
 * Measured on tests/data/h200-workloads (unit test passes_fixture): for the
 * first model of the recording (transformers Llama, DynamicCache,
 * prefill/decode alternation, varying lengths) every forward boundary is
 * found and none invented.  Known limits, seen on the later models of the
 * same recording: after a model is replaced in the same process the tied
 * second model's boundaries were not found, and for the hand-written
 * decoder the boundaries were found with the right period but rotated by a
 * few launches from the forward's first launch.
 *
 * Pure C on plain data, no CUDA, no locks: the caller serialises.
 */
#ifndef FT_PASSES_H
#define FT_PASSES_H

#include <stdint.h>

struct ft_region_ref {
	uint64_t alloc_id;
	uint64_t offset;
	uint64_t alloc_base;      /* carried along, not part of the identity */
	uint64_t alloc_size;
};

enum ft_pass_source { FT_PASS_NONE, FT_PASS_EAGER, FT_PASS_GRAPH, FT_PASS_MARK };

struct ft_pass_slot;
struct ft_pass_log;

struct ft_passes {
	uint64_t passes;          /* boundaries seen */
	uint64_t launches;        /* eager launches fed */
	int marked;               /* ft_mark_pass() was called: only marks count */

	/* the current pass */
	uint64_t start;           /* launch index where it began */
	uint64_t n;               /* launches in it so far */
	uint64_t prev_len;        /* launches in the previous pass */
	uint32_t generation;      /* region slots of other generations are stale */
	uint32_t norder;          /* regions touched in it so far */

	/* candidate boundary */
	int pending;
	uint64_t cand;            /* launch index of the candidate */
	struct ft_region_ref anchor;
	uint32_t anchor_pos;
	uint32_t matched, unknown;
	struct ft_pass_log *log;  /* launches since the candidate */
	uint32_t moved;           /* launches of the log that began the new pass */

	uint32_t slots_cap, slots_used;
	struct ft_pass_slot *slots;
};

int ft_passes_init(struct ft_passes *p);
void ft_passes_destroy(struct ft_passes *p);

/* Feeds one eager launch (id: the caller's number for it, increasing) and
 * the regions it referred to.  Returns FT_PASS_EAGER when this launch
 * confirmed a boundary (*start = id of the launch that began the new pass),
 * else FT_PASS_NONE. */
enum ft_pass_source ft_passes_launch(struct ft_passes *p, uint64_t id,
				     const struct ft_region_ref *r, unsigned n, uint64_t *start);
/* After FT_PASS_EAGER: the launches (from the new pass's first one to the
 * confirming one) that now belong to the new pass.  Launch i has refs
 * [i ? ends[i - 1] : 0, ends[i]) of *refs.  Valid until the next call. */
unsigned ft_passes_moved(const struct ft_passes *p, const struct ft_region_ref **refs,
			 const uint32_t **ends);
/* A graph replay; reads_memory: its capture referred to tracked memory. */
enum ft_pass_source ft_passes_graph(struct ft_passes *p, int reads_memory);
/* The program marked a boundary. */
enum ft_pass_source ft_passes_mark(struct ft_passes *p);

#endif
