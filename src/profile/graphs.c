/* Capture -> graph -> executable bookkeeping (include/ft/graphs.h). */
#include "ft/graphs.h"

#include <stdlib.h>
#include <string.h>

enum { FREE, CAPTURE, GRAPH, EXEC };

static void lose(struct ft_graphs *g)
{
	__atomic_store_n(&g->lost, 1, __ATOMIC_RELAXED);
}

void ft_graphs_init(struct ft_graphs *g)
{
	memset(g, 0, sizeof(*g));
	for (int i = 0; i < FT_GRAPH_BUCKETS; i++)
		g->bucket[i] = -1;
	for (int i = 0; i < FT_GRAPH_ENTRIES; i++)
		g->e[i].chain = -1;
	pthread_mutex_init(&g->lock, NULL);
}

void ft_graphs_set_release(struct ft_graphs *g, void (*release)(const struct ft_graph_exec *x))
{
	pthread_mutex_lock(&g->lock);
	g->release = release;
	pthread_mutex_unlock(&g->lock);
}

static unsigned hash(int kind, uint64_t key)
{
	uint64_t x = (key ^ ((uint64_t)kind << 61)) * 0x9e3779b97f4a7c15ULL;
	return (unsigned)(x >> 40) & (FT_GRAPH_BUCKETS - 1);
}

static int find(struct ft_graphs *g, int kind, uint64_t key)
{
	for (int i = g->bucket[hash(kind, key)]; i >= 0; i = g->e[i].chain)
		if (g->e[i].kind == kind && g->e[i].key == key)
			return i;
	return -1;
}

/* Entry i leaves its bucket (it is free, or is about to change key). */
static void unlink_entry(struct ft_graphs *g, int i)
{
	if (g->e[i].kind == FREE)
		return;
	int32_t *p = &g->bucket[hash(g->e[i].kind, g->e[i].key)];
	while (*p >= 0 && *p != i)
		p = &g->e[*p].chain;
	if (*p == i)
		*p = g->e[i].chain;
	g->e[i].chain = -1;
}

/* Entry i (unlinked) becomes (kind, key). */
static void link_entry(struct ft_graphs *g, int i, int kind, uint64_t key)
{
	unsigned b = hash(kind, key);
	g->e[i].kind = (uint8_t)kind;
	g->e[i].key = key;
	g->e[i].chain = g->bucket[b];
	g->bucket[b] = i;
}

static void release(struct ft_graphs *g, const struct ft_graph_exec *x)
{
	if (g->release && (x->kept || x->sub))
		g->release(x);
}

static void drop(struct ft_graphs *g, int i)
{
	unlink_entry(g, i);
	release(g, &g->e[i].x);
	free(g->e[i].refs);
	free(g->e[i].ends);
	memset(&g->e[i], 0, sizeof(g->e[i]));
	g->e[i].chain = -1;
}

/* Whether paging depends on entry i: a capture or graph that paged itself,
 * an executable with a clone (to page once a plan exists) or paged. */
static int pinned(const struct ft_graphs *g, int i)
{
	return g->e[i].kind != FREE && (g->e[i].paged || g->e[i].x.kept || g->e[i].x.sub ||
					g->e[i].x.how == FT_GRAPH_BOUNDARY);
}

static int entry(struct ft_graphs *g, int kind, uint64_t key)
{
	int i = find(g, kind, key);
	if (i >= 0)
		return i;
	for (int k = 0; k < FT_GRAPH_ENTRIES; k++) {
		i = (int)(g->next++ % FT_GRAPH_ENTRIES);
		if (!pinned(g, i))
			break;
	}
	/* all pinned (more live graphs than entries): the oldest goes anyway,
	 * and with it what a graph that pages reads */
	if (pinned(g, i))
		lose(g);
	drop(g, i);
	link_entry(g, i, kind, key);
	return i;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	uint32_t c = need * 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static void append(struct ft_graphs *g, int i, const struct ft_region_ref *r, unsigned n)
{
	if (grow((void **)&g->e[i].refs, &g->e[i].cap, g->e[i].n + n, sizeof(*r))) {
		lose(g);
		return;
	}
	memcpy(g->e[i].refs + g->e[i].n, r, n * sizeof(*r));
	g->e[i].n += n;
}

/* A launch ends at the current reference count. */
static void end_launch(struct ft_graphs *g, int i)
{
	if (grow((void **)&g->e[i].ends, &g->e[i].capl, g->e[i].nl + 1, sizeof(uint32_t))) {
		lose(g);
		return;
	}
	g->e[i].ends[g->e[i].nl++] = g->e[i].n;
}

void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture,
			    const struct ft_region_ref *r, unsigned n)
{
	pthread_mutex_lock(&g->lock);
	int i = entry(g, CAPTURE, capture);
	append(g, i, r, n);
	end_launch(g, i);
	pthread_mutex_unlock(&g->lock);
}

