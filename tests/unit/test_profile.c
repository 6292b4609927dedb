/* profile.json: round trip, atomic save and load, every refusal reason,
 * compatibility with this process's model and device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "ft/plan.h"
#include "ft/profile.h"
#include "ft/traps.h"
#include "llama_sizes.h"

/* A Llama-shaped profile with made-up timings. */
static void make(struct ft_profile *p, uint32_t layers)
{
	memset(p, 0, sizeof(*p));
	p->schema = FT_PROFILE_SCHEMA;
	snprintf(p->library, sizeof(p->library), "0.1.0");
	snprintf(p->device.name, sizeof(p->device.name), "NVIDIA H200");
	p->device.total_bytes = 150754820096ULL;
	p->device.driver = 13000;
	p->nweights = llama_sizes(&p->weights, layers, 4096, 14336, 1024, 128256, 0);
	p->fingerprint = ft_profile_fingerprint(p->weights, p->nweights);
	p->ntraps = (uint32_t)ft_traps_group(p->weights, p->nweights, 256 << 20, &p->traps);
	for (uint32_t i = 0; i < p->ntraps; i++)
		p->traps[i].compute = (struct ft_stat_ms){ 1.0 + i * 0.01, 0.9, 1.5 + i, 10 };
	p->ncurve = 3;
	p->curve = calloc(3, sizeof(*p->curve));
	p->curve[0] = (struct ft_curve_point){ 65536, 0.004 };
	p->curve[1] = (struct ft_curve_point){ 1 << 20, 0.0218 };
	p->curve[2] = (struct ft_curve_point){ 64 << 20, 1.24 };
}

/* An empty plan over n traps (none offloaded yet), into p. */
static void plan_of(struct ft_profile *p, uint32_t n)
{
	p->plan = calloc(1, sizeof(*p->plan));
	assert_non_null(p->plan);
	p->plan->ntraps = n;
	p->plan->t = calloc(n, sizeof(*p->plan->t));
	assert_non_null(p->plan->t);
}

