/* Options: defaults, env parsing of every type, INI, precedence, the
 * refusal messages (unknown name with did-you-mean, bad values, refused
 * upstream options, cross-checks), planned-option notes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>

#include "ft/options.h"

struct msgs {
	int n;
	char text[16][512];
};

static void collect(void *ud, const char *m)
{
	struct msgs *s = ud;
	if (s->n < 16)
		snprintf(s->text[s->n++], sizeof(s->text[0]), "%s", m);
}

/* Loads env into o, freeing what the previous load into the same o held
 * (tests reuse one struct; LeakSanitizer checks them). */
static int load(struct ft_options *o, struct msgs *m, char **env)
{
	static struct ft_options *last;
	if (o == last)
		ft_options_free(o);
	last = o;
	memset(m, 0, sizeof(*m));
	return ft_options_load(o, env, collect, m);
}

static void defaults_are_valid(void **state)
{
	(void)state;
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { NULL };
	assert_int_equal(load(&o, &m, env), 0);
	assert_false(o.enabled);
	assert_int_equal(o.discovery_iters, 1);
	assert_int_equal(o.profiling_iters, 10);
	assert_int_equal(o.num_blocks, 4);
	assert_int_equal(o.min_blocks, 4);
	assert_int_equal(o.transfer_mode, FT_TM_ALLOCATION_BLOCK);
	assert_true(isnan(o.max_gpu_mem_fraction));
	assert_true(o.transfer_budget_scale == 1.0);
	assert_int_equal(o.offload_timing, FT_TIMING_OFF);
	assert_int_equal(o.vllm_timing_batch, 0);
	assert_null(o.profile_storage_dir);
	assert_null(o.trace);
	assert_int_equal(o.source[FT_OPT_enabled], FT_SRC_DEFAULT);
	ft_options_free(&o);
}

static void env_values(void **state)
{
	(void)state;
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { "FT_ENABLED=yes", "FT_NUM_BLOCKS=8", "FT_MIN_BLOCKS=2",
			"FT_MAX_GPU_MEM_FRACTION=0.3", "FT_TRANSFER_MODE=RAW_BLOCK_TRANSFER",
			"FT_PROFILE_STORAGE_DIR=/tmp/p", "FT_VLLM_TIMING_BATCH=",
			"FT_LOG_LEVEL=debug", "FT_TRACE=/tmp/t", "OTHER=1", NULL };
	assert_int_equal(load(&o, &m, env), 0);
	assert_true(o.enabled);
	assert_int_equal(o.num_blocks, 8);
	assert_true(fabs(o.max_gpu_mem_fraction - 0.3) < 1e-12);
	assert_int_equal(o.transfer_mode, FT_TM_RAW_BLOCK);
	assert_string_equal(o.profile_storage_dir, "/tmp/p");
	assert_int_equal(o.vllm_timing_batch, -1);
	assert_int_equal(o.log_level, 3);
	assert_int_equal(o.source[FT_OPT_num_blocks], FT_SRC_ENV);
	ft_options_free(&o);
	/* the decimal forms strict parsing keeps */
	char *env2[] = { "FT_MAX_GPU_MEM_FRACTION=.25", "FT_TRANSFER_BUDGET_SCALE=2E0",
			 "FT_VMM_MIN_BYTES=0010", NULL };
	assert_int_equal(load(&o, &m, env2), 0);
	assert_true(o.max_gpu_mem_fraction == 0.25);
	assert_true(o.transfer_budget_scale == 2.0);
	assert_int_equal(o.vmm_min_bytes, 10);
	ft_options_free(&o);
}

