/*
 * Stream capture, graphs, contexts, module lifetime and TMA descriptors.
 * A captured kernel never passes through cuLaunchKernel at replay, so the
 * trace links the pieces: capture_begin/capture_end (capture id -> graph),
 * graph_instantiate (graph -> exec), graph_launch (exec, stream); captured
 * launches carry the capture id.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hooks.h"

#define OBSERVING() (ft_lib_ensure(), ft_observing())
#define H(x) ((uint64_t)(uintptr_t)(x))

/* A capture counts as under way from just before the driver begins it
 * (uncounted again if it refuses): another thread's watch, which may
 * synchronise the device, must not run between the two (it would
 * invalidate this capture).  The watch's own try runs before. */
static int capture_begins(void)
{
	if (!OBSERVING())
		return 0;
	ft_learn_capture_begins(&ft_g.learn);
	atomic_fetch_add(&ft_g.active_captures, 1);
	return 1;
}

static void capture_begun(int counted, const char *api, CUstream s, int ptsz, CUresult rc)
{
	if (counted && rc != CUDA_SUCCESS)
		atomic_fetch_sub(&ft_g.active_captures, 1);
	if (!ft_observing())
		return;
	if (rc == CUDA_SUCCESS)
		FT_STAT_INC(&ft_g.stats, captures);
	ft_obs_event("capture_begin", api, rc, "stream", H(s), "capture",
		     rc == CUDA_SUCCESS ? ft_obs_capture_id(s, ptsz) : 0);
}

#define BEGIN_CAPTURE(sym, ptsz)                                               \
	CUresult sym(CUstream s, CUstreamCaptureMode mode)                     \
	{                                                                      \
		int counted = capture_begins();                                \
		CUresult rc = FT_CALL(sym, s, mode);                           \
		capture_begun(counted, #sym, s, ptsz, rc);                     \
		return rc;                                                     \
	}
BEGIN_CAPTURE(cuStreamBeginCapture_v2, 0)
BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, 1)

#define BEGIN_CAPTURE_TO_GRAPH(sym, ptsz)                                      \
	CUresult sym(CUstream s, CUgraph g, const CUgraphNode *deps,           \
		     const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode) \
	{                                                                      \
		int counted = capture_begins();                                \
		CUresult rc = FT_CALL(sym, s, g, deps, data, n, mode);         \
		capture_begun(counted, #sym, s, ptsz, rc);                     \
		return rc;                                                     \
	}
BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph, 0)
BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz, 1)

#define END_CAPTURE(sym, ptsz)                                                 \
	CUresult sym(CUstream s, CUgraph *g)                                   \
	{                                                                      \
		if (!OBSERVING())                                              \
			return FT_CALL(sym, s, g);                             \
		uint64_t id = ft_obs_capture_id(s, ptsz);                      \
		if (id && ft_off_active(ft_g.off))                             \
			ft_off_capture_end(ft_g.off, s, id);                   \
		CUresult rc = FT_CALL(sym, s, g);                              \
		int n = atomic_load(&ft_g.active_captures);                    \
		while (n > 0 && !atomic_compare_exchange_weak(&ft_g.active_captures, \
							      &n, n - 1))      \
			;                                                      \
		if (ft_off_active(ft_g.off))                                   \
			ft_off_capture_over(ft_g.off);                         \
		if (ft_off_capture_broken(ft_g.off, id))                       \
			ft_off_keep_all(ft_g.off, "the driver refused a copy or " \
					"an event record in a CUDA graph capture " \
					"that pages weights");                 \
		ft_obs_event("capture_end", #sym, rc, "capture", id, "graph",  \
			     rc == CUDA_SUCCESS && g ? H(*g) : 0);             \
		if (rc == CUDA_SUCCESS && g && id)                             \
			ft_graphs_capture_end(ft_g.graphs, id, H(*g));         \
		return rc;                                                     \
	}
END_CAPTURE(cuStreamEndCapture, 0)
END_CAPTURE(cuStreamEndCapture_ptsz, 1)

