/* Capture -> graph -> executable bookkeeping (include/ft/graphs.h). */
#include "ft/graphs.h"

#include <stdlib.h>
#include <string.h>

enum { FREE, CAPTURE, GRAPH, EXEC };

void ft_graphs_init(struct ft_graphs *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
}

static int find(struct ft_graphs *g, int kind, uint64_t key)
{
	for (int i = 0; i < FT_GRAPH_ENTRIES; i++)
		if (g->e[i].kind == kind && g->e[i].key == key)
			return i;
	return -1;
}

static void drop(struct ft_graphs *g, int i)
{
	free(g->e[i].refs);
	g->e[i].refs = NULL;
	g->e[i].n = g->e[i].cap = 0;
	g->e[i].kind = FREE;
	g->e[i].paged = 0;
}

static int entry(struct ft_graphs *g, int kind, uint64_t key)
{
	int i = find(g, kind, key);
	if (i < 0) {
		i = (int)(g->next++ % FT_GRAPH_ENTRIES);
		drop(g, i);
		g->e[i].kind = (uint8_t)kind;
		g->e[i].key = key;
	}
	return i;
}

static void append(struct ft_graphs *g, int i, const struct ft_region_ref *r, unsigned n)
{
	if (g->e[i].n + n > g->e[i].cap) {
		uint32_t cap = (g->e[i].n + n) * 2;
		struct ft_region_ref *refs = realloc(g->e[i].refs, cap * sizeof(*refs));
		if (!refs)
			return;
		g->e[i].refs = refs;
		g->e[i].cap = cap;
	}
	memcpy(g->e[i].refs + g->e[i].n, r, n * sizeof(*r));
	g->e[i].n += n;
}

void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture,
			    const struct ft_region_ref *r, unsigned n)
{
	pthread_mutex_lock(&g->lock);
	append(g, entry(g, CAPTURE, capture), r, n);
	pthread_mutex_unlock(&g->lock);
}

void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, CAPTURE, capture);
	if (i >= 0) {
		/* the capture becomes the graph: its references move along */
		int j = find(g, GRAPH, graph);
		if (j >= 0)
			drop(g, j);
		g->e[i].kind = GRAPH;
		g->e[i].key = graph;
	}
	pthread_mutex_unlock(&g->lock);
}

void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, GRAPH, graph);
	/* copied out first: taking an entry for the exec may recycle i's */
	uint32_t n = i >= 0 ? g->e[i].n : 0;
	uint32_t paged = i >= 0 ? g->e[i].paged : 0;
	struct ft_region_ref *tmp = n ? malloc(n * sizeof(*tmp)) : NULL;
	if (tmp) {
		memcpy(tmp, g->e[i].refs, n * sizeof(*tmp));
		int j = entry(g, EXEC, exec);
		g->e[j].n = 0;
		g->e[j].paged = paged;
		append(g, j, tmp, n);
		free(tmp);
	}
	pthread_mutex_unlock(&g->lock);
}

uint32_t ft_graphs_exec_refs(struct ft_graphs *g, uint64_t exec, struct ft_region_ref **copy)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	uint32_t n = i >= 0 ? g->e[i].n : 0;
	if (copy) {
		*copy = n ? malloc(n * sizeof(**copy)) : NULL;
		if (*copy)
			memcpy(*copy, g->e[i].refs, n * sizeof(**copy));
		else
			n = 0;
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	if (i >= 0)
		drop(g, i);
	pthread_mutex_unlock(&g->lock);
}

void ft_graphs_capture_paged(struct ft_graphs *g, uint64_t capture, uint32_t tag)
{
	pthread_mutex_lock(&g->lock);
	g->e[entry(g, CAPTURE, capture)].paged = tag;
	pthread_mutex_unlock(&g->lock);
}

uint32_t ft_graphs_exec_paged(struct ft_graphs *g, uint64_t exec)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	uint32_t paged = i >= 0 ? g->e[i].paged : 0;
	pthread_mutex_unlock(&g->lock);
	return paged;
}

uint32_t ft_graphs_unpaged_refs(struct ft_graphs *g, struct ft_region_ref **out)
{
	pthread_mutex_lock(&g->lock);
	uint32_t n = 0;
	for (int i = 0; i < FT_GRAPH_ENTRIES; i++)
		if (g->e[i].kind != FREE && !g->e[i].paged)
			n += g->e[i].n;
	*out = n ? malloc(n * sizeof(**out)) : NULL;
	uint32_t k = 0;
	for (int i = 0; *out && i < FT_GRAPH_ENTRIES; i++)
		if (g->e[i].kind != FREE && !g->e[i].paged) {
			memcpy(*out + k, g->e[i].refs, g->e[i].n * sizeof(**out));
			k += g->e[i].n;
		}
	pthread_mutex_unlock(&g->lock);
	return *out ? k : 0;
}
