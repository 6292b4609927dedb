/*
 * Offloading end to end against the fake driver (whose VMM aliases for
 * real): a small model, each weight its own 4 MiB allocation (two chunks),
 * run for STEPS forwards (OFFLOAD_STEPS: that many); every forward's output
 * goes to OUT (a file).
 * offload_case.sh runs it without the library and with it in each transfer
 * mode, with FT_VERIFY and in the modes below (one test a scenario), and
 * compares the files byte for byte.  Kernels run on the host here, so this
 * checks the data path (host store, aliases, the copies into the right
 * addresses, guards), not the ordering on streams (test_offload simulates
 * that).
 * With FT_OFFLOAD_TIMING=eager it prints ft_offload_timing_collect's
 * report on stderr at the end.
 * OFFLOAD_MIB=n makes every tensor n MiB (default 4).
 * usage: offload OUT [modify | graph | mixed | early | stale | shared | stray | roam |
 *                    tail | built | prefill | ...]
 *   built: the model is built on the device: each weight written by a
 *   kernel from a staging tensor (its initialiser); the first three
 *   forwards begin with a kernel whose second word still holds the last
 *   weight written (a stale slot).
 *   prefill: from step 14 every other forward is a "prefill": a new kernel
 *   first carries, launch after launch, layers 0 to 3's first weights in
 *   its second word (stale slots that step on in the pass's turn: the
 *   position is sure there, and wrong), then the forward runs on another
 *   kernel (new to the library at the first prefill, as a prefill's GEMMs
 *   are), embedding included.
 *   modify: after step 10 the program rewrites a weight with a host copy
 *   and reads another back (a checkpoint); the outputs must still match a
 *   run without the library that does the same.
 *   graph: at step 12 (offloading in effect) one forward is captured on a
 *   stream as a CUDA graph and replayed for every later step: the graph
 *   must page the offloaded weights itself.
 *   mixed: the graph captured at step 12 is replayed in odd steps, the
 *   forward runs eagerly in even ones (eager prefills between graph
 *   decode steps): neither may leave the blocks wrong for the other.
 *   early: as graph, captured at step 7 (OFFLOAD_CAPTURE_AT: at that
 *   step), before any plan: once the plan offloads what it reads, the
 *   graph is paged by a substitute.
 *   update: as early, and at step 16 the forward is captured again into a
 *   new graph that cuGraphExecUpdate puts into the executable.
 *   OFFLOAD_LEGACY=1 (with early, update, pieces, params): executables are
 *   made and updated, and kernel nodes changed, through the CUDA 10.2-11
 *   ABIs (cuGraphInstantiate_v2, cuGraphExecUpdate,
 *   cuGraph[Exec]KernelNodeSetParams), found as a CUDA 11 runtime finds
 *   them.
 *   params: as early (the graph kept), and at step 16 the executable's
 *   second node (layer 0's first weight) gets new parameters: it reads
 *   layer 1's first weight instead (cuGraphExecKernelNodeSetParams): the
 *   substitute is built again from the changed clone (OFFLOAD_GENERIC=1:
 *   through cuGraphExecNodeSetParams; OFFLOAD_CAPTURE_AT=12: the graph is
 *   captured after the plan, with its loads, and has no clone;
 *   OFFLOAD_GRAPH_FIRST=1: the node is changed in the application's graph
 *   first, cuGraphKernelNodeSetParams).
 *   enabled: as early (the graph kept), and at step 16 the program switches
 *   the executable's first node off (cuGraphNodeSetEnabled): the substitute
 *   cannot follow such a change, so what the graph reads comes back and the
 *   executable runs itself (outputs change as without the library).
 *   pdl: as early, and in the capture each layer's second kernel depends
 *   on its first by a programmatic (PDL) edge, as kernels launched with
 *   programmatic stream serialisation are captured: the substitute must
 *   keep that edge and add none beside it (the driver refuses a second edge
 *   between two nodes).
 *   hidden: as early, and the captured forward has one more kernel after
 *   layer 2 that adds layer 5's first weight, read through an address in
 *   device memory (a reader the library cannot see), to the activations;
 *   the program prints how many outputs hold NaN (with FT_VERIFY=1, the
 *   substitute's poisoned blocks must show the read).
 *   pieces: at step 7, before any plan, the embedding, each layer and the
 *   head are captured as graphs of their own (vLLM's PIECEWISE graphs),
 *   replayed every step with an eager kernel on activations between them.
 *   stale: a kernel after layer 4 that reads nothing carries, in every
 *   fourth forward, the address of layer 1's first weight (a stale pointer
 *   in a parameter block, as seen on the H200): layer 1 must still be
 *   offloaded (a revisit in a minority of passes is no revisit).
 *   shared: the same in every forward (a weight read again later in every
 *   pass), with layer 4's first weight: layer 1's first weight must stay
 *   resident, and layers 1 and 4 are not read together (the shared
 *   weight does not leave the GPU).
 *   roam: from step 12 on, a kernel launched after every layer always
 *   carries, in a word, the first weight of the layer three on: no
 *   frequency shows it stale, but it points out of the pass's turn; after
 *   a few loads the word is ignored.
 *   tail: layer 2's second weight has an allocation of 6 MiB; from step 12
 *   on, a 1 MiB tensor lives in its free 2 MiB tail (as the caching
 *   allocator places one after discovery): only the tail comes back to
 *   the GPU, the weight stays offloaded, outputs stay the same.
 *   OFFLOAD_TAIL_HIDDEN=1: after layer 2 (its trap in its block) that
 *   tensor is first written through its address in device memory (a
 *   writer the library cannot see: a pointer array's grouped GEMM, a word
 *   judged stale), then read: the tail that comes back keeps the bytes.
 *   grouped: after each layer's second kernel, a kernel reads that
 *   layer's second weight again through its address in device memory (a
 *   grouped GEMM's pointer array): with FT_VERIFY=1 outputs must match.
 *   OFFLOAD_GROUPED_STRAY=step: at that step the kernel's fifth word,
 *   which it does not read (else an address in its table), holds the
 *   address of the weight three layers on (Mixtral's grouped GEMM on the
 *   H100 once carried another layer's experts' address);
 *   OFFLOAD_GROUPED_STRAY_BY=n: n layers on instead (one: in the pass's
 *   turn, the reference moves the pass), in layer 1's kernel alone (one
 *   in each layer's would make the word look like one that reads in turn).
 *   experts: after layer 1, two of sixteen experts, each weight its own
 *   allocation, chosen by the step (a mixture-of-experts layer whose
 *   experts are modules of their own): they are no weights (not read
 *   every pass), stay on the GPU, said at warn; outputs must match.
 *   stacked: after layer 1, two of sixteen experts of one stacked tensor
 *   (one allocation, an expert's slice a tensor each, every byte of it
 *   set), read through their slices' addresses, chosen by the step (a
 *   mixture-of-experts layer as transformers stacks it): the tensor is one
 *   weight; FT_EXPERT_PAGING loads the routed slices only.
 *   OFFLOAD_SPOIL_STEP=s: at step s a kernel writes into the first routed
 *   expert through its address in device memory (an offloaded weight
 *   written, its trap loaded in part: FT_VERIFY says so).
 *   moe: after layer 1, a loop over two of sixteen routed experts of two
 *   stacked tensors (an up and a down projection, a quarter of a tensor an
 *   expert), expert e's up slice, its down slice, then the next expert's
 *   (transformers' loop over routed experts): the two tensors' reads
 *   interleave, and a budget that cuts layers into traps must not cut
 *   between them (each would be read again after the other's trap began).
 *   OFFLOAD_LINGER=dir: the process waits at the end (linger()).
 *   stray: a kernel launched after every layer carries, in the word that
 *   is null after the others, layer 4's first weight after layer 0, every
 *   forward from the third: the word is stale, so layer 4 keeps its place in the pass (its
 *   own trap, loaded in its turn, nothing copied twice).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fake/fake.h"

#define STEPS 24
#define GRAPH_AT 12 /* graph mode: the step captured, replayed from then on */
#define EARLY_AT 7  /* early, update, pieces: captured then, while profiling
		       (latency mode plans from the eager passes' timings) */
#define LAYERS 6
static int N = 1 << 20; /* floats a tensor: 4 MiB (OFFLOAD_MIB sets the MiB) */

static CUfunction add, touch, add_ind, add_out_ind;
static int hidden;      /* hidden: a captured reader the library cannot see */
static int pdl;         /* pdl: programmatic edges in the capture */
static CUdeviceptr table; /* its table: layer 5's first weight's address */
static int stale_every; /* stale/shared: the stray reference every n-th forward */
static int stray;       /* stray: a stale pointer to a later layer's weight */
static int roam;        /* roam: a new kernel's word always points three layers on */
static int tail_from = -1; /* tail: the step from which a tensor lives in a weight's tail */
static CUdeviceptr tail_table; /* OFFLOAD_TAIL_HIDDEN: that tensor's address, in device memory */
static int grouped;     /* grouped: a kernel reads the weight the one before it read */
static int grouped_stray = -1; /* grouped: the step its stray word holds a weight */
static int grouped_by = 3;     /* grouped: of the layer that many on */
static int grouped_layer = -1; /* grouped: in that layer's kernel alone (-1: each) */
static CUfunction add_ind5;
#define EXPERTS 16
static int experts;     /* experts: two of EXPERTS, each its own allocation, read per forward */
static CUdeviceptr ex[EXPERTS];
static int stacked;     /* stacked: two of EXPERTS slices of one allocation, per forward */
static CUdeviceptr xs;
static int hidden = -1; /* stacked: an expert not routed to before step 16 */
static int spoil = -1;  /* stacked: the step whose first routed expert a kernel writes */
static int moe;         /* moe: two of EXPERTS experts of two stacked tensors, in turn */
static CUdeviceptr mup, mdown;

/* The i-th (0, 1) expert the step routes to. */
static unsigned routed(int step, int i)
{
	return ((unsigned)step * 7u + (i ? 11u : 3u)) % EXPERTS;
}
static CUdeviceptr extra; /* OFFLOAD_EXTRA set: one more weight, read in the last layer */
static CUdeviceptr gtable[LAYERS]; /* its tables: each layer's second weight's address */
static CUdeviceptr emb, head, w[LAYERS][2], inp, h, tmp, out, zero;
static CUstream stream; /* NULL, or the captured stream */

static void vec_add_n(CUdeviceptr a, CUdeviceptr x, CUdeviceptr c, int n)
{
	void *p[] = { &a, &x, &c, &n };
	cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, p, NULL);
}

