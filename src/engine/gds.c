/*
 * cuFile, loaded at run time (see gds.h).  The few types the library
 * passes are declared here with cufile.h's layout: CUfileError_t is two
 * ints (the cuFile error, then a CUresult), CUfileDescr_t a handle type,
 * a union of a descriptor and a pointer, and the file system's operations,
 * CUfileDrvProps_t starts with nvidia-fs's version (0.0: the module is
 * not loaded, and cuFile reads through host memory in its compatibility
 * mode: no GPUDirect Storage, so the NVMe tier keeps its own reads).
 *
 * cuFile calls the driver itself: every call into it runs with
 * ft_passthrough raised, so that those calls pass the hooks straight
 * through.  Its driver is process-wide: where the program loaded libcufile
 * before us (kvikio, PyTorch's GDS), it is left open at the end; the
 * library is never unloaded (it may have started threads).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ft/passthrough.h"
#include "gds.h"

struct cufile_err {
	int err;                            /* CUfileOpError: 0 success */
	int cu_err;                         /* CUresult */
};

struct cufile_descr {
	int type;                           /* CU_FILE_HANDLE_TYPE_OPAQUE_FD: 1 */
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
};

struct ft_gds_fns {
	struct cufile_err (*open)(void);
	struct cufile_err (*close)(void);
	struct cufile_err (*props)(void *props);
	struct cufile_err (*handle)(void **fh, struct cufile_descr *d);
	void (*unhandle)(void *fh);
	struct cufile_err (*reg)(const void *p, size_t n, int flags);
	struct cufile_err (*unreg)(const void *p);
	ssize_t (*read)(void *fh, void *p, size_t n, off_t file_off, off_t buf_off);
};

static void *(*lookup)(void *, const char *);

static void *sym(void *lib, const char *name, int *missing)
{
	void *p = lookup(lib, name);
	*missing |= !p;
	return p;
}

static int fail(struct ft_gds *g, char *why, size_t len, const char *what, int code)
{
	if (code)
		snprintf(why, len, "%s (cuFile error %d)", what, code);
	else
		snprintf(why, len, "%s", what);
	ft_gds_close(g);
	return -1;
}

/* libcufile and its entry points: 0, or -1 with why. */
static int load(struct ft_gds *g, char *why, size_t len)
{
	static const char *names[] = { "libcufile.so.0", "libcufile.so" };
	for (int i = 0; i < 2 && !g->lib; i++) {
		g->lib = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
		g->shared = g->lib != NULL; /* the program's: its driver stays open */
		if (!g->lib)
			g->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	}
	if (!g->lib)
		return fail(g, why, len, "libcufile.so.0 cannot be loaded (GPUDirect Storage is not "
			    "installed, or not on the library path)", 0);
	struct ft_gds_fns *f = g->f = calloc(1, sizeof(*f));
	if (!f)
		return fail(g, why, len, "out of memory", 0);
	int missing = 0;
	*(void **)&f->open = sym(g->lib, "cuFileDriverOpen", &missing);
	*(void **)&f->props = sym(g->lib, "cuFileDriverGetProperties", &missing);
	*(void **)&f->handle = sym(g->lib, "cuFileHandleRegister", &missing);
	*(void **)&f->unhandle = sym(g->lib, "cuFileHandleDeregister", &missing);
	*(void **)&f->reg = sym(g->lib, "cuFileBufRegister", &missing);
	*(void **)&f->unreg = sym(g->lib, "cuFileBufDeregister", &missing);
	*(void **)&f->read = sym(g->lib, "cuFileRead", &missing);
	/* the header's cuFileDriverClose is the _v2 entry point */
	*(void **)&f->close = lookup(g->lib, "cuFileDriverClose_v2");
	if (!f->close)
		*(void **)&f->close = sym(g->lib, "cuFileDriverClose", &missing);
	return missing ? fail(g, why, len, "libcufile lacks cuFile's entry points", 0) : 0;
}

static int open_on(struct ft_gds *g, int fd, char *why, size_t len)
{
	struct ft_gds_fns *f = g->f;
	struct cufile_err e = f->open();
	if (e.err)
		return fail(g, why, len, "cuFile's driver does not open", e.err);
	g->opened = 1;
	unsigned int props[1024] = { 0 }; /* CUfileDrvProps_t, and room to spare */
	e = f->props(props);
	if (e.err)
		return fail(g, why, len, "cuFile's driver properties cannot be read", e.err);
	if (!props[0] && !props[1])
		return fail(g, why, len, "nvidia-fs is not loaded: cuFile would read through host "
			    "memory (its compatibility mode)", 0);
	struct cufile_descr d = { .type = 1, .handle.fd = fd };
	e = f->handle(&g->fh, &d);
	if (e.err) {
		g->fh = NULL;
		return fail(g, why, len, "cuFile refuses the file (a file system without GPUDirect "
			    "Storage?)", e.err);
	}
	return 0;
}

int ft_gds_open(struct ft_gds *g, int fd, void *(*find)(void *, const char *), char *why,
		size_t len)
{
	memset(g, 0, sizeof(*g));
	if (!(lookup = find))
		return fail(g, why, len, "no dlsym to find cuFile's entry points", 0);
	ft_passthrough++;
	int rc = load(g, why, len) ? -1 : open_on(g, fd, why, len);
	ft_passthrough--;
	return rc;
}

int ft_gds_register(struct ft_gds *g, CUdeviceptr p, size_t n)
{
	ft_passthrough++;
	int rc = g->f->reg((const void *)(uintptr_t)p, n, 0).err ? -1 : 0;
	ft_passthrough--;
	return rc;
}

void ft_gds_unregister(struct ft_gds *g, CUdeviceptr p)
{
	ft_passthrough++;
	g->f->unreg((const void *)(uintptr_t)p);
	ft_passthrough--;
}

int ft_gds_read(struct ft_gds *g, CUdeviceptr dst, size_t n, uint64_t off)
{
	int rc = 0;
	ft_passthrough++;
	for (size_t done = 0; done < n;) {
		ssize_t k = g->f->read(g->fh, (void *)(uintptr_t)dst, n - done, (off_t)(off + done),
				       (off_t)done);
		if (k == -1 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k < -1 || !k) /* a cuFile error, or the file's end */
				errno = EIO;
			rc = -1;
			break;
		}
		done += (size_t)k;
	}
	ft_passthrough--;
	return rc;
}

void ft_gds_close(struct ft_gds *g)
{
	ft_passthrough++;
	if (g->fh)
		g->f->unhandle(g->fh);
	if (g->opened && !g->shared)
		g->f->close();
	ft_passthrough--;
	/* (never unloaded: RTLD_NODELETE, or the program's) */
	free(g->f);
	memset(g, 0, sizeof(*g));
}
