/*
 * Passes, phases and what the phases learn, in a live process (fake
 * driver), with FT_DISCOVERY_ITERS=1 FT_PROFILING_ITERS=2: two passes of
 * similar length before discovery starts, two discovery passes (two content
 * samples), three profiling passes (the first begins unobserved): INFERENCE
 * after 2 + 2 + 3 = 7 passes:
 *  eager  (fresh: after removing an old profile.json) forwards of a small "model": 22 weights of 1 MiB read in the same
 *         order every forward, a staging buffer refilled by a copy and a
 *         cache cleared by a memset every forward, activations allocated
 *         during the first forward (32 MiB, written every forward as
 *         kernels would, with new regions in every layer as a model's
 *         activations have: more regions than weights, each of which
 *         could hold a weight's size).  Passes are found, exactly the 22
 *         weights are identified, traps are timed and profile.json is
 *         written to FT_PROFILE_STORAGE_DIR.
 *  graph  replays of a captured forward: their launches (the capture's)
 *         are launches as eager ones are, so their pass boundaries are
 *         found and they read what the capture read: the same 22 weights
 *         are found (replays are not timed); after ft_mark_pass() only
 *         marks count.
 *  again  as eager, with the profile.json an eager run wrote: the first
 *         forward reads the saved weights, with the saved contents, so its
 *         timings are taken and INFERENCE begins at its end, before pass
 *         detection found any boundary (no checksum pass, no profiling;
 *         phases_profile.sh runs the sequence), also when the head, the
 *         last weight, is read after more tries than WATCH_TRIES (the
 *         H200 start-up harness: 113 of 114 weights found).
 *  skip   as again, with FT_SKIP_DISCOVERY=1: the first discovery pass is
 *         matched against the saved weights' sizes only.
 *  reload as again, but a forward first reads weights of other contents
 *         (initialised, not loaded yet), then the right ones are copied
 *         in: no new region comes, and the profile is taken within two
 *         forwards after the copy all the same.
 *  slow   as again, with a profile.json whose checksums are not this
 *         model's: discovery runs its passes, then INFERENCE without
 *         profiling.
 *  api DIR OUT  as again, the profile taken with ft_load_profile(DIR) and
 *         written with ft_save_profile(OUT) (no FT_PROFILE_STORAGE_DIR).
 *  engine as again, as a serving engine starts: a word of the head, the
 *         last weight, is changed before the head is read and put back
 *         after it (activations passing through a weight's segment tail
 *         during the profile forward, seen on the H200), so no try during
 *         the forward finds the head with its contents; then a stream
 *         capture begins, and the profile is taken before it does.
 */
#include <cjson/cJSON.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/read_file.h"
#include "../fake/fake.h"
#include "flextensor.h"
#include "../common/check.h"


#define MB (1u << 20)
static CUdeviceptr W, A, STAGING, CACHE, ONES; /* ONES: add1's operand */
static CUfunction add;
static CUdeviceptr head_word; /* engine: the word the first forward changes */

static void op(CUdeviceptr x, CUdeviceptr y, CUdeviceptr z, CUstream s)
{
	int n = 0;
	void *p[] = { &x, &y, &z, &n };
	cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, p, NULL);
}

/* x += y for one float, in place (x misaligned: no region of its own, but
 * a read of the weight holding it; y through ONES, a region seen before). */
static void add1(CUdeviceptr x, float y)
{
	int n = 1;
	cuMemcpyHtoD_v2(ONES, &y, sizeof(y));
	void *p[] = { &x, &ONES, &x, &n };
	cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, p, NULL);
}

/* A forward: embedding, 4 layers of 5 weights, head. */
static void forward(CUstream s, int step)
{
	static unsigned host[16];
	host[0] = (unsigned)step;
	if (!A)
		cuMemAlloc_v2(&A, 32 * MB); /* activations: allocated by the first forward */
	if (!s) {
		cuMemcpyHtoD_v2(STAGING, host, sizeof(host));
		cuMemsetD32_v2(CACHE, (unsigned)step, 1024);
		cuMemsetD32_v2(A, (unsigned)step, 32 * MB / 4); /* as kernels write activations */
	}
	op(STAGING, W, A + 256, s);
	for (int l = 0; l < 4; l++) {
		CUdeviceptr act = A + MB + (CUdeviceptr)l * MB; /* this layer's activations */
		for (int k = 0; k < 5; k++) {
			op(A + 256, W + (CUdeviceptr)(1 + l * 5 + k) * MB, act + (CUdeviceptr)k * 4096, s);
			op(act + (CUdeviceptr)k * 4096, act + 65536, act + 131072 + (CUdeviceptr)k * 4096, s);
		}
	}
	op(A + 512, CACHE, A + 768, s);
	if (head_word && !step && !s)
		add1(head_word, 1.0f);
	op(A + 768, W + 21 * MB, A + 1024, s);
	if (head_word && !step && !s)
		add1(head_word, -1.0f); /* as it was */
}

