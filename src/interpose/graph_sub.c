/*
 * CUDA graphs captured before the plan (DESIGN.md section 6): serving
 * engines capture every graph at start-up, long before the plan.
 *
 * At instantiation, a graph whose capture read tracked memory and that does
 * not page it itself is cloned (ft_sub_keep): the application may destroy
 * its graph (PyTorch does, right after instantiating).  Once a plan
 * offloads what an executable reads, ft_sub_plan decides how its replays
 * page:
 *
 *  - launch boundary: when the offloaded traps it reads all have blocks of
 *    their own (a piece of a pass, as vLLM's PIECEWISE graphs), the launch
 *    is one step of the eager executor: the stream waits for their loads,
 *    the next traps load ahead, nothing is edited;
 *  - substitute: otherwise (a whole pass, as FULL decode graphs), a clone
 *    gets the executor's copies and waits by capturing them into it
 *    (cuStreamBeginCaptureToGraph on a private stream): for each kernel node
 *    that reads offloaded weights, in a topological order, the capture's
 *    dependencies are set to the node's own and the previous such node's,
 *    the executor serves the node as it would a captured launch, and what
 *    its copies and waits left as the capture's dependencies become edges
 *    into the node.  Readers of weights are so ordered one after the other
 *    (the executor's block discipline assumes one stream), the rest of the
 *    graph keeps its concurrency.  The result is instantiated with the
 *    application's flags and launched in place of its executable;
 *  - resident: a graph that cannot be rebuilt (device launch, child graph or
 *    conditional nodes, a copy node on offloaded weights, anything the
 *    driver refuses) brings the traps it reads back to the GPU for good,
 *    said once per graph with the reason and counted.
 *
 * A cuGraphExecUpdate of the application's executable takes a clone of the
 * new graph and decides again; a kernel node's new parameters go to the
 * clone, and the substitute is rebuilt.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft/gate.h"
#include "hooks.h"

#define H(x) ((uint64_t)(uintptr_t)(x))

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void release(const struct ft_graph_exec *x)
{
	const struct ft_real *r = &ft_g.real;
	if (x->sub && r->cuGraphExecDestroy)
		r->cuGraphExecDestroy((CUgraphExec)(uintptr_t)x->sub);
	if (x->kept && r->cuGraphDestroy)
		r->cuGraphDestroy((CUgraph)(uintptr_t)x->kept);
}

void ft_sub_init(void)
{
	ft_graphs_set_release(ft_g.graphs, release);
}

/* Why graph g, instantiated with flags, could never be paged by the
 * library (NULL: it can be tried): known before any plan, so that the
 * planner keeps what it reads on the GPU rather than bring it back later,
 * when the memory may be gone. */
static const char *unpageable(CUgraph g, unsigned long long flags)
{
	const struct ft_real *r = &ft_g.real;
	if (!r->cuGraphClone || !r->cuStreamBeginCaptureToGraph || !r->cuGraphAddDependencies_v2 ||
	    !r->cuStreamUpdateCaptureDependencies_v2 || !r->cuGraphGetEdges_v2 ||
	    !r->cuGraphKernelNodeGetParams_v2 || !r->cuGraphGetNodes || !r->cuGraphNodeGetType)
		return "the driver lacks the graph calls it needs (CUDA 12.3)";
	if (!ft_g.opt.pinned_memory)
		return "FT_PINNED_MEMORY=0 (a graph cannot copy from a pageable host store)";
	if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
		return "it was instantiated for device launch, whose launches the library never "
		       "sees";
	size_t n = 0;
	if (r->cuGraphGetNodes(g, NULL, &n))
		return "the driver does not list its nodes";
	CUgraphNode *node = malloc((n + 1) * sizeof(*node));
	const char *why = node ? NULL : "out of host memory";
	if (node && r->cuGraphGetNodes(g, node, &n))
		why = "the driver does not list its nodes";
	for (size_t i = 0; !why && i < n; i++) {
		CUgraphNodeType t;
		if (r->cuGraphNodeGetType(node[i], &t))
			why = "the driver does not tell a node's type";
		else if (t == CU_GRAPH_NODE_TYPE_GRAPH)
			why = "it holds a child graph node";
		else if (t == CU_GRAPH_NODE_TYPE_CONDITIONAL)
			why = "it holds a conditional node";
		else if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC || t == CU_GRAPH_NODE_TYPE_MEM_FREE)
			why = "it holds memory alloc or free nodes (it cannot be cloned)";
	}
	free(node);
	return why;
}

