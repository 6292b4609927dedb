/* Kernel metadata cache against a table of fake driver functions:
 * CUfunction handles, CUkernel handles refused by cuFuncGetParamInfo or read
 * by it as parameterless, unknown handles, names, caching, flush. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ft/kernels.h"

static char func_h, kern_h, unknown_h;
static int func_queries, kernel_reads_as_empty;

static CUresult func_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
	func_queries++;
	if ((void *)f == &kern_h)
		return kernel_reads_as_empty ? CUDA_ERROR_INVALID_VALUE
					     : CUDA_ERROR_INVALID_HANDLE;
	if ((void *)f != &func_h)
		return CUDA_ERROR_INVALID_HANDLE;
	if (i >= 2)
		return CUDA_ERROR_INVALID_VALUE;
	*off = i * 8;
	*size = 8;
	return CUDA_SUCCESS;
}

static CUresult kern_info(CUkernel k, size_t i, size_t *off, size_t *size)
{
	if ((void *)k != &kern_h)
		return CUDA_ERROR_INVALID_HANDLE;
	if (i >= 3)
		return CUDA_ERROR_INVALID_VALUE;
	*off = i * 16;
	*size = 16;
	return CUDA_SUCCESS;
}

static CUresult func_name(const char **n, CUfunction f)
{
	if ((void *)f != &func_h)
		return CUDA_ERROR_INVALID_HANDLE;
	*n = "_Z4funcPf";
	return CUDA_SUCCESS;
}

static CUresult kern_name(const char **n, CUkernel k)
{
	if ((void *)k != &kern_h)
		return CUDA_ERROR_INVALID_HANDLE;
	*n = "_Z6kernelv";
	return CUDA_SUCCESS;
}

static int setup(void **state)
{
	static struct ft_real real;
	static struct ft_kernels k;
	memset(&real, 0, sizeof(real));
	real.cuFuncGetParamInfo = func_info;
	real.cuKernelGetParamInfo = kern_info;
	real.cuFuncGetName = func_name;
	real.cuKernelGetName = kern_name;
	func_queries = kernel_reads_as_empty = 0;
	assert_int_equal(ft_kernels_init(&k, &real), 0);
	*state = &k;
	return 0;
}

static int teardown(void **state)
{
	ft_kernels_destroy(*state);
	return 0;
}

static void function_and_kernel(void **state)
{
	struct ft_kernels *k = *state;
	const struct ft_kernel *f = ft_kernels_get(k, &func_h);
	assert_true(f->known && !f->is_kernel);
	assert_int_equal(f->layout.nparams, 2);
	assert_int_equal(f->layout.p[1].offset, 8);
	assert_string_equal(f->name, "_Z4funcPf");
	int q = func_queries;
	assert_ptr_equal(ft_kernels_get(k, &func_h), f); /* cached: no query */
	assert_int_equal(func_queries, q);

	const struct ft_kernel *kk = ft_kernels_get(k, &kern_h);
	assert_true(kk->known && kk->is_kernel);
	assert_int_equal(kk->layout.nparams, 3);
	assert_string_equal(kk->name, "_Z6kernelv");
	assert_true(kk->id > f->id);

	const struct ft_kernel *u = ft_kernels_get(k, &unknown_h);
	assert_false(u->known);
	assert_string_equal(u->name, "?");
}

static void kernel_read_as_parameterless(void **state)
{
	struct ft_kernels *k = *state;
	kernel_reads_as_empty = 1;
	const struct ft_kernel *kk = ft_kernels_get(k, &kern_h);
	assert_true(kk->known && kk->is_kernel);
	assert_int_equal(kk->layout.nparams, 3);
}

static void flush_forgets(void **state)
{
	struct ft_kernels *k = *state;
	ft_kernels_get(k, &func_h);
	int q = func_queries;
	ft_kernels_flush(k);
	ft_kernels_get(k, &func_h);
	assert_true(func_queries > q);
}

