/*
 * What the framework declares (ft_declare_tensor, ft_declare_done; the
 * Python package's offload()): its parameters and buffers by address, size
 * and name.  Discovery then starts at once and takes one pass by default
 * (FT_DISCOVERY_ITERS): a declared parameter read in every pass is a weight
 * without checksums (include/ft/discover.h), traps follow module names, and
 * the passes are the program's marks.  A declared weight that a kernel
 * changed after all (a model being trained) is caught before the plan by a
 * second checksum and stays on the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/traps.h"
#include "learn_int.h"

int ft_learn_declare(struct ft_learn *L, uint64_t va, uint64_t bytes, const char *name,
		     int buffer)
{
	if (!bytes || va + bytes < va)
		return -1;
	pthread_mutex_lock(&L->lock);
	int rc = -1;
	if (L->phases.phase != FT_PHASE_DISCOVERY || L->adopted) {
		ft_warn_once("a tensor was declared after discovery ended (offload() called after "
			     "the library had learnt the model): declarations are ignored; call "
			     "offload() before the first forward");
		goto out;
	}
	if (!L->decl_new) {
		/* a new set after ft_declare_done: it replaces the last one (the
		 * caller declares all it has; what it declared before may have
		 * been freed since, its memory now another tensor's) */
		for (uint32_t i = 0; i < L->nnames; i++)
			free(L->decl_names[i]);
		L->ndecl = L->nnames = L->nsorted = 0;
		if (L->declared)
			L->disc.ndecl = 0;
	}
	if (L->nnames == L->capdecl) { /* ndecl <= nnames: tidy() only merges */
		uint32_t cap = L->capdecl ? 2 * L->capdecl : 256;
		struct ft_disc_decl *d = realloc(L->decl, cap * sizeof(*d));
		char **n = d ? realloc(L->decl_names, cap * sizeof(*n)) : NULL;
		if (d) {
			L->decl = d;
			if (L->declared) /* discovery reads the sorted first ndecl */
				L->disc.decl = d;
		}
		if (!n)
			goto out;
		L->decl_names = n;
		L->capdecl = cap;
	}
	char *copy = strdup(name && *name ? name : "?");
	if (!copy)
		goto out;
	L->decl_names[L->nnames] = copy;
	L->decl[L->ndecl++] = (struct ft_disc_decl){ va, va + bytes, L->nnames++, (uint8_t)!!buffer };
	FT_STAT_INC(L->env.stats, declared_tensors);
	L->decl_new = 1;
	rc = 0;
out:
	pthread_mutex_unlock(&L->lock);
	return rc;
}

static int by_lo(const void *a, const void *b)
{
	const struct ft_disc_decl *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name; /* first declared first */
}

/* Sorted, one per address: a tensor declared twice (tied weights) keeps
 * its first name; one inside another (a view) is part of it. */
static void tidy(struct ft_learn *L)
{
	qsort(L->decl, L->ndecl, sizeof(*L->decl), by_lo);
	uint32_t k = 0;
	for (uint32_t i = 0; i < L->ndecl; i++) {
		if (k && L->decl[i].lo < L->decl[k - 1].hi) {
			if (L->decl[i].hi > L->decl[k - 1].hi)
				L->decl[k - 1].hi = L->decl[i].hi;
			L->decl[k - 1].buffer |= L->decl[i].buffer; /* never offload a buffer */
			continue;
		}
		L->decl[k++] = L->decl[i];
	}
	L->ndecl = k;
}

/* Whether the allocation at base holds no declared parameter (L->decl
 * sorted). */
static int holds_no_parameter(void *arg, CUdeviceptr base)
{
	struct ft_learn *L = arg;
	struct ft_alloc a;
	if (ft_registry_lookup(L->env.reg, base, &a))
		return 0; /* not known: it stays where it is */
	for (uint32_t i = 0; i < L->nsorted; i++)
		if (!L->decl[i].buffer && L->decl[i].lo < a.base + a.size && L->decl[i].hi > a.base)
			return 0;
	return 1;
}