/* A replay of the captured forward, whose kernels would write the
 * activations as an eager forward's do (the fake driver runs no kernel). */
static void replay(CUgraphExec e, CUstream s, int step)
{
	cuMemsetD32_v2(A, (unsigned)step, 32 * MB / 4);
	cuGraphLaunch(e, s);
}

static unsigned long long stat(const char *n)
{
	unsigned long long v = 0;
	ft_stat_get(n, &v);
	return v;
}

static void check_profile(int samples)
{
	const char *dir = getenv("FT_PROFILE_STORAGE_DIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/profile.json", dir ? dir : ".");
	char *text = read_file(path);
	CHECK(text, "no %s", path);
	if (!text)
		return;
	cJSON *p = cJSON_Parse(text);
	free(text);
	cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "model"), "weight_bytes");
	CHECK(cJSON_GetArraySize(w) == 22, "%d weights in profile.json", cJSON_GetArraySize(w));
	cJSON *x;
	int ok = 1;
	cJSON_ArrayForEach(x, w) ok &= x->valuedouble == MB;
	CHECK(ok, "weight sizes are not 1 MiB each");
	cJSON *traps = cJSON_GetObjectItem(p, "traps");
	CHECK(cJSON_GetArraySize(traps) > 0, "no traps");
	cJSON_ArrayForEach(x, traps) {
		cJSON *c = cJSON_GetObjectItem(x, "compute_ms");
		CHECK(cJSON_GetObjectItem(c, "samples")->valueint == samples,
		      "trap timed %d times, expected %d", cJSON_GetObjectItem(c, "samples")->valueint,
		      samples);
	}
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p, "copy_curve")) == 6, "no copy curve");
	cJSON *plan = cJSON_GetObjectItem(p, "plan");
	CHECK(cJSON_IsObject(plan) && !strcmp(cJSON_GetObjectItem(plan, "mode")->valuestring, "latency") &&
		      cJSON_GetArraySize(cJSON_GetObjectItem(plan, "traps")) == cJSON_GetArraySize(traps),
	      "no latency-mode plan for every trap in profile.json");
	cJSON_Delete(p);
}

