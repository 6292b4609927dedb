/*
 * Pass detection on real launches: replays a trace recorded on the H200
 * (tests/data/h200-workloads, see tests/gpu/capture_traces.py) into the
 * detector and scores its boundaries against the recorded forward calls.
 * A boundary is right when it falls between the end of the previous forward
 * and the first launch of the next (the launches between two forwards, e.g.
 * an argmax, belong to neither); boundaries before the first forward (the
 * weight-initialisation kernels) are not scored.
 * usage: passes_fixture TRACE.jsonl TRUTH.json WORKLOADS
 * Asserts, for the forwards of the comma-separated WORKLOADS (for
 * h200-workloads: hf_cache,hf_nocache, the first model, transformers Llama
 * with and without KV cache, prefill and decode, varying lengths; for
 * h200-hf8: hf8, an 8-layer Llama with a DynamicCache): every boundary
 * found and none invented.  Prints the score of the other workloads (a
 * second model in the same process, a hand-written decoder) as well.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/read_file.h"
#include "ft/passes.h"

struct window {
	uint64_t lo, hi; /* a right boundary is in [lo, hi] */
	const char *workload;
	int hit;
};

static const char *asserted;

static int is_asserted(const char *workload)
{
	size_t n = strlen(workload);
	for (const char *p = asserted; (p = strstr(p, workload)); p += n)
		if ((p == asserted || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	asserted = argv[3];
	char *truth_text = read_file(argv[2]);
	cJSON *truth = truth_text ? cJSON_Parse(truth_text) : NULL;
	FILE *f = fopen(argv[1], "r");
	if (!truth || !f) {
		fprintf(stderr, "cannot read the fixture\n");
		return 2;
	}
	struct window w[256];
	int nw = 0;
	uint64_t prev_end = 0;
	cJSON *fw;
	cJSON_ArrayForEach(fw, cJSON_GetObjectItem(truth, "forwards")) {
		const char *kind = cJSON_GetObjectItem(fw, "kind")->valuestring;
		if (strcmp(kind, "prefill") && strcmp(kind, "decode"))
			continue;
		uint64_t first = (uint64_t)cJSON_GetObjectItem(fw, "first")->valuedouble;
		w[nw++] = (struct window){ prev_end, first,
					   cJSON_GetObjectItem(fw, "workload")->valuestring, 0 };
		prev_end = (uint64_t)cJSON_GetObjectItem(fw, "end")->valuedouble;
		if (nw == 256)
			break;
	}

	struct ft_passes p;
	ft_passes_init(&p);
	char *line = malloc(1 << 20);
	int detected = 0, invented_first = 0, invented_later = 0;
	while (fgets(line, 1 << 20, f)) {
		if (!strstr(line, "\"ev\":\"launch\""))
			continue;
		cJSON *r = cJSON_Parse(line);
		uint64_t seq = (uint64_t)cJSON_GetObjectItem(r, "seq")->valuedouble;
		struct ft_region_ref refs[64];
		unsigned n = 0;
		cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "refs")) {
			if (n < 64)
				refs[n++] = (struct ft_region_ref){
					(uint64_t)cJSON_GetObjectItem(x, "id")->valuedouble,
					(uint64_t)cJSON_GetObjectItem(x, "off")->valuedouble, 0, 0 };
		}
		cJSON_Delete(r);
		uint64_t start;
		if (ft_passes_launch(&p, seq, refs, n, &start) != FT_PASS_EAGER)
			continue;
		detected++;
		/* Boundaries before the first forward (weight initialisation
		 * kernels) are neither required nor wrong. */
		int ok = nw && start <= w[0].hi;
		for (int i = 1; i < nw; i++)
			if (start >= w[i].lo && start <= w[i].hi) {
				w[i].hit = ok = 1;
			}
		if (!ok) {
			/* which model's span is it in? */
			int later = 0;
			for (int i = 1; i < nw; i++)
				if (start >= w[i].lo && !is_asserted(w[i].workload))
					later = 1;
			later ? invented_later++ : invented_first++;
			fprintf(stderr, "invented at %llu\n", (unsigned long long)start);
		}
	}
	fclose(f);
	int found_first = 0, want_first = 0, found_later = 0, want_later = 0;
	for (int i = 1; i < nw; i++) {
		int first_model = is_asserted(w[i].workload);
		if (first_model) {
			want_first++;
			found_first += w[i].hit;
		} else {
			want_later++;
			found_later += w[i].hit;
		}
	}
	printf("%s: %d of %d boundaries found, %d invented\n", asserted, found_first, want_first,
	       invented_first);
	printf("others (not asserted): %d of %d found, %d invented\n", found_later,
	       want_later, invented_later);
	printf("%d boundaries detected in all\n", detected);
	ft_passes_destroy(&p);
	free(line);
	cJSON_Delete(truth);
	free(truth_text);
	return want_first && found_first == want_first && invented_first == 0 ? 0 : 1;
}
