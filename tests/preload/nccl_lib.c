/* Stands in for libnccl (built as libnccl-stand-in.so): allocates device
 * memory and asks for a legacy IPC handle to it, as NCCL does for the
 * buffers it shares with its peers (see nccl_alloc.c). */
#include <cuda.h>

CUresult nccl_stand_in_alloc(CUdeviceptr *p, size_t n, CUipcMemHandle *h)
{
	CUresult rc = cuMemAlloc_v2(p, n);
	return rc ? rc : cuIpcGetMemHandle(h, *p);
}
