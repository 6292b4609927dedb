/*
 * profile.json: serialisation, parsing with full validation, atomic save,
 * load with a reason for every refusal (include/ft/profile.h).
 */
#include "ft/discover.h"
#include "ft/profile.h"
#include "ft/input.h"
#include "ft/plan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char profile_name[48] = "profile.json";

const char *ft_profile_file(void)
{
	return profile_name;
}

void ft_profile_set_rank(int rank)
{
	if (rank >= 0)
		snprintf(profile_name, sizeof(profile_name), "profile.rank%d.json", rank);
	else
		snprintf(profile_name, sizeof(profile_name), "profile.json");
}

const char *ft_profile_refusal_name(enum ft_profile_refusal r)
{
	static const char *const names[] = {
		[FT_PROFILE_OK] = "ok",
		[FT_PROFILE_MISSING] = "missing",
		[FT_PROFILE_UNREADABLE] = "unreadable",
		[FT_PROFILE_CORRUPT] = "corrupt",
		[FT_PROFILE_NEWER] = "newer schema",
		[FT_PROFILE_OLDER] = "older schema",
		[FT_PROFILE_INCONSISTENT] = "inconsistent",
		[FT_PROFILE_OTHER_MODEL] = "other model",
		[FT_PROFILE_OTHER_DEVICE] = "other device",
	};
	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

uint64_t ft_profile_fingerprint(const uint64_t *sizes, uint32_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (uint32_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++) {
			h ^= (sizes[i] >> (8 * b)) & 0xff;
			h *= 1099511628211ULL;
		}
	return h;
}

void ft_profile_drop_plan(struct ft_profile *p)
{
	if (p->plan)
		ft_plan_free(p->plan);
	free(p->plan);
	p->plan = NULL;
}

void ft_profile_free(struct ft_profile *p)
{
	free(p->weights);
	free(p->sums);
	free(p->traps);
	free(p->curve);
	ft_profile_drop_plan(p);
	free(p->coread);
	free(p->shared);
	free(p->nslices);
	free(p->slices);
	memset(p, 0, sizeof(*p));
}

static void add_stat(cJSON *o, const char *key, const struct ft_stat_ms *s)
{
	cJSON *c = cJSON_AddObjectToObject(o, key);
	cJSON_AddNumberToObject(c, "median", s->median);
	cJSON_AddNumberToObject(c, "min", s->min);
	cJSON_AddNumberToObject(c, "max", s->max);
	cJSON_AddNumberToObject(c, "samples", s->samples);
}

static void add_plan(cJSON *root, const struct ft_plan *pl)
{
	cJSON *o = cJSON_AddObjectToObject(root, "plan");
	cJSON_AddStringToObject(o, "settings", pl->settings);
	cJSON_AddStringToObject(o, "mode", pl->budget ? "memory" : "latency");
	cJSON_AddNumberToObject(o, "budget_bytes", (double)pl->budget);
	cJSON_AddNumberToObject(o, "blocks", pl->nblocks);
	cJSON *bb = cJSON_AddArrayToObject(o, "block_bytes");
	for (uint32_t k = 0; k < pl->nblocks; k++)
		cJSON_AddItemToArray(bb, cJSON_CreateNumber((double)pl->block_bytes[k]));
	cJSON *tr = cJSON_AddArrayToObject(o, "traps");
	for (uint32_t i = 0; i < pl->ntraps; i++) {
		cJSON *t = cJSON_CreateObject();
		cJSON_AddNumberToObject(t, "block", pl->t[i].block);
		cJSON_AddNumberToObject(t, "issue_ms", pl->t[i].offloaded ? pl->t[i].issue_ms : 0);
		cJSON_AddNumberToObject(t, "wait_ms", pl->t[i].wait_ms);
		cJSON_AddNumberToObject(t, "copy_ms", pl->t[i].offloaded ? pl->t[i].copy_ms : 0);
		cJSON_AddItemToArray(tr, t);
	}
	cJSON_AddNumberToObject(o, "peak_bytes", (double)pl->peak_bytes);
	cJSON_AddNumberToObject(o, "offloaded_bytes", (double)pl->offloaded_bytes);
	cJSON_AddNumberToObject(o, "pass_ms", pl->pass_ms);
	cJSON_AddNumberToObject(o, "stall_ms", pl->stall_ms);
	cJSON_AddNumberToObject(o, "floor_ms", pl->floor_ms);
}

char *ft_profile_to_json(const struct ft_profile *p)
{
	char hex[24];
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "schema", p->schema);
	cJSON_AddStringToObject(root, "library", p->library);
	cJSON *dev = cJSON_AddObjectToObject(root, "device");
	cJSON_AddStringToObject(dev, "name", p->device.name);
	cJSON_AddNumberToObject(dev, "total_bytes", (double)p->device.total_bytes);
	cJSON_AddNumberToObject(dev, "driver", p->device.driver);
	cJSON *model = cJSON_AddObjectToObject(root, "model");
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)p->fingerprint);
	cJSON_AddStringToObject(model, "fingerprint", hex);
	cJSON *w = cJSON_AddArrayToObject(model, "weight_bytes");
	for (uint32_t i = 0; i < p->nweights; i++)
		cJSON_AddItemToArray(w, cJSON_CreateNumber((double)p->weights[i]));
	if (p->sums) {
		/* (hex: a JSON number holds 53 bits) */
		cJSON *s = cJSON_AddArrayToObject(model, "weight_sums");
		for (uint32_t i = 0; i < p->nweights; i++) {
			snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)p->sums[i]);
			cJSON_AddItemToArray(s, cJSON_CreateString(hex));
		}
	}
	cJSON *traps = cJSON_AddArrayToObject(root, "traps");
	for (uint32_t i = 0; i < p->ntraps; i++) {
		const struct ft_trap *t = &p->traps[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "label", t->label);
		cJSON_AddStringToObject(o, "role", t->role);
		cJSON_AddNumberToObject(o, "first_weight", t->first_weight);
		cJSON_AddNumberToObject(o, "weights", t->nweights);
		cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
		add_stat(o, "compute_ms", &t->compute);
		cJSON_AddItemToArray(traps, o);
	}
	cJSON *curve = cJSON_AddArrayToObject(root, "copy_curve");
	for (uint32_t i = 0; i < p->ncurve; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "bytes", (double)p->curve[i].bytes);
		cJSON_AddNumberToObject(o, "ms", p->curve[i].ms);
		cJSON_AddItemToArray(curve, o);
	}
	cJSON *co = cJSON_AddArrayToObject(root, "coread");
	for (uint32_t i = 0; i < p->ncoread; i++) {
		cJSON *pair = cJSON_CreateArray();
		cJSON_AddItemToArray(pair, cJSON_CreateNumber(p->coread[i][0]));
		cJSON_AddItemToArray(pair, cJSON_CreateNumber(p->coread[i][1]));
		cJSON_AddItemToArray(co, pair);
	}
	cJSON *sh = cJSON_AddArrayToObject(root, "shared_weights");
	for (uint32_t i = 0; i < p->nshared; i++)
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(p->shared[i]));
	/* [weight, start, start, ...] per stacked tensor */
	cJSON *sl = cJSON_AddArrayToObject(root, "slices");
	for (uint32_t k = 0, at = 0; p->nslices && k < p->nweights; at += p->nslices[k++]) {
		if (!p->nslices[k])
			continue;
		cJSON *w = cJSON_CreateArray();
		cJSON_AddItemToArray(w, cJSON_CreateNumber(k));
		for (uint32_t j = 0; j < p->nslices[k]; j++)
			cJSON_AddItemToArray(w, cJSON_CreateNumber((double)p->slices[at + j]));
		cJSON_AddItemToArray(sl, w);
	}
	if (p->plan)
		add_plan(root, p->plan);
	else
		cJSON_AddNullToObject(root, "plan");
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

