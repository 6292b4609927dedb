/* The shared route workload (see scenario.h). */
#include "scenario.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fake/fake.h"
#include "../common/check.h"

/* The fake driver's test helpers, from whichever libcuda.so.1 is loaded
 * (the dlsym and getproc routes do not link it). */
static CUfunction (*fake_fn)(const char *);
static CUkernel (*fake_kn)(const char *);
#define fake_function(n) fake_fn(n)
#define fake_kernel(n) fake_kn(n)

static int load_fake(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	*(void **)&fake_fn = h ? dlsym(h, "fake_function") : NULL;
	*(void **)&fake_kn = h ? dlsym(h, "fake_kernel") : NULL;
	return fake_fn && fake_kn ? 0 : -1;
}

#define OK(call) CHECK((call) == CUDA_SUCCESS, "%s failed", #call)

void resolver_name(const char *exact, char *base, size_t size, int *per_thread)
{
	snprintf(base, size, "%s", exact);
	size_t n = strlen(base);
	*per_thread = n > 5 && (!strcmp(base + n - 5, "_ptsz") || !strcmp(base + n - 5, "_ptds"));
	if (*per_thread)
		base[n -= 5] = 0;
	if (n > 3 && !strcmp(base + n - 3, "_v2"))
		base[n - 3] = 0;
	if (!strcmp(base, "cuGraphInstantiateWithFlags"))
		snprintf(base, size, "cuGraphInstantiate");
}

int api_by_name(struct api *a, void *(*lookup)(void *, const char *), void *ud)
{
	int missing = 0;
#define GET(field, name)                                                       \
	do {                                                                   \
		*(void **)&a->field = lookup(ud, name);                        \
		if (!a->field) {                                               \
			fprintf(stderr, "FAIL: %s not resolved\n", name);      \
			missing++;                                             \
		}                                                              \
	} while (0)
	GET(init, "cuInit");
	GET(alloc, "cuMemAlloc_v2");
	GET(free, "cuMemFree_v2");
	GET(alloc_async, "cuMemAllocAsync");
	GET(free_async, "cuMemFreeAsync");
	GET(host_alloc, "cuMemHostAlloc");
	GET(reserve, "cuMemAddressReserve");
	GET(create, "cuMemCreate");
	GET(map, "cuMemMap");
	GET(unmap, "cuMemUnmap");
	GET(htod, "cuMemcpyHtoD_v2");
	GET(dtoh, "cuMemcpyDtoH_v2");
	GET(memset32, "cuMemsetD32_v2");
	GET(launch, "cuLaunchKernel");
	GET(launch_ptsz, "cuLaunchKernel_ptsz");
	GET(launch_ex, "cuLaunchKernelEx");
	GET(launch_coop, "cuLaunchCooperativeKernel");
	GET(encode_tiled, "cuTensorMapEncodeTiled");
	GET(begin_capture, "cuStreamBeginCapture_v2");
	GET(end_capture, "cuStreamEndCapture");
	GET(instantiate, "cuGraphInstantiateWithFlags");
	GET(graph_launch, "cuGraphLaunch");
#undef GET
	return missing;
}

/* What the trace must say about the i-th launch. */
struct expect {
	const char *api, *kernel;
	int nrefs;
	struct {
		CUdeviceptr base;
		uint64_t off;
		int tensormap;
	} ref[4];
	int captured;
};

#define N 256
static float hx[N], hy[N], hout[N];