/* c = a + x over n floats, c's address read from device memory at table:
 * a writer the library cannot see. */
static void vec_add_out_ind(CUdeviceptr a, CUdeviceptr x, CUdeviceptr table, int n)
{
	void *p[] = { &a, &x, &table, &n };
	cuLaunchKernel(add_out_ind, 1, 1, 1, 1, 1, 1, 0, stream, p, NULL);
}

static void vec_add(CUdeviceptr a, CUdeviceptr x, CUdeviceptr c)
{
	int n = N;
	void *p[] = { &a, &x, &c, &n };
	cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, p, NULL);
}

static int built;      /* built: the model built on the device (weights written by kernels) */
static int prefills;   /* prefill: every other forward from step 14 on another kernel */
static CUfunction add2;

static void forward(int step)
{
	CUfunction gemm = add;
	if (prefills && step >= 14 && step % 2 == 0) {
		for (int l = 0; l < 4; l++) {
			CUdeviceptr p[4] = { h, w[l][0], 0, 0 };
			void *a[] = { &p[0], &p[1], &p[2], &p[3] };
			cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, a, NULL);
		}
		add = add2;
	}
	vec_add(inp, emb, h);
	if (built && step < 3) {
		/* a kernel new to the library whose second word still holds
		 * the last weight the building kernels wrote (a struct slot
		 * of ATen's, stale), in the first forwards only */
		CUdeviceptr p[4] = { h, w[LAYERS - 1][1], 0, 0 };
		void *a[] = { &p[0], &p[1], &p[2], &p[3] };
		cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, a, NULL);
	}
	for (int l = 0; l < LAYERS; l++) {
		vec_add(h, w[l][0], tmp);
		if (pdl && stream) {
			/* the next node depends on this one programmatically */
			CUstreamCaptureStatus st;
			cuuint64_t id;
			const CUgraphNode *d = NULL;
			size_t nd = 0;
			CUgraphEdgeData e = { .type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
					      .from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC };
			if (cuStreamGetCaptureInfo_v3(stream, &st, &id, NULL, &d, NULL, &nd) ||
			    nd != 1 || cuStreamUpdateCaptureDependencies_v2(
					       stream, (CUgraphNode *)d, &e, 1,
					       CU_STREAM_SET_CAPTURE_DEPENDENCIES))
				fprintf(stderr, "cannot make a programmatic edge\n");
		}
		vec_add(tmp, w[l][1], h);
		if (extra && l == LAYERS - 1)
			vec_add(h, extra, h);
		if (experts && l == 1) {
			/* a mixture-of-experts layer: two of sixteen experts,
			 * routed by the step, each weight its own allocation */
			vec_add(h, ex[routed(step, 0)], h);
			vec_add(h, ex[routed(step, 1)], h);
		}
		for (int i = 0; stacked && l == 1 && i < 2; i++) {
			/* (the first forward reads the tensor's start: the
			 * weight begins at the lowest slice read, and a slice
			 * read lower later would move it once more) */
			unsigned e = ((unsigned)step * 5u + (i ? 7u : 0u)) % EXPERTS;
			/* OFFLOAD_HIDDEN_EXPERT: that expert is not routed to
			 * before step 16 (discovery never sees its start) */
			if (hidden >= 0 && e == (unsigned)hidden && step < 16)
				e = (e + 1) % EXPERTS;
			vec_add(h, xs + (CUdeviceptr)e * N * sizeof(float), h);
		}
		/* OFFLOAD_SPOIL_STEP: a kernel writes into the first routed
		 * expert through an address in device memory, its trap loaded
		 * in part then (FT_VERIFY must say so) */
		if (stacked && l == 1 && step == spoil) {
			CUdeviceptr e = xs + (CUdeviceptr)((unsigned)step * 5u % EXPERTS) * N *
						     sizeof(float), tab;
			cuMemAlloc_v2(&tab, sizeof(e));
			cuMemcpyHtoD_v2(tab, &e, sizeof(e));
			vec_add_out_ind(h, h, tab, N);
		}
		for (int i = 0; moe && l == 1 && i < 2; i++) {
			unsigned e = ((unsigned)step * 5u + (i ? 7u : 0u)) % EXPERTS;
			CUdeviceptr at = (CUdeviceptr)e * (N / 4) * sizeof(float);
			vec_add_n(h, mup + at, h, N / 4);
			vec_add_n(h, mdown + at, h, N / 4);
		}
		if (grouped) {
			/* the weight just read, again, through its address in
			 * device memory (a grouped GEMM reads its experts
			 * through the pointer array the kernel before it wrote) */
			int n = N;
			CUdeviceptr odd = step == grouped_stray && (grouped_layer < 0 || l == grouped_layer)
						 ? w[(l + grouped_by) % LAYERS][0] : gtable[l] + 8;
			void *p[] = { &gtable[l], &h, &h, &n, &odd };
			cuLaunchKernel(grouped_stray >= 0 ? add_ind5 : add_ind, 1, 1, 1, 1, 1, 1, 0,
				       stream, p, NULL);
		}
		if (stray) {
			/* after every layer the same kernel; from the third
			 * forward on, its second word holds layer 4's first
			 * weight after layer 0 only (an uninitialised struct
			 * slot, as ATen's cat and offset calculators carry on
			 * the H200, after their first launches) */
			CUdeviceptr p[4] = { h, l == 0 && step >= 2 ? w[4][0] : 0, 0, 0 };
			void *a[] = { &p[0], &p[1], &p[2], &p[3] };
			cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, a, NULL);
		}
		if (roam && step >= 12) {
			/* from step 12 (offloading in effect) a kernel new to
			 * the library after every layer, whose second word
			 * always holds a weight three layers on (a struct slot
			 * stale pointers always fill) */
			CUdeviceptr p[4] = { h, w[(l + 3) % LAYERS][0], 0, 0 };
			void *a[] = { &p[0], &p[1], &p[2], &p[3] };
			cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, a, NULL);
		}
		if (l == 2 && hidden && stream) {
			/* only in the capture (stream is set from then on) */
			int n = N;
			void *p[] = { &table, &h, &h, &n };
			cuLaunchKernel(add_ind, 1, 1, 1, 1, 1, 1, 0, stream, p, NULL);
		}
		if (l == 2 && tail_table && step >= tail_from) {
			/* written where the library cannot see, then read */
			vec_add_out_ind(h, h, tail_table, N / 4);
			vec_add_n(w[2][1] + N * sizeof(float), h, h, N / 4);
		}
		if (l == 4 && tail_from >= 0 && step >= tail_from) {
			/* a 1 MiB tensor in the free tail of layer 2's second
			 * weight's allocation, written and read back */
			CUdeviceptr t = w[2][1] + N * sizeof(float);
			vec_add_n(h, h, t, N / 4);
			vec_add_n(t, h, h, N / 4);
		}
		if (l == 4 && stale_every) {
			/* the same launch every forward; only the word varies
			 * (shared: it reads layer 4's first weight too) */
			CUdeviceptr p[4] = { h, step % stale_every ? 0 : w[1][0],
					     stale_every == 1 ? w[4][0] : 0, 0 };
			void *a[] = { &p[0], &p[1], &p[2], &p[3] };
			cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, a, NULL);
		}
	}
	vec_add(h, head, out);
	add = gemm;
}

