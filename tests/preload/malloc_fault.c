/*
 * Host allocation faults in the library's own paths, for malloc_faults.sh.
 * Preloaded before libflextensor.so, it takes the program's malloc, calloc,
 * realloc, posix_memalign and strdup, and fails those called from code in
 * libflextensor.so: MALLOC_FAIL=n fails the n-th such call (from 1),
 * MALLOC_FAIL=n+ every one from the n-th on (host memory gone for good);
 * MALLOC_FAIL=0 fails none and says at exit how many there were.  Calls
 * from anywhere else (the program, libc, the CUDA stand-in, cJSON) are
 * never failed: the program's own allocations are not the library's
 * fault.  The real allocator is glibc's (__libc_malloc and the others),
 * so that no dlsym is needed (the library interposes dlsym).
 */
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

static uintptr_t lo, hi;       /* libflextensor.so's mapped range */
static atomic_int found;       /* 1: lo and hi known */
static atomic_long calls;      /* calls from the library so far */
static long fail_at = -1;      /* MALLOC_FAIL's n; -1 unset */
static int fail_on;            /* n+: every call from n on */
static __thread int looking;   /* in dl_iterate_phdr (it may allocate) */

static int range_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libflextensor"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + p->p_vaddr, b = a + p->p_memsz;
		if (!lo || a < lo)
			lo = a;
		if (b > hi)
			hi = b;
	}
	return 1;
}

static void setup(void)
{
	if (fail_at >= 0)
		return;
	const char *e = getenv("MALLOC_FAIL");
	char *end = NULL;
	long n = e ? strtol(e, &end, 10) : 0;
	fail_on = end && *end == '+';
	fail_at = n > 0 ? n : 0;
}

/* Whether the call that returns to ret is the library's and is to fail. */
static int fails(const void *ret)
{
	if (!atomic_load(&found) && !looking) {
		looking = 1;
		if (dl_iterate_phdr(range_of, NULL))
			atomic_store(&found, 1);
		looking = 0;
	}
	if (!atomic_load(&found) || (uintptr_t)ret < lo || (uintptr_t)ret >= hi)
		return 0;
	setup();
	long k = atomic_fetch_add(&calls, 1) + 1;
	return fail_at > 0 && (k == fail_at || (fail_on && k > fail_at));
}

void *malloc(size_t n)
{
	if (fails(__builtin_return_address(0))) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	if (fails(__builtin_return_address(0))) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	if (fails(__builtin_return_address(0))) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (fails(__builtin_return_address(0)))
		return ENOMEM;
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

char *strdup(const char *s)
{
	if (fails(__builtin_return_address(0))) {
		errno = ENOMEM;
		return NULL;
	}
	size_t n = strlen(s) + 1;
	char *p = __libc_malloc(n);
	return p ? memcpy(p, s, n) : NULL;
}

__attribute__((destructor)) static void report(void)
{
	setup();
	if (!fail_at)
		fprintf(stderr, "malloc_fault: %ld allocations from the library\n",
			atomic_load(&calls));
}
