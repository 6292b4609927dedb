/*
 * What graph replays read.  A captured launch's references are kept for its
 * capture; the capture's end hands them to the graph, instantiation copies
 * them to the executable.  A replay of an executable that reads tracked
 * memory is one pass, and during discovery it reads those regions.
 *
 * An executable instantiated from a graph that does not page its weights
 * itself (captured before the plan) also holds what paging it later needs:
 * a clone of its graph (kept), and once a plan offloads what it reads, how
 * its replays page (FT_GRAPH_*: a substitute executable with the loads
 * added, waits and loads around the launch, or its weights kept on the
 * GPU).  The handles are opaque here; release() (ft_graphs_set_release)
 * frees them when the entry goes.
 *
 * A fixed table with a hash index: when full, the oldest entry that no
 * paging depends on (no clone, substitute, launch-boundary choice or paged
 * capture) is recycled; thread-safe.
 */
#ifndef FT_GRAPHS_H
#define FT_GRAPHS_H

#include <pthread.h>
#include <stdint.h>

#include "ft/passes.h"

#define FT_GRAPH_ENTRIES 8192 /* vLLM's PIECEWISE graphs: sizes x (layers + 1) */
#define FT_GRAPH_BUCKETS 4096

/* How replays of an executable page the offloaded weights it reads. */
enum ft_graph_how {
	FT_GRAPH_UNPLANNED,  /* no plan offloads what it reads (yet) */
	FT_GRAPH_CAPTURED,   /* captured with the loads (after the plan) */
	FT_GRAPH_SUBSTITUTE, /* a substitute executable with the loads runs instead */
	FT_GRAPH_BOUNDARY,   /* the launch waits for its traps' loads; no edit */
	FT_GRAPH_RESIDENT,   /* cannot be paged: what it reads stays on the GPU */
	FT_GRAPH_CLEAR,      /* offloading runs and it reads nothing offloaded (the
				plan only ever gives weights back: it stays so) */
};

#define FT_GRAPH_READS 8 /* traps a launch-boundary graph reads, at most */

/* One executable's paging state (ft_graphs_exec_get). */
struct ft_graph_exec {
	uint64_t kept;       /* a clone of its graph (CUgraph), 0 none */
	uint64_t flags;      /* its instantiation flags */
	uint64_t sub;        /* FT_GRAPH_SUBSTITUTE: the substitute (CUgraphExec) */
	uint32_t tag;        /* the loads' tag (ft_off_capture_launch), 0 none */
	uint8_t how;         /* enum ft_graph_how */
	uint8_t naddr;       /* FT_GRAPH_BOUNDARY: an address in each trap it reads */
	uint8_t changed;     /* a kernel node got new parameters: what it reads is
				known from its clone's nodes only (no launch boundary) */
	uint64_t addr[FT_GRAPH_READS];
};

struct ft_graphs {
	pthread_mutex_t lock;
	struct {
		uint64_t key;   /* capture id, graph or exec handle */
		uint8_t kind;   /* 0 free, 1 capture, 2 graph, 3 exec */
		uint8_t instantiated; /* a graph with an executable that holds a clone */
		uint32_t paged; /* the capture paged offloaded weights itself: its
				   tag (ft_off_capture_launch), else 0 */
		uint32_t n, cap;
		struct ft_region_ref *refs;
		uint32_t nl, capl;    /* launches: launch i read refs [ends[i-1], ends[i]) */
		uint32_t *ends;
		struct ft_graph_exec x; /* executables */
		int32_t chain;  /* next entry of its bucket, -1 none */
	} e[FT_GRAPH_ENTRIES];
	int32_t bucket[FT_GRAPH_BUCKETS]; /* first entry of each, -1 none */
	unsigned next;
	void (*release)(const struct ft_graph_exec *x); /* frees x's handles */
	int lost; /* what a graph reads was lost (host memory ran out, or more
		     graphs that page than entries): ft_graphs_lost */
};

void ft_graphs_init(struct ft_graphs *g);
/* Whether the table lost what a graph reads: an allocation failed while it
 * recorded or copied a graph's references, or an entry that paging depends
 * on was recycled.  Once set, it stays: no replay can be trusted to page
 * what it reads, and the caller is to stop offloading. */
int ft_graphs_lost(struct ft_graphs *g);
/* release(x) frees an entry's handles (kept, sub) when it goes:
 * destroyed, replaced or recycled.  Called under the table's lock. */
void ft_graphs_set_release(struct ft_graphs *g, void (*release)(const struct ft_graph_exec *x));
/* A launch captured into capture read these regions (n may be 0: the
 * launch is counted). */
void ft_graphs_capture_read(struct ft_graphs *g, uint64_t capture,
			    const struct ft_region_ref *r, unsigned n);
void ft_graphs_capture_end(struct ft_graphs *g, uint64_t capture, uint64_t graph);
/* exec was instantiated from graph with flags; kept: a clone of graph made
 * for paging it later (0 none). */
void ft_graphs_instantiate(struct ft_graphs *g, uint64_t graph, uint64_t exec, uint64_t kept,
			   uint64_t flags);
/* How many region reads replays of exec make (0: none tracked); with copy
 * non-NULL, *copy gets a malloc'd copy of them (caller frees). */
uint32_t ft_graphs_exec_refs(struct ft_graphs *g, uint64_t exec, struct ft_region_ref **copy);
/* The launches of exec's capture, in order: launch i read regions
 * [i ? ends[i - 1] : 0, ends[i]) of ft_graphs_exec_refs'.  How many (0:
 * unknown), with *ends a malloc'd copy (caller frees). */
uint32_t ft_graphs_exec_launches(struct ft_graphs *g, uint64_t exec, uint32_t **ends);
void ft_graphs_exec_destroy(struct ft_graphs *g, uint64_t exec);
/* What graph's capture read: how many region reads (0: none tracked), and
 * in *tag its tag when it paged its weights itself, else 0.  One that reads
 * tracked memory it does not page needs a clone to be paged later. */
uint32_t ft_graphs_graph_reads(struct ft_graphs *g, uint64_t graph, uint32_t *tag);
/* The graph was destroyed (its executables keep their clones). */
void ft_graphs_graph_destroy(struct ft_graphs *g, uint64_t graph);
/* exec's paging state into *x: 1, or 0 when exec is unknown. */
int ft_graphs_exec_get(struct ft_graphs *g, uint64_t exec, struct ft_graph_exec *x);
/* Sets exec's paging state (the handles it replaces are released unless x
 * keeps them): 0, or -1 when exec is unknown. */
int ft_graphs_exec_set(struct ft_graphs *g, uint64_t exec, const struct ft_graph_exec *x);
/* The executables with a kept clone and no paging yet (FT_GRAPH_UNPLANNED):
 * up to cap of them into out; how many there are. */
uint32_t ft_graphs_unplanned(struct ft_graphs *g, uint64_t *out, uint32_t cap);
/* Every region that graphs and executables not paged by the block engine,
 * nor able to be paged later (an executable with a clone can: substitute or
 * launch boundary), read (a malloc'd copy in *out, caller frees): weights
 * they read must stay resident when offloading begins. */
uint32_t ft_graphs_unpaged_refs(struct ft_graphs *g, struct ft_region_ref **out);
/* The block engine put its copies and waits into this capture: replays of
 * what it becomes page their weights themselves. */
void ft_graphs_capture_paged(struct ft_graphs *g, uint64_t capture, uint32_t tag);
#endif
