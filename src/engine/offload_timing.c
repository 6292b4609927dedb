/* Offload timing: events around the executor's waits and copies, read at
 * each eager pass end, and recorded into captured graphs as external event
 * nodes, read after each replay (include/ft/offload.h, include/ft/timing.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/offload.h"
#include "ft/log.h"
#include "offload_int.h"

static int make_events(const struct ft_real *r, struct ft_off_tev *e, uint32_t n)
{
	for (uint32_t t = 0; t < n; t++) {
		CUevent *ev[] = { &e[t].cs, &e[t].ce, &e[t].ws, &e[t].we,
				  &e[t].ts[0], &e[t].ts[1], &e[t].te[0], &e[t].te[1],
				  &e[t].tc[0], &e[t].tc[1] };
		for (unsigned k = 0; k < sizeof(ev) / sizeof(ev[0]); k++)
			if (r->cuEventCreate(ev[k], CU_EVENT_DEFAULT))
				return -1;
		e[t].served = -1;
	}
	return 0;
}

int ft_off_timing(struct ft_offload *o, struct ft_timing_store *st,
		  struct ft_timing_store *window, int graphs)
{
	const struct ft_real *r = o->real;
	if (!r->cuEventElapsedTime_v2 ||
	    (graphs && (!r->cuEventRecordWithFlags || !r->cuEventQuery)))
		return -1;
	ft_off_lock(o);
	if (!o->events) {
		o->etev = calloc(o->ntraps, sizeof(*o->etev));
		if (!o->etev || make_events(r, o->etev, o->ntraps)) {
			pthread_mutex_unlock(&o->lock);
			return -1;
		}
	}
	o->events = 1;
	if (st)
		o->timing = st;
	if (window)
		o->window = window;
	o->graph_timing |= graphs;
	if (st)
		o->graph_timing_kept = graphs;
	o->timed = 1;
	pthread_mutex_unlock(&o->lock);
	return 0;
}

int ft_off_on_pass(struct ft_offload *o,
		   int (*fn)(void *arg, const float *v, uint32_t ntraps, int kind), void *arg,
		   int graphs)
{
	if (!o->active || ft_off_timing(o, NULL, NULL, graphs))
		return -1;
	ft_off_lock(o);
	o->pass_done = fn;
	o->pass_arg = arg;
	pthread_mutex_unlock(&o->lock);
	return 0;
}

void ft_off_record(struct ft_offload *o, CUevent e, CUstream s)
{
	if (o->cap_id)
		o->real->cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL);
	else
		o->real->cuEventRecord(e, s);
}

/* Ends, on s, the windows still open among e[0..ntraps) (the eager
 * passes' events, or a graph's: recorded into its capture), except those of
 * the traps keep[0..nkeep) (the launch about to run reads them).  Whether
 * any trap was entered. */
static int end_open(struct ft_offload *o, struct ft_off_tev *e, CUstream s, const int *keep,
		    int nkeep)
{
	int any = 0;
	for (uint32_t t = 0; t < o->ntraps; t++, e++) {
		int kept = 0;
		for (int k = 0; k < nkeep; k++)
			kept |= keep[k] == (int)t;
		if (e->entered && !e->ended && !kept) {
			if (e == &o->etev[t])
				o->real->cuEventRecord(e->ce, s);
			else
				ft_off_record(o, e->ce, s);
			e->ended = 1;
		}
		any |= e->entered;
	}
	return any;
}

/* e[0..n) ready for the next pass. */
static void clear(struct ft_off_tev *e, uint32_t n)
{
	for (uint32_t t = 0; t < n; t++) {
		e[t].entered = e[t].waited = e[t].ended = 0;
		e[t].served = -1;
	}
}

static float elapsed(const struct ft_real *r, CUevent a, CUevent b)
{
	float ms;
	return r->cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS ? ms : NAN;
}

