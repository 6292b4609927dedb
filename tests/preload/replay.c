/*
 * Replays a trace recorded on the GPU (FT_TRACE) against the fake driver:
 * the same allocations (sizes, order), copies, memsets and, for every launch,
 * a launch whose pointers refer to the same allocations and offsets (up to
 * four).  The library, preloaded, then sees the reference structure of a real
 * PyTorch workload without a GPU: pass detection, the phase machine and the
 * discovery cutoff can be exercised on CI.  Kernels do nothing, so contents
 * never change: a KV cache looks unchanged here (the content rule is tested
 * on the GPU).
 * usage: replay TRACE.jsonl LAST_SEQ [TRUTH.json PREFIX TRAPS]
 *   replays launches with seq < LAST_SEQ; with TRUTH.json (the recording's
 *   ground truth) it checks what the library concluded, from its own trace
 *   (FT_TRACE): INFERENCE reached, every weight the library found lies in a
 *   parameter whose name starts with PREFIX (the model under test), every
 *   such parameter >= 0.1 MiB found, each decoder layer's weights in one
 *   trap of their own, the next layer's the next trap, TRAPS traps (one per
 *   decoder layer plus embedding and head).  REPLAY_SHRINK=k divides sizes
 *   and offsets by k.
 */
#include <cjson/cJSON.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/read_file.h"
#include "../fake/fake.h"
#include "flextensor.h"

#define MAX_ID 100000

static CUdeviceptr ptr_of[MAX_ID];
static double shrink = 1;
static unsigned char host[1 << 20];

static cJSON *load_json(const char *path)
{
	char *t = read_file(path);
	cJSON *j = t ? cJSON_Parse(t) : NULL;
	free(t);
	return j;
}

/* The recording's address of allocation id (from its trace). */
static unsigned long long rec_ptr[MAX_ID];

