/* Capture -> graph -> executable bookkeeping (include/ft/graphs.h). */
#include "ft/graphs.h"

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

static void put(struct ft_graphs *g, int kind, uint64_t key, int reads)
{
	int i = find(g, kind, key);
	if (i < 0) {
		i = (int)(g->next++ % FT_GRAPH_ENTRIES);
		g->e[i].kind = (uint8_t)kind;
		g->e[i].key = key;
		g->e[i].reads = 0;
	}
	g->e[i].reads |= (uint8_t)reads;
}

void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture)
{
	pthread_mutex_lock(&g->lock);
	put(g, CAPTURE, capture, 1);
	pthread_mutex_unlock(&g->lock);
}

static void carry(struct ft_graphs *g, int from, uint64_t k1, int to, uint64_t k2)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, from, k1);
	put(g, to, k2, i >= 0 && g->e[i].reads);
	if (i >= 0 && from == CAPTURE)
		g->e[i].kind = FREE;
	pthread_mutex_unlock(&g->lock);
}

void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph)
{
	carry(g, CAPTURE, capture, GRAPH, graph);
}

void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec)
{
	carry(g, GRAPH, graph, EXEC, exec);
}

int ft_graphs_exec_reads(struct ft_graphs *g, uint64_t exec)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	int r = i >= 0 && g->e[i].reads;
	pthread_mutex_unlock(&g->lock);
	return r;
}

void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec)
{
	pthread_mutex_lock(&g->lock);
	int i = find(g, EXEC, exec);
	if (i >= 0)
		g->e[i].kind = FREE;
	pthread_mutex_unlock(&g->lock);
}
