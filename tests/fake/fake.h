/*
 * Test-only API of the fake libcuda.so.1 (fake_cuda.c).  Device memory is
 * host memory, kernels are host functions, graphs replay recorded launches:
 * enough for the preload tests to run the library's whole path on a machine
 * without a GPU and to check that results pass through unchanged.
 */
#ifndef FT_FAKE_H
#define FT_FAKE_H

#include <cuda.h>

/* Kernels the fake knows: "vec_add" (float *a, const float *b, float *c, int n):
 * c = a + b; "scale" (struct { float *x; float *y; int n; float s; }):
 * y = s * x, the struct passed by value; "tma_sum" (CUtensorMap m, float *out,
 * int n): out[0] = sum of n floats at the map's global address. */
CUfunction fake_function(const char *name);
/* The i-th of 4096 functions with touch4096's layout (trace replays: one
 * per recorded kernel). */
CUfunction fake_replay_function(unsigned i);
CUkernel fake_kernel(const char *name);
/* The device cuCtxGetDevice reports from now on (0 at start). */
void fake_set_device(int d);
/* Launches the fake has executed (all launch entry points together). */
unsigned long fake_launch_count(void);

struct fake_scale_args {
	float *x;
	float *y;
	int n;
	float s;
};

#endif