/* pieces: the embedding (0), each layer (1 + l) and the head (LAYERS + 1),
 * captured one by one */
#define PIECES (LAYERS + 2)
static void piece(int i)
{
	if (i == 0) {
		vec_add(inp, emb, h);
	} else if (i <= LAYERS) {
		vec_add(h, w[i - 1][0], tmp);
		vec_add(tmp, w[i - 1][1], h);
	} else {
		vec_add(h, head, out);
	}
}

/* OFFLOAD_PIECES_JOINED: pieces 1 and 2 (layers 0 and 1) are one graph,
 * made by two captures (the second into the first's graph) */
static int joined;

/* A forward of pieces: each replayed (or run eagerly), with an eager
 * kernel on activations only between them (attention's place). */
static void forward_pieces(CUgraphExec *pe)
{
	for (int i = 0; i < PIECES; i++) {
		if (joined && i == 2 && pe[1])
			continue; /* in piece 1's graph */
		if (i) {
			CUstream s = stream;
			stream = NULL;
			vec_add(h, zero, h);
			stream = s;
		}
		if (pe[i])
			cuGraphLaunch(pe[i], stream);
		else
			piece(i);
	}
}

static CUgraph kept; /* enabled: the graph is kept, for its nodes */

/* OFFLOAD_LEGACY=1: executables made and updated through the CUDA 10.2-11
 * ABIs (error node and log buffer, no flags), looked up as a CUDA 11
 * runtime does, by cuGetProcAddress at version 11000. */
