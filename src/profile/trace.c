/*
 * The JSON-lines trace (include/ft/trace.h).  Records are rendered by cJSON
 * into a buffer that is written when it passes 64 KiB, at flush, at exit and
 * before fork; only whole lines are ever written.
 */
#include "ft/trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_AT (64 * 1024)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int ft_trace_open(struct ft_trace *t, const char *path)
{
	char expanded[4096];
	size_t o = 0;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	/* A path that does not fit is refused, never cut: a cut path names
	 * another file (FT_TRACE of 4,086 bytes once wrote to its first 4,080). */
	for (const char *p = path; *p; p++) {
		char pid[16];
		const char *piece = p;
		size_t n = 1;
		if (p[0] == '%' && p[1] == 'p') {
			n = (size_t)snprintf(pid, sizeof(pid), "%d", (int)getpid());
			piece = pid;
			p++;
		}
		if (o + n >= sizeof(expanded))
			return -ENAMETOOLONG;
		memcpy(expanded + o, piece, n);
		o += n;
	}
	expanded[o] = 0;
	int fd = open(expanded, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	t->fd = fd;
	t->pid = (int)getpid();
	t->t0_ns = now_ns();
	return 0;
}

struct cJSON *ft_trace_begin(const char *ev)
{
	cJSON *o = cJSON_CreateObject();
	if (o)
		cJSON_AddStringToObject(o, "ev", ev);
	return o;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void flush_locked(struct ft_trace *t)
{
	if (t->len && t->fd >= 0)
		write_all(t->fd, t->buf, t->len);
	t->len = 0;
}

void ft_trace_emit(struct ft_trace *t, struct cJSON *rec)
{
	if (!rec)
		return;
	if (t->fd < 0) {
		cJSON_Delete(rec);
		return;
	}
	cJSON_AddNumberToObject(rec, "pid", t->pid);
	cJSON_AddNumberToObject(rec, "t_us", (double)((now_ns() - t->t0_ns) / 1000));
	char *line = cJSON_PrintUnformatted(rec);
	cJSON_Delete(rec);
	if (!line)
		return;
	size_t n = strlen(line);
	pthread_mutex_lock(&t->lock);
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : FLUSH_AT * 2;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *b = realloc(t->buf, cap);
		if (!b) {
			pthread_mutex_unlock(&t->lock);
			free(line);
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, line, n);
	t->buf[t->len + n] = '\n';
	t->len += n + 1;
	if (t->len >= FLUSH_AT)
		flush_locked(t);
	pthread_mutex_unlock(&t->lock);
	free(line);
}

void ft_trace_flush(struct ft_trace *t)
{
	pthread_mutex_lock(&t->lock);
	flush_locked(t);
	pthread_mutex_unlock(&t->lock);
}

void ft_trace_close(struct ft_trace *t)
{
	if (t->fd < 0)
		return;
	ft_trace_flush(t);
	close(t->fd);
	t->fd = -1;
	free(t->buf);
	t->buf = NULL;
	t->len = t->cap = 0;
}

void ft_trace_after_fork(struct ft_trace *t)
{
	t->len = 0;
	t->pid = (int)getpid();
}

void ft_trace_hex(struct cJSON *rec, const char *key, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "0x%llx", (unsigned long long)v);
	cJSON_AddStringToObject(rec, key, s);
}

void ft_trace_num(struct cJSON *rec, const char *key, double v)
{
	cJSON_AddNumberToObject(rec, key, v);
}

void ft_trace_str(struct cJSON *rec, const char *key, const char *v)
{
	cJSON_AddStringToObject(rec, key, v ? v : "");
}
