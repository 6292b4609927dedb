/*
 * What graph replays read.  A captured launch's references are kept for its
 * capture; the capture's end hands them to the graph, instantiation copies
 * them to the executable.  A replay of an executable that reads tracked
 * memory is one pass, and during discovery it reads those regions.  Small
 * fixed tables (the oldest entry is recycled); thread-safe.
 */
#ifndef FT_GRAPHS_H
#define FT_GRAPHS_H

#include <pthread.h>
#include <stdint.h>

#include "ft/passes.h"

#define FT_GRAPH_ENTRIES 1024

struct ft_graphs {
	pthread_mutex_t lock;
	struct {
		uint64_t key;   /* capture id, graph or exec handle */
		uint8_t kind;   /* 0 free, 1 capture, 2 graph, 3 exec */
		uint32_t paged; /* the capture paged offloaded weights itself: its
				   tag (ft_off_capture_launch), else 0 */
		uint32_t n, cap;
		struct ft_region_ref *refs;
	} e[FT_GRAPH_ENTRIES];
	unsigned next;
};

void ft_graphs_init(struct ft_graphs *g);
/* A launch captured into capture read these regions. */
void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture,
			    const struct ft_region_ref *r, unsigned n);
void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph);
void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec);
/* How many region reads replays of exec make (0: none tracked); with copy
 * non-NULL, *copy gets a malloc'd copy of them (caller frees). */
uint32_t ft_graphs_exec_refs(struct ft_graphs *g, uint64_t exec, struct ft_region_ref **copy);
void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec);
/* Every region that graphs and executables not paged by the block engine
 * read (a malloc'd copy in *out, caller frees): weights they read must stay
 * resident when offloading begins. */
uint32_t ft_graphs_unpaged_refs(struct ft_graphs *g, struct ft_region_ref **out);
/* The block engine put its copies and waits into this capture: replays of
 * what it becomes page their weights themselves. */
void ft_graphs_capture_paged(struct ft_graphs *g, uint64_t capture, uint32_t tag);
/* The tag of the capture exec came from, 0 when it does not page. */
uint32_t ft_graphs_exec_paged(struct ft_graphs *g, uint64_t exec);

#endif
