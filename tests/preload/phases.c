/*
 * Passes and phases in a live process (fake driver), with
 * FT_DISCOVERY_ITERS=1 FT_PROFILING_ITERS=2:
 *  1. eager forwards of a small "model" (launches whose pointers walk a
 *     weight allocation in the same order every forward) are counted as
 *     passes and move the phase DISCOVERY -> PROFILING -> INFERENCE, where
 *     eager detection stops;
 *  2. in a second process (argv[1] = "graph"), replays of a captured graph
 *     count, and after ft_mark_pass() only marks count.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fake/fake.h"
#include "flextensor.h"

static int failures;
#define CHECK(c, ...)                                                         \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "FAIL %d: ", __LINE__);               \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			failures++;                                           \
		}                                                             \
	} while (0)

static CUdeviceptr W, A;
static CUfunction add;

static void op(CUdeviceptr x, CUdeviceptr y, CUdeviceptr z, CUstream s)
{
	int n = 0;
	void *p[] = { &x, &y, &z, &n };
	cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, p, NULL);
}

/* A forward: embedding, 4 layers of 5 weights, head; activations reused. */
static void forward(CUstream s)
{
	op(W, A, A + 256, s);
	for (int l = 0; l < 4; l++)
		for (int k = 0; k < 5; k++)
			op(A + 256, W + 4096 + (CUdeviceptr)(l * 5 + k) * 512, A + 512 + (CUdeviceptr)k * 64, s);
	op(A + 512, W + 65536, A + 1024, s);
}

static unsigned long long stat(const char *n)
{
	unsigned long long v = 0;
	ft_stat_get(n, &v);
	return v;
}

int main(int argc, char **argv)
{
	cuInit(0);
	cuMemAlloc_v2(&W, 1 << 20);
	cuMemAlloc_v2(&A, 1 << 16);
	add = fake_function("vec_add");
	CHECK(ft_iters_before_inference() == 3, "iters_before_inference %llu",
	      ft_iters_before_inference());
	CHECK(ft_phase() == FT_DISCOVERY, "phase %d at start", ft_phase());

	if (argc > 1 && !strcmp(argv[1], "graph")) {
		CUstream s = (CUstream)0x77;
		cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		forward(s);
		CUgraph g;
		CUgraphExec e;
		cuStreamEndCapture(s, &g);
		cuGraphInstantiateWithFlags(&e, g, 0);
		cuGraphLaunch(e, s);
		CHECK(ft_phase() == FT_PROFILING, "phase %d after one replay", ft_phase());
		cuGraphLaunch(e, s);
		cuGraphLaunch(e, s);
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after three replays", ft_phase());
		CHECK(stat("passes_graph") == 3, "passes_graph %llu", stat("passes_graph"));
		CHECK(ft_mark_pass() == 4, "mark");
		cuGraphLaunch(e, s); /* after a mark, replays no longer count */
		CHECK(stat("passes_graph") == 3 && stat("passes_marked") == 1,
		      "graph %llu marked %llu", stat("passes_graph"), stat("passes_marked"));
	} else {
		for (int i = 0; i < 5; i++)
			forward(NULL);
		/* Boundaries at the starts of forwards 2, 3, 4; detection then
		 * stops, as the phase is INFERENCE. */
		CHECK(stat("passes_eager") == 3, "passes_eager %llu", stat("passes_eager"));
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after 5 forwards", ft_phase());
	}
	printf("phases (%s): %d failure(s)\n", argc > 1 ? argv[1] : "eager", failures);
	return failures ? 1 : 0;
}