/* Parsing: every accessor records the first problem and returns a default. */
struct rd {
	enum ft_profile_refusal r;
	char *why;
	size_t len;
};

static void bad(struct rd *rd, enum ft_profile_refusal r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void bad(struct rd *rd, enum ft_profile_refusal r, const char *fmt, ...)
{
	if (rd->r != FT_PROFILE_OK)
		return;
	rd->r = r;
	if (rd->why && rd->len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(rd->why, rd->len, fmt, ap);
		va_end(ap);
	}
}

static double num(struct rd *rd, const cJSON *o, const char *key, double lo, double hi)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi) {
		bad(rd, FT_PROFILE_CORRUPT, "field \"%s\" is missing or not a number in [%g, %g]",
		    key, lo, hi);
		return lo;
	}
	return v->valuedouble;
}

static void str(struct rd *rd, const cJSON *o, const char *key, char *out, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= n) {
		bad(rd, FT_PROFILE_CORRUPT, "field \"%s\" is missing or not a short string", key);
		out[0] = 0;
		return;
	}
	snprintf(out, n, "%s", v->valuestring);
}

static const cJSON *child(struct rd *rd, const cJSON *o, const char *key, int array)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (array ? !cJSON_IsArray(v) : !cJSON_IsObject(v)) {
		bad(rd, FT_PROFILE_CORRUPT, "field \"%s\" is missing or not an %s", key,
		    array ? "array" : "object");
		return NULL;
	}
	return v;
}