static int check_trace(const char *path, const struct expect *ex, int nex,
		       CUdeviceptr gone)
{
	int (*flush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ft_flush_trace");
	CHECK(flush && flush() == 0, "ft_flush_trace failed");
	FILE *f = fopen(path, "r");
	CHECK(f, "cannot open trace %s", path);
	if (!f)
		return failures;
	struct { uint64_t ptr, id; } ids[64];
	int nids = 0, nl = 0, graph_launches = 0, capture_ends = 0;
	char line[1 << 16];
	while (fgets(line, sizeof(line), f)) {
		cJSON *r = cJSON_Parse(line);
		CHECK(r, "trace line is not JSON: %.80s", line);
		if (!r)
			continue;
		const char *ev = cJSON_GetObjectItem(r, "ev")->valuestring;
		int pid = cJSON_GetObjectItem(r, "pid")->valueint;
		if (pid != getpid()) {
			cJSON_Delete(r);
			continue;
		}
		if (!strcmp(ev, "alloc") && nids < 64) {
			ids[nids].ptr = strtoull(cJSON_GetObjectItem(r, "ptr")->valuestring, NULL, 16);
			ids[nids++].id = (uint64_t)cJSON_GetObjectItem(r, "id")->valuedouble;
		} else if (!strcmp(ev, "graph_launch")) {
			graph_launches++;
		} else if (!strcmp(ev, "capture_end")) {
			capture_ends++;
		} else if (!strcmp(ev, "launch") && nl < nex) {
			const struct expect *e = &ex[nl++];
			CHECK(!strcmp(cJSON_GetObjectItem(r, "api")->valuestring, e->api),
			      "launch %d: api %s, expected %s", nl,
			      cJSON_GetObjectItem(r, "api")->valuestring, e->api);
			CHECK(!strcmp(cJSON_GetObjectItem(r, "kernel")->valuestring, e->kernel),
			      "launch %d: kernel %s, expected %s", nl,
			      cJSON_GetObjectItem(r, "kernel")->valuestring, e->kernel);
			CHECK(!!cJSON_GetObjectItem(r, "capture") == e->captured,
			      "launch %d: capture flag wrong", nl);
			cJSON *refs = cJSON_GetObjectItem(r, "refs");
			CHECK(cJSON_GetArraySize(refs) == e->nrefs,
			      "launch %d (%s): %d refs, expected %d", nl, e->kernel,
			      cJSON_GetArraySize(refs), e->nrefs);
			for (int k = 0; k < e->nrefs; k++) {
				uint64_t want = 0;
				for (int j = 0; j < nids; j++)
					if (ids[j].ptr == e->ref[k].base)
						want = ids[j].id;
				CHECK(want, "launch %d: allocation not in the trace", nl);
				int found = 0;
				cJSON *x;
				cJSON_ArrayForEach(x, refs) {
					cJSON *via = cJSON_GetObjectItem(x, "via");
					if ((uint64_t)cJSON_GetObjectItem(x, "id")->valuedouble == want &&
					    (uint64_t)cJSON_GetObjectItem(x, "off")->valuedouble ==
						    e->ref[k].off &&
					    (!!via == e->ref[k].tensormap))
						found = 1;
				}
				CHECK(found, "launch %d (%s): reference %d (+%llu) missing", nl,
				      e->kernel, k, (unsigned long long)e->ref[k].off);
			}
		}
		cJSON_Delete(r);
	}
	fclose(f);
	CHECK(nl == nex, "%d launch records, expected %d", nl, nex);
	CHECK(graph_launches == 2, "%d graph launches, expected 2", graph_launches);
	CHECK(capture_ends == 1, "%d capture ends, expected 1", capture_ends);
	(void)gone;
	return failures;
}

void scenario_prepare(void)
{
	const char *path = getenv("FT_TRACE");
	if (path)
		unlink(path);
}

static unsigned long long stat(const char *name)
{
	int (*get)(const char *, unsigned long long *) =
		(int (*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "ft_stat_get");
	unsigned long long v = 0;
	CHECK(get && get(name, &v) == 0, "ft_stat_get(%s) failed", name);
	return v;
}

int run_scenario(const struct api *a, const char *route)
{
	const int preloaded = dlsym(RTLD_DEFAULT, "ft_version") != NULL;
	const size_t bytes = N * sizeof(float);
	CUdeviceptr A, B, C, D, V;
	CUstream S = (CUstream)0x5151;
	int n = N;

	if (load_fake()) {
		fprintf(stderr, "FAIL: the fake libcuda.so.1 is not the one loaded\n");
		return 1;
	}
	OK(a->init(0));
	OK(a->alloc(&A, bytes));
	OK(a->alloc(&B, bytes));
	OK(a->alloc(&C, bytes));
	OK(a->alloc_async(&D, bytes, S));
	void *host = NULL;
	OK(a->host_alloc(&host, 4096, 0));
	CUmemGenericAllocationHandle h;
	OK(a->reserve(&V, 2 << 20, 0, 0, 0));
	OK(a->create(&h, 2 << 20, NULL, 0));
	OK(a->map(V, 2 << 20, 0, h, 0));
	for (int i = 0; i < N; i++) {
		hx[i] = (float)i;
		hy[i] = 2.0f * (float)i + 1.0f;
	}
	OK(a->htod(A, hx, bytes));
	OK(a->htod(B, hy, bytes));
	OK(a->memset32(C, 0, N));

	/* 1: kernelParams, CUfunction, legacy stream. */
	CUfunction add = fake_function("vec_add");
	void *p1[] = { &A, &B, &C, &n };
	OK(a->launch(add, 1, 1, 1, 64, 1, 1, 0, NULL, p1, NULL));
	OK(a->dtoh(hout, C, bytes));
	for (int i = 0; i < N; i++)
		CHECK(hout[i] == 3.0f * (float)i + 1.0f, "vec_add[%d] = %g", i, hout[i]);

	/* 2: CUkernel handle (as ATen launches), interior pointers, _ptsz. */
	CUdeviceptr A1 = A + 64, B1 = B + 64;
	int n2 = N - 16;
	void *p2[] = { &A1, &B1, &D, &n2 };
	OK(a->launch_ptsz((CUfunction)fake_kernel("vec_add"), 1, 1, 1, 64, 1, 1, 0, S, p2, NULL));
	OK(a->dtoh(hout, D, (size_t)n2 * sizeof(float)));
	for (int i = 0; i < n2; i++)
		CHECK(hout[i] == 3.0f * (float)(i + 16) + 1.0f, "vec_add2[%d] = %g", i, hout[i]);

	/* 3: cuLaunchKernelEx with a packed extra buffer (as cuBLASLt). */
	struct fake_scale_args sa = { (float *)(uintptr_t)C, (float *)(uintptr_t)(V + 128), N, 0.5f };
	size_t sasize = sizeof(sa);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &sa, CU_LAUNCH_PARAM_BUFFER_SIZE,
			  &sasize, CU_LAUNCH_PARAM_END };
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = S };
	OK(a->launch_ex(&cfg, fake_function("scale"), NULL, extra));
	OK(a->dtoh(hout, V + 128, bytes));
	for (int i = 0; i < N; i++)
		CHECK(hout[i] == 0.5f * (3.0f * (float)i + 1.0f), "scale[%d] = %g", i, hout[i]);

	/* 3b: a cooperative launch. */
	OK(a->launch_coop(add, 1, 1, 1, 64, 1, 1, 0, S, (void *[]){ &C, &C, &B, &n }));
	OK(a->dtoh(hout, B, bytes));
	CHECK(hout[5] == 2.0f * (3.0f * 5.0f + 1.0f), "cooperative vec_add[5] = %g", hout[5]);
	OK(a->htod(B, hy, bytes));

	/* 4: a TMA descriptor whose address only the encode call reveals. */
	CUtensorMap m;
	cuuint64_t dim = 16;
	OK(a->encode_tiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, (void *)(uintptr_t)(B + 256),
			   &dim, NULL, NULL, NULL, 0, 0, 0, 0));
	CUdeviceptr out = D + 16;
	int n4 = 16;
	void *p4[] = { &m, &out, &n4 };
	OK(a->launch((CUfunction)fake_function("tma_sum"), 1, 1, 1, 1, 1, 1, 0, S, p4, NULL));
	float sum = 0, want = 0;
	OK(a->dtoh(&sum, out, sizeof(sum)));
	for (int i = 64; i < 80; i++)
		want += 2.0f * (float)i + 1.0f;
	CHECK(sum == want, "tma_sum = %g, expected %g", sum, want);

	/* 5: capture one launch, replay it twice. */
	OK(a->memset32(C, 0, N));
	OK(a->begin_capture(S, CU_STREAM_CAPTURE_MODE_GLOBAL));
	OK(a->launch(add, 1, 1, 1, 64, 1, 1, 0, S, p1, NULL));
	CUgraph g;
	CUgraphExec ge;
	OK(a->end_capture(S, &g));
	OK(a->instantiate(&ge, g, 0));
	OK(a->graph_launch(ge, S));
	OK(a->graph_launch(ge, S));
	OK(a->dtoh(hout, C, bytes));
	CHECK(hout[7] == 22.0f, "graph replay result %g", hout[7]);

	/* 6: frees and unmaps leave the registry. */
	OK(a->free_async(D, S));
	OK(a->unmap(V, 2 << 20));
	OK(a->launch(add, 1, 1, 1, 64, 1, 1, 0, NULL, (void *[]){ &A, &B, &D, &n }, NULL));

	if (preloaded) {
		const struct expect ex[] = {
			{ "cuLaunchKernel", "vec_add", 3, { { A, 0, 0 }, { B, 0, 0 }, { C, 0, 0 } }, 0 },
			{ "cuLaunchKernel_ptsz", "vec_add", 3,
			  { { A, 64, 0 }, { B, 64, 0 }, { D, 0, 0 } }, 0 },
			{ "cuLaunchKernelEx", "scale", 2, { { C, 0, 0 }, { V, 128, 0 } }, 0 },
			{ "cuLaunchCooperativeKernel", "vec_add", 2, { { C, 0, 0 }, { B, 0, 0 } }, 0 },
			{ "cuLaunchKernel", "tma_sum", 2, { { B, 256, 1 }, { D, 16, 0 } }, 0 },
			{ "cuLaunchKernel", "vec_add", 3, { { A, 0, 0 }, { B, 0, 0 }, { C, 0, 0 } }, 1 },
			{ "cuLaunchKernel", "vec_add", 2, { { A, 0, 0 }, { B, 0, 0 } }, 0 },
		};
		const char *path = getenv("FT_TRACE");
		CHECK(path, "FT_TRACE not set");
		if (path)
			check_trace(path, ex, 7, D);
		CHECK(stat("launches") == 7, "launches = %llu", stat("launches"));
		CHECK(stat("captured_launches") == 1, "captured = %llu", stat("captured_launches"));
		CHECK(stat("allocs") == 6, "allocs = %llu", stat("allocs"));
		CHECK(stat("frees") == 2, "frees = %llu", stat("frees"));
		CHECK(stat("tensormaps") == 1, "tensormaps = %llu", stat("tensormaps"));
		CHECK(stat("graph_launches") == 2, "graph launches = %llu", stat("graph_launches"));
		CHECK(stat("launches_unscanned") == 0, "unscanned = %llu", stat("launches_unscanned"));
	}
	printf("%s route: %s, %d failure(s)\n", route,
	       preloaded ? "preloaded" : "not preloaded", failures);
	return failures;
}
