/* Pairs read together (include/ft/profile.h): sorted sets of pairs. */
#include <stdlib.h>
#include <string.h>

#include "ft/profile.h"

static int cmp(const uint32_t *x, uint32_t a, uint32_t b)
{
	return x[0] != a ? (x[0] < a ? -1 : 1) : (x[1] < b ? -1 : x[1] > b);
}

/* The first of v[0..n) not before (a, b). */
static uint32_t lower(const uint32_t (*v)[2], uint32_t n, uint32_t a, uint32_t b)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (cmp(v[mid], a, b) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ft_coread_has(const struct ft_profile *p, uint32_t a, uint32_t b)
{
	if (a > b) {
		uint32_t x = a;
		a = b;
		b = x;
	}
	uint32_t i = lower((const uint32_t (*)[2])p->coread, p->ncoread, a, b);
	return i < p->ncoread && !cmp(p->coread[i], a, b);
}

int ft_pairs_add(uint32_t (**v)[2], uint32_t *n, uint32_t a, uint32_t b)
{
	if (a == b)
		return 0;
	if (a > b) {
		uint32_t x = a;
		a = b;
		b = x;
	}
	uint32_t i = lower((const uint32_t (*)[2])*v, *n, a, b);
	if (i < *n && !cmp((*v)[i], a, b))
		return 0;
	if (!(*n & (*n + 1)) || !*v) {
		/* capacity: the next power of two minus one, grown when full */
		uint32_t cap = *n ? 2 * (*n + 1) : 16;
		uint32_t (*g)[2] = realloc(*v, cap * sizeof(*g));
		if (!g)
			return -1;
		*v = g;
	}
	memmove(&(*v)[i + 1], &(*v)[i], (*n - i) * sizeof(**v));
	(*v)[i][0] = a;
	(*v)[i][1] = b;
	(*n)++;
	return 1;
}

int ft_coread_add(struct ft_profile *p, uint32_t a, uint32_t b)
{
	return ft_pairs_add(&p->coread, &p->ncoread, a, b);
}

int ft_coread_from_weights(struct ft_profile *p, const uint32_t (*pairs)[2], uint32_t n)
{
	uint32_t *trap = malloc((p->nweights + 1) * sizeof(*trap));
	if (!trap)
		return -1;
	for (uint32_t t = 0; t < p->ntraps; t++)
		for (uint32_t k = 0; k < p->traps[t].nweights; k++)
			trap[p->traps[t].first_weight + k] = t;
	int rc = 0;
	for (uint32_t k = 0; k < n && rc >= 0; k++)
		if (pairs[k][0] < p->nweights && pairs[k][1] < p->nweights)
			rc = ft_coread_add(p, trap[pairs[k][0]], trap[pairs[k][1]]);
	free(trap);
	return rc < 0 ? -1 : 0;
}