#define MAX_BYTES 1e15
#define MAX_MS 1e7

static void read_stat(struct rd *rd, const cJSON *o, struct ft_stat_ms *s)
{
	const cJSON *c = child(rd, o, "compute_ms", 0);
	if (!c)
		return;
	s->median = num(rd, c, "median", 0, MAX_MS);
	s->min = num(rd, c, "min", 0, MAX_MS);
	s->max = num(rd, c, "max", 0, MAX_MS);
	s->samples = (uint32_t)num(rd, c, "samples", 0, 1e9);
	if (s->min > s->median || s->median > s->max)
		bad(rd, FT_PROFILE_INCONSISTENT, "compute_ms needs min <= median <= max");
}

/* The plan made from this profile (every trap's block checked). */
static void read_plan(struct rd *rd, const cJSON *o, struct ft_profile *p)
{
	if (!cJSON_IsObject(o)) {
		bad(rd, FT_PROFILE_CORRUPT, "field \"plan\" is not an object or null");
		return;
	}
	struct ft_plan *pl = calloc(1, sizeof(*pl));
	if (!pl || !(pl->t = calloc(p->ntraps + 1, sizeof(*pl->t)))) {
		free(pl);
		bad(rd, FT_PROFILE_UNREADABLE, "out of memory");
		return;
	}
	p->plan = pl;
	pl->ntraps = p->ntraps;
	str(rd, o, "settings", pl->settings, sizeof(pl->settings));
	pl->budget = (uint64_t)num(rd, o, "budget_bytes", 0, MAX_BYTES);
	pl->nblocks = (uint32_t)num(rd, o, "blocks", 1, FT_PLAN_MAX_BLOCKS);
	const cJSON *bb = child(rd, o, "block_bytes", 1), *x;
	uint32_t i = 0;
	cJSON_ArrayForEach(x, bb) {
		if (i >= pl->nblocks || !cJSON_IsNumber(x) || x->valuedouble < 0 ||
		    x->valuedouble > MAX_BYTES) {
			bad(rd, FT_PROFILE_INCONSISTENT, "plan.block_bytes[%u] is not a block's size", i);
			return;
		}
		pl->block_bytes[i++] = (uint64_t)x->valuedouble;
	}
	const cJSON *tr = child(rd, o, "traps", 1);
	if (tr && (uint32_t)cJSON_GetArraySize(tr) != p->ntraps) {
		bad(rd, FT_PROFILE_INCONSISTENT, "the plan has %d traps, the profile %u",
		    cJSON_GetArraySize(tr), p->ntraps);
		return;
	}
	i = 0;
	cJSON_ArrayForEach(x, tr) {
		struct ft_plan_trap *t = &pl->t[i];
		t->block = (int)num(rd, x, "block", -1, FT_PLAN_MAX_BLOCKS);
		t->issue_ms = num(rd, x, "issue_ms", -MAX_MS, MAX_MS);
		t->wait_ms = num(rd, x, "wait_ms", 0, MAX_MS);
		/* (absent from profiles written before 0.3: 0, see ft_plan_copies) */
		if (cJSON_GetObjectItemCaseSensitive(x, "copy_ms"))
			t->copy_ms = num(rd, x, "copy_ms", 0, MAX_MS);
		if (rd->r == FT_PROFILE_OK && t->block >= (int)pl->nblocks)
			bad(rd, FT_PROFILE_INCONSISTENT, "plan.traps[%u].block %d is not one of its %u "
			    "blocks", i, t->block, pl->nblocks);
		t->offloaded = t->block >= 0;
		pl->compute_ms += p->traps[i].compute.median;
		i++;
	}
	pl->peak_bytes = (uint64_t)num(rd, o, "peak_bytes", 0, MAX_BYTES);
	pl->offloaded_bytes = (uint64_t)num(rd, o, "offloaded_bytes", 0, MAX_BYTES);
	pl->pass_ms = num(rd, o, "pass_ms", 0, MAX_MS);
	pl->stall_ms = num(rd, o, "stall_ms", 0, MAX_MS);
	pl->floor_ms = num(rd, o, "floor_ms", 0, MAX_MS);
}

