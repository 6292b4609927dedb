/*
 * The executor on a launch sequence recorded on the H200: the weights and
 * traps discovery found there (the trace's discovery record; extents from
 * the regions the discovery passes read), the plan the library made there
 * (a block per trap), VMM allocations at the recorded addresses, and then
 * every launch and copy of the INFERENCE forwards, with their recorded
 * parameter words and stale flags, through ft_off_launch and ft_off_copy
 * (the driver is stubbed: nothing is copied, the engine's decisions are
 * counted).  Checks, per forward: the bytes copied into blocks against the
 * offloaded bytes (one load per offloaded trap), no launch reading two
 * traps of one block (a trap sent back to the GPU), few late loads.
 * usage: exec_replay TRACE.jsonl TRUTH.json PLAN.json
 * A recording of a process that adopted a saved plan (no PROFILING phase:
 * the watch found the saved weights and INFERENCE began) replays with its
 * profile.json as PLAN (the plan's blocks, the saved weights' sizes as
 * extents, the weights read all over the pass kept out of their traps, as
 * apply.c does) from the first launch after the watch's pass record; with
 * TRUTH "-" a forward begins at each launch of a kernel whose name holds
 * EXEC_REPLAY_BEGIN (alternatives split by '|': the embedding's kernels).
 * (EXEC_REPLAY_LINKS=1 lists the small and linked weights first;
 * EXEC_REPLAY_FROM=n applies the plan n launches into the first INFERENCE
 * forward, mid-pass, as a restart's saved plan may be: the position is
 * unknown there, and the checks are the same.)
 * On the H200's Qwen2-7B recording the executor before the link fix
 * (9937159) copies 4.95 x the offloaded bytes in a prefill and sends layers
 * back to the GPU; the test asserts one load per offloaded trap.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/read_file.h"
#include "../common/stub_driver.h"
#include "ft/kernels.h"
#include "ft/offload.h"
#include "../../src/engine/offload_int.h"

#define MAX_ID 4096
#define CHUNK (2ull << 20)

static uint64_t ptr_of[MAX_ID], size_of[MAX_ID];

/* the copy stream: none of the recorded streams */
static CUresult copy_stream(CUstream *s, unsigned f)
{
	(void)f;
	*s = (CUstream)0x5000;
	return CUDA_SUCCESS;
}

static struct ft_real real;
static struct ft_stats stats;
static struct ft_vmm vmm;

/* ---- the recording ---- */
static cJSON **recs;
static size_t nrecs;

static int load(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t cap = 1 << 16;
	char *line = malloc(1 << 20);
	recs = malloc(cap * sizeof(*recs));
	while (fgets(line, 1 << 20, f)) {
		if (nrecs == cap)
			recs = realloc(recs, (cap *= 2) * sizeof(*recs));
		recs[nrecs++] = cJSON_Parse(line);
	}
	free(line);
	fclose(f);
	return 0;
}

static const char *ev(const cJSON *r)
{
	return cJSON_GetObjectItem(r, "ev")->valuestring;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);
	return v ? v->valuedouble : -1;
}

/* The launch sequence number where the first pass of phase begins. */
static double phase_start(const char *phase)
{
	for (size_t i = 0; i < nrecs; i++)
		if (!strcmp(ev(recs[i]), "pass") &&
		    !strcmp(cJSON_GetObjectItem(recs[i], "phase")->valuestring, phase))
			return num(recs[i], "start_seq");
	return -1;
}

/* An adopted plan's start: the first launch after the pass record that
 * entered INFERENCE (the watch's: it has no start_seq). */
static double adopted_start(void)
{
	size_t i = 0;
	while (i < nrecs && (strcmp(ev(recs[i]), "pass") ||
			     strcmp(cJSON_GetObjectItem(recs[i], "phase")->valuestring, "INFERENCE")))
		i++;
	while (i < nrecs && strcmp(ev(recs[i]), "launch"))
		i++;
	return i < nrecs ? num(recs[i], "seq") : -1;
}

/* Forwards of a recording without a truth file: each begins at a launch
 * of a kernel whose name holds one of begin's '|'-separated parts; into
 * {"forwards": [{kind, first, end}]}. */
