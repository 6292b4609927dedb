/* Non-fatal checks for the test programs that report a count of failures
 * at the end: CHECK(cond, printf-format, ...) says where and why, and
 * counts in `failures`. */
#ifndef FT_TEST_CHECK_H
#define FT_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

#endif
