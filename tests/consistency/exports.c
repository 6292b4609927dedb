/*
 * The export list of libflextensor.so (read with libelf from .dynsym) is
 * exactly: every hooked symbol of hooks.def, dlsym, and the public API of
 * flextensor.h.  No symbol version is defined (a named version node would
 * silently stop dlsym interposition).
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/elf_symbols.h"
#include "flextensor.h"

static const char *const expected[] = {
#define FT_HOOK(sym, base, ver, sfx) #sym,
#define FT_USE(sym, base, ver, sfx)
#define FT_RT_HOOK(sym) #sym,
#include "ft/hooks.def"
	"dlsym",
	"ft_version", "ft_is_observing", "ft_stat_get", "ft_flush_trace",
	"ft_mark_pass", "ft_phase", "ft_iters_before_inference", "ft_save_profile",
	"ft_load_profile", "ft_offload_timing_collect", "ft_offload_timing_reset",
	"ft_offload_timing_update", "ft_declare_tensor", "ft_declare_done", "ft_option_get",
	"ft_options_check", "ft_options_set", "ft_stat_name", "ft_verify_journal",
};
#define N (sizeof(expected) / sizeof(expected[0]))

/* Compile-time proof that the public names above are the header's. */
static void *const api[] = { (void *)ft_version, (void *)ft_is_observing,
			     (void *)ft_stat_get, (void *)ft_flush_trace,
			     (void *)ft_mark_pass, (void *)ft_phase,
			     (void *)ft_iters_before_inference, (void *)ft_save_profile,
			     (void *)ft_load_profile, (void *)ft_offload_timing_collect,
			     (void *)ft_offload_timing_reset, (void *)ft_offload_timing_update,
			     (void *)ft_declare_tensor, (void *)ft_declare_done,
			     (void *)ft_option_get, (void *)ft_options_check,
			     (void *)ft_options_set, (void *)ft_stat_name,
			     (void *)ft_verify_journal };

static int seen[N], failures;

static int check_one(void *ud, const char *name, uint64_t value)
{
	(void)ud;
	(void)value;
	size_t k;
	for (k = 0; k < N && strcmp(expected[k], name); k++)
		;
	if (k == N) {
		fprintf(stderr, "FAIL: unexpected export %s\n", name);
		failures++;
	} else {
		seen[k]++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	(void)api;
	int rc = elf_defined_symbols(argv[1], check_one, NULL);
	if (rc < 0) {
		fprintf(stderr, "cannot read %s\n", argv[1]);
		return 2;
	}
	if (rc > 0) {
		fprintf(stderr, "FAIL: the library defines symbol versions\n");
		failures++;
	}
	for (size_t k = 0; k < N; k++)
		if (seen[k] != 1) {
			fprintf(stderr, "FAIL: %s exported %d times\n", expected[k], seen[k]);
			failures++;
		}
	printf("%zu exports checked, %d failure(s)\n", N, failures);
	return failures ? 1 : 0;
}