/* Whether x is a whole number in [0, limit). */
static int is_index(const cJSON *x, uint32_t limit)
{
	return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < limit &&
	       x->valuedouble == (uint32_t)x->valuedouble;
}

/* Traps read together (absent in profiles of 0.2: none known then). */
static void read_coread(struct rd *rd, const cJSON *co, struct ft_profile *p)
{
	const cJSON *x;
	uint32_t i = 0;
	if (co && !cJSON_IsArray(co))
		bad(rd, FT_PROFILE_CORRUPT, "field \"coread\" is not an array");
	cJSON_ArrayForEach(x, co) {
		const cJSON *a = cJSON_GetArrayItem(x, 0), *b = cJSON_GetArrayItem(x, 1);
		if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2 || !is_index(a, p->ntraps) ||
		    !is_index(b, p->ntraps) || b->valuedouble <= a->valuedouble) {
			bad(rd, FT_PROFILE_INCONSISTENT, "coread[%u] is not a pair of traps a < b", i);
			return;
		}
		if (ft_coread_add(p, (uint32_t)a->valuedouble, (uint32_t)b->valuedouble) < 0)
			bad(rd, FT_PROFILE_UNREADABLE, "out of memory");
		i++;
	}
}

/* The weights' checksums (absent in profiles of 0.2): one 16-digit hex
 * string per weight. */
static void read_sums(struct rd *rd, const cJSON *s, struct ft_profile *p)
{
	const cJSON *x;
	uint32_t i = 0;
	if (!s)
		return;
	if (!cJSON_IsArray(s) || (uint32_t)cJSON_GetArraySize(s) != p->nweights) {
		bad(rd, FT_PROFILE_CORRUPT, "field \"weight_sums\" is not an array of one "
		    "checksum per weight");
		return;
	}
	p->sums = calloc(p->nweights + 1, sizeof(*p->sums));
	const cJSON *list = p->sums ? s : NULL;
	cJSON_ArrayForEach(x, list) {
		const char *v = cJSON_GetStringValue(x);
		char *end = NULL;
		if (v && strlen(v) == 16 && strspn(v, "0123456789abcdef") == 16)
			p->sums[i] = strtoull(v, &end, 16);
		if (!end || *end) {
			bad(rd, FT_PROFILE_CORRUPT, "weight_sums[%u] is not 16 hex digits", i);
			return;
		}
		i++;
	}
}

/* Weights that stay on the GPU (absent in profiles of 0.2). */
static void read_shared(struct rd *rd, const cJSON *sh, struct ft_profile *p)
{
	const cJSON *x;
	uint32_t i = 0;
	if (sh && !cJSON_IsArray(sh))
		bad(rd, FT_PROFILE_CORRUPT, "field \"shared_weights\" is not an array");
	p->nshared = cJSON_IsArray(sh) ? (uint32_t)cJSON_GetArraySize(sh) : 0;
	p->shared = p->nshared ? calloc(p->nshared, sizeof(*p->shared)) : NULL;
	const cJSON *list = p->shared ? sh : NULL;
	cJSON_ArrayForEach(x, list) {
		if (!is_index(x, p->nweights) || (i && (uint32_t)x->valuedouble <= p->shared[i - 1])) {
			bad(rd, FT_PROFILE_INCONSISTENT, "shared_weights[%u] is not a weight index "
			    "(increasing)", i);
			return;
		}
		p->shared[i++] = (uint32_t)x->valuedouble;
	}
}

/* Stacked tensors' slice starts (absent in profiles before 0.3):
 * [weight, start, start, ...] each, weights increasing, starts whole
 * numbers inside the weight, FT_DISC_SLICE_MIN or more apart (and from
 * its start), as discovery finds them. */