static void round_trip(void **state)
{
	(void)state;
	struct ft_profile a, b;
	char why[256];
	make(&a, 32);
	plan_of(&a, 34);
	a.plan->nblocks = 4;
	a.plan->budget = 8ULL << 30;
	snprintf(a.plan->settings, sizeof(a.plan->settings), "FT_X=1");
	a.plan->block_bytes[3] = 7 << 20;
	for (uint32_t i = 0; i < 34; i++) {
		a.plan->t[i].block = i % 3 ? (int)(i % 4) : -1;
		a.plan->t[i].offloaded = a.plan->t[i].block >= 0;
		a.plan->t[i].wait_ms = 0.25 * i;
		a.plan->t[i].copy_ms = a.plan->t[i].offloaded ? 1.5 + i : 0;
	}
	a.plan->pass_ms = 12.5;
	a.plan->floor_ms = 11.5;
	ft_coread_add(&a, 4, 3);
	ft_coread_add(&a, 1, 5);
	ft_coread_add(&a, 5, 1);
	/* two stacked tensors' slice starts (weights 2 and 9) */
	a.nslices = calloc(a.nweights, sizeof(*a.nslices));
	a.slices = calloc(5, sizeof(*a.slices));
	a.nslices[2] = 3;
	a.nslices[9] = 2;
	assert_true(a.weights[2] > 8 * (1 << 20) && a.weights[9] > 8 * (1 << 20));
	for (uint32_t j = 0; j < 5; j++)
		a.slices[j] = (j < 3 ? j + 1 : 4 * (j - 2)) * (uint64_t)(1 << 20);
	char *text = ft_profile_to_json(&a);
	assert_non_null(text);
	assert_int_equal(ft_profile_from_json(text, &b, why, sizeof(why)), FT_PROFILE_OK);
	assert_int_equal(b.nweights, a.nweights);
	assert_memory_equal(b.weights, a.weights, a.nweights * sizeof(uint64_t));
	assert_int_equal(b.fingerprint, a.fingerprint);
	assert_int_equal(b.ntraps, 34);
	assert_string_equal(b.traps[33].label, "trap.33");
	assert_string_equal(b.traps[33].role, "head");
	assert_true(b.traps[7].compute.median == a.traps[7].compute.median);
	assert_int_equal(b.ncurve, 3);
	assert_true(b.curve[2].ms == 1.24);
	assert_int_equal(b.ncoread, 2); /* sorted */
	assert_int_equal(b.coread[0][0], 1);
	assert_int_equal(b.coread[0][1], 5);
	assert_int_equal(b.coread[1][0], 3);
	assert_int_equal(b.coread[1][1], 4);
	assert_true(ft_coread_has(&b, 5, 1) && !ft_coread_has(&b, 1, 4));
	assert_non_null(b.nslices);
	assert_memory_equal(b.nslices, a.nslices, a.nweights * sizeof(*a.nslices));
	assert_memory_equal(b.slices, a.slices, 5 * sizeof(*a.slices));
	assert_string_equal(b.device.name, "NVIDIA H200");
	assert_non_null(b.plan); /* the typed plan, every field that is saved */
	assert_int_equal(b.plan->ntraps, 34);
	assert_int_equal(b.plan->nblocks, 4);
	assert_int_equal(b.plan->budget, 8ULL << 30);
	assert_string_equal(b.plan->settings, "FT_X=1");
	assert_int_equal(b.plan->block_bytes[3], 7 << 20);
	for (uint32_t i = 0; i < 34; i++) {
		assert_int_equal(b.plan->t[i].block, a.plan->t[i].block);
		assert_int_equal(b.plan->t[i].offloaded, a.plan->t[i].block >= 0);
		assert_true(b.plan->t[i].wait_ms == a.plan->t[i].wait_ms);
		assert_true(b.plan->t[i].copy_ms == a.plan->t[i].copy_ms);
	}
	assert_true(b.plan->pass_ms == 12.5 && b.plan->floor_ms == 11.5);
	/* FT_TRANSFER_COMPRESSION=auto weighs the restart's copies as the
	 * first start's (they were 0 before copy_ms was saved: the store
	 * stayed raw on every restart) */
	assert_true(ft_plan_copies(b.plan, b.curve, b.ncurve) == ft_plan_copies(a.plan, a.curve, a.ncurve));
	assert_true(ft_plan_copies(b.plan, b.curve, b.ncurve) > 0);
	assert_int_equal(ft_profile_check_compatible(&b, &a, why, sizeof(why)), FT_PROFILE_OK);
	free(text);
	ft_profile_free(&a);
	ft_profile_free(&b);
}

/* A plan saved before its copy times were (0.2): read as 0, and the
 * copy stream's time a pass is its offloaded bytes at the curve's rate. */
static void plan_without_copy_times(void **state)
{
	(void)state;
	struct ft_profile a, b;
	char why[256];
	make(&a, 4);
	plan_of(&a, a.ntraps);
	a.plan->nblocks = 1;
	a.plan->offloaded_bytes = 64 << 20;
	for (uint32_t i = 0; i < a.ntraps; i++) {
		a.plan->t[i].block = i == 1 ? 0 : -1;
		a.plan->t[i].offloaded = i == 1;
		a.plan->t[i].copy_ms = i == 1 ? 9.0 : 0;
	}
	char *text = ft_profile_to_json(&a), *k;
	assert_non_null(text);
	assert_true(ft_plan_copies(a.plan, a.curve, a.ncurve) == 9.0);
	/* "copy_ms" renamed: the old profile's field set */
	while ((k = strstr(text, "\"copy_ms\"")))
		memcpy(k, "\"xopy_ms\"", 9);
	assert_int_equal(ft_profile_from_json(text, &b, why, sizeof(why)), FT_PROFILE_OK);
	assert_true(b.plan->t[1].copy_ms == 0);
	double ms = ft_plan_copies(b.plan, b.curve, b.ncurve);
	assert_true(ms > 1.24 - 1e-9 && ms < 1.24 + 1e-9); /* 64 MiB on the curve */
	free(text);
	ft_profile_free(&a);
	ft_profile_free(&b);
}

