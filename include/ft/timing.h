/*
 * Offload timing (FT_OFFLOAD_TIMING, upstream section 8): per trap and pass
 * the compute time (the trap's own work on the launch stream), the transfer
 * time (its copy on the copy stream) and the wait (the launch stream stalled
 * for that copy), in milliseconds; NAN when not recorded in that pass.
 * Passes go to a durable ring of FT_TIMING_PASSES (oldest dropped); reports
 * aggregate them per trap.  Pure C on plain data: the executor measures
 * (offload.c), this stores, aggregates and formats.
 */
#ifndef FT_TIMING_H
#define FT_TIMING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ft/profile.h" /* FT_LABEL_MAX */

#define FT_TIMING_PASSES 1024
#define FT_TIMING_LOG_EVERY 10

/* FT_T_DECODE: a coded trap's (FT_TRANSFER_COMPRESSION) decode tail, from
 * the end of its copy to the end of its decode (its Transfer is then the
 * copy alone); NAN for raw stores. */
enum { FT_T_COMPUTE, FT_T_TRANSFER, FT_T_WAIT, FT_T_DECODE, FT_T_COLS };

struct ft_timing_store {
	pthread_mutex_t lock;
	uint32_t ntraps;
	char (*labels)[FT_LABEL_MAX];
	float *v;                 /* [slot][trap][col] */
	uint32_t head, count;     /* ring: count passes, the newest at head - 1 */
	uint64_t total;           /* passes ever added */
};

struct ft_timing_stat {
	double min, max, mean, median, std;
	uint32_t n;
};

struct ft_timing_report {
	uint32_t ntraps, passes;
	char (*labels)[FT_LABEL_MAX];
	struct ft_timing_stat *s;  /* [trap][col] */
	double per_pass[FT_T_COLS]; /* sums of the per-trap means */
	double sum[FT_T_COLS];      /* over every pass */
};

int ft_timing_init(struct ft_timing_store *st, uint32_t ntraps, const char (*labels)[FT_LABEL_MAX]);
void ft_timing_free(struct ft_timing_store *st);
/* One pass: v[trap * FT_T_COLS + col]. */
void ft_timing_add(struct ft_timing_store *st, const float *v);
void ft_timing_reset(struct ft_timing_store *st);
/* Aggregates what is stored (0, or -1 when empty); drain: empties the store. */
int ft_timing_report(struct ft_timing_store *st, int drain, struct ft_timing_report *r);
void ft_timing_report_free(struct ft_timing_report *r);
/* Upstream's table: title, Trap | Compute avg | med | ±std | [min | max] |
 * Transfer avg | med | Wait avg | med, then Decode avg | med when a trap
 * has a decode time, a `←` where the mean wait exceeds 0.01 ms, rows
 * Avg/pass and Sum (all).  Returns the length it needed. */
size_t ft_timing_format(const struct ft_timing_report *r, char *buf, size_t len);

#endif