/* One pass's values from events e[0..ntraps) (all complete). */
static void read_pass(struct ft_offload *o, const struct ft_off_tev *e, float *v)
{
	const struct ft_real *r = o->real;
	for (uint32_t t = 0; t < o->ntraps; t++, e++) {
		float *x = v + (size_t)t * FT_T_COLS;
		x[FT_T_COMPUTE] = x[FT_T_TRANSFER] = x[FT_T_WAIT] = x[FT_T_DECODE] = NAN;
		if (e->entered && e->ended) {
			x[FT_T_COMPUTE] = elapsed(r, e->waited ? e->we : e->cs, e->ce);
			if (e->waited)
				x[FT_T_WAIT] = elapsed(r, e->ws, e->we);
			int k = e->served;
			if (k >= 0 && e->coded[k]) {
				x[FT_T_TRANSFER] = elapsed(r, e->ts[k], e->tc[k]);
				x[FT_T_DECODE] = elapsed(r, e->tc[k], e->te[k]);
			} else if (k >= 0) {
				x[FT_T_TRANSFER] = elapsed(r, e->ts[k], e->te[k]);
			}
		}
	}
}

/* A pass measured: into the stores, to the observer; every
 * FT_TIMING_LOG_EVERY passes the window is logged as a table. */
static void publish(struct ft_offload *o, const float *v, int kind)
{
	if (o->timing)
		ft_timing_add(o->timing, v);
	if (o->window)
		ft_timing_add(o->window, v);
	if (o->pass_done && o->pass_done(o->pass_arg, v, o->ntraps, kind)) {
		o->pass_done = NULL;
		o->timed = o->timing != NULL;
		/* graphs timed for the observer only are timed no more: their
		 * substitutes are rebuilt without events (ft_off_graphs_timed) */
		o->graph_timing = o->graph_timing_kept;
	}
	if (!o->window || o->window->count < FT_TIMING_LOG_EVERY)
		return;
	struct ft_timing_report rep;
	if (ft_timing_report(o->window, 1, &rep))
		return;
	size_t n = ft_timing_format(&rep, NULL, 0) + 1;
	char *text = malloc(n);
	if (text) {
		ft_timing_format(&rep, text, n);
		ft_info("offload timing, the last %u passes:", rep.passes);
		char *save = NULL;
		for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			ft_info("%s", line);
		free(text);
	}
	ft_timing_report_free(&rep);
}

/* An eager pass ended (the launches went back to an earlier trap): its
 * events are read once the device is idle. */
static void timing_pass(struct ft_offload *o)
{
	float *v = malloc((size_t)o->ntraps * FT_T_COLS * sizeof(*v) + 1);
	if (!v)
		return;
	o->real->cuCtxSynchronize();
	read_pass(o, o->etev, v);
	clear(o->etev, o->ntraps);
	publish(o, v, FT_PASS_EAGER);
	free(v);
}

/* The latest replay of timed graph g, if not read yet: published when it
 * is done (wait: waiting for it), else dropped.  1 when published. */
static int graph_read(struct ft_offload *o, struct ft_off_gtime *g, int wait)
{
	const struct ft_real *r = o->real;
	if (!g->pending)
		return 0;
	g->pending = 0;
	if (wait)
		r->cuEventSynchronize(g->done);
	if (r->cuEventQuery(g->done) != CUDA_SUCCESS) {
		FT_STAT_INC(o->stats, timing_dropped);
		return 0;
	}
	float *v = malloc((size_t)o->ntraps * FT_T_COLS * sizeof(*v) + 1);
	if (!v)
		return 0;
	read_pass(o, g->tev, v);
	publish(o, v, FT_PASS_GRAPH);
	free(v);
	FT_STAT_INC(o->stats, timed_replays);
	return 1;
}

static int update(struct ft_offload *o)
{
	int n = 0;
	for (uint32_t i = 0; i < o->ngt; i++)
		n += graph_read(o, &o->gt[i], 1);
	return n;
}