/* Edits the JSON text of a valid profile and expects one refusal. */
static void refusals(void **state)
{
	(void)state;
	struct ft_profile a, b;
	make(&a, 4);
	ft_coread_add(&a, 1, 2);
	a.nslices = calloc(a.nweights, sizeof(*a.nslices));
	a.slices = calloc(1, sizeof(*a.slices));
	assert_true(a.weights[2] > 2 * (1 << 20));
	a.nslices[2] = 1;
	a.slices[0] = 1 << 20;
	plan_of(&a, a.ntraps);
	a.plan->nblocks = 2;
	for (uint32_t i = 0; i < a.ntraps; i++)
		a.plan->t[i].block = i == 1 ? 1 : -1;
	snprintf(a.plan->settings, sizeof(a.plan->settings), "S");
	char *good = ft_profile_to_json(&a);
	static const struct {
		const char *find, *replace;
		enum ft_profile_refusal want;
		const char *needle;
	} cases[] = {
		{ "\"schema\":\t1", "\"schema\":\t7", FT_PROFILE_NEWER, "newer" },
		{ "\"schema\":\t1", "\"schema\":\t0", FT_PROFILE_OLDER, "older" },
		{ "{", "[", FT_PROFILE_CORRUPT, "not a JSON object" },
		{ "\"traps\"", "\"trapz\"", FT_PROFILE_CORRUPT, "\"traps\"" },
		{ "\"median\":\t1,", "\"median\":\t\"fast\",", FT_PROFILE_CORRUPT, "median" },
		{ "\"median\":\t1,", "\"median\":\t100,", FT_PROFILE_INCONSISTENT, "min <= median" },
		{ "\"fingerprint\":\t\"", "\"fingerprint\":\t\"1", FT_PROFILE_INCONSISTENT, "fingerprint" },
		{ "\"first_weight\":\t1,", "\"first_weight\":\t2,", FT_PROFILE_INCONSISTENT, "continue" },
		{ "\"bytes\":\t65536", "\"bytes\":\t99999999", FT_PROFILE_INCONSISTENT, "increase" },
		{ "\"coread\":\t[[1, 2]]", "\"coread\":\t[[2, 1]]", FT_PROFILE_INCONSISTENT, "coread" },
		{ "\"coread\":\t[[1, 2]]", "\"coread\":\t[[1, 99]]", FT_PROFILE_INCONSISTENT, "coread" },
		{ "\"coread\":\t[[1, 2]]", "\"coread\":\t7", FT_PROFILE_CORRUPT, "coread" },
		{ "\"block\":\t1,", "\"block\":\t2,", FT_PROFILE_INCONSISTENT, "not one of its 2 blocks" },
		{ "\"blocks\":\t2,", "\"blocks\":\t0,", FT_PROFILE_CORRUPT, "blocks" },
		{ "\"settings\":\t\"S\",", "", FT_PROFILE_CORRUPT, "settings" },
		{ "[[2, 1048576]]", "[[2, 0]]", FT_PROFILE_INCONSISTENT, "starts must increase" },
		{ "[[2, 1048576]]", "[[2, 1048576, 1049600]]", FT_PROFILE_INCONSISTENT, "starts must increase" },
		{ "[[2, 1048576]]", "[[2, 1048576.5]]", FT_PROFILE_INCONSISTENT, "starts must increase" },
		{ "[[2, 1048576]]", "[[99999, 1048576]]", FT_PROFILE_INCONSISTENT, "not [weight" },
		{ "[[2, 1048576]]", "[[2]]", FT_PROFILE_INCONSISTENT, "not [weight" },
		{ "\"slices\":\t[[2, 1048576]]", "\"slices\":\t7", FT_PROFILE_CORRUPT, "\"slices\" is not an array" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *at = strstr(good, cases[i].find);
		if (!at)
			fail_msg("case %zu: '%s' not in the profile text", i, cases[i].find);
		char *bad = malloc(strlen(good) + 64);
		size_t pre = (size_t)(at - good);
		memcpy(bad, good, pre);
		strcpy(bad + pre, cases[i].replace);
		strcat(bad, at + strlen(cases[i].find));
		char why[256];
		enum ft_profile_refusal r = ft_profile_from_json(bad, &b, why, sizeof(why));
		if (r != cases[i].want || !strstr(why, cases[i].needle))
			fail_msg("case %zu: got %s '%s', want %s '%s'", i, ft_profile_refusal_name(r),
				 why, ft_profile_refusal_name(cases[i].want), cases[i].needle);
		assert_null(b.weights); /* nothing half-applied */
		free(bad);
	}
	free(good);
	/* Traps that stop short of the last weights. */
	a.ntraps--;
	char *shortened = ft_profile_to_json(&a);
	char why[256];
	assert_int_equal(ft_profile_from_json(shortened, &b, why, sizeof(why)),
			 FT_PROFILE_INCONSISTENT);
	assert_non_null(strstr(why, "the traps cover 37 of 39 weights"));
	free(shortened);
	a.ntraps++;
	ft_profile_free(&a);
}

static void save_load_compat(void **state)
{
	(void)state;
	char dir[] = "/tmp/ft-profile-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ft_profile a, b, other;
	char why[512], path[600];
	assert_int_equal(ft_profile_load(dir, &b, why, sizeof(why)), FT_PROFILE_MISSING);
	make(&a, 8);
	assert_int_equal(ft_profile_save(&a, dir), 0);
	snprintf(path, sizeof(path), "%s/profile.json.tmp.%d", dir, (int)getpid());
	assert_int_not_equal(access(path, F_OK), 0); /* temporary file renamed away */
	assert_int_equal(ft_profile_load(dir, &b, why, sizeof(why)), FT_PROFILE_OK);
	snprintf(path, sizeof(path), "%s/profile.json", dir);
	ft_profile_free(&b);
	assert_int_equal(ft_profile_load(path, &b, why, sizeof(why)), FT_PROFILE_OK);

	make(&other, 9); /* another model */
	assert_int_equal(ft_profile_check_compatible(&b, &other, why, sizeof(why)),
			 FT_PROFILE_OTHER_MODEL);
	assert_non_null(strstr(why, "another model"));
	ft_profile_free(&other);
	make(&other, 8);
	snprintf(other.device.name, sizeof(other.device.name), "NVIDIA H100 80GB HBM3");
	assert_int_equal(ft_profile_check_compatible(&b, &other, why, sizeof(why)),
			 FT_PROFILE_OTHER_DEVICE);
	assert_non_null(strstr(why, "H100"));
	/* Skipped checks: no device name, no weights. */
	other.device.name[0] = 0;
	free(other.weights);
	other.weights = NULL;
	assert_int_equal(ft_profile_check_compatible(&b, &other, why, sizeof(why)), FT_PROFILE_OK);

	FILE *f = fopen(path, "w");
	fputs("{\"schema\": 1, \"library\": ", f); /* truncated file */
	fclose(f);
	ft_profile_free(&b);
	assert_int_equal(ft_profile_load(dir, &b, why, sizeof(why)), FT_PROFILE_CORRUPT);
	unlink(path);
	rmdir(dir);
	ft_profile_free(&a);
	ft_profile_free(&other);
}

/* Only a regular profile.json under the size limit is read: a device
 * (FT_PROFILE_STORAGE_DIR=/dev/zero once filled memory), a FIFO, a huge
 * file or one with NUL bytes is refused at once with the reason. */
static void load_bounded(void **state)
{
	(void)state;
	char dir[] = "/tmp/ft-profile-XXXXXX", path[600], why[512];
	struct ft_profile b;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/profile.json", dir);

	assert_int_equal(ft_profile_load("/dev/zero", &b, why, sizeof(why)),
			 FT_PROFILE_UNREADABLE);
	assert_string_equal(why, "/dev/zero: is a character device, not a regular file, "
				 "nor a directory that holds profile.json");

	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(ft_profile_load(dir, &b, why, sizeof(why)), FT_PROFILE_UNREADABLE);
	assert_non_null(strstr(why, "/profile.json: is a FIFO, not a regular file"));
	unlink(path);

	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, ((off_t)256 << 20) + 1), 0); /* sparse */
	close(fd);
	assert_int_equal(ft_profile_load(dir, &b, why, sizeof(why)), FT_PROFILE_UNREADABLE);
	assert_non_null(strstr(why, "is 268435457 bytes, more than the 256 MiB accepted"));

	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "{}\0{}", 5), 5);
	close(fd);
	assert_int_equal(ft_profile_load(path, &b, why, sizeof(why)), FT_PROFILE_CORRUPT);
	assert_non_null(strstr(why, "holds NUL bytes"));
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(plan_without_copy_times),
		cmocka_unit_test(refusals),
		cmocka_unit_test(save_load_compat),
		cmocka_unit_test(load_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