uint64_t ft_sub_keep(CUgraph g, unsigned long long flags, const char **unkept)
{
	uint32_t tag;
	*unkept = NULL;
	if (!ft_graphs_graph_reads(ft_g.graphs, H(g), &tag) || tag)
		return 0; /* reads nothing tracked, or pages it itself */
	uint64_t t0 = now_us();
	const char *why = unpageable(g, flags);
	CUgraph c = NULL;
	CUresult rc = why ? CUDA_SUCCESS : ft_g.real.cuGraphClone(&c, g);
	FT_STAT_ADD(&ft_g.stats, graph_keep_us, now_us() - t0);
	if (!why && (rc != CUDA_SUCCESS || !c))
		why = "the driver refused to clone it";
	if (why) {
		ft_info("CUDA graph 0x%llx reads tracked memory and cannot be paged by the library "
			"(%s): what it reads stays on the GPU", (unsigned long long)H(g), why);
		*unkept = why;
		return 0;
	}
	FT_STAT_INC(&ft_g.stats, graphs_kept);
	return H(c);
}

/* ---- the nodes of a graph in a topological order ---- */

struct walk {
	CUgraphNode *node;       /* sorted by handle */
	size_t n;
	uint32_t *order;         /* indices into node, topological */
	uint32_t *pred_at, *pred; /* node i's predecessors: pred[pred_at[i] .. pred_at[i+1]) */
};

static int by_handle(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(const CUgraphNode *)a, y = (uintptr_t)*(const CUgraphNode *)b;
	return x < y ? -1 : x > y;
}

static int index_of(const struct walk *w, CUgraphNode h)
{
	CUgraphNode *p = bsearch(&h, w->node, w->n, sizeof(*w->node), by_handle);
	return p ? (int)(p - w->node) : -1;
}

static void walk_free(struct walk *w)
{
	free(w->node);
	free(w->order);
	free(w->pred_at);
	free(w->pred);
	memset(w, 0, sizeof(*w));
}

static const char *walk_graph(CUgraph g, struct walk *w)
{
	const struct ft_real *r = &ft_g.real;
	size_t ne = 0;
	memset(w, 0, sizeof(*w));
	/* edges are asked for with their data: without it the driver refuses
	 * to list edges that carry any (CUDA_ERROR_LOSSY_QUERY) */
	if (r->cuGraphGetNodes(g, NULL, &w->n) || r->cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne))
		return "the driver does not list its nodes";
	CUgraphNode *from = malloc((ne + 1) * sizeof(*from)), *to = malloc((ne + 1) * sizeof(*to));
	CUgraphEdgeData *data = calloc(ne + 1, sizeof(*data));
	uint32_t *indeg = calloc(w->n + 1, sizeof(*indeg)), *succ_at = calloc(w->n + 2, 4);
	uint32_t *succ = malloc((ne + 1) * 4);
	w->node = malloc((w->n + 1) * sizeof(*w->node));
	w->order = malloc((w->n + 1) * sizeof(*w->order));
	w->pred_at = calloc(w->n + 2, sizeof(*w->pred_at));
	w->pred = malloc((ne + 1) * sizeof(*w->pred));
	const char *why = NULL;
	if (!from || !to || !data || !indeg || !succ_at || !succ || !w->node || !w->order ||
	    !w->pred_at || !w->pred) {
		why = "out of host memory";
		goto out;
	}
	if (r->cuGraphGetNodes(g, w->node, &w->n) ||
	    r->cuGraphGetEdges_v2(g, from, to, data, &ne)) {
		why = "the driver does not list its nodes and edges";
		goto out;
	}
	qsort(w->node, w->n, sizeof(*w->node), by_handle);
	/* predecessors and successors, counted then placed */
	for (size_t e = 0; e < ne; e++) {
		int a = index_of(w, from[e]), b = index_of(w, to[e]);
		if (a < 0 || b < 0) {
			why = "an edge to a node it does not list";
			goto out;
		}
		w->pred_at[b + 1]++;
		succ_at[a + 1]++;
		indeg[b]++;
	}
	for (size_t i = 0; i < w->n; i++) {
		w->pred_at[i + 1] += w->pred_at[i];
		succ_at[i + 1] += succ_at[i];
	}
	uint32_t *pfill = calloc(w->n + 1, 4), *sfill = calloc(w->n + 1, 4);
	if (!pfill || !sfill) {
		free(pfill);
		free(sfill);
		why = "out of host memory";
		goto out;
	}
	for (size_t e = 0; e < ne; e++) {
		int a = index_of(w, from[e]), b = index_of(w, to[e]);
		w->pred[w->pred_at[b] + pfill[b]++] = (uint32_t)a;
		succ[succ_at[a] + sfill[a]++] = (uint32_t)b;
	}
	free(pfill);
	free(sfill);
	/* Kahn's order */
	size_t head = 0, tail = 0;
	for (size_t i = 0; i < w->n; i++)
		if (!indeg[i])
			w->order[tail++] = (uint32_t)i;
	while (head < tail) {
		uint32_t a = w->order[head++];
		for (uint32_t k = succ_at[a]; k < succ_at[a + 1]; k++)
			if (!--indeg[succ[k]])
				w->order[tail++] = succ[k];
	}
	if (tail != w->n)
		why = "its edges make a cycle";