typedef CUresult (*legacy_instantiate_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*legacy_update_fn)(CUgraphExec, CUgraph, CUgraphNode *,
				     CUgraphExecUpdateResult *);
typedef CUresult (*legacy_node_set_fn)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
typedef CUresult (*legacy_exec_set_fn)(CUgraphExec, CUgraphNode,
				       const CUDA_KERNEL_NODE_PARAMS_v1 *);
static legacy_instantiate_fn legacy_instantiate;
static legacy_update_fn legacy_update;
static legacy_node_set_fn legacy_node_set;
static legacy_exec_set_fn legacy_exec_set;

static int legacy_lookup(void)
{
	if (!getenv("OFFLOAD_LEGACY"))
		return 0;
	if (cuGetProcAddress_v2("cuGraphInstantiate", (void **)&legacy_instantiate, 11000, 0,
				NULL) != CUDA_SUCCESS ||
	    cuGetProcAddress_v2("cuGraphExecUpdate", (void **)&legacy_update, 11000, 0, NULL) !=
		    CUDA_SUCCESS ||
	    cuGetProcAddress_v2("cuGraphKernelNodeSetParams", (void **)&legacy_node_set, 11000, 0,
				NULL) != CUDA_SUCCESS ||
	    cuGetProcAddress_v2("cuGraphExecKernelNodeSetParams", (void **)&legacy_exec_set, 11000,
				0, NULL) != CUDA_SUCCESS ||
	    !legacy_instantiate || !legacy_update || !legacy_node_set || !legacy_exec_set) {
		fprintf(stderr, "legacy entry points not found\n");
		return -1;
	}
	return 0;
}

