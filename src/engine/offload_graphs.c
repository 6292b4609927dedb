/* Offloading inside CUDA graphs: captures get the executor's copies and
 * waits; replays (include/ft/offload.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/offload.h"
#include "ft/log.h"
#include "offload_int.h"

/* Captures record their loads in the blocks' capture events (ready_cap),
 * eager work in the eager ones: swapped as a capture begins and ends. */
static void swap_ready(struct ft_off_block *b)
{
	CUevent e = b->ready;
	b->ready = b->ready_cap;
	b->ready_cap = e;
}

int ft_off_graph_timed(struct ft_offload *o, const uint64_t *addr, unsigned n)
{
	return o->active && o->graph_timing && !o->pageable && ft_off_reads_trap(o, addr, n);
}

int ft_off_graphs_timed(struct ft_offload *o)
{
	ft_off_lock(o);
	int on = o->graph_timing;
	pthread_mutex_unlock(&o->lock);
	return on;
}

int ft_off_capture_launch(struct ft_offload *o, CUstream s, uint64_t cap, const uint64_t *addr,
			  const uint16_t *words, unsigned n, unsigned nstale,
			  struct ft_kernel *kern, const char *kernel)
{
	int trap;
	uint64_t w;
	/* a capture pages once it reads offloaded weights; when graphs are
	 * timed, from its first read of any trap (resident ones are timed).
	 * With FT_VERIFY, every later launch of a capture that pages goes to
	 * the executor: it poisons the blocks the launch does not read. */
	if (!o->active)
		return 0;
	int reads = o->graph_timing && !o->pageable ? ft_off_reads_trap(o, addr, n)
						    : ft_off_offloaded(o, addr, n, &trap, &w);
	if (!reads && !(o->gpu && o->cap_id && o->cap_id == cap))
		return 0;
	if (o->pageable) {
		/* a graph cannot copy from pageable memory */
		ft_warn_once("FT_PINNED_MEMORY=0: CUDA graphs cannot copy from a pageable host "
			     "store, so captured launches that read offloaded weights are not paged");
		return -1;
	}
	const struct ft_real *r = o->real;
	ft_off_lock(o);
	if (o->cap_id && o->cap_id != cap) {
		pthread_mutex_unlock(&o->lock);
		return -1;
	}
	if (!o->cap_id) {
		for (uint32_t k = 0; k < o->nblocks; k++) {
			struct ft_off_block *b = &o->b[k];
			o->saved[k].occupant = b->occupant;
			o->saved[k].nreaders = b->nreaders;
			memcpy(o->saved[k].readers, b->readers, sizeof(b->readers));
			memcpy(o->saved[k].reader_gen, b->reader_gen, sizeof(b->reader_gen));
			o->saved[k].gen = b->gen;
			b->occupant = -1;
			b->nreaders = 0;
			swap_ready(b);
		}
		o->saved_cur = o->cur;
		o->saved_cur_sure = o->cur_sure;
		o->saved_cur_stream = o->cur_stream;
		o->saved_last_stream = o->last_stream;
		ft_off_position_lost(o);
		o->cap_first = -1;
		/* fork: the copy stream joins the capture (where the driver
		 * refuses, the loads would run outside it: the capture is
		 * broken) */
		int forked = o->mode == FT_TM_STRATEGY ||
			     (!r->cuEventRecord(o->fork, s) &&
			      !r->cuStreamWaitEvent(o->copy, o->fork, 0));
		o->cap_id = cap;
		if (!forked) {
			FT_STAT_INC(o->stats, offload_faults);
			o->broken_cap = cap;
		}
		if (o->mode != FT_TM_STRATEGY)
			ft_off_codec_capture(o, 1, s);
		o->cap_tag = ft_off_timing_capture(o);
	}
	int tag = o->cap_tag;
	pthread_mutex_unlock(&o->lock);
	ft_off_launch(o, s, addr, words, n, nstale, kern, kernel);
	return tag;
}

