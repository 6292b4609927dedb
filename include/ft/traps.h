/*
 * Traps: weights grouped by the order of their first reader, one trap per
 * transformer layer.  Layers are found without module names: the sequence of
 * weight sizes repeats once per layer (sizes equal within an eighth or
 * 1 MiB: measured sizes carry allocator padding), so the smallest period
 * that repeats at least three times over at least half the weights is the
 * layer (or, when none does, runs that together cover half the weights:
 * a weight not taken leaves a layer short and the rest out of step), and
 * chains of layers go on across a layer with weights missing or added;
 * layers like the chain's outside it are layers too (a weight read out of
 * place, or the head of a pass that began mid-forward, between two
 * chains), each weight between them larger than a layer's a trap of its
 * own; what comes before the first layer is the embedding trap, what
 * comes after the last is the head trap.  A pass may begin in the middle
 * of the forward (where pass detection put its boundary): the sizes are
 * read as a cycle, and a trap that spans the pass's start is cut there.  A
 * model without such a period is cut into consecutive groups of about
 * target_bytes.  Pure C, CPU-tested.
 */
#ifndef FT_TRAPS_H
#define FT_TRAPS_H

#include <stdint.h>

#include "ft/profile.h"

/* Period (in weights) and first index of the repeating layer pattern of
 * sizes, or 0 when there is none. */
uint32_t ft_traps_period(const uint64_t *sizes, uint32_t n, uint32_t *start, uint32_t *layers);

/* Groups n weights (sizes in first-touch order) into traps, labelled
 * "trap.<i>" in order.  Returns the number of traps (*out malloc'd, compute
 * statistics zero), or -1 when out of memory. */
int ft_traps_group(const uint64_t *sizes, uint32_t n, uint64_t target_bytes,
		   struct ft_trap **out);

/* Groups n weights (first-touch order) by the names the framework
 * declared (src/profile/trap_names.c): consecutive weights of one module
 * key form a trap, the key being the name up to its first number (a layer
 * of a stack: "model.layers.7") or else its module ("lm_head");
 * non-layer traps before the first layer are "embedding", after the last
 * "head", between them "other"; labelled "trap.<i>".  Returns the number
 * of traps, 0 when the names hold fewer than two layers (group by sizes
 * then), -1 out of memory.  names[k] may be NULL (no name). */
int ft_traps_by_name(const char *const *names, const uint64_t *sizes, uint32_t n,
		     struct ft_trap **out);
/* The module key of a declared name into out (n bytes): the name up to its
 * first number, returning 1 (a layer), or its module, returning 0; the
 * empty key for NULL. */
int ft_traps_key(const char *name, char *out, size_t n);
/* Labels each of n traps with its weights' module key (the first and the
 * last when they differ: "a..b"), "#2", "#3", ... on a key seen before,
 * its tail when longer than FT_LABEL_MAX; a trap whose first weight has no
 * name keeps its label. */
void ft_traps_label_by_name(struct ft_trap *traps, uint32_t n, const char *const *names);

/* Joins consecutive traps among n whose weights' reads interleave (pairs
 * (i, j), i < j, of weight indices, ft_disc_interleaved: a loop over routed
 * experts reads expert e's up projection, its down projection, then the
 * next expert's up projection): apart, the trap of i would be read again
 * after j's began, within every pass.  A joined trap is a "layer" when one
 * of its traps was, else the first's role; all are relabelled in order.
 * Returns the new number of traps (*traps replaced when any was joined), or
 * -1 when out of memory (*traps unchanged). */
int ft_traps_join(struct ft_trap **traps, uint32_t n, const uint64_t *sizes,
		  const uint32_t (*pairs)[2], uint32_t npairs);
/* Cuts the "layer" traps among n into consecutive pieces of at most
 * max_bytes (a weight larger than that is a piece of its own), relabelling
 * all in order: for a budget that cannot hold the blocks of whole layers.
 * nocut (NULL: none) marks the weights w no cut may fall before (nocut[w]:
 * w is read together with a weight before it), so that what one launch
 * reads is never split into traps that may share a block; a piece then
 * grows past max_bytes.  Returns the new number of traps (*traps
 * replaced), or -1 when out of memory (*traps unchanged). */
int ft_traps_split(struct ft_trap **traps, uint32_t n, const uint64_t *sizes, uint64_t max_bytes,
		   const uint8_t *nocut);
/* The marks for ft_traps_split from npairs pairs (i, j), i < j, of the n
 * weights that are read together (ft_disc_weight_pairs): no cut between i
 * and j when both lie in one of traps[0..ntraps).  malloc'd (n entries),
 * NULL when out of memory. */
uint8_t *ft_traps_nocut(const struct ft_trap *traps, uint32_t ntraps, uint32_t n,
			const uint32_t (*pairs)[2], uint32_t npairs);

/* Profiling timed n traps while host[t] bytes of trap t's weights were in
 * host memory (over the budget before a plan): those times include reads
 * over the bus, not compute.  Each such trap's compute becomes an estimate
 * without them: its bytes at the median time per byte of the traps of its
 * role timed with all their weights on the GPU, else its time less
 * host[t] at bus_bytes_per_ms (at least a tenth of it); never more than
 * measured.  Returns how many traps were estimated. */
uint32_t ft_traps_exclude_bus(struct ft_trap *traps, uint32_t n, const uint64_t *host,
			      double bus_bytes_per_ms);

#endif