/* A capture into a graph made before (cuStreamBeginCaptureToGraph): the
 * graph reads what both read, in that order (dropping the graph's own
 * references left a launch-boundary executable without the first
 * capture's traps).  1 when capture i's references were added to graph
 * j's. */
static int merge(struct ft_graphs *g, int j, int i)
{
	uint32_t n = g->e[j].n, nl = g->e[j].nl;
	if (grow((void **)&g->e[j].refs, &g->e[j].cap, n + g->e[i].n, sizeof(*g->e[j].refs)) ||
	    grow((void **)&g->e[j].ends, &g->e[j].capl, nl + g->e[i].nl, sizeof(*g->e[j].ends))) {
		lose(g);
		return 0;
	}
	if (g->e[i].n)
		memcpy(g->e[j].refs + n, g->e[i].refs, g->e[i].n * sizeof(*g->e[j].refs));
	for (uint32_t k = 0; k < g->e[i].nl; k++)
		g->e[j].ends[nl + k] = g->e[i].ends[k] + n;
	g->e[j].n += g->e[i].n;
	g->e[j].nl += g->e[i].nl;
	if (!g->e[j].paged)
		g->e[j].paged = g->e[i].paged;
	return 1;
}

void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, CAPTURE, capture);
	int j = i >= 0 ? find(g, GRAPH, graph) : -1;
	if (j >= 0 && merge(g, j, i)) {
		drop(g, i);
	} else if (i >= 0) {
		/* the capture becomes the graph: its references move along */
		if (j >= 0)
			drop(g, j);
		unlink_entry(g, i);
		link_entry(g, i, GRAPH, graph);
	}
	pthread_mutex_unlock(&g->lock);
}

static void *dup(const void *p, size_t n)
{
	void *q = n ? malloc(n) : NULL;
	if (q)
		memcpy(q, p, n);
	return q;
}

void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec, uint64_t kept,
			   uint64_t flags)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, GRAPH, graph);
	/* copied out first: taking an entry for the exec may recycle i's */
	uint32_t n = i >= 0 ? g->e[i].n : 0, nl = i >= 0 ? g->e[i].nl : 0;
	uint32_t paged = i >= 0 ? g->e[i].paged : 0;
	struct ft_region_ref *refs = n ? dup(g->e[i].refs, n * sizeof(*refs)) : NULL;
	uint32_t *ends = nl ? dup(g->e[i].ends, nl * sizeof(*ends)) : NULL;
	if (i >= 0 && kept)
		g->e[i].instantiated = 1;
	if (refs && (ends || !nl)) {
		int j = entry(g, EXEC, exec);
		drop(g, j);
		link_entry(g, j, EXEC, exec);
		g->e[j].paged = paged;
		g->e[j].refs = refs;
		g->e[j].n = g->e[j].cap = n;
		g->e[j].ends = ends;
		g->e[j].nl = g->e[j].capl = nl;
		g->e[j].x.kept = kept;
		g->e[j].x.flags = flags;
		g->e[j].x.how = paged ? FT_GRAPH_CAPTURED : FT_GRAPH_UNPLANNED;
		g->e[j].x.tag = paged;
		refs = NULL;
		ends = NULL;
		kept = 0;
	} else if (n) {
		lose(g); /* what the executable reads could not be copied */
	}
	free(refs);
	free(ends);
	if (kept && g->release) /* nothing tracked to page: no clone needed */
		g->release(&(struct ft_graph_exec){ .kept = kept });
	pthread_mutex_unlock(&g->lock);
}

