/*
 * A fake CUDA runtime (libcudart.so.13) that reaches the driver exactly as
 * the real one does since 12.0: dlopen("libcuda.so.1"),
 * dlsym(h, "cuGetProcAddress_v2"), then a self-lookup of cuGetProcAddress
 * through that pointer, and every other driver function through the pointer
 * the self-lookup returned, asked per symbol with an ABI version.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cudaTypedefs.h>
#include <driver_types.h>

#define API __attribute__((visibility("default")))

static PFN_cuGetProcAddress_v12000 getproc;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	PFN_cuGetProcAddress_v12000 boot =
		(PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
	void *self = NULL;
	if (boot && boot("cuGetProcAddress", &self, 12000, 0, NULL) == CUDA_SUCCESS)
		getproc = (PFN_cuGetProcAddress_v12000)self;
}

static void *resolve(const char *sym, int ver, unsigned long long flags)
{
	void *p = NULL;
	pthread_once(&once, init);
	if (getproc)
		getproc(sym, &p, ver, flags, NULL);
	return p;
}

/* Pointer the runtime itself uses for a symbol (tests compare it with what
 * cudaGetDriverEntryPoint hands out). */
API void *fake_rt_driver_fn(const char *sym, int ver, int per_thread)
{
	return resolve(sym, ver,
		       per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
				  : CU_GET_PROC_ADDRESS_LEGACY_STREAM);
}

static unsigned long long to_driver_flags(unsigned long long f)
{
	if (f == cudaEnablePerThreadDefaultStream)
		return CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	if (f == cudaEnableLegacyStream)
		return CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	return CU_GET_PROC_ADDRESS_DEFAULT;
}


API int cudaGetDriverEntryPointByVersion(const char *sym, void **fp, unsigned int ver,
					 unsigned long long flags,
					 enum cudaDriverEntryPointQueryResult *st)
{
	*fp = resolve(sym, (int)ver, to_driver_flags(flags));
	if (st)
		*st = *fp ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
	return 0;
}

API int cudaGetDriverEntryPoint(const char *sym, void **fp, unsigned long long flags,
				enum cudaDriverEntryPointQueryResult *st)
{
	return cudaGetDriverEntryPointByVersion(sym, fp, 13000, flags, st);
}

/* cudaMalloc as the runtime does it: the driver's cuMemAlloc at the 12.0 ABI. */
API int cudaMalloc(void **p, size_t n)
{
	PFN_cuMemAlloc_v3020 alloc = (PFN_cuMemAlloc_v3020)resolve("cuMemAlloc", 12000, 0);
	CUdeviceptr d = 0;
	int rc = alloc ? (int)alloc(&d, n) : 1;
	*p = (void *)(uintptr_t)d;
	return rc;
}
