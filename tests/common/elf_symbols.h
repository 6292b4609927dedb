/*
 * Test helper (libelf): calls fn for every defined global or weak symbol of
 * a shared object's dynamic symbol table.  Returns 0, -1 when the file
 * cannot be read, or 1 when the object defines symbol versions (a named
 * version node; callers that care treat it as an error).
 */
#ifndef FT_TEST_ELF_SYMBOLS_H
#define FT_TEST_ELF_SYMBOLS_H

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <unistd.h>

static inline int elf_defined_symbols(const char *path,
				      int (*fn)(void *ud, const char *name, uint64_t value),
				      void *ud)
{
	int versioned = 0;
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (!e) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type == SHT_GNU_verdef)
			versioned = 1;
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			gelf_getsym(d, (int)i, &s);
			int bind = GELF_ST_BIND(s.st_info);
			if (s.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
				continue;
			if (fn(ud, elf_strptr(e, sh.sh_link, s.st_name), s.st_value))
				goto out;
		}
	}
out:
	elf_end(e);
	close(fd);
	return versioned;
}

#endif