static cJSON *derive_forwards(const char *begin)
{
	cJSON *truth = cJSON_CreateObject(), *fws = cJSON_AddArrayToObject(truth, "forwards");
	double first = -1, last = -1;
	for (size_t i = 0; i < nrecs; i++) {
		const cJSON *r = recs[i];
		if (strcmp(ev(r), "launch"))
			continue;
		int starts = 0;
		const char *kn = cJSON_GetObjectItem(r, "kernel")->valuestring;
		for (const char *b = begin, *e; *b && !starts; b = *e ? e + 1 : e) {
			e = strchr(b, '|') ? strchr(b, '|') : b + strlen(b);
			for (const char *q = kn; *q && !starts; q++)
				starts = !strncmp(q, b, (size_t)(e - b));
		}
		last = num(r, "seq");
		if (first < 0)
			first = last; /* (the launches before the first: a forward's end) */
		if (!starts || last == first)
			continue;
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "kind", "forward");
		cJSON_AddNumberToObject(f, "first", first);
		cJSON_AddNumberToObject(f, "end", last);
		cJSON_AddItemToArray(fws, f);
		first = last;
	}
	return truth;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Offsets each allocation was read at during discovery (what its regions
 * begin at), sorted per allocation: off[id][0..noff[id]). */
static uint64_t *off[MAX_ID];
static uint32_t noff[MAX_ID], capoff[MAX_ID];

static void regions(double from, double to)
{
	for (size_t i = 0; i < nrecs; i++) {
		if (strcmp(ev(recs[i]), "launch") || num(recs[i], "seq") < from ||
		    num(recs[i], "seq") >= to)
			continue;
		cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(recs[i], "refs")) {
			int id = (int)num(x, "id");
			uint64_t o = (uint64_t)num(x, "off");
			if (cJSON_GetObjectItem(x, "stale") || id <= 0 || id >= MAX_ID || o % 16)
				continue;
			if (noff[id] == capoff[id])
				off[id] = realloc(off[id], (capoff[id] = capoff[id] ? 2 * capoff[id] : 16) *
								   sizeof(uint64_t));
			off[id][noff[id]++] = o;
		}
	}
	for (int id = 0; id < MAX_ID; id++)
		if (noff[id])
			qsort(off[id], noff[id], sizeof(uint64_t), cmp_u64);
}

static uint64_t extent(int id, uint64_t o)
{
	for (uint32_t k = 0; k < noff[id]; k++)
		if (off[id][k] > o)
			return off[id][k] - o;
	return size_of[id] - o;
}

/* Kernels whose parameter words are the weights they read: the GEMMs. */
static int gemm(const char *name)
{
	return !strncmp(name, "nvjet", 5) || strstr(name, "gemm") || strstr(name, "Gemm");
}

/* The references a[0..n) (not stale) into offloaded bytes whose trap is not
 * in its block after the launch: a read the executor dropped. */