void ft_off_capture_end(struct ft_offload *o, CUstream origin, uint64_t cap)
{
	if (!o->active)
		return;
	const struct ft_real *r = o->real;
	ft_off_lock(o);
	if (o->cap_id && o->cap_id == cap) {
		ft_off_timing_capture_end(o, origin);
		if (o->mode != FT_TM_STRATEGY) {
			/* join: the capture ends with the copy stream's work */
			r->cuEventRecord(o->join, o->copy);
			r->cuStreamWaitEvent(origin, o->join, 0);
			ft_off_codec_capture(o, 0, origin);
		}
		ft_off_timing_captured(o, origin);
		for (uint32_t k = 0; k < o->nblocks; k++) {
			struct ft_off_block *b = &o->b[k];
			/* FT_VERIFY: a replay leaves its blocks poisoned */
			if (o->gpu)
				ft_off_poison_captured(o, k, origin);
			/* a broken capture's loads may have run outside it (a
			 * copy stream that did not join): what the blocks hold
			 * is not known */
			b->occupant = o->broken_cap == cap ? -1 : o->saved[k].occupant;
			b->nreaders = o->saved[k].nreaders;
			memcpy(b->readers, o->saved[k].readers, sizeof(b->readers));
			memcpy(b->reader_gen, o->saved[k].reader_gen, sizeof(b->reader_gen));
			b->gen = o->saved[k].gen;
			swap_ready(b);
		}
		o->cur = o->saved_cur;
		o->cur_sure = o->saved_cur_sure;
		o->slice_epoch++; /* (FT_EXPERT_PAGING: the position is lost) */
		o->cur_stream = o->saved_cur_stream;
		o->last_stream = o->saved_last_stream;
		o->cap_id = 0;
	}
	pthread_mutex_unlock(&o->lock);
}

int ft_off_capture_broken(struct ft_offload *o, uint64_t cap)
{
	if (!o->active || !cap)
		return 0;
	ft_off_lock(o);
	int broken = o->broken_cap == cap;
	pthread_mutex_unlock(&o->lock);
	return broken;
}

void ft_off_capture_over(struct ft_offload *o)
{
	if (!o->active)
		return;
	ft_off_lock(o);
	ft_off_demote_pending(o);
	pthread_mutex_unlock(&o->lock);
}

void ft_off_replay(struct ft_offload *o, CUstream s, int after, uint32_t tag)
{
	if (!o->active)
		return;
	const struct ft_real *r = o->real;
	ft_off_lock(o);
	if (!after && o->npending) {
		/* graphs captured while traps had to come back read their
		 * own memory: they come back first */
		ft_off_demote_pending(o);
		if (o->npending)
			ft_error_once("a CUDA graph replays while another thread captures one, "
				      "before %u traps could come back to the GPU: it may read "
				      "other traps' bytes", o->npending);
	}
	ft_off_timing_replay(o, tag, after);
	o->replayed = 1; /* (the pass's reads are not all eager launches') */
	if (!after && o->mode != FT_TM_STRATEGY) {
		/* nor may they race eager copies still in flight on the copy
		 * stream (prefetches into the same blocks) */
		r->cuEventRecord(o->fork, o->copy);
		ft_off_wait(o, s, o->fork);
		ft_off_codec_replay(o, s);
	}
	for (uint32_t k = 0; k < o->nblocks; k++) {
		struct ft_off_block *b = &o->b[k];
		/* FT_VERIFY: the blocks eager launches used are checked and
		 * poisoned before the replay (after one, they are poisoned) */
		if (!after && o->gpu && b->occupant >= 0 && !ft_off_capturing(o))
			ft_off_verify_release(o, k);
		if (!after) {
			/* the replay's copies must not overwrite what eager
			 * launches on other streams still read */
			for (uint32_t i = 0; i < b->nreaders; i++)
				if (b->readers[i] != s) {
					r->cuEventRecord(b->release[i], b->readers[i]);
					ft_off_wait(o, s, b->release[i]);
				}
			continue;
		}
		/* the blocks hold what the replay left; the next load into
		 * each waits for the replay (s is its reader) */
		b->occupant = -1;
		b->readers[0] = s;
		b->nreaders = 1;
	}
	if (after)
		ft_off_position_lost(o);
	pthread_mutex_unlock(&o->lock);
}
