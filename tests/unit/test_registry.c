/* Registry: insert, lookup (interior, edges), overlap eviction, removal,
 * VMM range removal, and lookup speed with tens of thousands of entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "ft/registry.h"

static int setup(void **state)
{
	struct ft_registry *r = malloc(sizeof(*r));
	assert_int_equal(ft_registry_init(r), 0);
	*state = r;
	return 0;
}

static int teardown(void **state)
{
	ft_registry_destroy(*state);
	free(*state);
	return 0;
}

static void lookup_edges(void **state)
{
	struct ft_registry *r = *state;
	struct ft_alloc a;
	uint64_t id1 = ft_registry_add(r, 0x10000, 0x1000, FT_ALLOC_DEVICE, 0, NULL);
	uint64_t id2 = ft_registry_add(r, 0x11000, 0x1000, FT_ALLOC_VMM, 1, NULL);
	assert_true(id1 > 0 && id2 > id1);

	static const struct {
		uint64_t addr;
		int found;
		uint64_t base;
	} cases[] = {
		{ 0xffff, 0, 0 },        { 0x10000, 1, 0x10000 }, { 0x10fff, 1, 0x10000 },
		{ 0x11000, 1, 0x11000 }, { 0x11fff, 1, 0x11000 }, { 0x12000, 0, 0 },
		{ 0, 0, 0 },             { UINT64_MAX, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = ft_registry_lookup(r, cases[i].addr, &a);
		assert_int_equal(rc == 0, cases[i].found);
		if (cases[i].found)
			assert_int_equal(a.base, cases[i].base);
	}
	assert_int_equal(ft_registry_lookup(r, 0x11800, &a), 0);
	assert_int_equal(a.id, id2);
	assert_int_equal(a.kind, FT_ALLOC_VMM);
	assert_int_equal(a.device, 1);
}

static void overlap_evicts_stale(void **state)
{
	struct ft_registry *r = *state;
	unsigned ev = 99;
	ft_registry_add(r, 0x1000, 0x1000, FT_ALLOC_DEVICE, 0, &ev);
	assert_int_equal(ev, 0);
	ft_registry_add(r, 0x3000, 0x1000, FT_ALLOC_DEVICE, 0, NULL);
	ft_registry_add(r, 0x5000, 0x1000, FT_ALLOC_DEVICE, 0, NULL);
	/* A new range over [0x1800, 0x3800) replaces the first two. */
	ft_registry_add(r, 0x1800, 0x2000, FT_ALLOC_ASYNC, 0, &ev);
	assert_int_equal(ev, 2);
	assert_int_equal(ft_registry_count(r), 2);
	struct ft_alloc a;
	assert_int_equal(ft_registry_lookup(r, 0x1000, &a), -2);
	assert_int_equal(ft_registry_lookup(r, 0x3700, &a), 0);
	assert_int_equal(a.kind, FT_ALLOC_ASYNC);
	/* Zero size and wrap-around are refused. */
	assert_int_equal(ft_registry_add(r, 0x9000, 0, 0, 0, NULL), 0);
	assert_int_equal(ft_registry_add(r, UINT64_MAX - 4, 16, 0, 0, NULL), 0);
}

static void remove_and_range(void **state)
{
	struct ft_registry *r = *state;
	for (uint64_t i = 0; i < 8; i++)
		ft_registry_add(r, 0x100000 + i * 0x200000, 0x200000, FT_ALLOC_VMM, 0, NULL);
	struct ft_alloc a;
	assert_int_equal(ft_registry_remove(r, 0x100001, &a), -2);
	assert_int_equal(ft_registry_remove(r, 0x100000, &a), 0);
	assert_int_equal(a.base, 0x100000);
	/* Unmap of chunks 2..5 (a range that covers four mappings). */
	size_t n = ft_registry_remove_range(r, 0x100000 + 2 * 0x200000, 4 * 0x200000,
					    NULL, NULL);
	assert_int_equal(n, 4);
	assert_int_equal(ft_registry_count(r), 3);
	assert_int_equal(ft_registry_lookup(r, 0x100000 + 3 * 0x200000, &a), -2);
	assert_int_equal(ft_registry_lookup(r, 0x100000 + 6 * 0x200000 + 5, &a), 0);
	assert_true(ft_registry_maybe(r, 0x100000 + 0x200000));
	assert_false(ft_registry_maybe(r, 0x100000 + 8 * 0x200000));
	ft_registry_clear(r);
	assert_int_equal(ft_registry_count(r), 0);
	assert_false(ft_registry_maybe(r, 0x100000 + 0x200000));
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Requirement: well under a microsecond with tens of thousands of entries. */
static void lookup_speed(void **state)
{
	struct ft_registry *r = *state;
	const uint64_t n = 50000, base = 0x7f0000000000ULL;
	for (uint64_t i = 0; i < n; i++) /* shuffled insert order */
		ft_registry_add(r, base + ((i * 7919) % n) * 0x10000, 0x8000, 0, 0, NULL);
	assert_int_equal(ft_registry_count(r), n);
	const int lookups = 2000000;
	uint64_t hits = 0, x = 12345;
	double t0 = now();
	ft_registry_rdlock(r);
	for (int i = 0; i < lookups; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		hits += ft_registry_find_locked(r, base + (x >> 20) % (n * 0x10000)) != NULL;
	}
	ft_registry_unlock(r);
	double ns = (now() - t0) * 1e9 / lookups;
	print_message("lookup: %.1f ns per lookup over %llu entries (%llu hits)\n", ns,
		      (unsigned long long)n, (unsigned long long)hits);
	assert_true(hits > (uint64_t)lookups / 3 && hits < (uint64_t)lookups);
	assert_true(ns < 500.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(lookup_edges, setup, teardown),
		cmocka_unit_test_setup_teardown(overlap_evicts_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(remove_and_range, setup, teardown),
		cmocka_unit_test_setup_teardown(lookup_speed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
