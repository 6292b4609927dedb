/* Profile refresh from serving traffic (include/ft/refresh.h). */
#include "ft/refresh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ft_refresh_init(struct ft_refresh *r, uint32_t ntraps, uint32_t need)
{
	memset(r, 0, sizeof(*r));
	if (!ntraps || !need)
		return -1;
	r->ms = calloc((size_t)ntraps * need, sizeof(*r->ms));
	if (!r->ms)
		return -1;
	r->ntraps = ntraps;
	r->need = need;
	return 0;
}

void ft_refresh_free(struct ft_refresh *r)
{
	free(r->ms);
	memset(r, 0, sizeof(*r));
}

int ft_refresh_add(struct ft_refresh *r, const float *v, uint32_t cols, uint32_t col)
{
	if (r->got >= r->need)
		return -1;
	for (uint32_t t = 0; t < r->ntraps; t++)
		if (!isfinite(v[(size_t)t * cols + col]) || v[(size_t)t * cols + col] < 0)
			return 0;
	for (uint32_t t = 0; t < r->ntraps; t++)
		r->ms[(size_t)r->got * r->ntraps + t] = v[(size_t)t * cols + col];
	return ++r->got == r->need;
}

static int by_value(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

int ft_refresh_apply(const struct ft_refresh *r, struct ft_trap *traps)
{
	if (!r->need || r->got < r->need)
		return -1;
	float *v = malloc(r->need * sizeof(*v));
	if (!v)
		return -1;
	for (uint32_t t = 0; t < r->ntraps; t++) {
		for (uint32_t k = 0; k < r->need; k++)
			v[k] = r->ms[(size_t)k * r->ntraps + t];
		qsort(v, r->need, sizeof(*v), by_value);
		traps[t].compute = (struct ft_stat_ms){ v[r->need / 2], v[0], v[r->need - 1],
							r->need };
	}
	free(v);
	return 0;
}