static void refusals(void **state)
{
	(void)state;
	static const struct {
		const char *var, *needle;
	} cases[] = {
		{ "FT_TRANSFER_MOD=raw_block_transfer", "did you mean FT_TRANSFER_MODE?" },
		{ "FT_PROFILING_ITER=3", "did you mean FT_PROFILING_ITERS?" },
		{ "FT_COMPLETELY_UNRELATED=1", "is not a FlexTensor option; " },
		{ "FT_NUM_BLOCKS=1", "expected a whole number from 2 to 1024" },
		{ "FT_NUM_BLOCKS=4x", "FT_NUM_BLOCKS=4x is not valid" },
		{ "FT_ENABLED=maybe", "expected a boolean" },
		{ "FT_MAX_GPU_MEM_FRACTION=0", "greater than 0 and at most 1, or none" },
		{ "FT_MAX_GPU_MEM_FRACTION=nan", "FT_MAX_GPU_MEM_FRACTION=nan is not valid" },
		{ "FT_TRANSFER_BUDGET_SCALE=none", "expected a number greater than 0" },
		{ "FT_TRANSFER_MODE=fast", "allocation_block_transfer, raw_block_transfer, strategy" },
		{ "FT_OFFLOAD_TIMING=always", "expected one of off, eager, cuda_graph" },
		{ "FT_TRANSFER_COMPRESSION=zstd", "expected one of none, auto, always" },
		{ "FT_INCLUDE_PATTERNS=model.*", "selects PyTorch modules by name" },
		{ "FT_UNIFIED_MEMORY=1", "FT_UNIFIED_MEMORY is not supported: it selects upstream's "
					 "unified-memory SoC path; libflextensor does not have one; "
					 "remove it" },
		{ "FT_SHM_NAMESPACE=../x", "expected a name of 1 to 64 letters" },
		{ "FT_SHM_WAIT_TIMEOUT=-1", "expected a number from 0 and at most" },
		{ "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_ENABLED=1 needs FT_NVME_OFFLOAD_PATH" },
		{ "FT_NVME_ALIGNMENT_BYTES=3000", "FT_NVME_ALIGNMENT_BYTES=3000 is not a power of two" },
		{ "FT_NVME_TRANSFER_MODE=gds", "expected one of posix, cufile" },
		{ "FT_CONFIG_FILE=/nonexistent/ft.ini", "cannot open the file" },
		/* strict numbers: what strtol/strtod would also have taken */
		{ "FT_NUM_BLOCKS= 4", "FT_NUM_BLOCKS= 4 is not valid: expected a whole number" },
		{ "FT_NUM_BLOCKS=+4", "FT_NUM_BLOCKS=+4 is not valid" },
		{ "FT_NUM_BLOCKS=4 ", "FT_NUM_BLOCKS=4  is not valid" },
		{ "FT_VMM_MIN_BYTES=99999999999999999999", "expected a whole number from 0 to" },
		{ "FT_MAX_GPU_MEM_FRACTION=0x1p-2", "FT_MAX_GPU_MEM_FRACTION=0x1p-2 is not valid" },
		{ "FT_MAX_GPU_MEM_FRACTION= 0.5", "FT_MAX_GPU_MEM_FRACTION= 0.5 is not valid" },
		{ "FT_MAX_GPU_MEM_FRACTION=+0.5", "FT_MAX_GPU_MEM_FRACTION=+0.5 is not valid" },
		{ "FT_MAX_GPU_MEM_FRACTION=0.5x", "FT_MAX_GPU_MEM_FRACTION=0.5x is not valid" },
		{ "FT_TRANSFER_BUDGET_SCALE=inf", "FT_TRANSFER_BUDGET_SCALE=inf is not valid" },
		{ "FT_TRANSFER_BUDGET_SCALE=1e999", "FT_TRANSFER_BUDGET_SCALE=1e999 is not valid" },
		/* the environment's names are exact: a wrong case is an unknown name */
		{ "FT_enabled=1", "FT_enabled is not a FlexTensor option (did you mean FT_ENABLED? "
				  "the names are upper case)" },
		{ "FT_Num_Blocks=8", "did you mean FT_NUM_BLOCKS? the names are upper case" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ft_options o = { 0 };
		struct msgs m;
		char *env[] = { (char *)cases[i].var, NULL };
		assert_int_equal(load(&o, &m, env), 1);
		if (!strstr(m.text[0], cases[i].needle))
			fail_msg("%s: message '%s' lacks '%s'", cases[i].var, m.text[0],
				 cases[i].needle);
		ft_options_free(&o);
	}
}

static void cross_checks(void **state)
{
	(void)state;
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *e1[] = { "FT_MIN_BLOCKS=6", NULL };
	assert_int_equal(load(&o, &m, e1), 1);
	assert_non_null(strstr(m.text[0], "larger than FT_NUM_BLOCKS=4"));
	char *e2[] = { "FT_OFFLOAD_TIMING=eager", "FT_TRANSFER_MODE=strategy", NULL };
	assert_int_equal(load(&o, &m, e2), 1);
	assert_non_null(strstr(m.text[0], "needs a block transfer mode"));
	char *e5[] = { "FT_OFFLOAD_TIMING=cuda_graph", "FT_TRANSFER_MODE=strategy", NULL };
	assert_int_equal(load(&o, &m, e5), 1);
	assert_non_null(strstr(m.text[0], "needs a block transfer mode"));
	char *e3[] = { "FT_TRACE=/tmp/x", NULL };
	assert_int_equal(load(&o, &m, e3), 1);
	assert_non_null(strstr(m.text[0], "needs FT_ENABLED=1"));
	char *e6[] = { "FT_GRAPH_COPY=kernel", "FT_PINNED_MEMORY=0", NULL };
	assert_int_equal(load(&o, &m, e6), 1);
	assert_non_null(strstr(m.text[0], "needs FT_PINNED_MEMORY=1"));
	/* a coded store needs the decode stream of the block modes; auto,
	 * the default, stays raw with strategy */
	char *e8[] = { "FT_TRANSFER_COMPRESSION=always", "FT_TRANSFER_MODE=strategy", NULL };
	assert_int_equal(load(&o, &m, e8), 1);
	assert_non_null(strstr(m.text[0], "FT_TRANSFER_COMPRESSION=always needs a block transfer"));
	char *e9[] = { "FT_TRANSFER_MODE=strategy", NULL };
	assert_int_equal(load(&o, &m, e9), 0);
	assert_int_equal(o.transfer_compression, FT_TC_AUTO);
	char *e10[] = { "FT_TRANSFER_COMPRESSION=none", NULL };
	assert_int_equal(load(&o, &m, e10), 0);
	assert_int_equal(o.transfer_compression, FT_TC_NONE);
	/* the NVMe tier: not with a shared store, nor with loads made in
	 * captures */
	char *e11[] = { "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_PATH=/tmp", "FT_SHM_ENABLED=1",
			NULL };
	assert_int_equal(load(&o, &m, e11), 1);
	assert_non_null(strstr(m.text[0], "cannot be used together yet"));
	char *e12[] = { "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_PATH=/tmp",
			"FT_GRAPH_PAGING=capture", NULL };
	assert_int_equal(load(&o, &m, e12), 1);
	assert_non_null(strstr(m.text[0], "cannot serve FT_GRAPH_PAGING=capture"));
	char *e13[] = { "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_PATH=/tmp", NULL };
	assert_int_equal(load(&o, &m, e13), 0);
	/* its directory must be there (on the H100 a missing one was found
	 * only when the plan was applied, and the run went on 8-16x slower) */
	char *e14[] = { "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_PATH=/nonexistent/ft", NULL };
	assert_int_equal(load(&o, &m, e14), 1);
	assert_non_null(strstr(m.text[0], "FT_NVME_OFFLOAD_PATH=/nonexistent/ft is not a directory "
					  "this process can write to (No such file or directory)"));
	char *e15[] = { "FT_NVME_OFFLOAD_ENABLED=1", "FT_NVME_OFFLOAD_PATH=/dev/null", NULL };
	assert_int_equal(load(&o, &m, e15), 1);
	assert_non_null(strstr(m.text[0], "(not a directory)"));
	char *e16[] = { "FT_NVME_OFFLOAD_PATH=/nonexistent/ft", NULL }; /* (not enabled) */
	assert_int_equal(load(&o, &m, e16), 0);
	char *e7[] = { "FT_GRAPH_COPY=kernel", NULL };
	assert_int_equal(load(&o, &m, e7), 0);
	assert_int_equal(o.graph_copy, FT_GC_KERNEL);
	/* Several problems are all reported. */
	char *e4[] = { "FT_NUM_BLOCKS=0", "FT_BAD=1", "FT_ENABLED=2", NULL };
	assert_int_equal(load(&o, &m, e4), 3);
	ft_options_free(&o);
}

static void ini_file(void **state)
{
	(void)state;
	char path[] = "/tmp/ft-test-XXXXXX.ini";
	int fd = mkstemps(path, 4);
	assert_true(fd >= 0);
	const char *text = "; comment\n[flextensor]\nnum_blocks = 6\nprofiling_iters = 3\n"
			   "max_gpu_mem_fraction = 0.5\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char cf[256];
	snprintf(cf, sizeof(cf), "FT_CONFIG_FILE=%s", path);
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	/* env beats file beats default */
	char *env[] = { cf, "FT_PROFILING_ITERS=7", NULL };
	assert_int_equal(load(&o, &m, env), 0);
	assert_int_equal(o.num_blocks, 6);
	assert_int_equal(o.source[FT_OPT_num_blocks], FT_SRC_FILE);
	assert_int_equal(o.profiling_iters, 7);
	assert_int_equal(o.source[FT_OPT_profiling_iters], FT_SRC_ENV);
	assert_true(o.max_gpu_mem_fraction == 0.5);
	ft_options_free(&o);

	fd = open(path, O_WRONLY | O_TRUNC);
	text = "[flextensor]\nnum_blok = 6\n[other]\nx = 1\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char *env2[] = { cf, NULL };
	assert_int_equal(load(&o, &m, env2), 2);
	assert_non_null(strstr(m.text[0], "did you mean num_blocks?"));
	assert_non_null(strstr(m.text[1], "unknown section [other]"));
	ft_options_free(&o);
	unlink(path);
}

/* FT_CONFIG_FILE is read only when it is a regular file of at most
 * FT_INPUT_CONFIG_MAX bytes: /dev/zero once hung the first CUDA call, a
 * directory or /proc/self/mem was taken as an empty file. */
static void config_file_kinds(void **state)
{
	(void)state;
	char big[] = "/tmp/ft-test-big-XXXXXX";
	int fd = mkstemp(big);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)(1 << 20) + 1), 0);
	close(fd);
	char big_var[64];
	snprintf(big_var, sizeof(big_var), "FT_CONFIG_FILE=%s", big);
	static const struct {
		const char *var, *needle;
	} cases[] = {
		{ "FT_CONFIG_FILE=/dev/zero", "FT_CONFIG_FILE=/dev/zero: is a character device, "
					      "not a regular file; name an INI file" },
		{ "FT_CONFIG_FILE=/tmp", "FT_CONFIG_FILE=/tmp: is a directory, not a regular file" },
		{ "FT_CONFIG_FILE=/proc/self/mem", "cannot read the file: Input/output error" },
		{ NULL, ": is 1048577 bytes, more than the 1 MiB accepted" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ft_options o = { 0 };
		struct msgs m;
		char *env[] = { cases[i].var ? (char *)cases[i].var : big_var, NULL };
		assert_int_equal(load(&o, &m, env), 1);
		if (!strstr(m.text[0], cases[i].needle))
			fail_msg("%s: message '%s' lacks '%s'", env[0], m.text[0], cases[i].needle);
		ft_options_free(&o);
	}
	unlink(big);
}