out:
	free(from);
	free(to);
	free(data);
	free(indeg);
	free(succ_at);
	free(succ);
	if (why)
		walk_free(w);
	return why;
}

/* ---- what a node reads ---- */

/* The addresses a kernel's parameters p refer to (the read ones first,
 * *nstale stale ones after): how many are read. */
static int params_refs(const CUDA_KERNEL_NODE_PARAMS *p, uint64_t *a, uint16_t *word,
		       unsigned *nstale, struct ft_kernel **kern, const char **name)
{
	*nstale = 0;
	*kern = NULL;
	*name = "?";
	/* the handle the launch gave: a CUkernel stands for its function */
	const void *fn = p->kern ? (const void *)p->kern : (const void *)p->func;
	const struct ft_kernel *k = ft_kernels_get(&ft_g.kernels, fn);
	struct ft_refs refs;
	if (k)
		*name = k->name;
	if (ft_scan_launch(&ft_g.reg, ft_g.tmaps, k && k->known ? &k->layout : NULL,
			   p->kernelParams, p->extra, &refs))
		return -1;
	if (k) {
		ft_kernel_mark_stale(k, &refs);
		*name = k->name;
	}
	*kern = (struct ft_kernel *)k;
	unsigned n = ft_obs_addrs(&refs, a, word);
	*nstale = refs.n - n;
	return (int)n;
}

/* The same for kernel node h's parameters. */
static int kernel_refs(CUgraphNode h, uint64_t *a, uint16_t *word, unsigned *nstale,
		       struct ft_kernel **kern, const char **name)
{
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	if (ft_g.real.cuGraphKernelNodeGetParams_v2(h, &p)) {
		*nstale = 0;
		*kern = NULL;
		*name = "?";
		return -1;
	}
	return params_refs(&p, a, word, nstale, kern, name);
}

/* The offloaded traps that p's references fall in (stale ones too when
 * stale), into rd (at most cap): how many, or -1 when p cannot be
 * scanned. */
static int params_traps(const CUDA_KERNEL_NODE_PARAMS *p, int stale, struct ft_off_read *rd,
			unsigned cap)
{
	uint64_t a[FT_MAX_REFS];
	uint16_t word[FT_MAX_REFS];
	unsigned nstale;
	struct ft_kernel *kern;
	const char *name;
	int n = params_refs(p, a, word, &nstale, &kern, &name);
	if (n < 0)
		return -1;
	return (int)ft_off_graph_traps(ft_g.off, a, (unsigned)n + (stale ? nstale : 0), rd, cap);
}

/* The offloaded traps kernel node n's new parameters p read that its
 * parameters in its graph do not come back to the GPU for good (graph: n
 * is being changed in the application's graph, not in an executable). */
