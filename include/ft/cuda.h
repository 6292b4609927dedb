/*
 * The one place that includes the CUDA driver headers.  cuda.h (13.0) maps
 * unversioned names to their newest ABI with macros (cuGetProcAddress ->
 * cuGetProcAddress_v2, ...); libflextensor always names the exact ELF symbol,
 * so the one macro that collides with a symbol we define is removed here.
 */
#ifndef FT_CUDA_H
#define FT_CUDA_H

#include <cuda.h>
#include <cudaTypedefs.h>

#undef cuGetProcAddress

#endif