static unsigned unserved_reads(const struct ft_offload *o, const uint64_t *a, unsigned n)
{
	unsigned bad = 0;
	for (unsigned i = 0; i < n; i++)
		for (uint32_t k = 0; k < o->nw; k++) {
			const struct ft_off_weight *w = &o->w[k];
			if (a[i] < w->lo || a[i] >= w->hi || w->trap >= o->ntraps)
				continue;
			int b = o->t[w->trap].block;
			if (b >= 0 && ft_off_weight_offloaded(o, (int)k, a[i]) &&
			    o->b[b].occupant != (int)w->trap)
				bad++;
			break;
		}
	return bad;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	const char *begin = getenv("EXEC_REPLAY_BEGIN");
	if (!strcmp(argv[2], "-") && !begin) {
		fprintf(stderr, "no truth file: EXEC_REPLAY_BEGIN names the kernels that begin a forward\n");
		return 2;
	}
	char *tt = strcmp(argv[2], "-") ? read_file(argv[2]) : strdup("{}"),
	     *pt = read_file(argv[3]);
	cJSON *truth = tt ? cJSON_Parse(tt) : NULL, *plan = pt ? cJSON_Parse(pt) : NULL;
	if (load(argv[1]) || !truth || !plan) {
		fprintf(stderr, "cannot read the recording\n");
		return 2;
	}
	const cJSON *disc = NULL;
	for (size_t i = 0; i < nrecs; i++) {
		const cJSON *r = recs[i];
		if (!strcmp(ev(r), "alloc")) {
			int id = (int)num(r, "id");
			if (id > 0 && id < MAX_ID) {
				ptr_of[id] = strtoull(cJSON_GetObjectItem(r, "ptr")->valuestring, NULL, 16);
				size_of[id] = (uint64_t)num(r, "size");
			}
		} else if (!strcmp(ev(r), "discovery")) {
			disc = r;
		}
	}
	/* a profile.json as the plan: a process that adopted it */
	const cJSON *saved = cJSON_GetObjectItem(plan, "model");
	double prof = phase_start("PROFILING"), inf = saved ? adopted_start() : phase_start("INFERENCE");
	if (!disc || (!saved && prof < 0) || inf < 0) {
		fprintf(stderr, "no discovery record or phases in the recording\n");
		return 2;
	}
	/* discovery's passes: the two forwards before profiling */
	if (!saved)
		regions(prof - 2 * (inf - prof) / 4, prof);

	/* VMM allocations: every one of 2 MiB and more, at its address */
	static struct ft_vmm_alloc va[MAX_ID];
	uint32_t na = 0;
	for (int id = 1; id < MAX_ID; id++) {
		if (size_of[id] < CHUNK || ptr_of[id] % CHUNK)
			continue;
		uint32_t n = (uint32_t)((size_of[id] + CHUNK - 1) / CHUNK);
		va[na++] = (struct ft_vmm_alloc){ .base = ptr_of[id], .size = n * CHUNK, .nchunks = n,
						  .own = calloc(n, sizeof(CUmemGenericAllocationHandle)),
						  .host = calloc(n, 1) };
		for (uint32_t k = 0; k < n; k++)
			va[na - 1].own[k] = 1 + id * 4096 + k;
	}
	for (uint32_t i = 1; i < na; i++) /* sorted by base */
		for (uint32_t j = i; j > 0 && va[j - 1].base > va[j].base; j--) {
			struct ft_vmm_alloc x = va[j];
			va[j] = va[j - 1];
			va[j - 1] = x;
		}
	stub_engine_driver(&real);
	real.cuStreamCreate = copy_stream;
	stub_vmm(&vmm, &real, CHUNK, va, na);

	/* the weights and traps discovery found, the plan's blocks */
	const cJSON *ws = cJSON_GetObjectItem(disc, "weights_in_order"), *x;
	const cJSON *sizes = saved ? cJSON_GetObjectItem(saved, "weight_bytes") : NULL;
	uint32_t nw = 0, ntraps = 0;
	struct ft_off_weight *w = calloc((size_t)cJSON_GetArraySize(ws) + 1, sizeof(*w));
	cJSON_ArrayForEach(x, ws) {
		int id = (int)num(x, "id");
		uint64_t o = (uint64_t)num(x, "off");
		uint32_t t = (uint32_t)num(x, "trap");
		uint64_t e = sizes ? (uint64_t)cJSON_GetArrayItem(sizes, (int)nw)->valuedouble : extent(id, o);
		w[nw++] = (struct ft_off_weight){ ptr_of[id] + o, ptr_of[id] + o + e, t, 0, 0, NULL, 0 };
		if (t + 1 > ntraps)
			ntraps = t + 1;
	}
	const cJSON *pp = saved ? cJSON_GetObjectItem(plan, "plan") : plan;
	const cJSON *tb = saved ? cJSON_GetObjectItem(pp, "traps") : cJSON_GetObjectItem(plan, "trap_block");
	if ((uint32_t)cJSON_GetArraySize(tb) != ntraps) {
		fprintf(stderr, "the plan has %d traps, discovery %u\n", cJSON_GetArraySize(tb), ntraps);
		return 2;
	}
	int *block = calloc(ntraps, sizeof(*block));
	for (uint32_t t = 0; t < ntraps; t++) {
		const cJSON *b = cJSON_GetArrayItem(tb, (int)t);
		block[t] = saved ? (int)num(b, "block") : b->valueint;
	}
	if (!cJSON_GetObjectItem(truth, "forwards"))
		truth = derive_forwards(begin);
	/* (apply.c) weights read all over the pass stay on the GPU, out of
	 * their traps */
	const cJSON *shared = saved ? cJSON_GetObjectItem(plan, "shared_weights") : NULL;
	cJSON_ArrayForEach(x, shared)
		if (x->valueint >= 0 && (uint32_t)x->valueint < nw)
			w[x->valueint].trap = UINT32_MAX;
	const struct ft_off_config c = { .real = &real, .vmm = &vmm, .stats = &stats,
					 .mode = FT_TM_ALLOCATION_BLOCK, .pinned = 1, .hold_ignored = 1 };
	struct ft_offload *o = ft_off_new();
	char why[256];
	if (ft_off_init(o, &c, block, ntraps, (uint32_t)num(pp, "blocks"), w, nw, why, sizeof(why)) ||
	    ft_off_stage(o, why, sizeof(why))) {
		fprintf(stderr, "the engine's set-up failed: %s\n", why);
		return 2;
	}
	if (getenv("EXEC_REPLAY_LINKS"))
		for (uint32_t k = 0; k < o->nw; k++)
			if (o->w[k].link || o->w[k].hi - o->w[k].lo < CHUNK)
				printf("weight 0x%llx..0x%llx trap %u link %u\n",
				       (unsigned long long)o->w[k].lo, (unsigned long long)o->w[k].hi,
				       o->w[k].trap, o->w[k].link);
	uint64_t moved, bb;
	uint32_t nb;
	ft_off_sizes(o, &moved, &bb, &nb);
	printf("%u weights in %u traps; %.1f MiB offloaded, %u blocks of %.1f MiB\n", nw, ntraps,
	       (double)moved / 1048576.0, nb, (double)bb / 1048576.0);

	/* EXEC_REPLAY_MISPLACE=F:T[:L]: at forward F's launch L (default 0)
	 * the position is at trap T, and sure */
	int misplace = 0, mis_fwd = 0, mis_trap = 0, mis_at = 0, nth = 0;
	unsigned long long unserved = 0;
	if (getenv("EXEC_REPLAY_MISPLACE"))
		misplace = sscanf(getenv("EXEC_REPLAY_MISPLACE"), "%d:%d:%d", &mis_fwd, &mis_trap,
				  &mis_at) >= 2;

	/* the INFERENCE forwards, launch by launch */
	static struct { char *name; struct ft_kernel *k; } kerns[4096];
	unsigned nk = 0;
	const cJSON *fw;
	int failures = 0, fwd = 0;
	size_t i = 0; /* the plan is applied at the first INFERENCE launch */
	if (getenv("EXEC_REPLAY_FROM"))
		inf += atof(getenv("EXEC_REPLAY_FROM"));
	while (i < nrecs && (strcmp(ev(recs[i]), "launch") || num(recs[i], "seq") < inf))
		i++;
	cJSON_ArrayForEach(fw, cJSON_GetObjectItem(truth, "forwards")) {
		double first = num(fw, "first"), end = num(fw, "end");
		if (end <= inf)
			continue;
		uint64_t c0 = ft_stats_read(&stats, FT_STAT_offload_copy_bytes);
		uint64_t m0 = ft_stats_read(&stats, FT_STAT_offload_misses);
		for (; i < nrecs; i++) {
			const cJSON *r = recs[i];
			if (!strcmp(ev(r), "launch")) {
				double seq = num(r, "seq");
				if (seq < first)
					continue;
				if (seq >= end)
					break;
				uint64_t a[64];
				uint16_t wd[64];
				unsigned n = 0, m = 0, all = 0;
				cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "refs")) all++;
				m = all;
				cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "refs")) {
					int id = (int)num(x, "id");
					if (id <= 0 || id >= MAX_ID || n >= 64 || m == 0)
						continue;
					unsigned j = cJSON_GetObjectItem(x, "stale") ? --m : n++;
					a[j] = ptr_of[id] + (uint64_t)num(x, "off");
					wd[j] = (uint16_t)num(x, "word");
				}
				const char *name = cJSON_GetObjectItem(r, "kernel")->valuestring;
				unsigned k = 0;
				while (k < nk && strcmp(kerns[k].name, name))
					k++;
				if (k == nk && nk < 4096) {
					kerns[nk].name = strdup(name);
					kerns[nk++].k = calloc(1, sizeof(struct ft_kernel) +
								      64 * sizeof(struct ft_param));
				}
				CUstream s = (CUstream)(uintptr_t)strtoull(
					cJSON_GetObjectItem(r, "stream")->valuestring, NULL, 16);
				if (misplace && fwd == mis_fwd && nth++ == mis_at) {
					/* the position sure but wrong (a stale
					 * word's placing, another layout's pass) */
					o->cur = mis_trap, o->cur_sure = 1, o->cur_stream = s;
					misplace = 0;
				}
				ft_off_launch(o, s, a, wd, n, all - n, k < nk ? kerns[k].k : NULL, name);
				ft_off_launched(o);
				if (gemm(name))
					unserved += unserved_reads(o, a, n);
			} else if (!strcmp(ev(r), "copy") || !strcmp(ev(r), "memset")) {
				const cJSON *d = cJSON_GetObjectItem(r, "dst_id"), *s = cJSON_GetObjectItem(r, "src_id");
				uint64_t bytes = (uint64_t)num(r, "bytes");
				uint64_t dst = d ? ptr_of[d->valueint] + (uint64_t)num(r, "dst_off") : 0;
				uint64_t src = s ? ptr_of[s->valueint] + (uint64_t)num(r, "src_off") : 0;
				ft_off_copy(o, NULL, dst, d ? bytes : 0, src, s ? bytes : 0);
			}
		}
		uint64_t copied = ft_stats_read(&stats, FT_STAT_offload_copy_bytes) - c0;
		uint64_t late = ft_stats_read(&stats, FT_STAT_offload_misses) - m0;
		printf("forward %d (%s): copied %.1f MiB = %.2f x the offloaded bytes, %llu late\n",
		       fwd, cJSON_GetObjectItem(fw, "kind")->valuestring, (double)copied / 1048576.0,
		       (double)copied / (double)moved, (unsigned long long)late);
		/* one load per offloaded trap (the first forward after the plan
		 * may load the next one's first traps too) */
		if (copied > moved + moved / 4) {
			fprintf(stderr, "FAIL: forward %d copied %.2f x the offloaded bytes\n", fwd,
				(double)copied / (double)moved);
			failures++;
		}
		fwd++;
	}
	unsigned long long conflicts = ft_stats_read(&stats, FT_STAT_offload_conflicts);
	unsigned long long misses = ft_stats_read(&stats, FT_STAT_offload_misses);
	printf("%d forwards: %llu conflicts, %llu late loads, %llu roaming references, %llu tails, "
	       "%llu ignored references (%llu held)\n", fwd, conflicts, misses,
	       (unsigned long long)ft_stats_read(&stats, FT_STAT_offload_roaming_refs),
	       (unsigned long long)ft_stats_read(&stats, FT_STAT_offload_tails),
	       (unsigned long long)ft_stats_read(&stats, FT_STAT_offload_ignored_refs),
	       (unsigned long long)ft_stats_read(&stats, FT_STAT_offload_held));
	if (!fwd || conflicts) {
		fprintf(stderr, "FAIL: %d forwards, %llu launches read two traps of one block\n", fwd,
			conflicts);
		failures++;
	}
	printf("%llu reads of GEMM kernels from offloaded traps not in their blocks; the position "
	       "moved to its shadow %llu times\n", unserved,
	       (unsigned long long)ft_stats_read(&stats, FT_STAT_offload_relocations));
	if (unserved) {
		fprintf(stderr, "FAIL: %llu GEMM reads of weights the executor did not load\n",
			unserved);
		failures++;
	}
	if (misses > (unsigned long long)fwd * 2) {
		fprintf(stderr, "FAIL: %llu late loads in %d forwards\n", misses, fwd);
		failures++;
	}
	return failures ? 1 : 0;
}