/* Once a plan is in effect, an executable just made (or updated) is
 * planned (graph_sub.c); one whose graph reads tracked memory but could not
 * be kept (unkept: why) brings what it reads back to the GPU: it was
 * captured without loads (FT_GRAPH_PAGING=instantiate). */
static void planned(CUgraphExec e, const char *unkept)
{
	if (!ft_off_active(ft_g.off))
		return;
	if (unkept)
		ft_sub_unpageable(e, unkept);
	else
		ft_sub_plan(e);
}

static void instantiated(const char *api, CUgraph g, CUgraphExec *e, unsigned long long flags,
			 CUresult rc)
{
	if (rc == CUDA_SUCCESS && e) {
		FT_STAT_INC(&ft_g.stats, graph_instantiates);
		/* a graph that does not page what it reads is cloned: the
		 * application may destroy it, and a plan may come later */
		const char *unkept;
		ft_graphs_instantiate(ft_g.graphs, H(g), H(*e), ft_sub_keep(g, flags, &unkept),
				      flags);
		planned(*e, unkept);
	}
	ft_obs_event("graph_instantiate", api, rc, "graph", H(g), "exec",
		     rc == CUDA_SUCCESS && e ? H(*e) : 0);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
	CUresult rc = FT_CALL(cuGraphInstantiateWithFlags, e, g, flags);
	if (OBSERVING())
		instantiated("cuGraphInstantiateWithFlags", g, e, flags, rc);
	return rc;
}

/* The older ABIs (cuGraphInstantiate of CUDA 10, _v2 of 11: no flags, an
 * error node and a log buffer), which programs built with older headers
 * still call. */
