/* Names and help of the counters declared in stats.def. */
#include "ft/stats.h"

#include <string.h>

static const char *const names[] = {
#define FT_STAT(name, help) #name,
#include "ft/stats.def"
#undef FT_STAT
};

static const char *const helps[] = {
#define FT_STAT(name, help) help,
#include "ft/stats.def"
#undef FT_STAT
};

const char *ft_stats_name(int id)
{
	return id >= 0 && id < FT_STAT_COUNT ? names[id] : NULL;
}

const char *ft_stats_help(int id)
{
	return id >= 0 && id < FT_STAT_COUNT ? helps[id] : NULL;
}

int ft_stats_find(const char *name)
{
	for (int i = 0; i < FT_STAT_COUNT; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

uint64_t ft_stats_read(const struct ft_stats *s, int id)
{
	return atomic_load_explicit(&s->v[id], memory_order_relaxed);
}

void ft_stats_reset(struct ft_stats *s)
{
	for (int i = 0; i < FT_STAT_COUNT; i++)
		atomic_store_explicit(&s->v[i], 0, memory_order_relaxed);
}
