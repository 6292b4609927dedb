/* Profile refresh from serving traffic: passes with every trap timed
 * count, others not; the statistics are the median, min and max of the
 * passes collected; an incomplete collection changes nothing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ft/refresh.h"

#define COLS 3 /* compute, transfer, wait: as the timing store's rows */

static void collects_complete_passes(void **state)
{
	(void)state;
	struct ft_refresh r;
	assert_int_equal(ft_refresh_init(&r, 2, 3), 0);
	float v[2 * COLS] = { 0 };
	struct ft_trap traps[2];
	memset(traps, 0, sizeof(traps));
	traps[0].compute = (struct ft_stat_ms){ 9, 9, 9, 5 };
	static const float ms[3][2] = { { 3, 30 }, { 1, 10 }, { 2, 20 } };
	for (int p = 0; p < 3; p++) {
		/* a pass that missed trap 1 (another shape, or cut short) */
		v[0] = 7;
		v[COLS] = NAN;
		assert_int_equal(ft_refresh_add(&r, v, COLS, 0), 0);
		assert_int_equal(ft_refresh_apply(&r, traps), -1); /* incomplete */
		assert_true(traps[0].compute.median == 9);
		v[0] = ms[p][0];
		v[COLS] = ms[p][1];
		v[1] = 100; /* another column: not read */
		assert_int_equal(ft_refresh_add(&r, v, COLS, 0), p == 2);
	}
	assert_int_equal(ft_refresh_add(&r, v, COLS, 0), -1); /* complete: no more */
	assert_int_equal(ft_refresh_apply(&r, traps), 0);
	assert_true(traps[0].compute.median == 2 && traps[0].compute.min == 1 &&
		    traps[0].compute.max == 3 && traps[0].compute.samples == 3);
	assert_true(traps[1].compute.median == 20 && traps[1].compute.max == 30);
	ft_refresh_free(&r);
	assert_int_equal(ft_refresh_init(&r, 2, 0), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(collects_complete_passes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
