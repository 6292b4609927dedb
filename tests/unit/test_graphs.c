/* Capture -> graph -> executable bookkeeping: references move with the
 * capture, every instantiation gets them, destroy forgets, a capture that
 * read nothing gives an executable that reads nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ft/graphs.h"

static void chain(void **state)
{
	(void)state;
	static struct ft_graphs g;
	ft_graphs_init(&g);
	struct ft_region_ref a[2] = { { 1, 0, 0, 0 }, { 2, 64, 0, 0 } }, b = { 3, 0, 0, 0 };
	ft_graphs_capture_read(&g, 7, a, 2);
	ft_graphs_capture_read(&g, 7, &b, 1);
	ft_graphs_capture_end(&g, 7, 0x100);
	ft_graphs_instantiate(&g, 0x100, 0xe1, 0, 0);
	ft_graphs_instantiate(&g, 0x100, 0xe2, 0, 0); /* a second executable of the graph */
	struct ft_region_ref *r;
	assert_int_equal(ft_graphs_exec_refs(&g, 0xe1, &r), 3);
	assert_int_equal(r[1].alloc_id, 2);
	assert_int_equal(r[1].offset, 64);
	assert_int_equal(r[2].alloc_id, 3);
	free(r);
	assert_int_equal(ft_graphs_exec_refs(&g, 0xe2, NULL), 3);
	ft_graphs_exec_destroy(&g, 0xe1);
	assert_int_equal(ft_graphs_exec_refs(&g, 0xe1, NULL), 0);
	assert_int_equal(ft_graphs_exec_refs(&g, 0xe2, NULL), 3);

	/* a capture that referred to nothing tracked */
	ft_graphs_capture_end(&g, 8, 0x200);
	ft_graphs_instantiate(&g, 0x200, 0xe3, 0, 0);
	assert_int_equal(ft_graphs_exec_refs(&g, 0xe3, &r), 0);
	assert_null(r);
}

static void recycling(void **state)
{
	(void)state;
	static struct ft_graphs g;
	ft_graphs_init(&g);
	struct ft_region_ref a = { 1, 0, 0, 0 };
	/* more captures than entries: the oldest are recycled, nothing leaks
	 * or crashes, the newest are intact */
	for (uint64_t c = 1; c <= 3 * FT_GRAPH_ENTRIES; c++) {
		ft_graphs_capture_read(&g, c, &a, 1);
		ft_graphs_capture_end(&g, c, 0x1000 + c);
		ft_graphs_instantiate(&g, 0x1000 + c, 0x900000 + c, 0, 0);
	}
	assert_int_equal(ft_graphs_exec_refs(&g, 0x900000 + 3 * FT_GRAPH_ENTRIES, NULL), 1);
	assert_int_equal(ft_graphs_exec_refs(&g, 0x900001, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chain),
		cmocka_unit_test(recycling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
