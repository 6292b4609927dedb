/* Offload timing store, report and table: aggregation per trap (min, max,
 * mean, median, sample std), missing values, the ring of 1024 passes,
 * draining, and the table's rows and wait marker. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/timing.h"

static const char labels[2][FT_LABEL_MAX] = { "trap.0", "trap.1" };

static void aggregates(void **state)
{
	(void)state;
	struct ft_timing_store st;
	assert_int_equal(ft_timing_init(&st, 2, labels), 0);
	/* trap.0 resident (compute only); trap.1 offloaded, waits 0.5 ms */
	float p1[] = { 1.0f, NAN, NAN, NAN, 2.0f, 3.0f, 0.5f, NAN };
	float p2[] = { 3.0f, NAN, NAN, NAN, 2.0f, 3.0f, 0.5f, NAN };
	float p3[] = { 2.0f, NAN, NAN, NAN, 2.0f, 3.0f, 0.5f, NAN };
	ft_timing_add(&st, p1);
	ft_timing_add(&st, p2);
	ft_timing_add(&st, p3);
	struct ft_timing_report r;
	assert_int_equal(ft_timing_report(&st, 0, &r), 0);
	assert_int_equal(r.passes, 3);
	const struct ft_timing_stat *c0 = &r.s[FT_T_COMPUTE];
	assert_int_equal(c0->n, 3);
	assert_true(c0->min == 1.0 && c0->max == 3.0 && c0->median == 2.0 && c0->mean == 2.0);
	assert_true(fabs(c0->std - 1.0) < 1e-9);
	assert_int_equal(r.s[FT_T_TRANSFER].n, 0); /* never recorded */
	assert_true(fabs(r.per_pass[FT_T_COMPUTE] - 4.0) < 1e-9);
	assert_true(fabs(r.per_pass[FT_T_WAIT] - 0.5) < 1e-9);
	assert_true(fabs(r.sum[FT_T_TRANSFER] - 9.0) < 1e-6);
	char buf[2048];
	size_t n = ft_timing_format(&r, buf, sizeof(buf));
	assert_true(n < sizeof(buf));
	assert_non_null(strstr(buf, "Offload Timing (3 passes)"));
	assert_non_null(strstr(buf, "Avg/pass"));
	assert_non_null(strstr(buf, "Sum (all)"));
	assert_null(strstr(buf, "Decode")); /* raw stores: no decode columns */
	/* the wait marker on trap.1's row only */
	char *row1 = strstr(buf, "trap.1"), *row0 = strstr(buf, "trap.0");
	assert_non_null(row1);
	assert_non_null(strstr(row1, "\u2190"));
	assert_true(strstr(row0, "\u2190") == strstr(row1, "\u2190"));
	/* a short buffer gets a truncated, terminated table and the length */
	char small[32];
	assert_int_equal(ft_timing_format(&r, small, sizeof(small)), n);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	ft_timing_report_free(&r);
	/* draining empties the store */
	assert_int_equal(ft_timing_report(&st, 1, &r), 0);
	ft_timing_report_free(&r);
	assert_int_equal(ft_timing_report(&st, 0, &r), -1);
	ft_timing_free(&st);
}

/* A coded trap's decode tail gets columns of its own; the others a dash. */
static void decode_columns(void **state)
{
	(void)state;
	struct ft_timing_store st;
	assert_int_equal(ft_timing_init(&st, 2, labels), 0);
	float p[] = { 1.0f, NAN, NAN, NAN, 2.0f, 2.25f, 0.0f, 0.125f };
	ft_timing_add(&st, p);
	ft_timing_add(&st, p);
	struct ft_timing_report r;
	assert_int_equal(ft_timing_report(&st, 0, &r), 0);
	assert_true(fabs(r.per_pass[FT_T_DECODE] - 0.125) < 1e-9);
	char buf[2048];
	ft_timing_format(&r, buf, sizeof(buf));
	assert_non_null(strstr(buf, "|   Decode |      med\n"));
	assert_non_null(strstr(buf, "|    0.000 |          |    0.125 |\n")); /* Avg/pass */
	char *row0 = strstr(buf, "trap.0"), *row1 = strstr(buf, "trap.1");
	assert_non_null(strstr(row1, "|    0.125 |    0.125\n"));
	assert_true(strstr(row0, "|        - |        -\n") < row1);
	assert_null(strstr(buf, "\u2190")); /* no wait */
	ft_timing_report_free(&r);
	ft_timing_free(&st);
}

static void ring_keeps_the_latest(void **state)
{
	(void)state;
	struct ft_timing_store st;
	assert_int_equal(ft_timing_init(&st, 1, labels), 0);
	for (int i = 0; i < FT_TIMING_PASSES + 100; i++) {
		float v[] = { (float)i, NAN, NAN, NAN };
		ft_timing_add(&st, v);
	}
	struct ft_timing_report r;
	assert_int_equal(ft_timing_report(&st, 0, &r), 0);
	assert_int_equal(r.passes, FT_TIMING_PASSES);
	assert_true(r.s[FT_T_COMPUTE].min == 100.0); /* the oldest 100 dropped */
	assert_true(r.s[FT_T_COMPUTE].max == FT_TIMING_PASSES + 99.0);
	ft_timing_report_free(&r);
	ft_timing_reset(&st);
	assert_int_equal(ft_timing_report(&st, 0, &r), -1);
	ft_timing_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(aggregates),
		cmocka_unit_test(decode_columns),
		cmocka_unit_test(ring_keeps_the_latest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
