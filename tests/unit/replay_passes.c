/*
 * Pass detection on graph replays: a trace of tests/gpu/startup.py's FULL
 * variant on the H200 (a serving start-up: one eager profile forward,
 * eager warm-ups, decode graphs captured before any plan, then eager
 * prefills of about 300 launches between replays of 1031-launch decode
 * graphs).  Every replay is expanded into its capture's launches, as
 * learning does (ft_learn_replay), and fed with the eager launches to the
 * detector.  Asserts: every replay begins a pass (a boundary within its
 * first 16 launches: the first ones read no weight), and no boundary falls
 * later inside a replay.  Before passes a quarter of the last one long
 * were looked for (they were half), no replay began a pass: a prefill is
 * 3.5 times shorter than a decode step there.
 * usage: replay_passes TRACE.jsonl
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/passes.h"

#define CAPTURES 64
#define REPLAYS 4096
#define HEAD 16 /* launches at a replay's start a boundary may fall in */

struct capture {
	uint64_t id, graph, exec;
	uint32_t n, nr, cap, rcap;
	uint32_t *ends;
	struct ft_region_ref *r;
};

static struct capture caps[CAPTURES];
static unsigned ncaps;

static struct capture *capture(uint64_t id)
{
	for (unsigned i = 0; i < ncaps; i++)
		if (caps[i].id == id)
			return &caps[i];
	if (ncaps == CAPTURES)
		return NULL;
	caps[ncaps].id = id;
	return &caps[ncaps++];
}

static uint64_t hex(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);
	return v && cJSON_IsString(v) ? strtoull(v->valuestring, NULL, 16) : 0;
}

/* The launch's references, without the stale ones (ft_learn_regions). */
static unsigned refs(const cJSON *rec, struct ft_region_ref *r, unsigned cap)
{
	unsigned n = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(rec, "refs")) {
		if (cJSON_GetObjectItem(x, "stale") || n == cap)
			continue;
		r[n++] = (struct ft_region_ref){
			.alloc_id = (uint64_t)cJSON_GetObjectItem(x, "id")->valuedouble,
			.offset = (uint64_t)cJSON_GetObjectItem(x, "off")->valuedouble };
	}
	return n;
}

static int append(struct capture *c, const struct ft_region_ref *r, unsigned n)
{
	if (c->nr + n > c->rcap) {
		c->rcap = 2 * (c->nr + n);
		c->r = realloc(c->r, c->rcap * sizeof(*c->r));
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->ends = realloc(c->ends, c->cap * sizeof(*c->ends));
	}
	if (!c->r || !c->ends)
		return -1;
	memcpy(c->r + c->nr, r, n * sizeof(*r));
	c->nr += n;
	c->ends[c->n++] = c->nr;
	return 0;
}

int main(int argc, char **argv)
{
	FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
	static char line[1 << 20];
	static struct ft_passes p;
	static uint64_t start[REPLAYS], len[REPLAYS];
	static char begins[REPLAYS];
	unsigned nrep = 0, inside = 0, nb = 0;
	uint64_t seq = 0;
	if (!f || ft_passes_init(&p))
		return 2;
	while (fgets(line, sizeof(line), f)) {
		cJSON *rec = cJSON_Parse(line);
		const char *ev = rec ? cJSON_GetStringValue(cJSON_GetObjectItem(rec, "ev")) : NULL;
		struct ft_region_ref r[64];
		uint64_t at;
		if (ev && !strcmp(ev, "launch")) {
			unsigned n = refs(rec, r, 64);
			const cJSON *c = cJSON_GetObjectItem(rec, "capture");
			if (c) {
				struct capture *k = capture((uint64_t)c->valuedouble);
				if (!k || append(k, r, n))
					return 2;
			} else if (ft_passes_launch(&p, ++seq, r, n, &at) != FT_PASS_NONE) {
				nb++;
				for (unsigned i = 0; i < nrep; i++)
					inside += at >= start[i] + HEAD && at < start[i] + len[i];
			}
		} else if (ev && !strcmp(ev, "capture_end")) {
			struct capture *k = capture(hex(rec, "capture"));
			if (k)
				k->graph = hex(rec, "graph");
		} else if (ev && !strcmp(ev, "graph_instantiate")) {
			/* graph handles are reused: the latest capture of it */
			for (unsigned i = ncaps; i-- > 0;)
				if (caps[i].graph == hex(rec, "graph") && !caps[i].exec) {
					caps[i].exec = hex(rec, "exec");
					break;
				}
		} else if (ev && !strcmp(ev, "graph_launch") && nrep < REPLAYS) {
			struct capture *k = NULL;
			for (unsigned i = 0; i < ncaps; i++)
				if (caps[i].exec == hex(rec, "exec"))
					k = &caps[i];
			if (!k)
				return 2;
			start[nrep] = seq + 1;
			len[nrep] = k->n;
			for (uint32_t i = 0, from = 0; i < k->n; from = k->ends[i], i++)
				if (ft_passes_launch(&p, ++seq, k->r + from, k->ends[i] - from, &at) !=
				    FT_PASS_NONE) {
					nb++;
					if (at >= start[nrep] && at < start[nrep] + HEAD)
						begins[nrep] = 1;
					else if (at > start[nrep])
						inside++;
				}
			nrep++;
		}
		cJSON_Delete(rec);
	}
	unsigned begun = 0;
	for (unsigned i = 0; i < nrep; i++)
		begun += begins[i];
	printf("%u replays, %u begin a pass, %u boundaries inside a replay, %u boundaries in all\n",
	       nrep, begun, inside, nb);
	int ok = nrep > 50 && begun == nrep && !inside;
	if (!ok)
		printf("FAIL: every replay must begin a pass, none be cut\n");
	return ok ? 0 : 1;
}
