/*
 * FT_TRACE: a JSON-lines record of what the library observed, one object per
 * line, written with cJSON.  Every record has "ev" (its kind), "pid" and
 * "t_us" (microseconds since the trace was opened).  Pointers and handles are
 * hex strings (JSON numbers lose 64-bit precision); allocation ids are
 * numbers.  Records are buffered and written as whole lines, so several
 * processes may append to one file.  Thread-safe.
 */
#ifndef FT_TRACE_H
#define FT_TRACE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;

struct ft_trace {
	int fd;              /* -1 = off */
	pthread_mutex_t lock;
	char *buf;
	size_t len, cap;
	uint64_t t0_ns;
	int pid;
};

/* Opens (appends to) path; "%p" in it becomes the pid.  0 or -errno
 * (-ENAMETOOLONG when the expanded path would not fit PATH_MAX). */
int ft_trace_open(struct ft_trace *t, const char *path);
static inline int ft_trace_on(const struct ft_trace *t) { return t->fd >= 0; }
/* Starts a record of kind ev (caller adds fields, then calls emit). */
struct cJSON *ft_trace_begin(const char *ev);
/* Appends the record as one line and frees it. */
void ft_trace_emit(struct ft_trace *t, struct cJSON *rec);
void ft_trace_flush(struct ft_trace *t);
void ft_trace_close(struct ft_trace *t);
/* After fork in the child: drop what the parent had buffered, new pid. */
void ft_trace_after_fork(struct ft_trace *t);

/* Field helpers. */
void ft_trace_hex(struct cJSON *rec, const char *key, uint64_t v);
void ft_trace_num(struct cJSON *rec, const char *key, double v);
void ft_trace_str(struct cJSON *rec, const char *key, const char *v);

#endif
