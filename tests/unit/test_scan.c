/* Launch scan: both parameter forms, struct parameters, interior pointers,
 * tensor maps, deduplication, the per-launch limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "ft/scan.h"

struct fix {
	struct ft_registry r;
	struct ft_tmaps t;
};

#define A 0x7f0000100000ULL
#define B 0x7f0000200000ULL

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	ft_registry_init(&f->r);
	ft_tmaps_init(&f->t);
	ft_registry_add(&f->r, A, 0x1000, 0, 0, NULL);
	ft_registry_add(&f->r, B, 0x1000, 0, 0, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	ft_registry_destroy(&f->r);
	free(f);
	return 0;
}

static int has(const struct ft_refs *r, uint64_t id, uint64_t off, int via)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->v[i].alloc_id == id && r->v[i].offset == off && r->v[i].via == via)
			return 1;
	return 0;
}

/* (float *a, int n, struct { int k; float *p; } s, double d) */
static void kernel_params(void **state)
{
	struct fix *f = *state;
	uint64_t a = A + 16, junk = 0x12345678;
	int n = 7;
	struct { int k; uint64_t p; } s = { 3, B + 0x800 };
	double d = 1.5;
	const struct ft_param p[] = { { 0, 8 }, { 8, 4 }, { 16, 16 }, { 32, 8 } };
	struct ft_layout l = { 4, p };
	void *params[] = { &a, &n, &s, &d };
	struct ft_refs out;
	assert_int_equal(ft_scan_launch(&f->r, &f->t, &l, params, NULL, &out), 0);
	assert_int_equal(out.n, 2);
	assert_true(has(&out, 1, 16, FT_VIA_WORD));
	assert_true(has(&out, 2, 0x800, FT_VIA_WORD));
	(void)junk;
	/* No layout and no extra buffer: nothing can be scanned. */
	assert_int_equal(ft_scan_launch(&f->r, &f->t, NULL, params, NULL, &out), -1);
}

static void extra_buffer(void **state)
{
	struct fix *f = *state;
	unsigned char buf[64] = { 0 };
	uint64_t a = A + 8, b = B, other = 0x42;
	memcpy(buf + 8, &a, 8);
	memcpy(buf + 24, &other, 8);
	memcpy(buf + 40, &b, 8);
	size_t size = sizeof(buf);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
			  &size, CU_LAUNCH_PARAM_END };
	struct ft_refs out;
	/* Without a layout, every aligned word of the buffer. */
	assert_int_equal(ft_scan_launch(&f->r, &f->t, NULL, NULL, extra, &out), 0);
	assert_int_equal(out.n, 2);
	assert_true(has(&out, 1, 8, FT_VIA_WORD) && has(&out, 2, 0, FT_VIA_WORD));
	/* With a layout: only the parameters' bytes. */
	const struct ft_param p[] = { { 0, 16 }, { 16, 16 } };
	struct ft_layout l = { 2, p };
	assert_int_equal(ft_scan_launch(&f->r, &f->t, &l, NULL, extra, &out), 0);
	assert_int_equal(out.n, 1);
	assert_true(has(&out, 1, 8, FT_VIA_WORD));
}

static void tensor_map(void **state)
{
	struct fix *f = *state;
	_Alignas(64) unsigned char map[128];
	memset(map, 0x33, sizeof(map)); /* address not stored in clear */
	ft_tmaps_put(&f->t, map, B + 0x100);
	const struct ft_param p[] = { { 0, 128 }, { 128, 8 } };
	struct ft_layout l = { 2, p };
	uint64_t a = A;
	void *params[] = { map, &a };
	struct ft_refs out;
	ft_scan_launch(&f->r, &f->t, &l, params, NULL, &out);
	assert_int_equal(out.n, 2);
	assert_true(has(&out, 2, 0x100, FT_VIA_TENSORMAP));
	assert_true(has(&out, 1, 0, FT_VIA_WORD));
	/* An unknown map refers to nothing. */
	map[3] ^= 1;
	ft_scan_launch(&f->r, &f->t, &l, params, NULL, &out);
	assert_int_equal(out.n, 1);
}

static void dedup_and_limit(void **state)
{
	struct fix *f = *state;
	uint64_t words[FT_MAX_REFS + 10];
	for (size_t i = 0; i < FT_MAX_REFS + 10; i++)
		words[i] = A + (i / 2) * 8; /* each address twice */
	const struct ft_param p[] = { { 0, sizeof(words) } };
	struct ft_layout l = { 1, p };
	void *params[] = { words };
	struct ft_refs out;
	ft_scan_launch(&f->r, &f->t, &l, params, NULL, &out);
	assert_int_equal(out.n, (FT_MAX_REFS + 10) / 2);
	assert_int_equal(out.dropped, 0);
	for (size_t i = 0; i < FT_MAX_REFS + 10; i++)
		words[i] = A + i * 8;
	ft_scan_launch(&f->r, &f->t, &l, params, NULL, &out);
	assert_int_equal(out.n, FT_MAX_REFS);
	assert_int_equal(out.dropped, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(kernel_params, setup, teardown),
		cmocka_unit_test_setup_teardown(extra_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(tensor_map, setup, teardown),
		cmocka_unit_test_setup_teardown(dedup_and_limit, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