#define INSTANTIATE_LOG(sym)                                                   \
	CUresult sym(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log, size_t n) \
	{                                                                      \
		CUresult rc = FT_CALL(sym, e, g, err, log, n);                 \
		if (OBSERVING())                                               \
			instantiated(#sym, g, e, 0, rc);                       \
		return rc;                                                     \
	}
INSTANTIATE_LOG(cuGraphInstantiate)
INSTANTIATE_LOG(cuGraphInstantiate_v2)

#define INSTANTIATE_PARAMS(sym)                                                \
	CUresult sym(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) \
	{                                                                      \
		CUresult rc = FT_CALL(sym, e, g, p);                           \
		if (OBSERVING())                                               \
			instantiated(#sym, g, e, p ? p->flags : 0, rc);        \
		return rc;                                                     \
	}
INSTANTIATE_PARAMS(cuGraphInstantiateWithParams)
INSTANTIATE_PARAMS(cuGraphInstantiateWithParams_ptsz)

/* A replay of a graph whose capture read tracked memory is one pass. */
static void replayed(CUgraphExec e)
{
	if (ft_learn_phase(&ft_g.learn) == FT_PHASE_INFERENCE) {
		ft_learn_deferred(&ft_g.learn); /* a plan that waited for a capture */
		return;
	}
	if (!ft_graphs_exec_refs(ft_g.graphs, H(e), NULL))
		return;
	ft_learn_replay(&ft_g.learn, H(e));
}

#define GRAPH_ON_STREAM(sym, ev, launch, ptsz)                                 \
	CUresult sym(CUgraphExec e, CUstream s)                                \
	{                                                                      \
		if (!OBSERVING())                                              \
			return FT_CALL(sym, e, s);                             \
		CUresult rc = ft_sub_launch(e, s, !launch, ptsz);              \
		if (launch && rc == CUDA_SUCCESS) {                            \
			FT_STAT_INC(&ft_g.stats, graph_launches);              \
			replayed(e);                                           \
		}                                                              \
		ft_obs_event(ev, #sym, rc, "exec", H(e), "stream", H(s));      \
		return rc;                                                     \
	}
GRAPH_ON_STREAM(cuGraphUpload, "graph_upload", 0, 0)
GRAPH_ON_STREAM(cuGraphUpload_ptsz, "graph_upload", 0, 1)
GRAPH_ON_STREAM(cuGraphLaunch, "graph_launch", 1, 0)
GRAPH_ON_STREAM(cuGraphLaunch_ptsz, "graph_launch", 1, 1)


CUresult cuGraphExecDestroy(CUgraphExec e)
{
	CUresult rc = FT_CALL(cuGraphExecDestroy, e);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_graphs_exec_destroy(ft_g.graphs, H(e)); /* its substitute too */
	if (OBSERVING())
		ft_obs_event("graph_exec_destroy", "cuGraphExecDestroy", rc, "exec",
			     H(e), NULL, 0);
	return rc;
}

CUresult cuGraphDestroy(CUgraph g)
{
	CUresult rc = FT_CALL(cuGraphDestroy, g);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_graphs_graph_destroy(ft_g.graphs, H(g)); /* executables keep their clones */
	return rc;
}

/* An executable captured before the plan, updated with a graph captured
 * after it: the loads the library added to the new graph change its
 * topology, so the driver refuses an update the application's own graphs
 * allow.  The new graph gets an executable of its own, launched in the
 * application's place: the update succeeds as it would without the
 * library.  0, or -1 (the driver's answer stands). */
static int update_paged(CUgraphExec e, CUgraph g, unsigned long long flags)
{
	struct ft_graph_exec x;
	CUgraphExec sub = NULL;
	uint32_t tag;
	ft_graphs_graph_reads(ft_g.graphs, H(g), &tag);
	if (!tag || ft_g.real.cuGraphInstantiateWithFlags(&sub, g, flags) != CUDA_SUCCESS)
		return -1;
	ft_graphs_exec_destroy(ft_g.graphs, H(e));
	ft_graphs_instantiate(ft_g.graphs, H(g), H(e), 0, flags);
	if (!ft_graphs_exec_get(ft_g.graphs, H(e), &x)) {
		ft_g.real.cuGraphExecDestroy(sub);
		return -1;
	}
	x.sub = H(sub);
	x.how = FT_GRAPH_SUBSTITUTE;
	ft_graphs_exec_set(ft_g.graphs, H(e), &x);
	FT_STAT_INC(&ft_g.stats, graphs_substituted);
	return 0;
}

/* The application's executable now runs graph g (rc: the driver's answer
 * to the update): its clone, its paging and what it reads are g's.  The
 * answer to give; *made_good: a refused update was made good
 * (update_paged), and the caller reports success. */
static CUresult updated(const char *api, CUgraphExec e, CUgraph g, CUresult rc, int *made_good)
{
	*made_good = 0;
	if (!OBSERVING())
		return rc;
	struct ft_graph_exec x;
	unsigned long long flags = ft_graphs_exec_get(ft_g.graphs, H(e), &x) ? x.flags : 0;
	if (rc != CUDA_SUCCESS) {
		if (ft_off_active(ft_g.off) && !update_paged(e, g, flags)) {
			rc = CUDA_SUCCESS;
			*made_good = 1;
		}
		ft_obs_event("graph_exec_update", api, rc, "exec", H(e), "graph", H(g));
		return rc;
	}
	ft_graphs_exec_destroy(ft_g.graphs, H(e));
	const char *unkept;
	ft_graphs_instantiate(ft_g.graphs, H(g), H(e), ft_sub_keep(g, flags, &unkept), flags);
	planned(e, unkept);
	ft_obs_event("graph_exec_update", api, rc, "exec", H(e), "graph", H(g));
	return rc;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
	int made_good;
	CUresult rc = updated("cuGraphExecUpdate_v2", e, g, FT_CALL(cuGraphExecUpdate_v2, e, g, info),
			      &made_good);
	if (made_good && info)
		*info = (CUgraphExecUpdateResultInfo){ .result = CU_GRAPH_EXEC_UPDATE_SUCCESS };
	return rc;
}

/* The CUDA 10.2-11 ABI of the same. */
CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err,
			   CUgraphExecUpdateResult *result)
{
	int made_good;
	CUresult rc = updated("cuGraphExecUpdate", e, g, FT_CALL(cuGraphExecUpdate, e, g, err, result),
			      &made_good);
	if (made_good) {
		if (err)
			*err = NULL;
		if (result)
			*result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	}
	return rc;
}

/* A kernel node's new parameters reach the substitute: the clone takes
 * them (the node found through the application's graph, which lives while
 * its nodes are used) and the executable is planned again (a substitute
 * made again, or launch-boundary paging of what it reads now). */
static void kernel_node_changed(CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct ft_graph_exec x;
	if (!ft_graphs_exec_get(ft_g.graphs, H(e), &x))
		return;
	if (!x.kept) {
		/* a rescued update's executable runs in the application's
		 * place: it takes the change too (it was made from the graph
		 * the node belongs to) */
		if (x.how == FT_GRAPH_SUBSTITUTE && x.sub &&
		    ft_g.real.cuGraphExecKernelNodeSetParams_v2((CUgraphExec)(uintptr_t)x.sub, n, p))
			ft_sub_unpageable(e, "a kernel node got new parameters its substitute "
					     "cannot take");
		return;
	}
	CUgraphNode c = NULL;
	if (ft_g.real.cuGraphNodeFindInClone(&c, n, (CUgraph)(uintptr_t)x.kept) ||
	    ft_g.real.cuGraphKernelNodeSetParams_v2(c, p)) {
		/* the clone no longer describes the executable */
		ft_sub_unpageable(e, "a kernel node got new parameters its kept clone cannot take");
		return;
	}
	/* the references recorded at capture may be stale now: a substitute
	 * reads the clone's nodes again */
	x.changed = 1;
	if (x.how == FT_GRAPH_SUBSTITUTE || x.how == FT_GRAPH_BOUNDARY || x.how == FT_GRAPH_CLEAR) {
		x.how = FT_GRAPH_UNPLANNED;
		x.sub = 0;
		x.naddr = 0;
	}
	ft_graphs_exec_set(ft_g.graphs, H(e), &x);
	ft_sub_plan(e);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode n,
					   const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (OBSERVING() && p)
		ft_sub_params_unkept(e, n, p); /* before another launch can run them */
	CUresult rc = FT_CALL(cuGraphExecKernelNodeSetParams_v2, e, n, p);
	if (rc == CUDA_SUCCESS && OBSERVING())
		kernel_node_changed(e, n, p);
	return rc;
}

/* The CUDA 10-11 ABI's kernel node parameters (no kern, no ctx) as
 * today's. */
static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *k)
{
	return (CUDA_KERNEL_NODE_PARAMS){
		.func = k->func, .gridDimX = k->gridDimX, .gridDimY = k->gridDimY,
		.gridDimZ = k->gridDimZ, .blockDimX = k->blockDimX, .blockDimY = k->blockDimY,
		.blockDimZ = k->blockDimZ, .sharedMemBytes = k->sharedMemBytes,
		.kernelParams = k->kernelParams, .extra = k->extra,
	};
}

/* The same through the CUDA 10-11 ABI (a program built with CUDA 11
 * headers, or a CUDA 11 runtime asking cuGetProcAddress for 11000). */
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode n,
					const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS kp = { 0 };
	if (p)
		kp = from_v1(p);
	if (OBSERVING() && p)
		ft_sub_params_unkept(e, n, &kp);
	CUresult rc = FT_CALL(cuGraphExecKernelNodeSetParams, e, n, p);
	if (rc == CUDA_SUCCESS && OBSERVING() && p)
		kernel_node_changed(e, n, &kp);
	return rc;
}

