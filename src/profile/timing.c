/* Offload timing store, report and table (include/ft/timing.h). */
#include "ft/timing.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ft_timing_init(struct ft_timing_store *st, uint32_t ntraps, const char (*labels)[FT_LABEL_MAX])
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
	st->ntraps = ntraps;
	st->labels = calloc(ntraps + 1, sizeof(*st->labels));
	st->v = malloc((size_t)FT_TIMING_PASSES * ntraps * FT_T_COLS * sizeof(*st->v) + 1);
	if (!st->labels || !st->v) {
		ft_timing_free(st);
		return -1;
	}
	memcpy(st->labels, labels, ntraps * sizeof(*st->labels));
	return 0;
}

void ft_timing_free(struct ft_timing_store *st)
{
	free(st->labels);
	free(st->v);
	st->labels = NULL;
	st->v = NULL;
	st->ntraps = 0;
}

void ft_timing_add(struct ft_timing_store *st, const float *v)
{
	size_t row = (size_t)st->ntraps * FT_T_COLS;
	pthread_mutex_lock(&st->lock);
	memcpy(st->v + (size_t)st->head * row, v, row * sizeof(*v));
	st->head = (st->head + 1) % FT_TIMING_PASSES;
	if (st->count < FT_TIMING_PASSES)
		st->count++;
	st->total++;
	pthread_mutex_unlock(&st->lock);
}

void ft_timing_reset(struct ft_timing_store *st)
{
	pthread_mutex_lock(&st->lock);
	st->head = st->count = 0;
	pthread_mutex_unlock(&st->lock);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int ft_timing_report(struct ft_timing_store *st, int drain, struct ft_timing_report *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&st->lock);
	uint32_t n = st->count, nt = st->ntraps;
	if (!n || !nt) {
		pthread_mutex_unlock(&st->lock);
		return -1;
	}
	r->ntraps = nt;
	r->passes = n;
	r->labels = calloc(nt, sizeof(*r->labels));
	r->s = calloc((size_t)nt * FT_T_COLS, sizeof(*r->s));
	double *x = malloc(n * sizeof(*x));
	if (!r->labels || !r->s || !x) {
		pthread_mutex_unlock(&st->lock);
		free(x);
		ft_timing_report_free(r);
		return -1;
	}
	memcpy(r->labels, st->labels, nt * sizeof(*r->labels));
	size_t row = (size_t)nt * FT_T_COLS;
	uint32_t first = (st->head + FT_TIMING_PASSES - n) % FT_TIMING_PASSES;
	for (uint32_t t = 0; t < nt; t++)
		for (int c = 0; c < FT_T_COLS; c++) {
			uint32_t k = 0;
			double sum = 0;
			for (uint32_t p = 0; p < n; p++) {
				float v = st->v[(size_t)((first + p) % FT_TIMING_PASSES) * row +
						(size_t)t * FT_T_COLS + (size_t)c];
				if (!isnan(v)) {
					x[k++] = v;
					sum += v;
				}
			}
			struct ft_timing_stat *s = &r->s[(size_t)t * FT_T_COLS + (size_t)c];
			s->n = k;
			if (!k)
				continue;
			qsort(x, k, sizeof(*x), cmp_double);
			s->min = x[0];
			s->max = x[k - 1];
			s->mean = sum / k;
			s->median = k % 2 ? x[k / 2] : (x[k / 2 - 1] + x[k / 2]) / 2;
			double ss = 0;
			for (uint32_t i = 0; i < k; i++)
				ss += (x[i] - s->mean) * (x[i] - s->mean);
			s->std = k > 1 ? sqrt(ss / (k - 1)) : 0;
			r->per_pass[c] += s->mean;
			r->sum[c] += sum;
		}
	if (drain)
		st->head = st->count = 0;
	pthread_mutex_unlock(&st->lock);
	free(x);
	return 0;
}

void ft_timing_report_free(struct ft_timing_report *r)
{
	free(r->labels);
	free(r->s);
	memset(r, 0, sizeof(*r));
}

struct out {
	char *buf;
	size_t len, used;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->used < o->len ? o->buf + o->used : NULL,
			  o->used < o->len ? o->len - o->used : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->used += (size_t)n;
}

size_t ft_timing_format(const struct ft_timing_report *r, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	if (buf && len)
		buf[0] = 0;
	/* the Trap column as wide as its longest label (module paths) */
	int w = 10;
	for (uint32_t t = 0; t < r->ntraps; t++)
		if ((int)strlen(r->labels[t]) > w)
			w = (int)strlen(r->labels[t]);
	/* the decode columns only where a store is coded */
	int dec = 0;
	for (uint32_t t = 0; t < r->ntraps; t++)
		dec |= r->s[(size_t)t * FT_T_COLS + FT_T_DECODE].n > 0;
	put(&o, "Offload Timing (%u passes)\n", r->passes);
	put(&o, "%-*s | %8s | %8s | %7s | %8s | %8s | %8s | %8s | %8s | %8s", w, "Trap",
	    "Compute", "med", "+-std", "min", "max", "Transfer", "med", "Wait", "med");
	put(&o, dec ? " | %8s | %8s\n" : "\n", "Decode", "med");
	for (uint32_t t = 0; t < r->ntraps; t++) {
		const struct ft_timing_stat *c = &r->s[(size_t)t * FT_T_COLS + FT_T_COMPUTE];
		const struct ft_timing_stat *x = &r->s[(size_t)t * FT_T_COLS + FT_T_TRANSFER];
		const struct ft_timing_stat *wt = &r->s[(size_t)t * FT_T_COLS + FT_T_WAIT];
		const struct ft_timing_stat *d = &r->s[(size_t)t * FT_T_COLS + FT_T_DECODE];
		put(&o, "%-*s | %8.3f | %8.3f | %7.3f | %8.3f | %8.3f | ", w, r->labels[t], c->mean,
		    c->median, c->std, c->min, c->max);
		if (x->n)
			put(&o, "%8.3f | %8.3f | ", x->mean, x->median);
		else
			put(&o, "%8s | %8s | ", "-", "-");
		if (wt->n)
			put(&o, "%8.3f | %8.3f", wt->mean, wt->median);
		else
			put(&o, "%8s | %8s", "-", "-");
		if (dec && d->n)
			put(&o, " | %8.3f | %8.3f", d->mean, d->median);
		else if (dec)
			put(&o, " | %8s | %8s", "-", "-");
		put(&o, "%s\n", wt->n && wt->mean > 0.01 ? " \u2190" : "");
	}
	const char *rows[] = { "Avg/pass", "Sum (all)" };
	for (int k = 0; k < 2; k++) {
		const double *v = k ? r->sum : r->per_pass;
		put(&o, "%-*s | %8.3f | %8s | %7s | %8s | %8s | %8.3f | %8s | %8.3f |", w, rows[k],
		    v[FT_T_COMPUTE], "", "", "", "", v[FT_T_TRANSFER], "", v[FT_T_WAIT]);
		if (dec) /* under Decode, past Wait's median */
			put(&o, " %8s | %8.3f |", "", v[FT_T_DECODE]);
		put(&o, "\n");
	}
	return o.used;
}
