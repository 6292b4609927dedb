/*
 * Logging: levels, one write(2) per message, no malloc, safe inside hooks.
 * The level check happens before any argument is evaluated, so a disabled
 * message costs one load and one compare.  Prefix: "flextensor[pid]: warn: ".
 */
#ifndef FT_LOG_H
#define FT_LOG_H

#include <stdatomic.h>

enum ft_log_level {
	FT_LOG_ERROR = 0,
	FT_LOG_WARN,
	FT_LOG_INFO,
	FT_LOG_DEBUG,
	FT_LOG_TRACE,
};

extern int ft_log_level;

/* Sets level and destination (path NULL or "" = stderr).  Returns 0 or -errno
 * (the file could not be opened; logging stays on stderr). */
int ft_log_configure(int level, const char *path);
void ft_log_write(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *ft_log_level_name(int level);

#define FT_LOG(lvl, ...)                                                      \
	do {                                                                  \
		if ((lvl) <= ft_log_level)                                    \
			ft_log_write((lvl), __VA_ARGS__);                     \
	} while (0)

/* Logs at most once per call site (hot paths). */
#define FT_LOG_ONCE(lvl, ...)                                                 \
	do {                                                                  \
		static atomic_flag ft_once_ = ATOMIC_FLAG_INIT;               \
		if ((lvl) <= ft_log_level &&                                  \
		    !atomic_flag_test_and_set_explicit(&ft_once_,             \
						       memory_order_relaxed)) \
			ft_log_write((lvl), __VA_ARGS__);                     \
	} while (0)

#define ft_error(...) FT_LOG(FT_LOG_ERROR, __VA_ARGS__)
#define ft_warn(...)  FT_LOG(FT_LOG_WARN, __VA_ARGS__)
#define ft_info(...)  FT_LOG(FT_LOG_INFO, __VA_ARGS__)
#define ft_debug(...) FT_LOG(FT_LOG_DEBUG, __VA_ARGS__)
#define ft_error_once(...) FT_LOG_ONCE(FT_LOG_ERROR, __VA_ARGS__)
#define ft_warn_once(...) FT_LOG_ONCE(FT_LOG_WARN, __VA_ARGS__)
#define ft_info_once(...) FT_LOG_ONCE(FT_LOG_INFO, __VA_ARGS__)
#define ft_debug_once(...) FT_LOG_ONCE(FT_LOG_DEBUG, __VA_ARGS__)

#endif