/* A kernel node changed in the application's graph (not an executable's):
 * what its new parameters read that it did not comes back to the GPU. */
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (OBSERVING() && p)
		ft_sub_graph_params(n, p);
	return FT_CALL(cuGraphKernelNodeSetParams_v2, n, p);
}

CUresult cuGraphKernelNodeSetParams(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (OBSERVING() && p) {
		CUDA_KERNEL_NODE_PARAMS kp = from_v1(p);
		ft_sub_graph_params(n, &kp);
	}
	return FT_CALL(cuGraphKernelNodeSetParams, n, p);
}

/* Any other change to a node of an executable that the library pages (a
 * substitute replaces it, or its launch waits for the traps it read): the
 * application's executable takes it, the library could not follow, so
 * what it reads comes back to the GPU and the executable runs itself. */
static void exec_changed(CUgraphExec e, const char *api, int switched)
{
	struct ft_graph_exec x;
	char why[96];
	if (!ft_graphs_exec_get(ft_g.graphs, H(e), &x) ||
	    (x.how != FT_GRAPH_SUBSTITUTE && x.how != FT_GRAPH_BOUNDARY))
		return;
	/* a node switched on or off (switched) reads nothing the capture
	 * did not show: the launch still waits for everything it read */
	if (x.how == FT_GRAPH_BOUNDARY && switched)
		return;
	snprintf(why, sizeof(why), "%s changed one of its nodes", api);
	ft_sub_unpageable(e, why);
}

