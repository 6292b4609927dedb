/*
 * fork: the child starts with an empty registry (the parent's device memory
 * is not the child's), keeps observing its own calls, and never repeats the
 * parent's buffered trace records.
 */
#include <cjson/cJSON.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../fake/fake.h"

static int launch_add(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c)
{
	int n = 4;
	void *p[] = { &a, &b, &c, &n };
	return cuLaunchKernel(fake_function("vec_add"), 1, 1, 1, 1, 1, 1, 0, NULL, p, NULL);
}

int main(void)
{
	const char *path = getenv("FT_TRACE");
	if (!path)
		return 1;
	unlink(path);
	CUdeviceptr A, B;
	cuInit(0);
	cuMemAlloc_v2(&A, 64);
	pid_t pid = fork();
	if (pid == 0) {
		cuMemAlloc_v2(&B, 64);
		launch_add(A, B, B);
		/* _exit skips the library's exit flush: flush by hand. */
		int (*cflush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ft_flush_trace");
		_exit(cflush && cflush() == 0 ? 0 : 3);
	}
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "FAIL: child exited with status %d\n", st);
		return 1;
	}
	launch_add(A, A, A);
	int (*flush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ft_flush_trace");
	flush();

	(void)B;
	FILE *f = fopen(path, "r");
	char line[8192];
	int parent_allocs = 0, child_allocs = 0, child_launch_refs = -1, failures = 0;
	while (f && fgets(line, sizeof(line), f)) {
		cJSON *r = cJSON_Parse(line);
		const char *ev = cJSON_GetObjectItem(r, "ev")->valuestring;
		int is_child = cJSON_GetObjectItem(r, "pid")->valueint == pid;
		if (!strcmp(ev, "alloc"))
			*(is_child ? &child_allocs : &parent_allocs) += 1;
		if (!strcmp(ev, "launch") && is_child)
			child_launch_refs = cJSON_GetArraySize(cJSON_GetObjectItem(r, "refs"));
		cJSON_Delete(r);
	}
	if (f)
		fclose(f);
	if (parent_allocs != 1 || child_allocs != 1) {
		fprintf(stderr, "FAIL: allocs parent %d child %d, expected 1 and 1\n",
			parent_allocs, child_allocs);
		failures++;
	}
	if (child_launch_refs != 1) {
		fprintf(stderr, "FAIL: child launch refs %d, expected 1 (B only)\n",
			child_launch_refs);
		failures++;
	}
	printf("fork: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