static int check(const char *rec_trace, const char *truth_path, const char *prefix, int want_traps)
{
	size_t np = strlen(prefix);
	int failures = 0;
	char line[1 << 16];
	FILE *f = fopen(rec_trace, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, "\"ev\":\"alloc\""))
			continue;
		cJSON *r = cJSON_Parse(line);
		int id = cJSON_GetObjectItem(r, "id")->valueint;
		if (id > 0 && id < MAX_ID)
			rec_ptr[id] = strtoull(cJSON_GetObjectItem(r, "ptr")->valuestring, NULL, 16);
		cJSON_Delete(r);
	}
	if (f)
		fclose(f);
	/* "-": no ground truth (a recording of a program that wrote none):
	 * only the phase and the trap count are checked */
	int blind = !strcmp(truth_path, "-");
	cJSON *truth = blind ? cJSON_CreateObject() : load_json(truth_path);
	/* what the library concluded: its discovery record */
	cJSON *disc = NULL;
	f = fopen(getenv("FT_TRACE"), "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "\"ev\":\"discovery\"")) {
			cJSON_Delete(disc);
			disc = cJSON_Parse(line);
		}
	if (f)
		fclose(f);
	if (!truth || !disc) {
		fprintf(stderr, "FAIL: no truth or no discovery record\n");
		return 1;
	}
	if (ft_phase() != FT_INFERENCE) {
		fprintf(stderr, "FAIL: phase %d after the replay\n", ft_phase());
		failures++;
	}
	/* Every weight found must lie in a parameter of the first model. */
	int found[4096] = { 0 }, nparams = -1, trap_of[4096], layer_trap[1024];
	for (int i = 0; i < 4096; i++)
		trap_of[i] = -1;
	for (int i = 0; i < 1024; i++)
		layer_trap[i] = -1;
	cJSON *bufs = cJSON_GetObjectItem(truth, "buffers"), *x, *b;
	if (!blind)
		nparams = 0;
	cJSON *found_w = blind ? NULL : cJSON_GetObjectItem(disc, "weights_in_order");
	cJSON_ArrayForEach(x, found_w) {
		int id = cJSON_GetObjectItem(x, "id")->valueint;
		unsigned long long p = rec_ptr[id] +
				       (unsigned long long)(cJSON_GetObjectItem(x, "off")->valuedouble * shrink);
		int k = 0, owner = -1;
		cJSON_ArrayForEach(b, bufs) {
			unsigned long long lo = (unsigned long long)cJSON_GetObjectItem(b, "ptr")->valuedouble;
			unsigned long long n = (unsigned long long)cJSON_GetObjectItem(b, "bytes")->valuedouble;
			if (!strncmp(cJSON_GetObjectItem(b, "name")->valuestring, prefix, np) && p >= lo &&
			    p < lo + n)
				owner = k;
			k++;
		}
		if (owner < 0) {
			fprintf(stderr, "FAIL: weight at recorded address 0x%llx is not a parameter\n", p);
			failures++;
		} else if (owner < 4096) {
			found[owner] = 1;
			trap_of[owner] = cJSON_GetObjectItem(x, "trap")->valueint;
		}
	}
	int k = 0;
	cJSON_ArrayForEach(b, bufs) {
		const char *name = cJSON_GetObjectItem(b, "name")->valuestring;
		if (!strncmp(name, prefix, np) && cJSON_GetObjectItem(b, "bytes")->valuedouble >= 104858) {
			nparams++;
			if (k < 4096 && !found[k]) {
				fprintf(stderr, "FAIL: parameter %s not identified\n", name);
				failures++;
			}
			/* a decoder layer's weights are one trap, its own */
			const char *ly = strstr(name, "layers.");
			int l = ly ? atoi(ly + 7) : -1;
			if (k < 4096 && found[k] && l >= 0 && l < 1024) {
				if (layer_trap[l] < 0)
					layer_trap[l] = trap_of[k];
				if (trap_of[k] != layer_trap[l] ||
				    (l > 0 && layer_trap[l - 1] >= 0 && layer_trap[l] != layer_trap[l - 1] + 1)) {
					fprintf(stderr, "FAIL: %s is in trap %d (layer %d's first weight: "
						"trap %d, layer %d's: %d)\n", name, trap_of[k], l,
						layer_trap[l], l - 1, l > 0 ? layer_trap[l - 1] : -1);
					failures++;
				}
			}
		}
		k++;
	}
	int traps = cJSON_GetObjectItem(disc, "traps")->valueint;
	printf("%d weights found for %d parameters >= 0.1 MiB; %d traps\n",
	       cJSON_GetObjectItem(disc, "weights")->valueint, nparams, traps);
	if (traps != want_traps) {
		fprintf(stderr, "FAIL: %d traps, expected %d\n", traps, want_traps);
		failures++;
	}
	cJSON_Delete(disc);
	cJSON_Delete(truth);
	printf("replay check: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}

/* One recorded launch, replayed: one fake function per recorded kernel
 * name (the library learns which of a kernel's parameter words are
 * pointers), each reference at the word it was recorded at (older
 * recordings: in order, from word 0). */
static void launch(cJSON *r)
{
	static char *names[4096];
	static unsigned nnames;
	const char *name = cJSON_GetObjectItem(r, "kernel")->valuestring;
	unsigned fi = 0;
	while (fi < nnames && strcmp(names[fi], name))
		fi++;
	if (fi == nnames && nnames < 4096)
		names[nnames++] = strdup(name);
	static CUdeviceptr p[512];
	memset(p, 0, sizeof(p));
	int k = 0;
	cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "refs")) {
		int id = cJSON_GetObjectItem(x, "id")->valueint;
		cJSON *w = cJSON_GetObjectItem(x, "word");
		int at = w && w->valueint < 512 ? w->valueint : k;
		if (at < 512 && id < MAX_ID && ptr_of[id])
			p[at] = ptr_of[id] +
				(CUdeviceptr)(cJSON_GetObjectItem(x, "off")->valuedouble / shrink);
		k++;
	}
	void *params[] = { p };
	cuLaunchKernel(fake_replay_function(fi), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 6)
		return 2;
	unsigned long long last = strtoull(argv[2], NULL, 10);
	FILE *f = fopen(argv[1], "r");
	if (!f)
		return 2;
	/* REPLAY_SHRINK=k: sizes and offsets divided by k (big models in
	 * little host memory; the fake's VMM memory is real) */
	const char *sh = getenv("REPLAY_SHRINK");
	shrink = sh && atof(sh) >= 1 ? atof(sh) : 1;
	cuInit(0);
	char *line = malloc(1 << 20);
	unsigned long long launches = 0;
	while (fgets(line, 1 << 20, f)) {
		cJSON *r = cJSON_Parse(line);
		const char *ev = cJSON_GetObjectItem(r, "ev")->valuestring;
		if (!strcmp(ev, "alloc")) {
			int id = cJSON_GetObjectItem(r, "id")->valueint;
			size_t size = (size_t)(cJSON_GetObjectItem(r, "size")->valuedouble / shrink);
			if (id > 0 && id < MAX_ID)
				cuMemAlloc_v2(&ptr_of[id], size);
		} else if (!strcmp(ev, "free")) {
			int id = cJSON_GetObjectItem(r, "id")->valueint;
			if (id > 0 && id < MAX_ID && ptr_of[id])
				cuMemFree_v2(ptr_of[id]);
		} else if (!strcmp(ev, "copy") || !strcmp(ev, "memset")) {
			cJSON *d = cJSON_GetObjectItem(r, "dst_id");
			size_t n = (size_t)(cJSON_GetObjectItem(r, "bytes")->valuedouble / shrink);
			if (d && d->valueint < MAX_ID && ptr_of[d->valueint]) {
				CUdeviceptr dst = ptr_of[d->valueint] +
						  (CUdeviceptr)(cJSON_GetObjectItem(r, "dst_off")->valuedouble /
								shrink);
				if (!strcmp(ev, "copy"))
					cuMemcpyHtoD_v2(dst, host, n < sizeof(host) ? n : sizeof(host));
				else
					cuMemsetD8Async(dst, 0, n, NULL);
			}
		} else if (!strcmp(ev, "launch")) {
			if ((unsigned long long)cJSON_GetObjectItem(r, "seq")->valuedouble >= last) {
				cJSON_Delete(r);
				break;
			}
			launch(r);
			launches++;
		}
		cJSON_Delete(r);
	}
	/* REPLAY_LOOP=from:count: the launches from seq `from` on replayed
	 * count more times (steady INFERENCE passes of a short recording) */
	const char *lp = getenv("REPLAY_LOOP");
	unsigned long long from = lp ? strtoull(lp, NULL, 10) : 0;
	int count = lp && strchr(lp, ':') ? atoi(strchr(lp, ':') + 1) : 0;
	for (int c = 0; c < count; c++) {
		rewind(f);
		while (fgets(line, 1 << 20, f)) {
			if (!strstr(line, "\"ev\":\"launch\""))
				continue;
			cJSON *r = cJSON_Parse(line);
			unsigned long long seq =
				(unsigned long long)cJSON_GetObjectItem(r, "seq")->valuedouble;
			if (seq >= from && seq < last) {
				launch(r);
				launches++;
			}
			cJSON_Delete(r);
		}
	}
	fclose(f);
	unsigned long long eager = 0;
	ft_stat_get("passes_eager", &eager);
	printf("replayed %llu launches: phase %d, %llu passes\n", launches, ft_phase(), eager);
	return argc > 3 ? check(argv[1], argv[3], argv[4], atoi(argv[5])) : 0;
}