int ft_learn_declare_done(struct ft_learn *L)
{
	pthread_mutex_lock(&L->lock);
	int rc = -1;
	if (!L->ndecl || !L->decl_new || L->phases.phase != FT_PHASE_DISCOVERY || L->adopted)
		goto out;
	if (L->started)
		ft_disc_destroy(&L->disc);
	if (ft_disc_init(&L->disc, ft_registry_next_id(L->env.reg))) {
		L->started = 0;
		goto out;
	}
	tidy(L);
	L->nsorted = L->ndecl;
	L->disc.decl = L->decl;
	L->disc.ndecl = L->ndecl;
	L->decl_new = 0;
	L->declared = 1;
	L->started = 1;
	ft_learn_watch_stop(L);
	/* what is allocated from now on is no weight: over a budget the
	 * weights fill before a plan it gets GPU memory, not host memory that
	 * kernels would read over the bus while the passes are timed; what
	 * holds no declared parameter and got host memory moves to the GPU */
	ft_vmm_exempt_new(L->env.vmm);
	ft_learn_to_gpu(L, holds_no_parameter, "that hold no declared parameter");
	/* passes are the program's marks from here on, exact: DISCOVERY
	 * takes FT_DISCOVERY_ITERS of them (no content samples needed),
	 * PROFILING FT_PROFILING_ITERS (none begins unobserved) */
	ft_passes_mark_from_now(&L->passes);
	L->unmarked_from = L->passes.launches;
	L->phases.phase = FT_PHASE_DISCOVERY;
	L->phases.in_phase = 0;
	ft_learn_phase_counts(L);
	uint64_t params = 0, buffers = 0;
	uint32_t nbuf = 0;
	for (uint32_t i = 0; i < L->ndecl; i++) {
		uint64_t b = L->decl[i].hi - L->decl[i].lo;
		if (L->decl[i].buffer)
			buffers += b, nbuf++;
		else
			params += b;
	}
	ft_info("declared: %u parameters (%.1f MiB) and %u buffers (%.1f MiB); discovery takes "
		"them from the next pass on, INFERENCE after %llu marked passes",
		L->ndecl - nbuf, (double)params / 1048576.0, nbuf, (double)buffers / 1048576.0,
		(unsigned long long)(L->phases.discovery + L->phases.profiling));
	rc = 0;
out:
	pthread_mutex_unlock(&L->lock);
	return rc;
}

/* Launches without a mark after which a declared program is told that its
 * passes are not being marked. */
#define FT_UNMARKED_LAUNCHES 200000ull

void ft_learn_check_marks(struct ft_learn *L)
{
	if (L->declared && L->phases.phase != FT_PHASE_INFERENCE &&
	    L->passes.launches - L->unmarked_from > FT_UNMARKED_LAUNCHES)
		ft_warn_once("the tensors were declared (offload()), but no pass was marked in the "
			     "%llu launches since: the library learns nothing until ft_mark_pass is "
			     "called after each forward (the forward hook offload() registers does "
			     "not run when the model's forward is called directly, model.forward(x), "
			     "instead of model(x))", FT_UNMARKED_LAUNCHES);
}

const char *ft_learn_decl_name(const struct ft_learn *L, uint64_t va)
{
	struct ft_discover d = { .decl = L->decl, .ndecl = L->declared ? L->nsorted : 0 };
	int k = ft_disc_declared(&d, va);
	return k >= 0 ? L->decl_names[L->decl[k].name] : NULL;
}

/* The names of the weights (L->wmap in first-touch order), NULL each
 * where none was declared; NULL when nothing was. malloc'd. */
static const char **weight_names(const struct ft_learn *L)
{
	const struct ft_profile *p = &L->prof;
	if (!L->declared || !p->nweights)
		return NULL;
	const char **v = calloc(p->nweights, sizeof(*v));
	for (uint32_t k = 0; v && k < p->nweights; k++)
		v[k] = ft_learn_decl_name(L, L->wmap[k].va);
	return v;
}

/* idx[0..n): regions of discovery in first-touch order.  A module is read
 * where most of its weights are: a weight first touched out of its place (a
 * stale pointer in a kernel's parameters, seen in the first pass before the
 * words are known to be stale) must not take its module's trap there, where
 * the executor would load it out of the pass's turn.  Modules are ordered
 * by the median first touch of their weights, each module's weights kept
 * together in their own order. */
struct keyed {
	uint32_t region, pos, rank;
	char key[200];
};

