/*
 * libFuzzer target: FT_* settings.  The input's first line is an INI file's
 * text (its "\\n" escapes become line breaks), written to a file named by
 * FT_CONFIG_FILE; every further line is one environment entry.
 * ft_options_load parses both, checks every value, and is listed back;
 * nothing may crash, leak or read out of bounds (tests/fuzz/run.sh builds
 * it with ASan and UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft/options.h"

static void quiet(void *ud, const char *message)
{
	(void)message;
	(void)ud;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[256];
	if (!path[0]) {
		const char *dir = getenv("TMPDIR");
		snprintf(path, sizeof(path), "%s/ft-fuzz-%d.ini", dir ? dir : "/tmp", (int)getpid());
	}
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	char *nl = strchr(text, '\n');
	if (nl)
		*nl = 0;
	FILE *f = fopen(path, "w");
	if (f) {
		for (const char *c = text; *c; c++)
			if (c[0] == '\\' && c[1] == 'n')
				fputc('\n', f), c++;
			else
				fputc(*c, f);
		fclose(f);
	}
	char *env[66];
	char cf[300];
	snprintf(cf, sizeof(cf), "FT_CONFIG_FILE=%s", path);
	int n = 0;
	env[n++] = cf;
	for (char *line = nl ? nl + 1 : NULL; line && n < 65;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		env[n++] = line;
		line = next;
	}
	env[n] = NULL;
	struct ft_options o;
	ft_options_load(&o, env, quiet, NULL);
	ft_options_free(&o);
	free(text);
	return 0;
}