static int slice_entry(const cJSON *w)
{
	return cJSON_IsArray(w) && cJSON_GetArraySize(w) >= 2 && cJSON_GetArraySize(w) <= 1 << 16;
}

static void read_slices(struct rd *rd, const cJSON *sl, struct ft_profile *p)
{
	const cJSON *w, *x;
	uint32_t total = 0, last = 0;
	if (sl && !cJSON_IsArray(sl))
		bad(rd, FT_PROFILE_CORRUPT, "field \"slices\" is not an array");
	if (!cJSON_IsArray(sl) || !cJSON_GetArraySize(sl))
		return;
	cJSON_ArrayForEach(w, sl)
		total += slice_entry(w) ? (uint32_t)cJSON_GetArraySize(w) - 1 : 0;
	p->nslices = calloc(p->nweights + 1, sizeof(*p->nslices));
	p->slices = calloc(total + 1, sizeof(*p->slices));
	if (!p->nslices || !p->slices) {
		bad(rd, FT_PROFILE_CORRUPT, "out of memory for \"slices\"");
		return;
	}
	total = 0;
	cJSON_ArrayForEach(w, sl) {
		const cJSON *k = slice_entry(w) ? cJSON_GetArrayItem(w, 0) : NULL;
		if (!k || !is_index(k, p->nweights) || (total && (uint32_t)k->valuedouble <= last)) {
			bad(rd, FT_PROFILE_INCONSISTENT, "slices: an entry is not [weight, starts...] "
			    "of a weight after the one before");
			return;
		}
		last = (uint32_t)k->valuedouble;
		uint64_t prev = 0;
		for (x = k->next; x; x = x->next) {
			if (!cJSON_IsNumber(x) || x->valuedouble != (double)(uint64_t)x->valuedouble ||
			    x->valuedouble < (double)prev + FT_DISC_SLICE_MIN ||
			    x->valuedouble >= (double)p->weights[last]) {
				bad(rd, FT_PROFILE_INCONSISTENT, "slices of weight %u: starts must "
				    "increase by %u bytes or more inside the weight", last,
				    FT_DISC_SLICE_MIN);
				return;
			}
			prev = (uint64_t)x->valuedouble;
			p->slices[total++] = prev;
			p->nslices[last]++;
		}
	}
}

