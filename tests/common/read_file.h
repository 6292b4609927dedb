/* Test helper: a whole file as a NUL-terminated malloc'd string, or NULL. */
#ifndef FT_TEST_READ_FILE_H
#define FT_TEST_READ_FILE_H

#include <stdio.h>
#include <stdlib.h>

static inline char *read_file(const char *path)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *t = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (t && fread(t, 1, (size_t)n, f) != (size_t)n) {
		free(t);
		t = NULL;
	}
	if (t)
		t[n] = 0;
	fclose(f);
	return t;
}

#endif