/* Writes n bytes to a fresh temporary INI file; its FT_CONFIG_FILE=... in var. */
static void ini_write(const void *text, size_t n, char *path, char *var, size_t var_len)
{
	strcpy(path, "/tmp/ft-test-XXXXXX.ini");
	int fd = mkstemps(path, 4);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
	snprintf(var, var_len, "FT_CONFIG_FILE=%s", path);
}

/* inih cuts lines at its INI_MAX_LINE (200) and parsed the rest as a line
 * of its own: the tail of a long log_file line set verify = 1. */
static void ini_long_lines(void **state)
{
	(void)state;
	char text[512], path[64], var[96];
	int k = snprintf(text, sizeof(text), "[flextensor]\nlog_file = /tmp/");
	memset(text + k, 'a', 199 - 16);
	snprintf(text + k + 183, sizeof(text) - (size_t)k - 183, "verify = 1\nnum_blocks = 6\n");
	ini_write(text, strlen(text), path, var, sizeof(var));
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { var, NULL };
	assert_int_equal(load(&o, &m, env), 1);
	assert_non_null(strstr(m.text[0], " line 2 is 209 bytes long; the INI reader (libinih) "
					  "takes lines of at most 197 bytes"));
	assert_false(o.verify);
	assert_int_equal(o.num_blocks, 6); /* the lines after it are still read */
	ft_options_free(&o);
	unlink(path);

	/* the longest line that fits, with either line end */
	k = snprintf(text, sizeof(text), "[flextensor]\r\nlog_file = /");
	memset(text + k, 'b', 197 - 12);
	snprintf(text + k + 185, sizeof(text) - (size_t)k - 185, "\r\nverify = 0");
	ini_write(text, strlen(text), path, var, sizeof(var));
	assert_int_equal(load(&o, &m, env), 0);
	assert_int_equal(strlen(o.log_file), 186);
	ft_options_free(&o);
	unlink(path);
}

