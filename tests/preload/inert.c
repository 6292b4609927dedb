/*
 * A process that never touches CUDA, run under LD_PRELOAD with FT_ENABLED=1,
 * FT_TRACE and even a misspelled FT_* variable: the library must stay inert:
 * no libcuda loaded, no trace file, no refusal, and dlsym answering as glibc
 * does (also RTLD_NEXT, also for cu* names that are not driver symbols).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int saw_libcuda;

static int each(struct dl_phdr_info *i, size_t n, void *ud)
{
	(void)n; (void)ud;
	if (strstr(i->dlpi_name, "libcuda"))
		saw_libcuda = 1;
	return 0;
}

int main(void)
{
	int failures = 0;
	const char *trace = getenv("FT_TRACE");
	if (trace)
		unlink(trace);
	if (dlsym(RTLD_DEFAULT, "printf") != (void *)printf) {
		fprintf(stderr, "FAIL: dlsym(printf) wrong\n");
		failures++;
	}
	if (dlsym(RTLD_DEFAULT, "cuNotAFunction") != NULL ||
	    dlsym(RTLD_NEXT, "curl_easy_init") != NULL) {
		fprintf(stderr, "FAIL: dlsym invented a symbol\n");
		failures++;
	}
	dl_iterate_phdr(each, NULL);
	if (saw_libcuda) {
		fprintf(stderr, "FAIL: libcuda was loaded in a process without CUDA\n");
		failures++;
	}
	if (trace && access(trace, F_OK) == 0) {
		fprintf(stderr, "FAIL: trace %s created without CUDA use\n", trace);
		failures++;
	}
	int (*observing)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ft_is_observing");
	if (!observing || observing()) {
		fprintf(stderr, "FAIL: library missing or observing without CUDA\n");
		failures++;
	}
	printf("inert: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
