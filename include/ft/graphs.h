/*
 * Which graph executables replay launches that read tracked memory: a
 * captured launch with references marks its capture; the capture's end
 * names the graph, instantiation the executable.  A replay of such an
 * executable is one pass.  Small fixed tables (oldest entries recycled);
 * thread-safe.
 */
#ifndef FT_GRAPHS_H
#define FT_GRAPHS_H

#include <pthread.h>
#include <stdint.h>

#define FT_GRAPH_ENTRIES 1024

struct ft_graphs {
	pthread_mutex_t lock;
	struct {
		uint64_t key;   /* capture id, graph or exec handle */
		uint8_t kind;   /* 0 free, 1 capture, 2 graph, 3 exec */
		uint8_t reads;
	} e[FT_GRAPH_ENTRIES];
	unsigned next;
};

void ft_graphs_init(struct ft_graphs *g);
void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture);
void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph);
void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec);
/* 1 when replays of exec read tracked memory. */
int ft_graphs_exec_reads(struct ft_graphs *g, uint64_t exec);
void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec);

#endif