static void read_body(struct rd *rd, const cJSON *root, struct ft_profile *p)
{
	str(rd, root, "library", p->library, sizeof(p->library));
	const cJSON *dev = child(rd, root, "device", 0);
	if (dev) {
		str(rd, dev, "name", p->device.name, sizeof(p->device.name));
		p->device.total_bytes = (uint64_t)num(rd, dev, "total_bytes", 0, MAX_BYTES);
		p->device.driver = (int)num(rd, dev, "driver", 0, 1e6);
	}
	const cJSON *model = child(rd, root, "model", 0);
	const cJSON *w = model ? child(rd, model, "weight_bytes", 1) : NULL;
	char fp[24] = "";
	if (model)
		str(rd, model, "fingerprint", fp, sizeof(fp));
	p->nweights = w ? (uint32_t)cJSON_GetArraySize(w) : 0;
	p->weights = calloc(p->nweights + 1, sizeof(*p->weights));
	uint32_t i = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, w) {
		if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > MAX_BYTES)
			bad(rd, FT_PROFILE_CORRUPT, "weight_bytes[%u] is not a size", i);
		else
			p->weights[i] = (uint64_t)x->valuedouble;
		i++;
	}
	p->fingerprint = strtoull(fp, NULL, 16);
	if (model && rd->r == FT_PROFILE_OK)
		read_sums(rd, cJSON_GetObjectItemCaseSensitive(model, "weight_sums"), p);
	if (rd->r == FT_PROFILE_OK && p->fingerprint != ft_profile_fingerprint(p->weights, p->nweights))
		bad(rd, FT_PROFILE_INCONSISTENT, "the fingerprint does not match weight_bytes");

	const cJSON *traps = child(rd, root, "traps", 1);
	p->ntraps = traps ? (uint32_t)cJSON_GetArraySize(traps) : 0;
	p->traps = calloc(p->ntraps + 1, sizeof(*p->traps));
	uint32_t next = 0;
	i = 0;
	cJSON_ArrayForEach(x, traps) {
		struct ft_trap *t = &p->traps[i++];
		str(rd, x, "label", t->label, sizeof(t->label));
		str(rd, x, "role", t->role, sizeof(t->role));
		t->first_weight = (uint32_t)num(rd, x, "first_weight", 0, 1e9);
		t->nweights = (uint32_t)num(rd, x, "weights", 1, 1e9);
		t->bytes = (uint64_t)num(rd, x, "bytes", 1, MAX_BYTES);
		read_stat(rd, x, &t->compute);
		if (rd->r != FT_PROFILE_OK)
			break;
		uint64_t sum = 0;
		if (t->first_weight != next || t->first_weight + t->nweights > p->nweights) {
			bad(rd, FT_PROFILE_INCONSISTENT,
			    "trap %s does not continue where the previous one ended", t->label);
			break;
		}
		for (uint32_t k = 0; k < t->nweights; k++)
			sum += p->weights[t->first_weight + k];
		if (sum != t->bytes)
			bad(rd, FT_PROFILE_INCONSISTENT, "trap %s: bytes %llu, its weights sum to %llu",
			    t->label, (unsigned long long)t->bytes, (unsigned long long)sum);
		next = t->first_weight + t->nweights;
	}
	if (rd->r == FT_PROFILE_OK && next != p->nweights)
		bad(rd, FT_PROFILE_INCONSISTENT, "the traps cover %u of %u weights", next, p->nweights);

	const cJSON *curve = child(rd, root, "copy_curve", 1);
	p->ncurve = curve ? (uint32_t)cJSON_GetArraySize(curve) : 0;
	p->curve = calloc(p->ncurve + 1, sizeof(*p->curve));
	i = 0;
	cJSON_ArrayForEach(x, curve) {
		p->curve[i].bytes = (uint64_t)num(rd, x, "bytes", 1, MAX_BYTES);
		p->curve[i].ms = num(rd, x, "ms", 0, MAX_MS);
		if (i && p->curve[i].bytes <= p->curve[i - 1].bytes)
			bad(rd, FT_PROFILE_INCONSISTENT, "copy_curve sizes must increase");
		i++;
	}
	read_coread(rd, cJSON_GetObjectItemCaseSensitive(root, "coread"), p);
	read_shared(rd, cJSON_GetObjectItemCaseSensitive(root, "shared_weights"), p);
	if (rd->r == FT_PROFILE_OK)
		read_slices(rd, cJSON_GetObjectItemCaseSensitive(root, "slices"), p);
	const cJSON *plan = cJSON_GetObjectItemCaseSensitive(root, "plan");
	if (plan && !cJSON_IsNull(plan) && rd->r == FT_PROFILE_OK)
		read_plan(rd, plan, p);
}

enum ft_profile_refusal ft_profile_from_json(const char *text, struct ft_profile *p,
					     char *why, size_t why_len)
{
	struct rd rd = { FT_PROFILE_OK, why, why_len };
	memset(p, 0, sizeof(*p));
	if (why && why_len)
		why[0] = 0;
	cJSON *root = cJSON_Parse(text);
	if (!cJSON_IsObject(root)) {
		bad(&rd, FT_PROFILE_CORRUPT, "not a JSON object");
		cJSON_Delete(root);
		return rd.r;
	}
	p->schema = (int)num(&rd, root, "schema", 0, 1e6);
	if (rd.r == FT_PROFILE_OK && p->schema > FT_PROFILE_SCHEMA)
		bad(&rd, FT_PROFILE_NEWER, "schema %d is newer than this library's %d: upgrade "
		    "libflextensor or delete the profile", p->schema, FT_PROFILE_SCHEMA);
	else if (rd.r == FT_PROFILE_OK && p->schema < FT_PROFILE_SCHEMA)
		bad(&rd, FT_PROFILE_OLDER, "schema %d is older than this library's %d: it will be "
		    "profiled again", p->schema, FT_PROFILE_SCHEMA);
	if (rd.r == FT_PROFILE_OK)
		read_body(&rd, root, p);
	cJSON_Delete(root);
	if (rd.r != FT_PROFILE_OK)
		ft_profile_free(p);
	return rd.r;
}

