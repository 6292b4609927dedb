/*
 * The codec's kernels (src/engine/codec_kernel.cu) run on the host, for a
 * check of a kernel change where there is no GPU: the file itself is
 * compiled as C++, each CUDA thread an OS thread, one block of 256 at a
 * time, __shared__ variables function statics (shared by the block's
 * threads), barriers for __syncthreads and the warp intrinsics.  For every
 * class of data (tests/common/codec_data.h) and a few sizes, the decoder
 * decodes the host encoder's image bit for bit (staged in pieces at an
 * offset, as the engine stages them) and the GPU encoder's two passes make
 * the host's image byte for byte.  Not the GPU (no memory model, no real
 * warps, no timing): tests/gpu/codec.c is the test; this catches logic
 * errors before it runs.  Meson test codec_emulate, in the unit suite
 * (about 40 s on two CPUs); by hand:
 *
 *   g++ -std=c++20 -O1 -w -Iinclude -c tests/gpu/codec_emulate.cc -o /tmp/emu.o &&
 *   gcc -O2 -Iinclude -c src/engine/codec.c -o /tmp/codec.o &&
 *   g++ /tmp/emu.o /tmp/codec.o -pthread -o /tmp/emu && /tmp/emu
 */
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
static uint2 make_uint2(unsigned a, unsigned b) { return { a, b }; }
static uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return { a, b, c, d }; }
template <class T> static T __ldg(const T *p) { return *p; }
static unsigned __byte_perm(unsigned x, unsigned, unsigned) { return __builtin_bswap32(x); }
static unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static int __popc(unsigned x) { return __builtin_popcount(x); }

struct dim { unsigned x; };
static thread_local dim threadIdx, blockIdx;
static const dim blockDim = { 256 };
static std::barrier<> *blk;
static std::barrier<> *wbar[8];

static void __syncthreads() { blk->arrive_and_wait(); }
static int __syncthreads_count(int p)
{
	static std::atomic<int> c;
	c += p != 0;
	blk->arrive_and_wait();
	int r = c;
	blk->arrive_and_wait();
	if (threadIdx.x == 0)
		c = 0;
	blk->arrive_and_wait();
	return r;
}
template <class T> struct slots { static T s[8][32]; };
template <class T> T slots<T>::s[8][32];
template <class T> static T xchg(T v, unsigned from)
{
	unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
	slots<T>::s[w][l] = v;
	wbar[w]->arrive_and_wait();
	T r = slots<T>::s[w][from];
	wbar[w]->arrive_and_wait();
	return r;
}
template <class T> static T __shfl_up_sync(unsigned, T v, int o)
{
	unsigned l = threadIdx.x % 32;
	return xchg(v, l >= (unsigned)o ? l - o : l);
}
template <class T> static T __shfl_xor_sync(unsigned, T v, int o)
{
	return xchg(v, (threadIdx.x % 32) ^ (unsigned)o);
}
static unsigned __match_any_sync(unsigned, unsigned v)
{
	unsigned m = 0;
	for (unsigned k = 0; k < 32; k++)
		m |= (xchg(v, k) == v) << k;
	return m;
}
static void __syncwarp() { wbar[threadIdx.x / 32]->arrive_and_wait(); }

#define ft_z_analyse k_analyse
#define ft_z_code k_code
#define ft_z_decode k_decode
#include "../../src/engine/codec_kernel.cu"
#undef ft_z_analyse
#undef ft_z_code
#undef ft_z_decode

extern "C" {
#include "ft/codec.h"
}
#include "../common/codec_data.h"

template <class F> static void grid(unsigned blocks, F f)
{
	for (unsigned b = 0; b < blocks; b++) {
		std::barrier<> bb(256);
		blk = &bb;
		for (int w = 0; w < 8; w++)
			wbar[w] = new std::barrier<>(32);
		std::vector<std::thread> th;
		for (unsigned t = 0; t < 256; t++)
			th.emplace_back([=] {
				threadIdx.x = t;
				blockIdx.x = b;
				f();
			});
		for (auto &x : th)
			x.join();
		for (int w = 0; w < 8; w++)
			delete wbar[w];
	}
}