static void node_unkept(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p, int graph)
{
	struct ft_off_read now[FT_GRAPH_READS], was[FT_GRAPH_READS];
	int nn = params_traps(p, 1, now, FT_GRAPH_READS), nw = -1;
	if (!nn)
		return; /* reads nothing offloaded */
	CUDA_KERNEL_NODE_PARAMS old;
	memset(&old, 0, sizeof(old));
	/* the node's parameters in the application's graph: those it was
	 * captured (and paged) with, the read ones only (a capture loads
	 * nothing for stale references) */
	if (nn > 0 && nn <= FT_GRAPH_READS && ft_g.real.cuGraphKernelNodeGetParams_v2 &&
	    !ft_g.real.cuGraphKernelNodeGetParams_v2(n, &old))
		nw = params_traps(&old, 0, was, FT_GRAPH_READS);
	/* in an application's graph, what cannot be checked is left to the
	 * executable's setter (it compares with these parameters, and brings
	 * every weight back when it cannot read them); a node the driver does
	 * not know refuses the setter anyway */
	if (graph && (nn < 0 || nw < 0 || nn > FT_GRAPH_READS))
		return;
	uint64_t keep[FT_GRAPH_READS];
	unsigned nk = 0;
	for (int i = 0; i < nn && i < FT_GRAPH_READS; i++) {
		int in = 0;
		for (int j = 0; j < nw; j++)
			in |= now[i].trap == was[j].trap;
		if (!in)
			keep[nk++] = now[i].addr;
	}
	if (nn < 0 || nw < 0 || nn > FT_GRAPH_READS)
		ft_off_keep_all(ft_g.off, "a kernel node of a CUDA graph got new parameters the "
					  "library cannot check");
	else if (nk && graph) {
		ft_warn_once("a kernel node of a CUDA graph got new parameters that read other "
			     "offloaded weights (cuGraphKernelNodeSetParams): those come back to "
			     "the GPU for good (an executable made from the graph may take them)");
		ft_off_keep(ft_g.off, keep, nk, "read by a kernel node's new parameters in a CUDA "
						"graph");
	} else if (nk) {
		ft_warn_once("a kernel node of a CUDA graph the library cannot page again got "
			     "new parameters that read other offloaded weights: those come back "
			     "to the GPU for good");
		ft_off_keep(ft_g.off, keep, nk, "read by a kernel node's new parameters in a CUDA "
						"graph that cannot be paged again");
	}
}

void ft_sub_params_unkept(CUgraphExec exec, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct ft_graph_exec x;
	if (!ft_off_active(ft_g.off) || (ft_graphs_exec_get(ft_g.graphs, H(exec), &x) && x.kept))
		return; /* (a kept clone takes the parameters after the setter) */
	node_unkept(n, p, 0);
}

void ft_sub_graph_params(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (ft_off_active(ft_g.off))
		node_unkept(n, p, 1);
}

static uint64_t copy_end(CUmemorytype t, CUdeviceptr d)
{
	return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED ? (uint64_t)d : 0;
}

/* Whether memcpy or memset node h touches an offloaded trap's bytes. */
static int copy_touches(CUgraphNode h, CUgraphNodeType type)
{
	uint64_t a[2] = { 0, 0 };
	struct ft_off_read x;
	if (type == CU_GRAPH_NODE_TYPE_MEMCPY) {
		CUDA_MEMCPY3D p;
		if (ft_g.real.cuGraphMemcpyNodeGetParams(h, &p))
			return 1;
		a[0] = copy_end(p.srcMemoryType, p.srcDevice);
		a[1] = copy_end(p.dstMemoryType, p.dstDevice);
	} else {
		CUDA_MEMSET_NODE_PARAMS p;
		if (ft_g.real.cuGraphMemsetNodeGetParams(h, &p))
			return 1;
		a[0] = p.dst;
	}
	return ft_off_graph_traps(ft_g.off, a, 2, &x, 1) > 0;
}

/* ---- the substitute ---- */