int ft_profile_save(const struct ft_profile *p, const char *dir)
{
	char path[4096], tmp[4200];
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", dir, FT_PROFILE_FILE);
	/* one temporary file per save: threads of one process may save at
	 * once (a refresh while the plan's profile is written) */
	static _Atomic unsigned saves;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(), atomic_fetch_add(&saves, 1));
	char *text = ft_profile_to_json(p);
	if (!text)
		return -ENOMEM;
	int rc = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
	} else {
		size_t n = strlen(text), off = 0;
		while (off < n) {
			ssize_t w = write(fd, text + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = -errno;
				break;
			}
			off += (size_t)w;
		}
		if (!rc && (write(fd, "\n", 1) != 1 || fsync(fd)))
			rc = -errno;
		if (close(fd) && !rc)
			rc = -errno;
		if (!rc && rename(tmp, path))
			rc = -errno;
		if (rc)
			unlink(tmp);
	}
	free(text);
	return rc;
}

enum ft_profile_refusal ft_profile_load(const char *path, struct ft_profile *p,
					char *why, size_t why_len)
{
	char dir_file[4096], what[256];
	const char *file = path;
	struct stat st;
	memset(p, 0, sizeof(*p));
	if (why && why_len)
		why[0] = 0;
	int is_dir = !stat(path, &st) && S_ISDIR(st.st_mode);
	if (is_dir) {
		int n = snprintf(dir_file, sizeof(dir_file), "%s/%s", path, FT_PROFILE_FILE);
		if (n < 0 || (size_t)n >= sizeof(dir_file)) {
			if (why && why_len)
				snprintf(why, why_len, "%.64s...: the path is too long", path);
			return FT_PROFILE_UNREADABLE;
		}
		file = dir_file;
	}
	/* Bounded: a device (FT_PROFILE_STORAGE_DIR=/dev/zero), a FIFO or a
	 * huge file is refused rather than read until memory runs out. */
	char *text = NULL;
	size_t len = 0;
	int rc = ft_input_read_file(file, FT_INPUT_PROFILE_MAX, &text, &len, what, sizeof(what));
	if (rc) {
		if (why && why_len)
			snprintf(why, why_len, "%s: %s%s%s", file, what,
				 rc == -EINVAL && !is_dir ? ", nor a directory that holds " : "",
				 rc == -EINVAL && !is_dir ? FT_PROFILE_FILE : "");
		return rc == -ENOENT ? FT_PROFILE_MISSING : FT_PROFILE_UNREADABLE;
	}
	if (memchr(text, 0, len)) {
		free(text);
		if (why && why_len)
			snprintf(why, why_len, "%s: holds NUL bytes, so it is not JSON text", file);
		return FT_PROFILE_CORRUPT;
	}
	enum ft_profile_refusal r = ft_profile_from_json(text, p, why, why_len);
	free(text);
	return r;
}

enum ft_profile_refusal ft_profile_check_compatible(const struct ft_profile *l,
						    const struct ft_profile *e,
						    char *why, size_t why_len)
{
	if (e->weights && (l->nweights != e->nweights ||
			   memcmp(l->weights, e->weights, e->nweights * sizeof(*e->weights)))) {
		uint32_t k = 0;
		while (k < l->nweights && k < e->nweights && l->weights[k] == e->weights[k])
			k++;
		if (why && why_len)
			snprintf(why, why_len, "it describes another model (%u weights, "
				 "fingerprint %016llx; this process has %u, %016llx; the first to "
				 "differ is weight %u: %llu bytes there, %llu here)",
				 l->nweights, (unsigned long long)l->fingerprint, e->nweights,
				 (unsigned long long)ft_profile_fingerprint(e->weights, e->nweights), k,
				 (unsigned long long)(k < l->nweights ? l->weights[k] : 0),
				 (unsigned long long)(k < e->nweights ? e->weights[k] : 0));
		return FT_PROFILE_OTHER_MODEL;
	}
	if (e->device.name[0] && (strcmp(l->device.name, e->device.name) ||
				  l->device.total_bytes != e->device.total_bytes)) {
		if (why && why_len)
			snprintf(why, why_len, "it was measured on %s (%llu bytes), this is %s "
				 "(%llu bytes)", l->device.name,
				 (unsigned long long)l->device.total_bytes, e->device.name,
				 (unsigned long long)e->device.total_bytes);
		return FT_PROFILE_OTHER_DEVICE;
	}
	return FT_PROFILE_OK;
}