/* A generic setter's kernel parameters (the two structs have one
 * layout): 1, or 0 for another node type. */
static int kernel_params(const CUgraphNodeParams *p, CUDA_KERNEL_NODE_PARAMS *kp)
{
	if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return 0;
	const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
	*kp = (CUDA_KERNEL_NODE_PARAMS){
		.func = k->func, .gridDimX = k->gridDimX, .gridDimY = k->gridDimY,
		.gridDimZ = k->gridDimZ, .blockDimX = k->blockDimX, .blockDimY = k->blockDimY,
		.blockDimZ = k->blockDimZ, .sharedMemBytes = k->sharedMemBytes,
		.kernelParams = k->kernelParams, .extra = k->extra, .kern = k->kern, .ctx = k->ctx,
	};
	return 1;
}

/* The generic setter (CUDA 12.2): a kernel node's change is followed as
 * through cuGraphExecKernelNodeSetParams, any other as exec_changed. */
CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraphNodeParams *p)
{
	CUDA_KERNEL_NODE_PARAMS kp = { 0 };
	int kernel = kernel_params(p, &kp);
	if (kernel && OBSERVING())
		ft_sub_params_unkept(e, n, &kp);
	CUresult rc = FT_CALL(cuGraphExecNodeSetParams, e, n, p);
	if (rc != CUDA_SUCCESS || !OBSERVING())
		return rc;
	if (kernel)
		kernel_node_changed(e, n, &kp);
	else
		exec_changed(e, "cuGraphExecNodeSetParams", 0);
	return rc;
}

/* The generic setter on an application's graph: a kernel node's change
 * as through cuGraphKernelNodeSetParams. */
CUresult cuGraphNodeSetParams(CUgraphNode n, CUgraphNodeParams *p)
{
	CUDA_KERNEL_NODE_PARAMS kp = { 0 };
	if (kernel_params(p, &kp) && OBSERVING())
		ft_sub_graph_params(n, &kp);
	return FT_CALL(cuGraphNodeSetParams, n, p);
}

