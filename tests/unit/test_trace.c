/* ft_trace_open names exactly the file it was given: a path that fits is
 * opened whole (a 4,086-byte path was cut to its first 4,080 bytes, and the
 * trace went to another file), and one that does not fit once %p is
 * replaced by the pid is refused with -ENAMETOOLONG. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ft/trace.h"

/* dir + "/" + "./" repeated + name, len bytes in all */
static char *long_path(const char *dir, const char *name, size_t len)
{
	char *p = malloc(len + 1);
	size_t o = (size_t)sprintf(p, "%s/", dir);
	while (o + strlen(name) + 2 <= len) {
		memcpy(p + o, "./", 2);
		o += 2;
	}
	if (o + strlen(name) < len)
		p[o++] = '/'; /* "//" is "/" */
	strcpy(p + o, name);
	assert_int_equal(strlen(p), len);
	return p;
}

static void exact_paths(void **state)
{
	(void)state;
	char dir[] = "/tmp/ft-trace-XXXXXX", file[64], cut[64];
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/trace.jsonl", dir);
	snprintf(cut, sizeof(cut), "%s/trace", dir);

	struct ft_trace t;
	char *p = long_path(dir, "trace.jsonl", 4086);
	assert_int_equal(ft_trace_open(&t, p), 0);
	ft_trace_close(&t);
	assert_int_equal(access(file, F_OK), 0);
	assert_int_not_equal(access(cut, F_OK), 0);
	free(p);

	p = long_path(dir, "trace.jsonl", 4096); /* no room for its NUL */
	assert_int_equal(ft_trace_open(&t, p), -ENAMETOOLONG);
	assert_int_equal(t.fd, -1);
	ft_trace_close(&t);
	free(p);

	/* 4096 bytes once each of the 20 %p is the pid */
	char pid[16];
	size_t digits = (size_t)snprintf(pid, sizeof(pid), "%d", (int)getpid());
	p = long_path(dir, "%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p%p", 4096 + 40 - 20 * digits);
	assert_int_equal(ft_trace_open(&t, p), -ENAMETOOLONG);
	ft_trace_close(&t);
	free(p);

	unlink(file);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exact_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
