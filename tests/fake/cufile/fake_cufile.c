/*
 * A libcufile.so.0 stand-in for the NVMe tier's FT_NVME_TRANSFER_MODE=cufile
 * (src/engine/gds.c) against the fake driver, whose device pointers are
 * host addresses: cuFileRead reads the file into them.  It lies in a
 * folder of its own, so that a test puts it on the library path or not.
 * FAKE_CUFILE=no-nvfs: the driver opens without nvidia-fs (its version
 * 0.0, cuFile's compatibility mode); no-open: the driver does not open;
 * no-register: buffers are not registered; read-fails: every read fails;
 * callback: reads copy through the driver's cuMemcpyHtoD_v2 found with
 * dlsym (the preloaded library's hook, as cuFile's own driver calls would
 * reach it).  Every read must be of a registered handle, whole 4096-byte
 * blocks at aligned offsets, as GPUDirect Storage's are.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

struct err {
	int err, cu_err;
};
struct descr {
	int type;
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
};

static int opened;
static struct err ok = { 0, 0 };

static int mode(const char *m)
{
	const char *e = getenv("FAKE_CUFILE");
	return e && !strcmp(e, m);
}

API struct err cuFileDriverOpen(void)
{
	if (mode("no-open"))
		return (struct err){ 5001, 0 }; /* CU_FILE_DRIVER_NOT_INITIALIZED */
	opened = 1;
	return ok;
}

API struct err cuFileDriverClose_v2(void)
{
	opened = 0;
	return ok;
}

API struct err cuFileDriverGetProperties(unsigned int *props)
{
	if (!opened)
		return (struct err){ 5001, 0 };
	props[0] = mode("no-nvfs") ? 0 : 2; /* nvfs.major_version */
	props[1] = mode("no-nvfs") ? 0 : 17;
	return ok;
}

API struct err cuFileHandleRegister(void **fh, struct descr *d)
{
	if (!opened || d->type != 1 || d->handle.fd < 0)
		return (struct err){ 5011, 0 }; /* CU_FILE_INVALID_FILE_TYPE */
	int *h = malloc(sizeof(*h));
	if (!h)
		return (struct err){ 5010, 0 };
	*h = d->handle.fd;
	*fh = h;
	return ok;
}

API void cuFileHandleDeregister(void *fh)
{
	free(fh);
}

API struct err cuFileBufRegister(const void *p, size_t n, int flags)
{
	(void)flags;
	return p && n && !mode("no-register") ? ok : (struct err){ 5004, 0 };
}

API struct err cuFileBufDeregister(const void *p)
{
	(void)p;
	return ok;
}

/* At most 64 MiB a call, as cuFile's reads may be short. */
API ssize_t cuFileRead(void *fh, void *p, size_t n, off_t file_off, off_t buf_off)
{
	if (!opened || !fh || (file_off | (off_t)n) % 4096 || mode("read-fails"))
		return -5022; /* -CU_FILE_INVALID_VALUE */
	if (n > (64 << 20))
		n = 64 << 20;
	void *b;
	if (posix_memalign(&b, 4096, n))
		return -1;
	ssize_t k = pread(*(int *)fh, b, n, file_off);
	typedef int (*htod)(unsigned long long, const void *, size_t);
	htod copy = mode("callback") ? (htod)dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2") : NULL;
	if (k > 0 && copy)
		copy((unsigned long long)(uintptr_t)((char *)p + buf_off), b, (size_t)k);
	else if (k > 0)
		memcpy((char *)p + buf_off, b, (size_t)k);
	free(b);
	return k;
}
