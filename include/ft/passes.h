/*
 * Pass detection without framework help.  A pass is one forward (one
 * iteration of the program's loop).  Sources, in order of authority:
 *
 *  1. ft_mark_pass() from the program: once called, it alone counts passes.
 *  2. A replay of a graph whose capture referenced tracked memory.
 *  3. Eager launches.  Every region (allocation, offset) that a launch
 *     refers to remembers its last touch and its last return distance (the
 *     launches between its two latest touches).  A weight is read once per
 *     pass, so it returns after one pass length; activation buffers reused
 *     by every layer return after a few launches.  A launch that touches a
 *     region again after d launches (d at least a quarter of the longer of
 *     the last two passes, at most four passes; the region's previous return
 *     not short) is a candidate boundary c, with the hypothesis that the
 *     previous pass was [c - d, c).
 *     The regions touched after c then vote: one last touched inside the
 *     hypothetical previous pass matches; one last touched before it whose
 *     own return distance is of pass scale (a weight the hypothesis skipped:
 *     the next layer's, when c is only a layer boundary) contradicts;
 *     regions never seen (a new KV cache block) or reused within the pass
 *     do not vote.  Sixteen matches against at most 2 + matches / 8
 *     contradictions confirm (four, once the candidate has survived a whole
 *     hypothetical pass: a small model reads fewer regions); the boundary is then placed at the earliest
 *     candidate still standing and the launches since are handed to the new
 *     pass.  Nothing confirmed for four passes forgets the pass length (a
 *     new model, a changed workload) and learns afresh.
 *
 * A pass may be 3.5 times shorter than the one before: a serving start-up
 * on the H200 (tests/data/h200-startup-full, unit test replay_passes)
 * prefills in about 300 launches between decode steps of 1031.
 *
 * Measured on the H200 recordings (unit test passes_fixture): for the first
 * model of tests/data/h200-workloads (transformers Llama, DynamicCache,
 * prefill/decode alternation, varying lengths) and for the 8-layer model of
 * tests/data/h200-hf8 every forward boundary is found and none invented.
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

struct ft_pass_region;
struct ft_pass_cand;
struct ft_pass_log;

struct ft_passes {
	uint64_t passes;          /* boundaries seen */
	uint64_t launches;        /* eager launches fed */
	int marked;               /* ft_mark_pass() was called: only marks count */

	uint64_t start;           /* launch index where the current pass began */
	uint64_t prev_len;        /* launches in the previous pass; 0 = unknown */
	uint64_t prev_len2;       /* in the one before it; 0 = unknown */

	uint32_t ncand;
	struct ft_pass_cand *cand;
	struct ft_pass_log *log;  /* the latest launches, for the moved ones */
	uint32_t moved;           /* launches that began the new pass */
	struct ft_region_ref *moved_ref;
	uint32_t *moved_end;

	uint32_t cap, used;       /* region table (open addressing) */
	struct ft_pass_region *regions;
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
/* Only marks count passes from now on (the program declared its tensors
 * and will mark its passes), no pass ending here. */
void ft_passes_mark_from_now(struct ft_passes *p);

#endif
