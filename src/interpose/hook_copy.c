/*
 * Copy and memset hooks: destination ranges (and device sources), so later
 * stages can tell weights (written once, at load) from buffers written every
 * pass.  The shapes repeat across the _ptds/_ptsz twins, hence the macros.
 */
#include "ft/gate.h"
#include "hooks.h"

#define OBSERVING() (ft_lib_ensure(), ft_observing())
#define P(x) ((uint64_t)(uintptr_t)(x))

/* The launch gate (ft/gate.h) covers the guard and the real call, so that
 * the plan is not applied between them (nor under a copy into a weight);
 * observation, which may take learning's lock, comes after.  gate_in: 1
 * when observing (and then inside). */
static int gate_in(void)
{
	int obs = OBSERVING();
	if (obs)
		ft_gate_enter();
	return obs;
}

static void gate_out(int obs)
{
	if (obs)
		ft_gate_leave();
}

/* With weights offloaded, a copy or memset that touches them is settled
 * first (include/ft/offload.h, ft_off_copy).  Host addresses never meet
 * them (UVA). */
#define GUARD(stream, dst, dbytes, src, sbytes)                                \
	do {                                                                   \
		if (!ft_passthrough && ft_off_active(ft_g.off))                \
			ft_off_copy(ft_g.off, stream, dst, dbytes, src, sbytes); \
	} while (0)

#define COPY_BODY(sym, stream, ...)                                            \
	{                                                                      \
		int obs = gate_in();                                           \
		GUARD(stream, P(dst), n, P(src), n);                           \
		CUresult rc = FT_CALL(sym, __VA_ARGS__);                        \
		gate_out(obs);                                                 \
		if (rc == CUDA_SUCCESS && obs)                                 \
			ft_obs_copy(#sym, P(dst), P(src), n, stream);          \
		return rc;                                                     \
	}

#define COPY_SYNC(sym, DT, ST) \
	CUresult sym(DT dst, ST src, size_t n) COPY_BODY(sym, NULL, dst, src, n)
#define COPY_ASYNC(sym, DT, ST) \
	CUresult sym(DT dst, ST src, size_t n, CUstream s) COPY_BODY(sym, s, dst, src, n, s)

COPY_SYNC(cuMemcpy, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpy_ptds, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyAsync, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpyHtoD_v2, CUdeviceptr, const void *)
COPY_SYNC(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void *)
COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *)
COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void *)
COPY_SYNC(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoH_v2, void *, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoH_v2_ptds, void *, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, void *, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, void *, CUdeviceptr)

#define COPY_PEER(sym)                                                         \
	CUresult sym(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, \
		     size_t n) COPY_BODY(sym, NULL, dst, dc, src, sc, n)
#define COPY_PEER_ASYNC(sym)                                                   \
	CUresult sym(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, \
		     size_t n, CUstream s) COPY_BODY(sym, s, dst, dc, src, sc, n, s)
COPY_PEER(cuMemcpyPeer)
COPY_PEER(cuMemcpyPeer_ptds)
COPY_PEER_ASYNC(cuMemcpyPeerAsync)
COPY_PEER_ASYNC(cuMemcpyPeerAsync_ptsz)

/* 2D copies: the range from the first to the last byte touched; api NULL:
 * the guard before the copy, else the observation after it. */
static void copy2d(const char *api, const CUDA_MEMCPY2D *c, CUstream s)
{
	uint64_t dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? P(c->dstHost)
							      : c->dstDevice;
	uint64_t src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? P(c->srcHost)
							      : c->srcDevice;
	dst += c->dstY * c->dstPitch + c->dstXInBytes;
	src += c->srcY * c->srcPitch + c->srcXInBytes;
	uint64_t bytes = c->Height ? (c->Height - 1) * c->dstPitch + c->WidthInBytes : 0;
	uint64_t sbytes = c->Height ? (c->Height - 1) * c->srcPitch + c->WidthInBytes : 0;
	if (!api)
		GUARD(s, dst, bytes, src, sbytes);
	else
		ft_obs_copy(api, dst, src, bytes, s);
}

