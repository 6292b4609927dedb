/*
 * Logging back end.  Each message is formatted into a stack buffer and
 * written with a single write(2), so lines from several threads or processes
 * never interleave and nothing allocates.  A thread-local guard drops a
 * message logged from inside the logger (e.g. from a hook reached by
 * vsnprintf's locale code) instead of recursing.
 */
#include "ft/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ft_log_level = FT_LOG_WARN;
static int log_fd = 2;
static __thread int in_log;

static const char *const level_names[] = {
	[FT_LOG_ERROR] = "error", [FT_LOG_WARN] = "warn",
	[FT_LOG_INFO] = "info",   [FT_LOG_DEBUG] = "debug",
	[FT_LOG_TRACE] = "trace",
};

const char *ft_log_level_name(int level)
{
	if (level < FT_LOG_ERROR || level > FT_LOG_TRACE)
		return "?";
	return level_names[level];
}

int ft_log_configure(int level, const char *path)
{
	ft_log_level = level;
	if (!path || !*path)
		return 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (log_fd > 2)
		close(log_fd);
	log_fd = fd;
	return 0;
}

void ft_log_write(int level, const char *fmt, ...)
{
	char buf[1024];
	int saved_errno = errno;

	if (in_log)
		return;
	in_log = 1;
	int n = snprintf(buf, sizeof(buf), "flextensor[%d]: %s: ", (int)getpid(),
			 ft_log_level_name(level));
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	ssize_t w = write(log_fd, buf, len);
	(void)w;
	in_log = 0;
	errno = saved_errno;
}