/* A binary file is one error, not one for each line of junk. */
static void ini_binary(void **state)
{
	(void)state;
	char text[4096], path[64], var[96];
	size_t n = 0;
	while (n + 20 < sizeof(text)) {
		memcpy(text + n, "[flextensor]\n\x01\x02=\x7f\n\0\n", 19);
		n += 19;
	}
	ini_write(text, n, path, var, sizeof(var));
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { var, NULL };
	assert_int_equal(load(&o, &m, env), 1);
	assert_non_null(strstr(m.text[0], ": not a text file (byte 13 is 0x01); name an INI file"));
	ft_options_free(&o);
	unlink(path);
}

/* The one rule for keys given twice: refused, with both lines.  An indented
 * line is read by INI as more of the value above it, and said so. */
static void ini_duplicates(void **state)
{
	(void)state;
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{ "[flextensor]\nnum_blocks = 6\nverify = 0\nnum_blocks = 8\n",
		  " line 4 sets num_blocks again (line 2 set it first): each option may be set "
		  "once in the file" },
		{ "[flextensor]\nnum_blocks = 6\n[flextensor]\nNUM_BLOCKS = 6\n",
		  " line 4 sets NUM_BLOCKS again (line 2 set it first)" },
		{ "[flextensor]\nlog_file = /tmp/a.log\n  verify = 1\n",
		  " line 3 is indented, so the INI reader takes it as more of the value of "
		  "log_file (line 2)" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[64], var[96];
		ini_write(cases[i].text, strlen(cases[i].text), path, var, sizeof(var));
		struct ft_options o = { 0 };
		struct msgs m;
		char *env[] = { var, NULL };
		assert_int_equal(load(&o, &m, env), 1);
		if (!strstr(m.text[0], cases[i].needle))
			fail_msg("case %zu: message '%s' lacks '%s'", i, m.text[0], cases[i].needle);
		ft_options_free(&o);
		unlink(path);
	}
	/* the environment may still override what the file set once */
	char path[64], var[96];
	const char *once = "[flextensor]\nnum_blocks = 6\n";
	ini_write(once, strlen(once), path, var, sizeof(var));
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { var, "FT_NUM_BLOCKS=8", NULL };
	assert_int_equal(load(&o, &m, env), 0);
	assert_int_equal(o.num_blocks, 8);
	ft_options_free(&o);
	unlink(path);
}