static int by_key_pos(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int by_rank_pos(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

void ft_learn_order_declared(struct ft_learn *L, uint32_t *idx, uint32_t n)
{
	if (!L->declared || n < 2)
		return;
	struct keyed *k = calloc(n, sizeof(*k));
	if (!k)
		return;
	for (uint32_t i = 0; i < n; i++) {
		const struct ft_disc_region *r = &L->disc.r[idx[i]];
		k[i].region = idx[i];
		k[i].pos = i;
		ft_traps_key(ft_learn_decl_name(L, r->alloc_base + r->offset), k[i].key,
			     sizeof(k[i].key));
	}
	uint32_t runs = 1, keys = 0;
	for (uint32_t i = 1; i < n; i++)
		runs += strcmp(k[i].key, k[i - 1].key) != 0;
	qsort(k, n, sizeof(*k), by_key_pos);
	/* each module's rank: the position of its median weight */
	for (uint32_t i = 0, j; i < n; i = j, keys++) {
		for (j = i; j < n && !strcmp(k[j].key, k[i].key); j++)
			;
		uint32_t median = k[i + (j - i) / 2].pos;
		for (uint32_t m = i; m < j; m++)
			k[m].rank = median;
	}
	qsort(k, n, sizeof(*k), by_rank_pos);
	for (uint32_t i = 0; i < n; i++)
		idx[i] = k[i].region;
	if (runs > keys)
		ft_info("declared: the first pass touched some modules' weights apart (%u runs of "
			"%u modules; stale pointers in kernel parameters?): each module's weights "
			"are kept together where most of them were read", runs, keys);
	free(k);
}

int ft_learn_group_declared(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	const char **names = weight_names(L);
	int t = names ? ft_traps_by_name(names, p->weights, p->nweights, &p->traps) : 0;
	free(names);
	if (t > 0)
		ft_info("declared: %d traps from the module names", t);
	return t;
}

void ft_learn_label_declared(struct ft_learn *L)
{
	const char **names = weight_names(L);
	if (names)
		ft_traps_label_by_name(L->prof.traps, L->prof.ntraps, names);
	free(names);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Declared weights were taken on the framework's word, with one content
 * sample: before the plan each is checksummed again, and one whose
 * content changed (a kernel writes it: a model being trained) stays on
 * the GPU, out of its trap, as a weight read all over the pass does
 * (p->shared).  Said at warn level, with its name. */
void ft_learn_recheck_declared(struct ft_learn *L)
{
	struct ft_profile *p = &L->prof;
	if (!L->declared || !p->nweights || L->adopted)
		return;
	if (!p->sums || atomic_load(L->env.captures) > 0) {
		ft_warn_once("the declared weights could not be checksummed again before the plan "
			     "(%s): a weight a kernel changes would be offloaded and its changes "
			     "lost; they all stay on the GPU",
			     p->sums ? "a stream capture is under way" : "no first checksum");
		goto keep_all;
	}
	uint64_t *addr = malloc(p->nweights * sizeof(*addr));
	uint64_t *bytes = malloc(p->nweights * sizeof(*bytes));
	uint64_t *sums = malloc(p->nweights * sizeof(*sums));
	uint32_t *order = malloc(p->nweights * sizeof(*order));
	uint32_t changed = 0;
	int ok = addr && bytes && sums && order;
	for (uint32_t j = 0; ok && j < L->nwmap; j++) {
		addr[j] = L->wmap[j].va;
		bytes[j] = L->wmap[j].extent;
		order[j] = L->wmap[j].order;
	}
	if (ok && ft_gpu_checksums(&L->gpu, addr, bytes, L->nwmap, sums))
		ok = 0;
	uint32_t *add = ok ? malloc((p->nshared + L->nwmap + 1) * sizeof(*add)) : NULL;
	uint32_t nadd = 0;
	for (uint32_t j = 0; add && j < L->nwmap; j++) {
		if (sums[j] == p->sums[order[j]])
			continue;
		if (++changed <= 8)
			ft_warn("declared weight %s (%.1f MiB) changed during the passes (a kernel "
				"writes it): it stays on the GPU", ft_learn_decl_name(L, addr[j]),
				(double)bytes[j] / 1048576.0);
		add[nadd++] = order[j];
	}
	if (add && nadd) {
		memcpy(add + nadd, p->shared, p->nshared * sizeof(*add));
		nadd += p->nshared;
		qsort(add, nadd, sizeof(*add), cmp_u32);
		uint32_t u = 0;
		for (uint32_t i = 0; i < nadd; i++)
			if (!u || add[u - 1] != add[i])
				add[u++] = add[i];
		free(p->shared);
		p->shared = add;
		p->nshared = u;
		add = NULL;
	}
	free(add);
	free(addr);
	free(bytes);
	free(sums);
	free(order);
	if (changed > 8)
		ft_warn("%u declared weights changed during the passes in all; they stay on the GPU",
			changed);
	FT_STAT_ADD(L->env.stats, declared_changed, changed);
	if (ok)
		return;
	ft_warn_once("the declared weights could not be checksummed again before the plan: "
		     "they all stay on the GPU");
keep_all:
	free(p->shared);
	p->shared = malloc(p->nweights * sizeof(*p->shared));
	p->nshared = 0;
	for (uint32_t k = 0; p->shared && k < p->nweights; k++)
		p->shared[p->nshared++] = k;
}