/* Words that held a tracked address in 9 of 10 counted launches are
 * pointers; a word that did only sometimes (a stale pointer in a by-value
 * struct, as ATen's cat and offset calculators on the H200) is stale.  Too
 * few launches: nothing is stale. */
static void sporadic_words_are_stale(void **state)
{
	struct ft_kernels *k = *state;
	struct ft_kernel *e = (struct ft_kernel *)ft_kernels_get(k, &func_h);
	assert_non_null(e);
	struct ft_refs r = { 0 };
	r.n = 3;
	r.v[0].word = 0;   /* output, every launch */
	r.v[1].word = 1;   /* input, every launch */
	r.v[2].word = 300; /* stale: in one launch of five */
	for (int i = 0; i < 5; i++)
		ft_kernel_count(e, &r);
	assert_int_equal(ft_kernel_mark_stale(e, &r), 0); /* five counted: too few */
	for (int i = 5; i < 20; i++) {
		r.n = i % 5 ? 2 : 3;
		ft_kernel_count(e, &r);
	}
	r.n = 3;
	assert_int_equal(ft_kernel_mark_stale(e, &r), 1);
	assert_false(r.v[0].stale);
	assert_false(r.v[1].stale);
	assert_true(r.v[2].stale);
	/* counting stops at FT_KERNEL_COUNTED launches */
	for (int i = 20; i < FT_KERNEL_COUNTED + 10; i++)
		ft_kernel_count(e, &r);
	assert_int_equal(atomic_load(&e->launches), FT_KERNEL_COUNTED);
}

/* A word pointing mostly out of the pass's turn roams after 4 such
 * references; one reading in turn is a reader; references to resident
 * traps (count 0) classify without counting (a weight shared across the
 * pass, read out of turn by a reader word, does not make it roam). */
static void words_in_and_out_of_turn(void **state)
{
	struct ft_kernels *k = *state;
	struct ft_kernel *e = (struct ft_kernel *)ft_kernels_get(k, &func_h);
	assert_non_null(e);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ft_kernel_turn(e, 7, 0, 1), 0);
	assert_int_equal(ft_kernel_turn(e, 7, 0, 1), -1); /* the fourth: roams */
	for (int i = 0; i < 3; i++)
		assert_int_equal(ft_kernel_turn(e, 9, 1, 1), 0);
	assert_int_equal(ft_kernel_turn(e, 9, 1, 1), 1); /* a reader */
	for (int i = 0; i < 20; i++)
		assert_int_equal(ft_kernel_turn(e, 9, 0, 0), 1); /* resident: not counted */
	assert_int_equal(ft_kernel_turn(e, 9, 0, 1), 1);  /* 4 in, 1 out */
}

/* A verdict does not stand for good: once FT_KERNEL_COUNTED references are
 * counted, the counts are halved, so that a word taken for roaming (while
 * the position was wrong) reads in turn again once it does so lately. */
static void verdicts_follow_the_latest(void **state)
{
	struct ft_kernels *k = *state;
	struct ft_kernel *e = (struct ft_kernel *)ft_kernels_get(k, &func_h);
	assert_non_null(e);
	for (int i = 0; i < FT_KERNEL_COUNTED; i++)
		ft_kernel_turn(e, 5, 0, 1);
	assert_int_equal(ft_kernel_turn(e, 5, 1, 0), -1);
	int n = 0;
	while (ft_kernel_turn(e, 5, 1, 1) != 1 && n < 4 * FT_KERNEL_COUNTED)
		n++;
	/* halved once to 512 out: 512 in make it a reader again */
	assert_true(n >= FT_KERNEL_COUNTED / 2 - 1 && n <= FT_KERNEL_COUNTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(function_and_kernel, setup, teardown),
		cmocka_unit_test_setup_teardown(kernel_read_as_parameterless, setup, teardown),
		cmocka_unit_test_setup_teardown(flush_forgets, setup, teardown),
		cmocka_unit_test_setup_teardown(sporadic_words_are_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(verdicts_follow_the_latest, setup, teardown),
		cmocka_unit_test_setup_teardown(words_in_and_out_of_turn, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
