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

#include "flextensor.h"

static const char *const expected[] = {
#define FT_HOOK(sym, base, ver, sfx) #sym,
#define FT_USE(sym, base, ver, sfx)
#define FT_RT_HOOK(sym) #sym,
#include "../../src/interpose/hooks.def"
	"dlsym",
	"ft_version", "ft_is_observing", "ft_stat_get", "ft_flush_trace",
	"ft_mark_pass", "ft_phase", "ft_iters_before_inference",
};
#define N (sizeof(expected) / sizeof(expected[0]))

/* Compile-time proof that the public names above are the header's. */
static void *const api[] = { (void *)ft_version, (void *)ft_is_observing,
			     (void *)ft_stat_get, (void *)ft_flush_trace,
			     (void *)ft_mark_pass, (void *)ft_phase,
			     (void *)ft_iters_before_inference };

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	(void)api;
	elf_version(EV_CURRENT);
	int fd = open(argv[1], O_RDONLY);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (!e) {
		fprintf(stderr, "cannot read %s\n", argv[1]);
		return 2;
	}
	int seen[N] = { 0 }, failures = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type == SHT_GNU_verdef) {
			fprintf(stderr, "FAIL: the library defines symbol versions\n");
			failures++;
		}
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			gelf_getsym(d, (int)i, &s);
			int bind = GELF_ST_BIND(s.st_info);
			if (s.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
				continue;
			const char *name = elf_strptr(e, sh.sh_link, s.st_name);
			size_t k;
			for (k = 0; k < N && strcmp(expected[k], name); k++)
				;
			if (k == N) {
				fprintf(stderr, "FAIL: unexpected export %s\n", name);
				failures++;
			} else {
				seen[k]++;
			}
		}
	}
	for (size_t k = 0; k < N; k++)
		if (seen[k] != 1) {
			fprintf(stderr, "FAIL: %s exported %d times\n", expected[k], seen[k]);
			failures++;
		}
	printf("%zu exports checked, %d failure(s)\n", N, failures);
	elf_end(e);
	close(fd);
	return failures ? 1 : 0;
}