/* A path longer than the library's buffers is refused, never cut (a
 * 4,086-byte FT_TRACE was cut to its first 4,080 bytes); the message shows
 * the value's ends, not all of it. */
static void long_paths(void **state)
{
	(void)state;
	static const char *const vars[] = { "FT_TRACE", "FT_LOG_FILE", "FT_PROFILE_STORAGE_DIR",
					    "FT_CONFIG_FILE" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		for (size_t len = 4000; len <= 4086; len += 86) {
			char *var = malloc(len + 64);
			int k = sprintf(var, "%s=/tmp/", vars[i]);
			memset(var + k, 'a', len - 7); /* "/tmp/" + a... + "/x": len bytes */
			strcpy(var + k + len - 7, "/x");
			struct ft_options o = { 0 };
			struct msgs m;
			char *env[] = { var, "FT_ENABLED=1", NULL };
			int errors = load(&o, &m, env);
			if (len == 4086) {
				char needle[160];
				snprintf(needle, sizeof(needle), "%s=/tmp/aaa", vars[i]);
				assert_int_equal(errors, 1);
				assert_non_null(strstr(m.text[0], needle));
				assert_non_null(strstr(m.text[0], "aaa...aaa"));
				assert_non_null(strstr(m.text[0], "aaa/x is not valid: the path is "
								  "4086 bytes long, more than the "
								  "4000 accepted"));
				assert_true(strlen(m.text[0]) < 400);
			} else if (i == 3) { /* accepted, and then not found */
				assert_int_equal(errors, 1);
				assert_non_null(strstr(m.text[0], "cannot open the file"));
			} else {
				assert_int_equal(errors, 0);
			}
			ft_options_free(&o);
			free(var);
		}
	}
}

/* flextensor-config --list: an option whose default is none lists as none
 * (FT_GPU_DEVICE was listed as 0 while unset). */