#define EXEC_NODE_SET(sym, T, switched)                                        \
	CUresult sym(CUgraphExec e, CUgraphNode n, T p)                        \
	{                                                                      \
		CUresult rc = FT_CALL(sym, e, n, p);                           \
		if (rc == CUDA_SUCCESS && OBSERVING())                         \
			exec_changed(e, #sym, switched);                       \
		return rc;                                                     \
	}
#define EXEC_NODE_SET_CTX(sym, T)                                              \
	CUresult sym(CUgraphExec e, CUgraphNode n, T p, CUcontext c)           \
	{                                                                      \
		CUresult rc = FT_CALL(sym, e, n, p, c);                        \
		if (rc == CUDA_SUCCESS && OBSERVING())                         \
			exec_changed(e, #sym, 0);                              \
		return rc;                                                     \
	}
EXEC_NODE_SET_CTX(cuGraphExecMemcpyNodeSetParams, const CUDA_MEMCPY3D *)
EXEC_NODE_SET_CTX(cuGraphExecMemsetNodeSetParams, const CUDA_MEMSET_NODE_PARAMS *)
EXEC_NODE_SET(cuGraphExecHostNodeSetParams, const CUDA_HOST_NODE_PARAMS *, 0)
EXEC_NODE_SET(cuGraphExecChildGraphNodeSetParams, CUgraph, 0)
EXEC_NODE_SET(cuGraphExecEventRecordNodeSetEvent, CUevent, 0)
EXEC_NODE_SET(cuGraphExecEventWaitNodeSetEvent, CUevent, 0)
EXEC_NODE_SET(cuGraphExecBatchMemOpNodeSetParams, const CUDA_BATCH_MEM_OP_NODE_PARAMS *, 0)
EXEC_NODE_SET(cuGraphNodeSetEnabled, unsigned int, 1) /* switches only */

/* Contexts: which device later allocations belong to. */
CUresult cuCtxSetCurrent(CUcontext c)
{
	CUresult rc = FT_CALL(cuCtxSetCurrent, c);
	if (OBSERVING())
		ft_obs_event("ctx_set", "cuCtxSetCurrent", rc, "ctx", H(c), NULL, 0);
	return rc;
}

CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	CUresult rc = FT_CALL(cuCtxPushCurrent_v2, c);
	if (OBSERVING())
		ft_obs_event("ctx_push", "cuCtxPushCurrent_v2", rc, "ctx", H(c), NULL, 0);
	return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice dev)
{
	CUresult rc = FT_CALL(cuDevicePrimaryCtxRetain, c, dev);
	if (OBSERVING())
		ft_obs_event("ctx_retain", "cuDevicePrimaryCtxRetain", rc, "ctx",
			     rc == CUDA_SUCCESS && c ? H(*c) : 0, "device", (uint64_t)dev);
	return rc;
}

/* Unloading a module frees its kernel handles, which may be reused. */
CUresult cuModuleUnload(CUmodule m)
{
	CUresult rc = FT_CALL(cuModuleUnload, m);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_kernels_flush(&ft_g.kernels);
	return rc;
}

CUresult cuLibraryUnload(CUlibrary l)
{
	CUresult rc = FT_CALL(cuLibraryUnload, l);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_kernels_flush(&ft_g.kernels);
	return rc;
}

/* TMA descriptors: remember which global address each encoded map holds. */
CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
				void *addr, const cuuint64_t *dim,
				const cuuint64_t *strides, const cuuint32_t *box,
				const cuuint32_t *estrides, CUtensorMapInterleave il,
				CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
				CUtensorMapFloatOOBfill oob)
{
	CUresult rc = FT_CALL(cuTensorMapEncodeTiled, m, t, rank, addr, dim, strides,
			      box, estrides, il, sw, l2, oob);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_tensormap("cuTensorMapEncodeTiled", m, H(addr));
	return rc;
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
				 void *addr, const cuuint64_t *dim,
				 const cuuint64_t *strides, const int *lower,
				 const int *upper, cuuint32_t ch, cuuint32_t px,
				 const cuuint32_t *estrides, CUtensorMapInterleave il,
				 CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
				 CUtensorMapFloatOOBfill oob)
{
	CUresult rc = FT_CALL(cuTensorMapEncodeIm2col, m, t, rank, addr, dim, strides,
			      lower, upper, ch, px, estrides, il, sw, l2, oob);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_tensormap("cuTensorMapEncodeIm2col", m, H(addr));
	return rc;
}

CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *m, CUtensorMapDataType t,
				     cuuint32_t rank, void *addr, const cuuint64_t *dim,
				     const cuuint64_t *strides, int lower, int upper,
				     cuuint32_t ch, cuuint32_t px,
				     const cuuint32_t *estrides, CUtensorMapInterleave il,
				     CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle sw,
				     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	CUresult rc = FT_CALL(cuTensorMapEncodeIm2colWide, m, t, rank, addr, dim,
			      strides, lower, upper, ch, px, estrides, il, mode, sw,
			      l2, oob);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_tensormap("cuTensorMapEncodeIm2colWide", m, H(addr));
	return rc;
}

CUresult cuTensorMapReplaceAddress(CUtensorMap *m, void *addr)
{
	CUresult rc = FT_CALL(cuTensorMapReplaceAddress, m, addr);
	if (rc == CUDA_SUCCESS && OBSERVING())
		ft_obs_tensormap("cuTensorMapReplaceAddress", m, H(addr));
	return rc;
}