/* Capture dependencies of s: a copy in deps (up to cap); how many. */
static size_t capture_deps(CUstream s, CUgraphNode *deps, size_t cap)
{
	CUstreamCaptureStatus st;
	cuuint64_t id;
	CUgraph g;
	const CUgraphNode *d = NULL;
	const CUgraphEdgeData *e = NULL;
	size_t n = 0;
	if (ft_g.real.cuStreamGetCaptureInfo_v3(s, &st, &id, &g, &d, &e, &n) ||
	    st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return (size_t)-1;
	for (size_t i = 0; i < n && i < cap; i++)
		deps[i] = d[i];
	return n;
}

static int set_deps(CUstream s, CUgraphNode *deps, size_t n)
{
	return ft_g.real.cuStreamUpdateCaptureDependencies_v2(s, deps, NULL, n,
							      CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

/* Edges to add once the capture is over (the graph is not edited while
 * the driver captures into it). */
struct edges {
	CUgraphNode *from, *to;
	size_t n, cap;
};

static int edge(struct edges *e, CUgraphNode from, CUgraphNode to)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 256;
		CUgraphNode *f = realloc(e->from, cap * sizeof(*f));
		if (f)
			e->from = f;
		CUgraphNode *t = f ? realloc(e->to, cap * sizeof(*t)) : NULL;
		if (!t)
			return -1;
		e->to = t;
		e->cap = cap;
	}
	e->from[e->n] = from;
	e->to[e->n++] = to;
	return 0;
}

/* Every node the capture's dependencies hold that is not yet a predecessor
 * of node k becomes one (recorded in e).  One that already is, by an edge
 * of any kind, stays as it is: the driver refuses a second edge between two
 * nodes, and such a dependency means that nothing was captured on its path
 * (no load for k through it), so the application's edge orders what it
 * did. */
static const char *join_into(const struct walk *w, uint32_t k, CUstream s, struct edges *e)
{
	CUgraphNode d[64];
	size_t n = capture_deps(s, d, 64);
	if (n == (size_t)-1 || n > 64)
		return "the capture of its loads failed";
	for (size_t i = 0; i < n; i++) {
		int j = index_of(w, d[i]);
		int known = j == (int)k;
		for (uint32_t p = w->pred_at[k]; !known && j >= 0 && p < w->pred_at[k + 1]; p++)
			known = w->pred[p] == (uint32_t)j;
		if (!known && edge(e, d[i], w->node[k]))
			return "out of host memory";
	}
	return NULL;
}

/* The loads go into graph g (a clone): the tag of its loads (> 0), 0 when
 * it reads nothing offloaded after all, or -1 with why. */
static int capture_loads(CUgraph g, const struct walk *w, CUstream s, const char **why)
{
	const struct ft_real *r = &ft_g.real;
	CUgraphNode deps[65];
	struct edges e = { 0 };
	int tag = 0;
	uint64_t cap = 0;
	int last = -1;
	*why = NULL;
	if (r->cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED)) {
		*why = "the driver refused a capture into its clone";
		return -1;
	}
	CUstreamCaptureStatus st;
	if (r->cuStreamGetCaptureInfo_v3(s, &st, &cap, NULL, NULL, NULL, NULL) || !cap)
		*why = "the driver gives no capture id";
	for (size_t i = 0; !*why && i < w->n; i++) {
		uint32_t k = w->order[i];
		CUgraphNodeType type;
		if (r->cuGraphNodeGetType(w->node[k], &type)) {
			*why = "the driver does not tell a node's type";
			break;
		}
		if ((type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_MEMSET) &&
		    copy_touches(w->node[k], type)) {
			*why = "a copy or memset node reads or writes offloaded weights";
			break;
		}
		if (type != CU_GRAPH_NODE_TYPE_KERNEL)
			continue;
		uint64_t a[FT_MAX_REFS];
		uint16_t word[FT_MAX_REFS];
		unsigned nstale;
		struct ft_kernel *kern;
		const char *name;
		int n = kernel_refs(w->node[k], a, word, &nstale, &kern, &name);
		struct ft_off_read x;
		if (n < 0) {
			*why = "a kernel node's parameters cannot be read or scanned";
			break;
		}
		/* reads nothing offloaded: as captured (with FT_VERIFY, it
		 * poisons the blocks it does not read, as each node does;
		 * when graphs are timed, a reader of a resident trap is timed,
		 * as in a capture that pages itself) */
		if (!ft_off_graph_traps(ft_g.off, a, (unsigned)n, &x, 1) &&
		    !ft_off_verifying(ft_g.off) && !ft_off_graph_timed(ft_g.off, a, (unsigned)n))
			continue;
		/* its own dependencies, and the previous reader's: readers of
		 * blocks follow one another */
		size_t nd = 0;
		for (uint32_t p = w->pred_at[k]; p < w->pred_at[k + 1] && nd < 64; p++)
			deps[nd++] = w->node[w->pred[p]];
		int known = 0;
		for (uint32_t p = w->pred_at[k]; last >= 0 && p < w->pred_at[k + 1]; p++)
			known |= w->pred[p] == (uint32_t)last;
		if (last >= 0 && !known && nd < 65)
			deps[nd++] = w->node[last];
		if (w->pred_at[k + 1] - w->pred_at[k] > 64 || set_deps(s, deps, nd)) {
			*why = "the driver refused the capture's dependencies";
			break;
		}
		int t = ft_off_capture_launch(ft_g.off, s, cap, a, word, (unsigned)n, nstale, kern,
					      name);
		ft_off_launched(ft_g.off);
		if (t < 0) {
			*why = "the executor cannot page a capture now (another capture pages "
			       "weights, or FT_PINNED_MEMORY=0)";
			break;
		}
		if (t > 0)
			tag = t;
		if ((*why = join_into(w, k, s, &e)))
			break;
		if (set_deps(s, &w->node[k], 1)) {
			*why = "the driver refused the capture's dependencies";
			break;
		}
		last = (int)k;
	}
	if (cap)
		ft_off_capture_end(ft_g.off, s, cap);
	if (!*why && ft_off_capture_broken(ft_g.off, cap))
		*why = "the driver refused a copy or an event record in the capture of its loads";
	CUgraph out = NULL;
	CUresult rc = r->cuStreamEndCapture(s, &out);
	ft_off_capture_over(ft_g.off);
	if (!*why && rc)
		*why = "the capture of its loads was refused at its end";
	/* the loads before each reader, and the readers in turn */
	for (size_t i = 0; !*why && i < e.n; i++)
		if (r->cuGraphAddDependencies_v2(g, &e.from[i], &e.to[i], NULL, 1))
			*why = "the driver refused an edge to a kernel node";
	free(e.from);
	free(e.to);
	return *why ? -1 : tag;
}