/* (Threads that return early, as ft_z_analyse's past its first warp, only
 * leave barriers that no thread waits at again.) */

static int check(int cls, size_t nvals)
{
	std::vector<uint16_t> v(nvals), out(nvals, 0xa5a5);
	codec_fill((enum codec_class)cls, v.data(), nvals);
	struct ft_z_image z;
	if (ft_z_encode(v.data(), nvals * 2, 1, &z))
		return 1;
	int bad = 0;
	// decode: staged in pieces of at most 3 chunks' image bytes, at a bias
	for (uint32_t a = 0, b; a < z.nchunks; a = b) {
		b = ft_z_piece_end(&z, a, z.nchunks, 3 * 65536);
		size_t span = ft_z_span(&z, a, b);
		unsigned char *slot = (unsigned char *)aligned_alloc(16, (span + 15) & ~15ul);
		memcpy(slot, z.data + FT_Z_OFF(z.desc[a]), span);
		const unsigned char *src = slot;
		unsigned long long bias = FT_Z_OFF(z.desc[a]);
		const unsigned long long *desc = (const unsigned long long *)z.desc + a;
		unsigned short *dst = out.data() + (size_t)a * FT_Z_VALS;
		unsigned long long nv = nvals - (size_t)a * FT_Z_VALS;
		unsigned nc = b - a;
		grid(nc, [=] { k_decode(src, bias, desc, dst, nv, nc); });
		free(slot);
	}
	if (memcmp(v.data(), out.data(), nvals * 2)) {
		for (size_t i = 0; i < nvals; i++)
			if (v[i] != out[i]) {
				printf("  decode mismatch at %zu: %04x vs %04x\n", i, v[i], out[i]);
				break;
			}
		bad = 1;
	}
	// encode: analyse, layout, code into one image
	uint32_t n = z.nchunks;
	std::vector<struct ft_z_meta> m(n);
	unsigned *mp = (unsigned *)m.data();
	const unsigned short *src = v.data();
	unsigned long long nv = nvals;
	grid(n, [=] { k_analyse(src, mp, nv, n); });
	struct ft_z_image g;
	ft_z_layout(&g, nvals * 2, m.data());
	std::vector<unsigned char> img(g.bytes + 16, 0x5a);
	unsigned char *ip = img.data();
	const unsigned long long *gd = (const unsigned long long *)g.desc;
	grid(n, [=] { k_code(src, mp, gd, 0, ip, nv, n); });
	if (g.bytes != z.bytes || memcmp(g.desc, z.desc, (n + 1) * 8) || memcmp(ip, z.data, z.bytes)) {
		printf("  encode mismatch: %zu vs %zu bytes, desc %d\n", g.bytes, z.bytes,
		       memcmp(g.desc, z.desc, (n + 1) * 8) != 0);
		for (size_t i = 0; i < z.bytes && g.bytes == z.bytes; i++)
			if (ip[i] != z.data[i]) {
				printf("  first byte %zu\n", i);
				break;
			}
		bad = 1;
	}
	int modes[4] = { 0 };
	for (uint32_t c = 0; c < n; c++)
		modes[FT_Z_MODE(z.desc[c])]++;
	printf("%-34s %8zu words  ratio %.4f  modes %d/%d/%d/%d  %s\n", codec_class_name[cls], nvals,
	       (double)z.raw_bytes / z.bytes, modes[0], modes[1], modes[2], modes[3], bad ? "BAD" : "ok");
	ft_z_free(&g);
	ft_z_free(&z);
	return bad;
}

int main(void)
{
	/* (16416 words: two whole rounds of mode 3's decoder, then one of 32
	 * words, where a symbol carried over from the round before lands and
	 * most threads have none) */
	size_t sizes[] = { 5u * FT_Z_VALS + 4096 + 32, 32, 2080, 4128, 16416 };
	int bad = 0;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int c = 0; c < CD_NCLASSES; c++)
			bad |= check(c, sizes[k]);
	printf(bad ? "FAILED\n" : "all ok\n");
	return bad;
}
