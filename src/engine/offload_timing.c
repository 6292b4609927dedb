/* Offload timing: events around the executor's waits and copies, read at
 * each pass end (include/ft/engine.h, include/ft/timing.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/engine.h"
#include "ft/log.h"
#include "offload_int.h"

int ft_off_timing(struct ft_offload *o, struct ft_timing_store *st,
		  struct ft_timing_store *window)
{
	const struct ft_real *r = o->real;
	if (!r->cuEventElapsedTime_v2)
		return -1;
	for (uint32_t t = 0; !o->events && t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		CUevent *ev[] = { &e->cs, &e->ce, &e->ws, &e->we,
				  &e->ts[0], &e->ts[1], &e->te[0], &e->te[1] };
		for (unsigned k = 0; k < sizeof(ev) / sizeof(ev[0]); k++)
			if (r->cuEventCreate(ev[k], CU_EVENT_DEFAULT))
				return -1;
		e->served = -1;
	}
	pthread_mutex_lock(&o->lock);
	o->events = 1;
	if (st)
		o->timing = st;
	if (window)
		o->window = window;
	o->timed = 1;
	pthread_mutex_unlock(&o->lock);
	return 0;
}

int ft_off_on_pass(struct ft_offload *o, int (*fn)(void *arg, const float *v, uint32_t ntraps),
		   void *arg)
{
	if (!o->active || ft_off_timing(o, NULL, NULL))
		return -1;
	pthread_mutex_lock(&o->lock);
	o->pass_done = fn;
	o->pass_arg = arg;
	pthread_mutex_unlock(&o->lock);
	return 0;
}

static float elapsed(const struct ft_real *r, CUevent a, CUevent b)
{
	float ms;
	return r->cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS ? ms : NAN;
}

/* A pass ended (the launches went back to an earlier trap): its events are
 * read (after the device is idle) into the store; every
 * FT_TIMING_LOG_EVERY passes the window is logged as a table. */
static void timing_pass(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	float *v = malloc((size_t)o->ntraps * FT_T_COLS * sizeof(*v) + 1);
	if (!v)
		return;
	r->cuCtxSynchronize();
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		float *x = v + (size_t)t * FT_T_COLS;
		x[FT_T_COMPUTE] = x[FT_T_TRANSFER] = x[FT_T_WAIT] = NAN;
		if (e->entered && e->ended) {
			x[FT_T_COMPUTE] = elapsed(r, e->waited ? e->we : e->cs, e->ce);
			if (e->waited)
				x[FT_T_WAIT] = elapsed(r, e->ws, e->we);
			if (e->served >= 0)
				x[FT_T_TRANSFER] = elapsed(r, e->ts[e->served], e->te[e->served]);
		}
		e->entered = e->waited = e->ended = 0;
		e->served = -1;
	}
	if (o->timing)
		ft_timing_add(o->timing, v);
	if (o->window)
		ft_timing_add(o->window, v);
	if (o->pass_done && o->pass_done(o->pass_arg, v, o->ntraps)) {
		o->pass_done = NULL;
		o->timed = o->timing != NULL;
	}
	free(v);
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

void ft_off_timing_flush(struct ft_offload *o)
{
	if (!o->active || !o->timed)
		return;
	pthread_mutex_lock(&o->lock);
	int any = 0;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		if (e->entered && !e->ended) {
			o->real->cuEventRecord(e->ce, o->last_stream);
			e->ended = 1;
		}
		any |= e->entered;
	}
	if (any)
		timing_pass(o);
	o->cur = -1; /* the next launch begins a pass */
	pthread_mutex_unlock(&o->lock);
}

/* Timing around the launch about to run on stream s: the traps it reads
 * for the first time this pass (touched[0..nt), cur the latest) begin
 * their windows; the one the launches leave ends its window. */
void ft_off_timing_before(struct ft_offload *o, CUstream s, const int *touched, int nt, int cur)
{
	const struct ft_real *r = o->real;
	if (cur == o->cur)
		return;
	for (uint32_t t = 0; t < o->ntraps; t++) {
		struct ft_off_tev *e = &o->t[t].tev;
		int now = 0;
		for (int k = 0; k < nt; k++)
			now |= touched[k] == (int)t;
		if (e->entered && !e->ended && !now) {
			r->cuEventRecord(e->ce, o->last_stream ? o->last_stream : s);
			e->ended = 1;
		}
	}
	if (o->cur >= 0 && cur < o->cur)
		timing_pass(o);
}
