/* Route 1: the program binds the driver's symbols directly (-lcuda). */
#include <cuda.h>
#include <string.h>

#include "scenario.h"

#undef cuGetProcAddress
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
			     unsigned, unsigned, unsigned, CUstream, void **, void **);

int main(void)
{
	scenario_prepare();
	struct api a = {
		.init = cuInit, .alloc = cuMemAlloc_v2, .free = cuMemFree_v2,
		.alloc_async = cuMemAllocAsync, .free_async = cuMemFreeAsync,
		.host_alloc = cuMemHostAlloc, .reserve = cuMemAddressReserve,
		.create = cuMemCreate, .map = cuMemMap, .unmap = cuMemUnmap,
		.htod = cuMemcpyHtoD_v2, .dtoh = cuMemcpyDtoH_v2,
		.memset32 = cuMemsetD32_v2, .launch = cuLaunchKernel,
		.launch_ptsz = cuLaunchKernel_ptsz, .launch_ex = cuLaunchKernelEx,
		.launch_coop = cuLaunchCooperativeKernel,
		.encode_tiled = cuTensorMapEncodeTiled,
		.begin_capture = cuStreamBeginCapture_v2,
		.end_capture = cuStreamEndCapture,
		.instantiate = cuGraphInstantiateWithFlags, .graph_launch = cuGraphLaunch,
	};
	return run_scenario(&a, "direct") ? 1 : 0;
}
