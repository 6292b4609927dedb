/* What the offloading files share beyond include/ft/engine.h. */
#ifndef FT_OFFLOAD_INT_H
#define FT_OFFLOAD_INT_H

#include <stdatomic.h>

#include "ft/engine.h"

/* Synchronising calls would invalidate a capture in progress (any
 * thread's, in global mode): the steps that need one wait for none. */
static inline int ft_off_capturing(const struct ft_offload *o)
{
	return o->cap_id || (o->captures && atomic_load(o->captures) > 0);
}

/* Weights back on the GPU (offload_back.c).  Trap t leaves its block for
 * good: its chunks get memory of their own, filled from the host store
 * (the device is idle first).  A reference a inside weight k's extent,
 * past its start, in chunks that left the GPU: 1 (a tensor placed in the
 * extent's tail, perhaps).  Whether any byte of weight k left the GPU.
 * The tail of weight k from a's chunk on comes back to the GPU and the
 * weight ends at a. */
void ft_off_demote(struct ft_offload *o, int t, const char *why);
int ft_off_foreign(const struct ft_offload *o, uint64_t a, int k);
int ft_off_weight_offloaded(const struct ft_offload *o, int k);
void ft_off_return_tail(struct ft_offload *o, int t, int k, uint64_t a);

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

#endif