#define COPY_2D(sym)                                                           \
	CUresult sym(const CUDA_MEMCPY2D *c)                                   \
	{                                                                      \
		int obs = gate_in();                                           \
		if (c)                                                         \
			copy2d(NULL, c, NULL);                                 \
		CUresult rc = FT_CALL(sym, c);                                 \
		gate_out(obs);                                                 \
		if (rc == CUDA_SUCCESS && c && obs)                            \
			copy2d(#sym, c, NULL);                                 \
		return rc;                                                     \
	}
#define COPY_2D_ASYNC(sym)                                                     \
	CUresult sym(const CUDA_MEMCPY2D *c, CUstream s)                       \
	{                                                                      \
		int obs = gate_in();                                           \
		if (c)                                                         \
			copy2d(NULL, c, s);                                    \
		CUresult rc = FT_CALL(sym, c, s);                              \
		gate_out(obs);                                                 \
		if (rc == CUDA_SUCCESS && c && obs)                            \
			copy2d(#sym, c, s);                                    \
		return rc;                                                     \
	}
COPY_2D(cuMemcpy2D_v2)
COPY_2D(cuMemcpy2D_v2_ptds)
COPY_2D(cuMemcpy2DUnaligned_v2)
COPY_2D(cuMemcpy2DUnaligned_v2_ptds)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2_ptsz)

#define MEMSET_BODY(sym, esize, stream, ...)                                   \
	{                                                                      \
		int obs = gate_in();                                           \
		GUARD(stream, dst, (uint64_t)n * (esize), 0, 0);               \
		CUresult rc = FT_CALL(sym, __VA_ARGS__);                        \
		gate_out(obs);                                                 \
		if (rc == CUDA_SUCCESS && obs)                                 \
			ft_obs_memset(#sym, dst, (uint64_t)n * (esize), stream); \
		return rc;                                                     \
	}
#define MEMSET_SYNC(sym, T, es) \
	CUresult sym(CUdeviceptr dst, T v, size_t n) MEMSET_BODY(sym, es, NULL, dst, v, n)
#define MEMSET_ASYNC(sym, T, es)                                               \
	CUresult sym(CUdeviceptr dst, T v, size_t n, CUstream s)               \
		MEMSET_BODY(sym, es, s, dst, v, n, s)

MEMSET_SYNC(cuMemsetD8_v2, unsigned char, 1)
MEMSET_SYNC(cuMemsetD8_v2_ptds, unsigned char, 1)
MEMSET_SYNC(cuMemsetD16_v2, unsigned short, 2)
MEMSET_SYNC(cuMemsetD16_v2_ptds, unsigned short, 2)
MEMSET_SYNC(cuMemsetD32_v2, unsigned int, 4)
MEMSET_SYNC(cuMemsetD32_v2_ptds, unsigned int, 4)
MEMSET_ASYNC(cuMemsetD8Async, unsigned char, 1)
MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1)
MEMSET_ASYNC(cuMemsetD16Async, unsigned short, 2)
MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2)
MEMSET_ASYNC(cuMemsetD32Async, unsigned int, 4)
MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4)

/* 2D memsets: pitch * (height - 1) + width elements' bytes. */
#define MEMSET_2D_BODY(sym, es, stream, ...)                                   \
	{                                                                      \
		int obs = gate_in();                                           \
		GUARD(stream, dst, h ? (h - 1) * pitch + w * (es) : 0, 0, 0);  \
		CUresult rc = FT_CALL(sym, __VA_ARGS__);                        \
		gate_out(obs);                                                 \
		if (rc == CUDA_SUCCESS && obs)                                 \
			ft_obs_memset(#sym, dst,                               \
				      h ? (h - 1) * pitch + w * (es) : 0, stream); \
		return rc;                                                     \
	}
#define MEMSET_2D_SYNC(sym, T, es)                                             \
	CUresult sym(CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h)   \
		MEMSET_2D_BODY(sym, es, NULL, dst, pitch, v, w, h)
#define MEMSET_2D_ASYNC(sym, T, es)                                            \
	CUresult sym(CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h,   \
		     CUstream s) MEMSET_2D_BODY(sym, es, s, dst, pitch, v, w, h, s)

MEMSET_2D_SYNC(cuMemsetD2D8_v2, unsigned char, 1)
MEMSET_2D_SYNC(cuMemsetD2D8_v2_ptds, unsigned char, 1)
MEMSET_2D_SYNC(cuMemsetD2D16_v2, unsigned short, 2)
MEMSET_2D_SYNC(cuMemsetD2D16_v2_ptds, unsigned short, 2)
MEMSET_2D_SYNC(cuMemsetD2D32_v2, unsigned int, 4)
MEMSET_2D_SYNC(cuMemsetD2D32_v2_ptds, unsigned int, 4)
MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1)
MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1)
MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2)
MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2)
MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4)
MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4)