/* A substitute for exec (clone kept, flags): 0 with x filled, 1 when its
 * nodes read nothing offloaded, or -1 with why. */
static int substitute(struct ft_graph_exec *x, const char **why)
{
	const struct ft_real *r = &ft_g.real;
	uint64_t t0 = now_us();
	CUgraph g = NULL;
	CUstream s = NULL;
	CUgraphExec e = NULL;
	struct walk w;
	int tag = -1;
	*why = NULL;
	/* a kept clone passed unpageable(): the calls exist, the node kinds
	 * and flags allow a substitute */
	if (r->cuGraphClone(&g, (CUgraph)(uintptr_t)x->kept))
		*why = "its clone cannot be cloned";
	else if (!(*why = walk_graph(g, &w))) {
		if (r->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
			*why = "no stream for its capture";
		else
			tag = capture_loads(g, &w, s, why);
		walk_free(&w);
	}
	/* the application's flags, less the upload (which needs a stream) */
	if (!*why && tag > 0 &&
	    r->cuGraphInstantiateWithFlags(&e, g, x->flags & ~(unsigned long long)
					   CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
		*why = "the driver refused to instantiate it with the loads";
	if (s)
		r->cuStreamDestroy_v2(s);
	if (g)
		r->cuGraphDestroy(g);
	FT_STAT_ADD(&ft_g.stats, graph_sub_us, now_us() - t0);
	if (*why)
		return -1;
	if (tag <= 0)
		return 1; /* it reads nothing offloaded: it runs as it is */
	x->sub = H(e);
	x->tag = (uint32_t)tag;
	x->how = FT_GRAPH_SUBSTITUTE;
	ft_debug("CUDA graph exec: substitute 0x%llx built in %.1f ms", (unsigned long long)H(e),
		 (double)(now_us() - t0) / 1000.0);
	return 0;
}

void ft_sub_check_lost(void)
{
	if (ft_graphs_lost(ft_g.graphs))
		ft_off_keep_all(ft_g.off, "the library lost what a CUDA graph reads (out of host "
			       "memory, or more graphs that page than it can track)");
}

static void keep_resident(CUgraphExec exec, struct ft_graph_exec *x, const uint64_t *a,
			  unsigned n, const char *why)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "CUDA graph exec 0x%llx cannot be paged: %s",
		 (unsigned long long)H(exec), why);
	ft_warn("%s; what it reads comes back to the GPU", msg);
	if (n && !a)
		ft_off_keep_all(ft_g.off, "out of host memory while listing what a CUDA graph "
			       "that cannot be paged reads");
	else
		ft_off_keep(ft_g.off, a, n, msg);
	x->how = FT_GRAPH_RESIDENT;
	FT_STAT_INC(&ft_g.stats, graphs_resident);
}

/* exec's references as addresses (malloc'd, caller frees), *n of them. */
static uint64_t *exec_addrs(CUgraphExec exec, uint32_t *n)
{
	struct ft_region_ref *r = NULL;
	*n = ft_graphs_exec_refs(ft_g.graphs, H(exec), &r);
	uint64_t *a = *n ? malloc(*n * sizeof(*a)) : NULL;
	for (uint32_t i = 0; a && i < *n; i++)
		a[i] = r[i].alloc_base + r[i].offset;
	free(r);
	return a;
}

void ft_sub_unpageable(CUgraphExec exec, const char *why)
{
	struct ft_graph_exec x;
	uint32_t n;
	if (!ft_graphs_exec_get(ft_g.graphs, H(exec), &x))
		return;
	uint64_t *a = exec_addrs(exec, &n);
	if (ft_off_active(ft_g.off))
		keep_resident(exec, &x, a, n, why);
	else
		x.how = FT_GRAPH_RESIDENT;
	x.sub = 0;
	x.naddr = 0;
	ft_graphs_exec_set(ft_g.graphs, H(exec), &x);
	free(a);
}

void ft_sub_plan(CUgraphExec exec)
{
	struct ft_graph_exec x;
	if (!ft_off_active(ft_g.off) || !ft_graphs_exec_get(ft_g.graphs, H(exec), &x) ||
	    !x.kept || x.how != FT_GRAPH_UNPLANNED)
		return;
	uint32_t n;
	uint64_t *a = exec_addrs(exec, &n);
	if (!a) {
		ft_sub_check_lost();
		if (n)
			ft_off_keep_all(ft_g.off, "out of host memory while planning a CUDA graph");
		return;
	}
	struct ft_off_read rd[FT_GRAPH_READS];
	unsigned nt = ft_off_graph_traps(ft_g.off, a, n, rd, FT_GRAPH_READS);
	if (!nt && !x.changed) {
		free(a);
		return; /* reads nothing offloaded */
	}
	int distinct = nt <= FT_GRAPH_READS && !x.changed;
	for (unsigned i = 0; distinct && i < nt; i++)
		for (unsigned j = 0; j < i; j++)
			distinct &= rd[i].block != rd[j].block;
	const char *why = NULL;
	if (distinct) {
		/* a piece of the pass: its traps are all in their blocks at once */
		x.how = FT_GRAPH_BOUNDARY;
		x.naddr = (uint8_t)nt;
		for (unsigned i = 0; i < nt; i++)
			x.addr[i] = rd[i].addr;
		FT_STAT_INC(&ft_g.stats, graphs_boundary);
		ft_debug("CUDA graph exec 0x%llx reads %u offloaded traps with blocks of their own: "
			 "paged at its launch boundary", (unsigned long long)H(exec), nt);
	} else {
		int rc = substitute(&x, &why);
		if (!rc)
			FT_STAT_INC(&ft_g.stats, graphs_substituted);
		else if (rc < 0)
			keep_resident(exec, &x, a, n, why);
	}
	free(a);
	if (ft_graphs_exec_set(ft_g.graphs, H(exec), &x) && x.sub)
		release(&(struct ft_graph_exec){ .sub = x.sub });
}

void ft_sub_plan_all(void)
{
	uint64_t e[FT_GRAPH_ENTRIES];
	ft_sub_check_lost();
	uint32_t n = ft_graphs_unplanned(ft_g.graphs, e, FT_GRAPH_ENTRIES);
	uint64_t t0 = now_us();
	uint64_t before[3] = { atomic_load(&ft_g.stats.v[FT_STAT_graphs_substituted]),
			       atomic_load(&ft_g.stats.v[FT_STAT_graphs_boundary]),
			       atomic_load(&ft_g.stats.v[FT_STAT_graphs_resident]) };
	for (uint32_t i = 0; i < n && i < FT_GRAPH_ENTRIES; i++)
		ft_sub_plan((CUgraphExec)(uintptr_t)e[i]);
	if (!n)
		return;
	ft_info("CUDA graphs captured before the plan: %llu substituted, %llu paged at their "
		"launch boundaries, %llu kept on the GPU, of %u kept executables (%.1f ms)",
		(unsigned long long)(atomic_load(&ft_g.stats.v[FT_STAT_graphs_substituted]) - before[0]),
		(unsigned long long)(atomic_load(&ft_g.stats.v[FT_STAT_graphs_boundary]) - before[1]),
		(unsigned long long)(atomic_load(&ft_g.stats.v[FT_STAT_graphs_resident]) - before[2]),
		n, (double)(now_us() - t0) / 1000.0);
}

/* A launch of exec, which no paging serves (one that could not be
 * cloned, or that read nothing offloaded when the plan came): a read of
 * offloaded weights is said and counted; one that reads none is marked
 * clear, and its later launches look no more. */
static void check_unpaged(CUgraphExec exec, struct ft_graph_exec *x)
{
	uint32_t n;
	uint64_t *a = exec_addrs(exec, &n);
	int trap;
	uint64_t w;
	char what[64];
	if (a && ft_off_offloaded(ft_g.off, a, n, &trap, &w)) {
		snprintf(what, sizeof(what), "a replay of graph exec 0x%llx",
			 (unsigned long long)H(exec));
		ft_obs_hidden(what, "cuGraphLaunch", trap, w);
	} else if (a) {
		x->how = FT_GRAPH_CLEAR;
		ft_graphs_exec_set(ft_g.graphs, H(exec), x);
	}
	free(a);
}

/* A substitute built with timing events while graphs were timed for a
 * profile's refresh only, now that the refresh has its replays: rebuilt
 * without them (events around every reader of a trap, resident ones too,
 * cost the replays time), one thread at a time; every caller then takes
 * the entry as it is (another thread may have rebuilt it and destroyed the
 * timed one).  Not while a capture is under way (the executor pages one
 * capture at a time): a later launch tries again.  Where the rebuild is
 * refused, the timed one stays, its replays no longer read (tag 1). */
static void untime(CUgraphExec exec, struct ft_graph_exec *x)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	if (atomic_load(&ft_g.active_captures) > 0)
		return;
	pthread_mutex_lock(&one);
	struct ft_graph_exec y;
	const char *why = NULL;
	if (ft_graphs_exec_get(ft_g.graphs, H(exec), &y) && y.how == FT_GRAPH_SUBSTITUTE &&
	    y.tag >= 2) {
		uint64_t timed = y.sub;
		int rc = substitute(&y, &why);
		if (rc == 1) {
			/* without its timed readers, it reads nothing offloaded */
			y.how = FT_GRAPH_CLEAR;
			y.sub = 0;
			y.tag = 0;
		} else if (rc < 0) {
			y.tag = 1;
			ft_debug("CUDA graph exec 0x%llx keeps its timed substitute: %s",
				 (unsigned long long)H(exec), why);
		}
		if (ft_graphs_exec_set(ft_g.graphs, H(exec), &y) && y.sub != timed)
			release(&(struct ft_graph_exec){ .sub = y.sub });
	}
	ft_graphs_exec_get(ft_g.graphs, H(exec), x);
	pthread_mutex_unlock(&one);
}

