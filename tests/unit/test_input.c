/* Bounded reads (ft_input_read_file): regular files under the limit are
 * read whole; devices, FIFOs, directories, unreadable /proc files and files
 * over the limit (by their size or by what reading finds) are refused at
 * once with the reason.  Strict numbers (ft_input_parse_long/double). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ft/input.h"

static char dir[] = "/tmp/ft-input-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *put(const char *name, const void *bytes, size_t n)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, n), (ssize_t)n);
	close(fd);
	return path;
}

static void regular_files(void **state)
{
	(void)state;
	char *text = NULL, why[256];
	size_t len = 0;
	const char *p = put("a", "x = 1\n\0tail", 11);
	assert_int_equal(ft_input_read_file(p, 64, &text, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 11);
	assert_memory_equal(text, "x = 1\n\0tail", 12); /* and the NUL after it */
	free(text);
	p = put("empty", "", 0);
	assert_int_equal(ft_input_read_file(p, 64, &text, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 0);
	assert_string_equal(text, "");
	free(text);
	/* exactly the limit is accepted, one more byte is not */
	p = put("at", "0123456789", 10);
	assert_int_equal(ft_input_read_file(p, 10, &text, &len, why, sizeof(why)), 0);
	free(text);
	assert_int_equal(ft_input_read_file(p, 9, &text, &len, why, sizeof(why)), -EFBIG);
	assert_null(text);
	assert_string_equal(why, "is 10 bytes, more than the 9 bytes accepted");
}

static void refused_kinds(void **state)
{
	(void)state;
	char fifo[256], sparse[256];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	snprintf(sparse, sizeof(sparse), "%s/sparse", dir);
	int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)3 << 30), 0); /* 3 GiB, no blocks */
	close(fd);
	const size_t mib = (size_t)1 << 20;
	const struct {
		const char *path;
		size_t limit;
		int rc;
		const char *why;
	} cases[] = {
		{ "/dev/zero", mib, -EINVAL, "is a character device, not a regular file" },
		{ "/dev/null", mib, -EINVAL, "is a character device, not a regular file" },
		{ "/tmp", mib, -EISDIR, "is a directory, not a regular file" },
		{ fifo, mib, -EINVAL, "is a FIFO, not a regular file" },
		{ sparse, mib, -EFBIG, "is 3072 MiB, more than the 1 MiB accepted" },
		{ "/proc/self/mem", mib, -EIO, "cannot read the file: Input/output error" },
		/* says it is empty, holds more than the limit */
		{ "/proc/self/maps", 16, -EFBIG, "is larger than the 16 bytes accepted" },
		{ "/nonexistent/x", mib, -ENOENT, "cannot open the file: No such file or directory" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *text = (char *)1, why[256] = "";
		size_t len = 7;
		int rc = ft_input_read_file(cases[i].path, cases[i].limit, &text, &len, why,
					    sizeof(why));
		if (rc != cases[i].rc || strcmp(why, cases[i].why))
			fail_msg("%s: %d '%s', expected %d '%s'", cases[i].path, rc, why,
				 cases[i].rc, cases[i].why);
		assert_null(text);
		assert_int_equal(len, 0);
	}
}

/* Numbers are plain decimal text; everything strtol/strtod would also take
 * (spaces, '+', hex, nan, inf, trailing text) is refused. */
static void numbers(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int rc;
		long v;
	} longs[] = {
		{ "0", 0, 0 }, { "42", 0, 42 }, { "-3", 0, -3 }, { "0010", 0, 10 },
		{ "1024", 0, 1024 }, { "1025", -ERANGE, 0 }, { "-11", -ERANGE, 0 },
		{ "99999999999999999999", -ERANGE, 0 }, { "", -EINVAL, 0 }, { "-", -EINVAL, 0 },
		{ " 4", -EINVAL, 0 }, { "4 ", -EINVAL, 0 }, { "+4", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 }, { "4x", -EINVAL, 0 }, { "1e3", -EINVAL, 0 },
		{ "4.0", -EINVAL, 0 }, { "--4", -EINVAL, 0 }, { "\t4", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++) {
		long v = 12345;
		int rc = ft_input_parse_long(longs[i].s, -10, 1024, &v);
		if (rc != longs[i].rc || (!rc && v != longs[i].v) || (rc && v != 12345))
			fail_msg("long '%s': %d %ld, expected %d %ld", longs[i].s, rc, v,
				 longs[i].rc, longs[i].v);
	}
	static const struct {
		const char *s;
		int rc;
		double v;
	} doubles[] = {
		{ "0.5", 0, 0.5 }, { ".25", 0, 0.25 }, { "1.", 0, 1.0 }, { "-3", 0, -3.0 },
		{ "1e6", 0, 1e6 }, { "2.5E-1", 0, 0.25 }, { "1e+2", 0, 100.0 },
		{ "1e999", -ERANGE, 0 }, { "-1e999", -ERANGE, 0 }, { "1e-400", -ERANGE, 0 },
		{ "nan", -EINVAL, 0 }, { "NaN", -EINVAL, 0 }, { "inf", -EINVAL, 0 },
		{ "-infinity", -EINVAL, 0 }, { "0x1p-2", -EINVAL, 0 }, { " 0.5", -EINVAL, 0 },
		{ "0.5 ", -EINVAL, 0 }, { "+0.5", -EINVAL, 0 }, { "0,5", -EINVAL, 0 },
		{ "abc", -EINVAL, 0 }, { "", -EINVAL, 0 }, { ".", -EINVAL, 0 },
		{ "1e", -EINVAL, 0 }, { "e5", -EINVAL, 0 }, { "1..2", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(doubles) / sizeof(doubles[0]); i++) {
		double v = 12345;
		int rc = ft_input_parse_double(doubles[i].s, &v);
		if (rc != doubles[i].rc || (!rc && v != doubles[i].v) || (rc && v != 12345))
			fail_msg("double '%s': %d %g, expected %d %g", doubles[i].s, rc, v,
				 doubles[i].rc, doubles[i].v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(regular_files),
		cmocka_unit_test(refused_kinds),
		cmocka_unit_test(numbers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