static CUresult instantiate(CUgraphExec *exec, CUgraph g)
{
	char log[64];
	CUgraphNode err;
	return legacy_instantiate ? legacy_instantiate(exec, g, &err, log, sizeof(log))
				  : cuGraphInstantiateWithFlags(exec, g, 0);
}

static CUresult update_exec(CUgraphExec exec, CUgraph g)
{
	CUgraphExecUpdateResultInfo info;
	CUgraphExecUpdateResult result;
	CUgraphNode err;
	return legacy_update ? legacy_update(exec, g, &err, &result)
			     : cuGraphExecUpdate_v2(exec, g, &info);
}

static int capture(void (*fn)(int), int arg, CUgraphExec *exec)
{
	CUgraph g;
	cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
	fn(arg);
	if (cuStreamEndCapture(stream, &g) != CUDA_SUCCESS ||
	    instantiate(exec, g) != CUDA_SUCCESS) {
		fprintf(stderr, "capture failed\n");
		return -1;
	}
	if (kept == (CUgraph)1)
		kept = g;
	else
		cuGraphDestroy(g); /* as PyTorch, right after instantiating */
	return 0;
}

/* Piece 1, then piece 2 captured into its graph after its last node: one
 * executable for both (*exec replaced). */
static int capture_joined(CUgraphExec *exec)
{
	CUgraph g;
	CUgraphNode last = NULL;
	const CUgraphNode *deps = NULL;
	CUstreamCaptureStatus st;
	size_t n = 0;
	cuGraphExecDestroy(*exec);
	cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
	piece(1);
	/* the capture's last node, which piece 2 follows */
	if (cuStreamGetCaptureInfo_v3(stream, &st, NULL, NULL, &deps, NULL, &n) == CUDA_SUCCESS &&
	    n == 1)
		last = deps[0];
	if (cuStreamEndCapture(stream, &g) != CUDA_SUCCESS || !last ||
	    cuStreamBeginCaptureToGraph(stream, g, &last, NULL, 1,
					CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) {
		fprintf(stderr, "joined capture failed\n");
		return -1;
	}
	piece(2);
	if (cuStreamEndCapture(stream, &g) != CUDA_SUCCESS ||
	    instantiate(exec, g) != CUDA_SUCCESS) {
		fprintf(stderr, "joined capture failed\n");
		return -1;
	}
	cuGraphDestroy(g);
	return 0;
}

static void fill_now(CUdeviceptr d, float base);

/* A weight's values; built: written by a kernel from a staging tensor, as
 * a model built on the device is (its initialisers). */
static void fill(CUdeviceptr d, float base)
{
	static CUdeviceptr src;
	if (!built || d == zero || d == inp) {
		fill_now(d, base);
		return;
	}
	if (!src)
		cuMemAlloc_v2(&src, N * sizeof(float));
	fill_now(src, base);
	vec_add(src, zero, d);
}

static void fill_now(CUdeviceptr d, float base)
{
	static float *v;
	if (!v)
		v = malloc((size_t)N * sizeof(*v));
	/* every value a bfloat16's (the low half of each float zero): the
	 * store's codec finds what it finds in a model's weights */
	for (int i = 0; i < N; i++) {
		float x = base + (float)(i % 977) * 0.001f;
		uint32_t u;
		memcpy(&u, &x, sizeof(u));
		u &= 0xffff0000u;
		memcpy(&v[i], &u, sizeof(u));
	}
	cuMemcpyHtoD_v2(d, v, (size_t)N * sizeof(*v));
}

/* OFFLOAD_LINGER=dir: after the last step, says so (dir/ready.<pid>) and
 * waits for dir/go (at most a minute): processes that share a host store
 * are alive at once. */
static void linger(void)
{
	const char *d = getenv("OFFLOAD_LINGER");
	if (!d)
		return;
	char p[4096];
	snprintf(p, sizeof(p), "%s/ready.%d", d, (int)getpid());
	FILE *f = fopen(p, "w");
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "%s/go", d);
	for (int i = 0; i < 6000 && access(p, F_OK); i++)
		usleep(10000);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int modify = argc > 2 && !strcmp(argv[2], "modify");
	int mixed = argc > 2 && !strcmp(argv[2], "mixed");
	int graph = mixed || (argc > 2 && !strcmp(argv[2], "graph"));
	int update = argc > 2 && !strcmp(argv[2], "update");
	int enabled = argc > 2 && !strcmp(argv[2], "enabled");
	int params = argc > 2 && !strcmp(argv[2], "params");
	hidden = argc > 2 && !strcmp(argv[2], "hidden");
	pdl = argc > 2 && !strcmp(argv[2], "pdl");
	int early = update || enabled || params || hidden || pdl ||
		    (argc > 2 && !strcmp(argv[2], "early"));
	int nan_steps = 0;
	int pieces = argc > 2 && !strcmp(argv[2], "pieces");
	int capture_at = graph ? GRAPH_AT : early ? EARLY_AT : -1;
	/* OFFLOAD_CAPTURE_AT: the capture at another step (a serving engine's
	 * right after its first forward) */
	if (capture_at >= 0 && getenv("OFFLOAD_CAPTURE_AT"))
		capture_at = atoi(getenv("OFFLOAD_CAPTURE_AT"));
	/* OFFLOAD_PIECES_AT: the pieces at another step (after the plan) */
	int pieces_at = getenv("OFFLOAD_PIECES_AT") ? atoi(getenv("OFFLOAD_PIECES_AT")) : EARLY_AT;
	joined = getenv("OFFLOAD_PIECES_JOINED") != NULL;
	CUgraphExec pe[PIECES] = { 0 };
	if (enabled || params)
		kept = (CUgraph)1; /* the capture keeps its graph */
	stale_every = argc > 2 && !strcmp(argv[2], "stale") ? 4 :
		      argc > 2 && !strcmp(argv[2], "shared") ? 1 : 0;
	stray = argc > 2 && !strcmp(argv[2], "stray");
	grouped = argc > 2 && !strcmp(argv[2], "grouped");
	experts = argc > 2 && !strcmp(argv[2], "experts");
	stacked = argc > 2 && !strcmp(argv[2], "stacked");
	if (getenv("OFFLOAD_HIDDEN_EXPERT"))
		hidden = atoi(getenv("OFFLOAD_HIDDEN_EXPERT"));
	if (getenv("OFFLOAD_SPOIL_STEP"))
		spoil = atoi(getenv("OFFLOAD_SPOIL_STEP"));
	moe = argc > 2 && !strcmp(argv[2], "moe");
	roam = argc > 2 && !strcmp(argv[2], "roam");
	built = argc > 2 && !strcmp(argv[2], "built");
	prefills = argc > 2 && !strcmp(argv[2], "prefill");
	if (argc > 2 && !strcmp(argv[2], "tail"))
		tail_from = 12;
	CUgraphExec exec = NULL;
	FILE *f = fopen(argv[1], "wb");
	if (!f)
		return 2;
	const char *mib = getenv("OFFLOAD_MIB");
	if (mib && atoi(mib) > 0)
		N = atoi(mib) << 18;
	cuInit(0);
	if (legacy_lookup())
		return 1;
	add = fake_function("vec_add");
	touch = fake_function("touch4");
	add_ind = fake_function("vec_add_ind");
	add_out_ind = fake_function("vec_add_out_ind");
	add_ind5 = fake_function("vec_add_ind5");
	if (getenv("OFFLOAD_GROUPED_STRAY"))
		grouped_stray = atoi(getenv("OFFLOAD_GROUPED_STRAY"));
	if (getenv("OFFLOAD_GROUPED_STRAY_BY"))
		grouped_by = atoi(getenv("OFFLOAD_GROUPED_STRAY_BY")), grouped_layer = 1;
	add2 = fake_function("vec_add2");
	if (built) { /* (the initialisers add it) */
		cuMemAlloc_v2(&zero, N * sizeof(float));
		fill(zero, 0.0f);
	}
	CUdeviceptr *all[] = { &emb, &head };
	for (int i = 0; i < 2; i++)
		cuMemAlloc_v2(all[i], N * sizeof(float));
	for (int l = 0; l < LAYERS; l++)
		for (int k = 0; k < 2; k++)
			cuMemAlloc_v2(&w[l][k], (size_t)N * sizeof(float) + (l == 2 && k == 1 ? 2u << 20 : 0));
	fill(emb, 3.125f);
	fill(head, 3.375f);
	if (getenv("OFFLOAD_EXTRA")) {
		cuMemAlloc_v2(&extra, N * sizeof(float));
		fill(extra, 3.625f);
	}
	if (tail_from >= 0 && getenv("OFFLOAD_TAIL_HIDDEN")) {
		CUdeviceptr t = w[2][1] + N * sizeof(float);
		cuMemAlloc_v2(&tail_table, 64);
		cuMemcpyHtoD_v2(tail_table, &t, sizeof(t));
	}
	if (hidden) {
		cuMemAlloc_v2(&table, 64);
		cuMemcpyHtoD_v2(table, &w[5][0], sizeof(w[5][0]));
	}
	for (int e = 0; experts && e < EXPERTS; e++) {
		cuMemAlloc_v2(&ex[e], N * sizeof(float));
		fill(ex[e], 4.0f + 0.125f * (float)e);
	}
	if (stacked) {
		float *x = malloc((size_t)N * EXPERTS * sizeof(*x));
		if (!x)
			return 2;
		for (size_t i = 0; i < (size_t)N * EXPERTS; i++)
			x[i] = 0.0625f * (float)(i / (size_t)N + 1) + (float)(i % 1013) * 0.0001f;
		cuMemAlloc_v2(&xs, (size_t)N * EXPERTS * sizeof(float));
		cuMemcpyHtoD_v2(xs, x, (size_t)N * EXPERTS * sizeof(float));
		free(x);
	}
	for (int k = 0; moe && k < 2; k++) {
		/* every byte set: a slice's bytes differ from the next's */
		size_t n = (size_t)N / 4 * EXPERTS;
		float *x = malloc(n * sizeof(*x));
		CUdeviceptr *t = k ? &mdown : &mup;
		if (!x)
			return 2;
		for (size_t i = 0; i < n; i++)
			x[i] = 0.03125f * (float)(i / ((size_t)N / 4) + 1 + k) + (float)(i % 1013) * 0.0001f;
		cuMemAlloc_v2(t, n * sizeof(*x));
		cuMemcpyHtoD_v2(*t, x, n * sizeof(*x));
		free(x);
	}
	for (int l = 0; grouped && l < LAYERS; l++) {
		cuMemAlloc_v2(&gtable[l], 64);
		cuMemcpyHtoD_v2(gtable[l], &w[l][1], sizeof(w[l][1]));
	}
	for (int l = 0; l < LAYERS; l++)
		for (int k = 0; k < 2; k++)
			fill(w[l][k], 0.25f * (float)(l * 2 + k));
	float *v = malloc((size_t)N * sizeof(*v));
	/* OFFLOAD_STEPS: more forwards (or fewer) */
	int steps = getenv("OFFLOAD_STEPS") ? atoi(getenv("OFFLOAD_STEPS")) : STEPS;
	for (int s = 0; s < steps; s++) {
		if (!inp) {
			/* activations appear with the first forward */
			cuMemAlloc_v2(&inp, N * sizeof(float));
			cuMemAlloc_v2(&h, N * sizeof(float));
			cuMemAlloc_v2(&tmp, N * sizeof(float));
			cuMemAlloc_v2(&out, N * sizeof(float));
			if (!zero) {
				cuMemAlloc_v2(&zero, N * sizeof(float));
				fill(zero, 0.0f);
			}
		}
		if (modify && s == 10) {
			fill(w[3][0], 9.5f);                              /* a weight rewritten */
			cuMemcpyDtoH_v2(v, w[4][1], N * sizeof(float)); /* one saved */
			fwrite(v, sizeof(float), N, f);
		}
		fill(inp, (float)s);
		if (s == capture_at || (pieces && s == pieces_at) || (update && s == 16)) {
			/* one forward captured, then replayed every step (or
			 * its pieces; or again, into the same executable) */
			CUstream cs;
			CUgraph g;
			cuStreamCreate(&cs, 0);
			stream = cs;
			if (pieces) {
				for (int i = 0; i < PIECES; i++)
					if (!(joined && i == 2) && capture(piece, i, &pe[i]))
						return 1;
				if (joined && capture_joined(&pe[1]))
					return 1;
			} else if (exec) {
				cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL);
				forward(s);
				if (cuStreamEndCapture(cs, &g) != CUDA_SUCCESS ||
				    update_exec(exec, g) != CUDA_SUCCESS) {
					fprintf(stderr, "update failed\n");
					return 1;
				}
				cuGraphDestroy(g);
			} else if (capture((void (*)(int))forward, s, &exec)) {
				return 1;
			}
		}
		if (enabled && s == 16) {
			CUgraphNode node[1];
			size_t nn = 1;
			if (cuGraphGetNodes(kept, node, &nn) != CUDA_SUCCESS ||
			    cuGraphNodeSetEnabled(exec, node[0], 0) != CUDA_SUCCESS) {
				fprintf(stderr, "cuGraphNodeSetEnabled failed\n");
				return 1;
			}
		}
		if (params && s == 16) {
			/* the graph's second kernel node (a graph captured
			 * after the plan has the library's copies too) */
			CUgraphNode node[512], second = NULL;
			size_t nn = 512;
			CUdeviceptr a = h, x = w[1][0], c = tmp;
			int n = N, kernels = 0;
			void *pv[] = { &a, &x, &c, &n };
			CUDA_KERNEL_NODE_PARAMS kp = { 0 };
			if (cuGraphGetNodes(kept, node, &nn) != CUDA_SUCCESS)
				nn = 0;
			for (size_t i = 0; i < nn && !second; i++) {
				CUgraphNodeType t;
				if (cuGraphNodeGetType(node[i], &t) == CUDA_SUCCESS &&
				    t == CU_GRAPH_NODE_TYPE_KERNEL && ++kernels == 2)
					second = node[i];
			}
			if (!second || cuGraphKernelNodeGetParams_v2(second, &kp) != CUDA_SUCCESS) {
				fprintf(stderr, "cannot read the graph's second kernel node\n");
				return 1;
			}
			node[1] = second;
			kp.kernelParams = pv;
			kp.extra = NULL;
			/* OFFLOAD_GENERIC: through the generic setter */
			CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };
			memcpy(&np.kernel, &kp, sizeof(kp));
			/* OFFLOAD_LEGACY: the CUDA 10-11 ABI's setters */
			CUDA_KERNEL_NODE_PARAMS_v1 k1 = {
				.func = kp.func, .gridDimX = kp.gridDimX, .gridDimY = kp.gridDimY,
				.gridDimZ = kp.gridDimZ, .blockDimX = kp.blockDimX,
				.blockDimY = kp.blockDimY, .blockDimZ = kp.blockDimZ,
				.sharedMemBytes = kp.sharedMemBytes, .kernelParams = pv,
			};
			/* OFFLOAD_GRAPH_FIRST: the application's graph's node
			 * first, then the executable's */
			if (getenv("OFFLOAD_GRAPH_FIRST") &&
			    (legacy_node_set ? legacy_node_set(second, &k1)
					     : cuGraphKernelNodeSetParams_v2(second, &kp)) !=
				    CUDA_SUCCESS) {
				fprintf(stderr, "cuGraphKernelNodeSetParams failed\n");
				return 1;
			}
			if ((getenv("OFFLOAD_GENERIC") ? cuGraphExecNodeSetParams(exec, node[1], &np)
			     : legacy_exec_set	       ? legacy_exec_set(exec, node[1], &k1)
						       : cuGraphExecKernelNodeSetParams_v2(
								 exec, node[1], &kp)) != CUDA_SUCCESS) {
				fprintf(stderr, "cuGraphExecKernelNodeSetParams failed\n");
				return 1;
			}
		}
		if (pieces && s >= EARLY_AT)
			forward_pieces(pe);
		else if (exec && (!mixed || s % 2))
			cuGraphLaunch(exec, stream);
		else
			forward(s);
		cuMemcpyDtoH_v2(v, out, N * sizeof(float));
		fwrite(v, sizeof(float), N, f);
		for (int i = 0; i < N; i++)
			if (v[i] != v[i]) {
				nan_steps++;
				break;
			}
	}
	fclose(f);
	if (hidden)
		printf("outputs with NaN: %d\n", nan_steps);
	/* with the library and FT_OFFLOAD_TIMING=eager: the report, on stderr */
	long (*collect)(char *, unsigned long) =
		(long (*)(char *, unsigned long))dlsym(RTLD_DEFAULT, "ft_offload_timing_collect");
	static char report[16384];
	if (collect && collect(report, sizeof(report)) > 0)
		fprintf(stderr, "%s", report);
	/* OFFLOAD_JOURNAL=path: FT_VERIFY's journal of the executor's steps */
	int (*journal)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT,
								    "ft_verify_journal");
	if (getenv("OFFLOAD_JOURNAL"))
		printf("journal: %d\n", journal ? journal(getenv("OFFLOAD_JOURNAL")) : -2);
	linger();
	return 0;
}
