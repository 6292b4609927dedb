/*
 * Counters (include/ft/stats.def).  Relaxed atomics: they are statistics, not
 * synchronisation.  Safe inside hooks.
 */
#ifndef FT_STATS_H
#define FT_STATS_H

#include <stdatomic.h>
#include <stdint.h>

enum ft_stat_id {
#define FT_STAT(name, help) FT_STAT_##name,
#include "ft/stats.def"
#undef FT_STAT
	FT_STAT_COUNT
};

struct ft_stats {
	_Atomic uint64_t v[FT_STAT_COUNT];
};

#define FT_STAT_ADD(s, name, n) \
	atomic_fetch_add_explicit(&(s)->v[FT_STAT_##name], (n), memory_order_relaxed)
#define FT_STAT_INC(s, name) FT_STAT_ADD(s, name, 1)

const char *ft_stats_name(int id);
const char *ft_stats_help(int id);
/* Index of a counter by name, or -1. */
int ft_stats_find(const char *name);
uint64_t ft_stats_read(const struct ft_stats *s, int id);
void ft_stats_reset(struct ft_stats *s);

#endif
