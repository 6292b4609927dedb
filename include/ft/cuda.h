/*
 * The one place that includes the CUDA driver headers.  cuda.h (13.0) maps
 * unversioned names to their newest ABI with macros (cuGetProcAddress ->
 * cuGetProcAddress_v2, ...); libflextensor always names the exact ELF symbol,
 * so the macros that collide with symbols we define are removed here: the
 * older ABIs of cuGetProcAddress, cuGraphInstantiate and cuGraphExecUpdate
 * are still exported by the driver and still called (a program built with
 * CUDA 11 headers instantiates through cuGraphInstantiate_v2), and an
 * executable made where the library does not see it would not be paged.
 */
#ifndef FT_CUDA_H
#define FT_CUDA_H

#include <cuda.h>
#include <cudaTypedefs.h>

#undef cuGetProcAddress
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams

/* cudaTypedefs.h declares these two only for the driver's own build */
#ifndef __CUDA_API_VERSION_INTERNAL
typedef CUresult(CUDAAPI *PFN_cuGraphInstantiate_v10000)(CUgraphExec *phGraphExec, CUgraph hGraph,
							 CUgraphNode *phErrorNode, char *logBuffer,
							 size_t bufferSize);
typedef CUresult(CUDAAPI *PFN_cuGraphInstantiate_v11000)(CUgraphExec *phGraphExec, CUgraph hGraph,
							 CUgraphNode *phErrorNode, char *logBuffer,
							 size_t bufferSize);
#endif

#endif
