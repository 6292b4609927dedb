/*
 * Traps from the names the framework declared (include/ft/traps.h): a
 * weight's module key is its name up to its first number ("model.layers.7"
 * of "model.layers.7.mlp.up_proj.weight": a layer), or its module
 * ("lm_head" of "lm_head.weight").  Pure C, CPU-tested.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/traps.h"

int ft_traps_key(const char *name, char *out, size_t n)
{
	out[0] = 0;
	if (!name)
		return 0;
	const char *seg = name, *last_dot = NULL;
	for (const char *p = name;; p++) {
		if (*p != '.' && *p)
			continue;
		size_t len = (size_t)(p - seg);
		if (len && strspn(seg, "0123456789") >= len) {
			snprintf(out, n, "%.*s", (int)(p - name), name);
			return 1;
		}
		if (!*p)
			break;
		last_dot = p;
		seg = p + 1;
	}
	snprintf(out, n, "%.*s", (int)(last_dot ? last_dot - name : (long)strlen(name)), name);
	return 0;
}

int ft_traps_by_name(const char *const *names, const uint64_t *sizes, uint32_t n,
		     struct ft_trap **out)
{
	*out = NULL;
	char (*key)[256] = malloc((n + 1) * sizeof(*key));
	uint8_t *layer = malloc(n + 1);
	struct ft_trap *t = calloc(n + 1, sizeof(*t));
	if (!key || !layer || !t) {
		free(key);
		free(layer);
		free(t);
		return -1;
	}
	uint32_t k = 0, layers = 0, first_layer = UINT32_MAX, last_layer = 0;
	for (uint32_t w = 0; w < n; w++) {
		layer[w] = (uint8_t)ft_traps_key(names[w], key[w], sizeof(key[w]));
		if (w && !strcmp(key[w], key[w - 1])) {
			t[k - 1].nweights++;
			t[k - 1].bytes += sizes[w];
			continue;
		}
		t[k] = (struct ft_trap){ .first_weight = w, .nweights = 1, .bytes = sizes[w] };
		if (layer[w]) {
			layers++;
			if (first_layer == UINT32_MAX)
				first_layer = k;
			last_layer = k;
		}
		k++;
	}
	free(key);
	if (layers < 2) { /* no stack of layers: the sizes say more */
		free(layer);
		free(t);
		return 0;
	}
	for (uint32_t i = 0; i < k; i++) {
		const char *role = layer[t[i].first_weight] ? "layer" : i < first_layer ? "embedding"
								    : i > last_layer    ? "head"
											: "other";
		snprintf(t[i].role, sizeof(t[i].role), "%s", role);
		snprintf(t[i].label, sizeof(t[i].label), "trap.%u", i);
	}
	free(layer);
	*out = t;
	return (int)k;
}

/* s into out (FT_LABEL_MAX), its tail after "..." when it is longer. */
static void fit(char *out, const char *s)
{
	size_t len = strlen(s);
	if (len < FT_LABEL_MAX)
		snprintf(out, FT_LABEL_MAX, "%s", s);
	else
		snprintf(out, FT_LABEL_MAX, "...%s", s + len - (FT_LABEL_MAX - 4));
}

void ft_traps_label_by_name(struct ft_trap *traps, uint32_t n, const char *const *names)
{
	char a[256], b[256], both[520];
	char **base = calloc(n + 1, sizeof(*base)); /* each trap's whole label, unnumbered */
	for (uint32_t i = 0; i < n; i++) {
		struct ft_trap *t = &traps[i];
		if (!t->nweights)
			continue;
		ft_traps_key(names[t->first_weight], a, sizeof(a));
		ft_traps_key(names[t->first_weight + t->nweights - 1], b, sizeof(b));
		if (!a[0])
			continue; /* not named: keeps "trap.<i>" */
		if (strcmp(a, b) && b[0])
			snprintf(both, sizeof(both), "%s..%s", a, b);
		else
			snprintf(both, sizeof(both), "%s", a);
		/* one label per trap: a module in two traps (a layer cut for
		 * the budget, a module read twice apart) gets #2, #3, ... */
		unsigned seen = 1;
		for (uint32_t j = 0; base && j < i; j++)
			seen += base[j] && !strcmp(base[j], both);
		if (base)
			base[i] = strdup(both);
		if (seen > 1) {
			char sfx[16], tmp[FT_LABEL_MAX];
			snprintf(sfx, sizeof(sfx), "#%u", seen);
			size_t room = FT_LABEL_MAX - 1 - strlen(sfx);
			fit(tmp, both);
			snprintf(both, sizeof(both), "%.*s%s", (int)room, tmp, sfx);
		}
		fit(t->label, both);
	}
	for (uint32_t i = 0; base && i < n; i++)
		free(base[i]);
	free(base);
}