int ft_off_timing_update(struct ft_offload *o)
{
	if (!o->active || !o->graph_timing)
		return -1;
	ft_off_lock(o);
	int n = update(o);
	pthread_mutex_unlock(&o->lock);
	return n;
}

void ft_off_timing_reset(struct ft_offload *o)
{
	if (!o->active || !o->events)
		return;
	ft_off_lock(o);
	clear(o->etev, o->ntraps);
	for (uint32_t i = 0; i < o->ngt; i++)
		o->gt[i].pending = 0;
	pthread_mutex_unlock(&o->lock);
}

/* The eager pass in progress ends here (its open traps end on the
 * stream of the latest launch). */
static void end_eager(struct ft_offload *o)
{
	if (end_open(o, o->etev, o->last_stream, NULL, 0))
		timing_pass(o);
}

void ft_off_timing_flush(struct ft_offload *o)
{
	if (!o->active || !o->timed)
		return;
	ft_off_lock(o);
	end_eager(o);
	ft_off_position_lost(o); /* the next launch begins a pass */
	update(o);
	pthread_mutex_unlock(&o->lock);
}

int ft_off_timing_capture(struct ft_offload *o)
{
	o->gcur = -1;
	if (!o->graph_timing)
		return 1;
	if (o->ngt == FT_OFF_TIMED_GRAPHS) {
		/* a program that captures graphs again and again would make
		 * events without end */
		ft_info_once("more than %d CUDA graphs captured: the later ones are paged "
			     "but not timed", FT_OFF_TIMED_GRAPHS);
		return 1;
	}
	struct ft_off_gtime *gt = realloc(o->gt, (o->ngt + 1) * sizeof(*gt));
	if (!gt)
		return 1;
	o->gt = gt;
	struct ft_off_gtime *g = &gt[o->ngt];
	memset(g, 0, sizeof(*g));
	g->tev = calloc(o->ntraps, sizeof(*g->tev));
	if (!g->tev || make_events(o->real, g->tev, o->ntraps) ||
	    o->real->cuEventCreate(&g->done, CU_EVENT_DEFAULT)) {
		free(g->tev); /* (events made so far are not worth tracking) */
		ft_warn_once("cannot make timing events for a captured graph: its replays "
			     "are not timed");
		return 1;
	}
	o->gcur = (int)o->ngt++;
	return 2 + o->gcur;
}

void ft_off_timing_capture_end(struct ft_offload *o, CUstream origin)
{
	if (o->gcur >= 0)
		end_open(o, o->gt[o->gcur].tev, o->last_stream ? o->last_stream : origin, NULL, 0);
}

void ft_off_timing_captured(struct ft_offload *o, CUstream origin)
{
	if (o->gcur < 0)
		return;
	ft_off_record(o, o->gt[o->gcur].done, origin);
	o->gcur = -1;
}

void ft_off_timing_replay(struct ft_offload *o, uint32_t tag, int after)
{
	if (!after && o->timed)
		end_eager(o); /* a replay ends the eager pass before it */
	if (tag < 2 || tag - 2 >= o->ngt)
		return;
	struct ft_off_gtime *g = &o->gt[tag - 2];
	if (after)
		g->pending = 1;
	else
		graph_read(o, g, 0);
}

/* Timing around the launch about to run on stream s: the traps it reads
 * for the first time this pass (touched[0..nt), cur the latest) begin
 * their windows; the one the launches leave ends its window.  An eager
 * pass ends when the launches go back to an earlier trap. */
void ft_off_timing_before(struct ft_offload *o, CUstream s, const int *touched, int nt, int cur)
{
	if (cur == o->cur)
		return;
	end_open(o, ft_off_tev(o, 0), o->last_stream ? o->last_stream : s, touched, nt);
	if (!o->cap_id && o->cur >= 0 && cur < o->cur)
		timing_pass(o);
}