uint32_t ft_graphs_exec_refs(struct ft_graphs *g, uint64_t exec, struct ft_region_ref **copy)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	uint32_t n = i >= 0 ? g->e[i].n : 0;
	if (copy) {
		*copy = n ? dup(g->e[i].refs, n * sizeof(**copy)) : NULL;
		if (!*copy && n) {
			lose(g);
			n = 0;
		}
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

uint32_t ft_graphs_exec_launches(struct ft_graphs *g, uint64_t exec, uint32_t **ends)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	uint32_t n = i >= 0 ? g->e[i].nl : 0;
	*ends = n ? dup(g->e[i].ends, n * sizeof(**ends)) : NULL;
	if (!*ends && n) {
		lose(g);
		n = 0;
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

/* (kind, key) is gone: its entry too. */
static void forget(struct ft_graphs *g, int kind, uint64_t key)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, kind, key);
	if (i >= 0)
		drop(g, i);
	pthread_mutex_unlock(&g->lock);
}

void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec)
{
	forget(g, EXEC, exec);
}

uint32_t ft_graphs_graph_reads(struct ft_graphs *g, uint64_t graph, uint32_t *tag)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, GRAPH, graph);
	uint32_t n = i >= 0 ? g->e[i].n : 0;
	*tag = i >= 0 ? g->e[i].paged : 0;
	pthread_mutex_unlock(&g->lock);
	return n;
}

void ft_graphs_graph_destroy(struct ft_graphs *g, uint64_t graph)
{
	forget(g, GRAPH, graph);
}

int ft_graphs_lost(struct ft_graphs *g)
{
	/* read at every graph launch: no lock */
	return __atomic_load_n(&g->lost, __ATOMIC_RELAXED);
}

int ft_graphs_exec_get(struct ft_graphs *g, uint64_t exec, struct ft_graph_exec *x)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	if (i >= 0)
		*x = g->e[i].x;
	pthread_mutex_unlock(&g->lock);
	return i >= 0;
}

int ft_graphs_exec_set(struct ft_graphs *g, uint64_t exec, const struct ft_graph_exec *x)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	if (i >= 0) {
		struct ft_graph_exec old = g->e[i].x;
		/* what x no longer holds goes */
		struct ft_graph_exec gone = {
			.kept = old.kept != x->kept ? old.kept : 0,
			.sub = old.sub != x->sub ? old.sub : 0,
		};
		release(g, &gone);
		g->e[i].x = *x;
	}
	pthread_mutex_unlock(&g->lock);
	return i >= 0 ? 0 : -1;
}

uint32_t ft_graphs_unplanned(struct ft_graphs *g, uint64_t *out, uint32_t cap)
{
	pthread_mutex_lock(&g->lock);
	uint32_t n = 0;
	for (int i = 0; i < FT_GRAPH_ENTRIES; i++)
		if (g->e[i].kind == EXEC && g->e[i].x.kept && !g->e[i].paged &&
		    g->e[i].x.how == FT_GRAPH_UNPLANNED) {
			if (n < cap)
				out[n] = g->e[i].key;
			n++;
		}
	pthread_mutex_unlock(&g->lock);
	return n;
}

void ft_graphs_capture_paged(struct ft_graphs *g, uint64_t capture, uint32_t tag)
{
	pthread_mutex_lock(&g->lock);
	g->e[entry(g, CAPTURE, capture)].paged = tag;
	pthread_mutex_unlock(&g->lock);
}

/* Whether entry i's replays read their weights where they are, for good:
 * nothing pages them, nor can later. */
static int unpaged(const struct ft_graphs *g, int i)
{
	if (g->e[i].kind == FREE || g->e[i].paged)
		return 0;
	if (g->e[i].kind == GRAPH)
		return !g->e[i].instantiated;
	if (g->e[i].kind == EXEC)
		return !g->e[i].x.kept || g->e[i].x.how == FT_GRAPH_RESIDENT;
	return 1;
}

uint32_t ft_graphs_unpaged_refs(struct ft_graphs *g, struct ft_region_ref **out)
{
	pthread_mutex_lock(&g->lock);
	uint32_t n = 0;
	for (int i = 0; i < FT_GRAPH_ENTRIES; i++)
		if (unpaged(g, i))
			n += g->e[i].n;
	*out = n ? malloc(n * sizeof(**out)) : NULL;
	uint32_t k = 0;
	for (int i = 0; *out && i < FT_GRAPH_ENTRIES; i++)
		if (unpaged(g, i)) {
			memcpy(*out + k, g->e[i].refs, g->e[i].n * sizeof(**out));
			k += g->e[i].n;
		}
	pthread_mutex_unlock(&g->lock);
	return *out ? k : 0;
}