static CUresult sub_launch(CUgraphExec exec, CUstream s, int upload, int ptsz)
{
	const struct ft_real *r = &ft_g.real;
	__typeof__(r->cuGraphLaunch) fn = upload ? (ptsz ? r->cuGraphUpload_ptsz : r->cuGraphUpload)
						 : (ptsz ? r->cuGraphLaunch_ptsz : r->cuGraphLaunch);
	if (!fn)
		return CUDA_ERROR_NOT_FOUND;
	struct ft_graph_exec x = { 0 };
	if (!ft_off_active(ft_g.off))
		return fn(exec, s);
	ft_sub_check_lost();
	if (!ft_graphs_exec_get(ft_g.graphs, H(exec), &x))
		return fn(exec, s);
	CUresult rc;
	switch (x.how) {
	case FT_GRAPH_SUBSTITUTE:
		if (x.tag >= 2 && !ft_off_graphs_timed(ft_g.off))
			untime(exec, &x);
		if (x.how != FT_GRAPH_SUBSTITUTE)
			break;
		if (upload)
			return fn((CUgraphExec)(uintptr_t)x.sub, s);
		ft_off_replay(ft_g.off, s, 0, x.tag);
		rc = fn((CUgraphExec)(uintptr_t)x.sub, s);
		ft_off_replay(ft_g.off, s, 1, x.tag);
		return rc;
	case FT_GRAPH_BOUNDARY:
		if (upload)
			return fn(exec, s);
		ft_off_launch(ft_g.off, s, x.addr, NULL, x.naddr, 0, NULL, "a CUDA graph launch");
		rc = fn(exec, s);
		ft_off_launched(ft_g.off);
		return rc;
	case FT_GRAPH_CAPTURED:
		if (upload || !x.tag)
			break;
		ft_off_replay(ft_g.off, s, 0, x.tag);
		rc = fn(exec, s);
		ft_off_replay(ft_g.off, s, 1, x.tag);
		return rc;
	case FT_GRAPH_UNPLANNED:
		if (!upload)
			check_unpaged(exec, &x);
		break;
	default:
		break;
	}
	if (!upload && ft_off_verifying(ft_g.off))
		/* FT_VERIFY: a launch the executor does not page finds every
		 * block poisoned */
		ft_off_launch(ft_g.off, s, NULL, NULL, 0, 0, NULL, "a CUDA graph launch");
	return fn(exec, s);
}

CUresult ft_sub_launch(CUgraphExec exec, CUstream s, int upload, int ptsz)
{
	/* the plan is not applied between the executor's step and the
	 * enqueued launch (ft/gate.h) */
	ft_gate_enter();
	CUresult rc = sub_launch(exec, s, upload, ptsz);
	ft_gate_leave();
	return rc;
}