static void listing(void **state)
{
	(void)state;
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m;
	char *env[] = { "FT_NUM_BLOCKS=8", NULL };
	assert_int_equal(load(&o, &m, env), 0);
	FILE *f = tmpfile();
	assert_non_null(f);
	ft_options_dump(&o, fileno(f), 0);
	ft_options_free(&o);
	rewind(f);
	char line[1024], name[64] = "", value[256] = "", source[32] = "";
	int nones = 0, listed = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "FT_", 3)) {
			assert_int_equal(sscanf(line, "%63s %255s %31s", name, value, source), 3);
			listed++;
		} else if (!strncmp(line, "    default none;", 17)) {
			nones++;
			if (strcmp(value, "none") || strcmp(source, "(default)"))
				fail_msg("%s is listed as %s %s, its default is none", name, value,
					 source);
		}
		if (!strcmp(name, "FT_GPU_DEVICE") && !strncmp(line, "FT_", 3))
			assert_string_equal(line, "FT_GPU_DEVICE              none                  "
						  "       (default)\n");
		if (!strcmp(name, "FT_NUM_BLOCKS") && !strncmp(line, "FT_", 3))
			assert_true(!strcmp(value, "8") && !strcmp(source, "(env)"));
	}
	fclose(f);
	assert_int_equal(listed, FT_OPT_COUNT);
	assert_true(nones >= 6); /* gpu_device, the fraction, the paths */
}

/* Every refused upstream option's message is a sentence: "FT_X is not
 * supported: it <verb>s ..." (it read "it NVMe offload is not supported"). */
static void refused_sentences(void **state)
{
	(void)state;
	static const struct {
		const char *name, *why;
	} refused[] = {
#define FT_OPT(n, ...)
#define FT_OPT_REFUSED(n, w) { #n, w },
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char var[96], want[512];
		size_t k = (size_t)snprintf(var, sizeof(var), "FT_");
		for (const char *c = refused[i].name; *c; c++)
			var[k++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
		var[k] = 0;
		snprintf(want, sizeof(want), "%s is not supported: it %s; remove it", var,
			 refused[i].why);
		strcat(var, "=1");
		struct ft_options o = { 0 };
		struct msgs m;
		char *env[] = { var, NULL };
		assert_int_equal(load(&o, &m, env), 1);
		assert_string_equal(m.text[0], want);
		/* the first word is a verb in the third person: "selects", "arms" */
		size_t w = strcspn(refused[i].why, " ");
		if (w < 3 || refused[i].why[w - 1] != 's' || refused[i].why[0] < 'a' ||
		    refused[i].why[0] > 'z' || !strncmp(refused[i].why, "is ", 3))
			fail_msg("%s: \"it %s\" does not read as a sentence", var, refused[i].why);
		ft_options_free(&o);
	}
}

static void planned_notes(void **state)
{
	(void)state;
	struct ft_options o = { 0 }; /* load() may free it (same address as the last) */
	struct msgs m, notes = { 0 };
	char *env[] = { "FT_ENABLED=1", "FT_PIECEWISE_PREFETCH=off", "FT_LOG_LEVEL=info", NULL };
	assert_int_equal(load(&o, &m, env), 0);
	ft_options_note_planned(&o, collect, &notes);
	assert_int_equal(notes.n, 1);
	assert_non_null(strstr(notes.text[0], "FT_PIECEWISE_PREFETCH=off accepted"));
	ft_options_free(&o);
}

/* The rank of a process among several names its profile.json; a process
 * on its own (no launcher variables, a world of one, rank 0 of unknown
 * size) has none. */
static void rank_from_launchers(void **state)
{
	(void)state;
	static const struct {
		const char *env[3];
		int rank;
	} cases[] = {
		{ { NULL }, -1 },
		{ { "RANK=2", "WORLD_SIZE=4", NULL }, 2 },
		{ { "RANK=0", "WORLD_SIZE=2", NULL }, 0 },
		{ { "RANK=0", "WORLD_SIZE=1", NULL }, -1 },
		{ { "RANK=0", NULL }, -1 },
		{ { "RANK=3", NULL }, 3 },
		{ { "RANK=x", "WORLD_SIZE=2", NULL }, -1 },
		{ { "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", NULL }, 1 },
		{ { "SLURM_PROCID=5", "SLURM_NTASKS=8", NULL }, 5 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ft_options o = { 0 };
		struct msgs m;
		assert_int_equal(load(&o, &m, (char **)cases[i].env), 0);
		assert_int_equal(o.rank, cases[i].rank);
		ft_options_free(&o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_valid), cmocka_unit_test(env_values),
		cmocka_unit_test(refusals),           cmocka_unit_test(cross_checks),
		cmocka_unit_test(ini_file),           cmocka_unit_test(planned_notes),
		cmocka_unit_test(rank_from_launchers), cmocka_unit_test(config_file_kinds),
		cmocka_unit_test(ini_long_lines),     cmocka_unit_test(ini_binary),
		cmocka_unit_test(ini_duplicates),     cmocka_unit_test(long_paths),
		cmocka_unit_test(listing),            cmocka_unit_test(refused_sentences),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