int main(int argc, char **argv)
{
	int graph = argc > 1 && !strcmp(argv[1], "graph");
	int reload = argc > 1 && !strcmp(argv[1], "reload");
	int skip = argc > 1 && (!strcmp(argv[1], "skip") || !strcmp(argv[1], "again"));
	int slow = argc > 1 && !strcmp(argv[1], "slow");
	int api = argc > 2 && !strcmp(argv[1], "api");
	int engine = argc > 1 && !strcmp(argv[1], "engine");
	if (argc > 1 && (!strcmp(argv[1], "fresh") || graph)) {
		/* no profile.json from an earlier run of this test */
		char path[512];
		snprintf(path, sizeof(path), "%s/profile.json", getenv("FT_PROFILE_STORAGE_DIR"));
		unlink(path);
	}
	cuInit(0);
	cuMemAlloc_v2(&W, 22 * MB);
	{
		/* the weights' contents (all-zero bytes prove nothing) */
		unsigned *v = malloc(22 * MB);
		for (size_t i = 0; v && i < 22 * MB / sizeof(*v); i++)
			v[i] = (unsigned)(i * 2654435761u) ^ (unsigned)reload;
		if (v)
			cuMemcpyHtoD_v2(W, v, 22 * MB);
		cuMemAlloc_v2(&STAGING, 4096);
		cuMemAlloc_v2(&CACHE, 4096);
		cuMemAlloc_v2(&ONES, 4096);
		/* a word of the head that is a float f with f + 1 - 1 == f,
		 * at an address no tensor starts at */
		for (size_t i = 21 * MB / sizeof(*v) + 1; engine && v && !head_word; i++) {
			float f;
			memcpy(&f, &v[i], sizeof(f));
			if (i % 4 && f > 1 && f < 1e6f && (f + 1.0f) - 1.0f == f)
				head_word = W + i * sizeof(*v);
		}
		add = fake_function("vec_add");
		if (reload) {
			forward(NULL, 0); /* the initialised weights */
			for (size_t i = 0; v && i < 22 * MB / sizeof(*v); i++)
				v[i] = (unsigned)(i * 2654435761u);
			if (v)
				cuMemcpyHtoD_v2(W, v, 22 * MB);
		}
		free(v);
	}
	CHECK(ft_iters_before_inference() == 7, "iters_before_inference %llu",
	      ft_iters_before_inference());
	CHECK(ft_phase() == FT_DISCOVERY, "phase %d at start", ft_phase());

	if (reload) {
		int i = 0;
		while (i < 9 && ft_phase() != FT_INFERENCE)
			forward(NULL, i++);
		CHECK(i <= 2, "INFERENCE after %d forwards after the copy, not 2 at most", i);
	} else if (graph) {
		CUstream s = (CUstream)0x77;
		forward(NULL, 0);
		cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		forward(s, 0);
		CUgraph g;
		CUgraphExec e;
		cuStreamEndCapture(s, &g);
		cuGraphInstantiateWithFlags(&e, g, 0);
		for (int i = 0; i < 5; i++)
			replay(e, s, i);
		CHECK(ft_phase() == FT_PROFILING, "phase %d after five replays", ft_phase());
		for (int i = 5; i < 8; i++)
			replay(e, s, i);
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after eight replays", ft_phase());
		/* the replays' launches are known: their boundaries are found
		 * as eager ones are, none is a whole pass by itself */
		unsigned long long found = stat("passes_eager");
		CHECK(stat("passes_graph") == 0 && found >= 7 && found <= 8,
		      "passes_graph %llu, passes_eager %llu", stat("passes_graph"), found);
		CHECK(ft_mark_pass() == (long long)found + 1, "mark");
		replay(e, s, 8); /* after a mark, replays no longer count */
		CHECK(stat("passes_eager") == found && stat("passes_marked") == 1,
		      "eager %llu marked %llu", stat("passes_eager"), stat("passes_marked"));
		/* discovery read what the capture read; replays are not timed */
		check_profile(0);
	} else if (engine) {
		CHECK(head_word, "no word of the head to change");
		forward(NULL, 0);
		CHECK(ft_phase() == FT_DISCOVERY, "phase %d after the first forward", ft_phase());
		CUstream s = (CUstream)0x77;
		cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		CHECK(ft_phase() == FT_INFERENCE, "phase %d once a capture began", ft_phase());
		forward(s, 1);
		CUgraph g;
		CUgraphExec e;
		cuStreamEndCapture(s, &g);
		cuGraphInstantiateWithFlags(&e, g, 0);
		replay(e, s, 1);
		CHECK(stat("graphs_substituted") == 0 && stat("passes_eager") == 0,
		      "graphs_substituted %llu, passes_eager %llu", stat("graphs_substituted"),
		      stat("passes_eager"));
	} else if (api) {
		/* ft_load_profile before discovery ends, ft_save_profile in
		 * INFERENCE (FT_PROFILE_STORAGE_DIR unset): argv[2] holds a
		 * profile.json of this model, argv[3] receives one */
		CHECK(ft_save_profile(argv[3]) == -1, "saved before INFERENCE");
		CHECK(ft_load_profile(argv[2]) == 0, "ft_load_profile(%s)", argv[2]);
		for (int i = 0; i < 6; i++)
			forward(NULL, i);
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after 6 forwards", ft_phase());
		CHECK(ft_load_profile(argv[2]) == -1, "loaded after discovery");
		CHECK(ft_save_profile(argv[3]) == 0, "ft_save_profile(%s)", argv[3]);
	} else if (skip) {
		/* a compatible profile.json: INFERENCE at the end of the first
		 * forward (again: its checksums found), or after the first
		 * discovery pass (skip: its sizes, which only a pass tells) */
		int i = 0, again = !strcmp(argv[1], "again");
		while (i < 9 && ft_phase() != FT_INFERENCE)
			forward(NULL, i++);
		CHECK(again ? i == 1 && stat("passes_eager") == 0 : i == 5 && stat("passes_eager") == 4,
		      "INFERENCE after %d forwards (passes_eager %llu), not %d", i,
		      stat("passes_eager"), again ? 1 : 5);
	} else if (slow) {
		/* A profile.json of other contents: INFERENCE after discovery. */
		for (int i = 0; i < 6; i++)
			forward(NULL, i);
		CHECK(stat("passes_eager") == 5, "passes_eager %llu", stat("passes_eager"));
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after 6 forwards", ft_phase());
	} else {
		for (int i = 0; i < 9; i++) {
			forward(NULL, i);
			if (i == 5)
				CHECK(ft_phase() == FT_PROFILING, "phase %d after 6 forwards", ft_phase());
		}
		CHECK(stat("passes_eager") == 8, "passes_eager %llu", stat("passes_eager"));
		CHECK(ft_phase() == FT_INFERENCE, "phase %d after 9 forwards", ft_phase());
		check_profile(2);
	}
	printf("phases (%s): %d failure(s)\n", argc > 1 ? argv[1] : "eager", failures);
	return failures ? 1 : 0;
}
