/*
 * flextensor-config: the FT_* options as libflextensor will read them.
 *   --check     validate the environment (and FT_CONFIG_FILE); exit 2 on error
 *   --list      every option with its effective value and where it came from
 *   --markdown  the option table of README.md
 *   --stats     the counters ft_stat_get() and the exit table know
 * flextensor-run calls --check before starting the command, so bad settings
 * are refused before anything runs.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ft/options.h"
#include "ft/stats.h"

extern char **environ;

static void to_stderr(void *ud, const char *msg)
{
	(void)ud;
	fprintf(stderr, "flextensor: error: %s\n", msg);
}

static int usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: flextensor-config [--check | --list | --markdown | --stats | --version]\n"
		"  --check     validate the FT_* environment and FT_CONFIG_FILE (exit 2 on error)\n"
		"  --list      list every option: effective value, source, default, meaning\n"
		"  --markdown  print the option table as Markdown\n"
		"  --stats     list the counters (ft_stat_get names)\n"
		"  --version   print the library version\n");
	return rc;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "--list";
	if (argc > 2)
		return usage(stderr, 2);
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
		return usage(stdout, 0);
	if (!strcmp(cmd, "--version")) {
		printf("%s\n", FT_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "--stats")) {
		for (int i = 0; i < FT_STAT_COUNT; i++)
			printf("%-20s %s\n", ft_stats_name(i), ft_stats_help(i));
		return 0;
	}
	struct ft_options o;
	if (!strcmp(cmd, "--markdown")) {
		ft_options_defaults(&o);
		ft_options_dump(&o, 1, 1);
		return 0;
	}
	if (strcmp(cmd, "--check") && strcmp(cmd, "--list")) {
		fprintf(stderr, "flextensor-config: unknown argument '%s'\n", cmd);
		return usage(stderr, 2);
	}
	int errors = ft_options_load(&o, environ, to_stderr, NULL);
	if (errors) {
		fprintf(stderr, "flextensor: error: %d problem(s) in the FT_* settings; "
				"`flextensor-config --list` shows every option\n", errors);
		return 2;
	}
	if (!strcmp(cmd, "--list")) {
		fflush(stdout);
		ft_options_dump(&o, 1, 0);
	}
	ft_options_free(&o);
	return 0;
}
