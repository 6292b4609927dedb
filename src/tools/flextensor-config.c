/*
 * flextensor-config: the FT_* options as libflextensor will read them.
 *   --check     validate the environment (and FT_CONFIG_FILE); exit 2 on error
 *   --list      every option with its effective value and where it came from
 *   --markdown  the option table of README.md
 *   --stats     the counters ft_stat_get() and the exit table know
 *   --preloaded the version of the libflextensor preloaded into this process
 * flextensor-run calls --check before starting the command, so bad settings
 * (and a log or trace file that could not be opened) are refused before
 * anything runs, and runs --preloaded under LD_PRELOAD=<its library> to learn
 * whether the dynamic loader really preloads that library: the loader only
 * warns about an object it cannot preload and runs the program without it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ft/options.h"
#include "ft/stats.h"

extern char **environ;

/* The library's public ft_version(), declared weak so that this program runs
 * without it: the dynamic loader binds it when libflextensor is preloaded and
 * leaves it NULL otherwise.  Calling dlsym() instead would go through the
 * library's dlsym override and start the library (see src/interpose/dlsym.c);
 * meson links with -z dynamic-undefined-weak where the linker has it, so the
 * reference stays dynamic in a position-independent executable. */
extern const char *ft_version(void) __attribute__((weak));

static void to_stderr(void *ud, const char *msg)
{
	(void)ud;
	fprintf(stderr, "flextensor: error: %s\n", msg);
}

/* FT_TRACE's %p, expanded as the trace does (src/profile/trace.c) with this
 * process's id: a name made per process rarely exists yet, so what is checked
 * is mostly its directory. */
static void expand_pid(char *out, size_t len, const char *path)
{
	size_t o = 0;
	for (const char *p = path; *p && o + 24 < len; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid());
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = 0;
}

/* Why the library could not open path for appending (it opens with O_CREAT,
 * src/common/log.c and src/profile/trace.c), or NULL when it could.  Nothing
 * is created: an existing file must be writable, else its directory must
 * exist and let us create a file.  why holds the reason's text. */
static const char *unwritable(const char *path, char *why, size_t len)
{
	struct stat st;
	size_t n = strlen(path);

	if (n && path[n - 1] == '/') {
		snprintf(why, len, "the path ends with '/', so it names a directory");
		return why;
	}
	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode))
			snprintf(why, len, "it is a directory");
		else if (access(path, W_OK))
			snprintf(why, len, "the file cannot be written: %s", strerror(errno));
		else
			return NULL;
		return why;
	}
	if (errno == ENOTDIR) {
		snprintf(why, len, "a part of the path is a file, not a directory");
		return why;
	}
	if (errno != ENOENT) {
		snprintf(why, len, "%s", strerror(errno));
		return why;
	}
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st))
		snprintf(why, len, "its directory %s: %s", dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, len, "%s is not a directory", dir);
	else if (access(dir, W_OK | X_OK))
		snprintf(why, len, "no file can be created in %s: %s", dir, strerror(errno));
	else
		return NULL;
	return why;
}

/* 1 (one problem, reported) when the file of option name cannot be opened. */
static int check_file(const char *name, const char *value, int expand)
{
	char path[4096], why[4096 + 128];

	if (!value || !*value)
		return 0;
	if (expand)
		expand_pid(path, sizeof(path), value);
	else
		snprintf(path, sizeof(path), "%s", value);
	if (!unwritable(path, why, sizeof(why)))
		return 0;
	fprintf(stderr, "flextensor: error: %s=%s cannot be opened for writing (%s); "
		"the library would stop the program with status 2 at its first CUDA "
		"call: choose a file in a writable directory\n", name, value, why);
	return 1;
}

static int usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: flextensor-config [--check | --list | --markdown | --stats | --version | --preloaded]\n"
		"  --check     validate the FT_* environment and FT_CONFIG_FILE, and that\n"
		"              FT_LOG_FILE and FT_TRACE can be written (exit 2 on error)\n"
		"  --list      list every option: effective value, source, default, meaning\n"
		"  --markdown  print the option table as Markdown\n"
		"  --stats     list the counters (ft_stat_get names)\n"
		"  --version   print the library version\n"
		"  --preloaded print the version of the libflextensor preloaded into this\n"
		"              process (exit 1 when none is)\n");
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
	if (!strcmp(cmd, "--preloaded")) {
		if (!ft_version) {
			fprintf(stderr, "flextensor-config: no libflextensor is preloaded "
					"into this process; run LD_PRELOAD=/path/to/libflextensor.so "
					"flextensor-config --preloaded\n");
			return 1;
		}
		printf("%s\n", ft_version());
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
	if (!strcmp(cmd, "--check")) {
		errors += check_file("FT_LOG_FILE", o.log_file, 0);
		errors += check_file("FT_TRACE", o.trace, 1);
	}
	if (errors) {
		fprintf(stderr, "flextensor: error: %d problem(s) in the FT_* settings; "
				"`flextensor-config --list` shows every option\n", errors);
		ft_options_free(&o);
		return 2;
	}
	if (!strcmp(cmd, "--list")) {
		fflush(stdout);
		ft_options_dump(&o, 1, 0);
	}
	ft_options_free(&o);
	return 0;
}
