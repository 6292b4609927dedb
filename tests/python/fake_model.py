"""A model with the shape of a decoder, run on the fake libcuda.so.1
(tests/fake: device memory is host memory, kernels are host functions)
through ctypes, with the PyTorch module methods offload() uses
(named_parameters, named_buffers, parameters, register_forward_hook).

Every weight is its own 4 MiB allocation (the library serves allocations of
2 MiB and up through VMM, so they can be offloaded); a forward adds the
embedding, each layer's two weights and the head to the input, and returns
the output's bytes."""
import ctypes

N = 1 << 20          # floats a tensor: 4 MiB
LAYERS = 6

cuda = ctypes.CDLL("libcuda.so.1")
cuda.fake_function.restype = ctypes.c_void_p
cuda.fake_function.argtypes = [ctypes.c_char_p]
for fn in ("cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuLaunchKernel",
           "cuInit", "cuCtxSynchronize"):
    getattr(cuda, fn).restype = ctypes.c_int


def check(rc, what):
    if rc:
        raise RuntimeError("%s failed: CUresult %d" % (what, rc))


class Tensor:
    """A device allocation as PyTorch shows one: data_ptr, nbytes, is_cuda."""

    def __init__(self, nbytes, value=None):
        self.ptr = ctypes.c_uint64()
        check(cuda.cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        self.nbytes = nbytes
        self.is_cuda = True
        if value is not None:
            host = (ctypes.c_float * (nbytes // 4))(*([value] * (nbytes // 4)))
            check(cuda.cuMemcpyHtoD_v2(self.ptr, host, ctypes.c_size_t(nbytes)), "cuMemcpyHtoD")

    def data_ptr(self):
        return self.ptr.value


class FakeModel:
    def __init__(self, stray=False):
        check(cuda.cuInit(0), "cuInit")
        self.add = ctypes.c_void_p(cuda.fake_function(b"vec_add"))
        self.touch = ctypes.c_void_p(cuda.fake_function(b"touch4"))
        # stray: in the first forward, right after the embedding, a kernel
        # that reads nothing carries layer 4's first weight in its
        # parameters (a stale pointer, as cuBLAS kernels carry on the H200)
        self.stray = stray
        self.forwards = 0
        self.params = [("model.embed_tokens.weight", Tensor(4 * N, 1.0))]
        for l in range(LAYERS):
            for k, part in enumerate(("self_attn.qkv_proj", "mlp.down_proj")):
                self.params.append(("model.layers.%d.%s.weight" % (l, part),
                                    Tensor(4 * N, 0.25 * (2 * l + k))))
        self.params.append(("lm_head.weight", Tensor(4 * N, 2.0)))
        self.buffers = [("model.rotary_emb.inv_freq", Tensor(4096, 0.5))]
        self.hooks = []
        self.inp = self.h = self.out = None

    def named_parameters(self):
        return iter(self.params)

    def named_buffers(self):
        return iter(self.buffers)

    def parameters(self):
        return (t for _, t in self.params)

    def register_forward_hook(self, fn):
        self.hooks.append(fn)

    def _vec_add(self, a, b, c):
        n = ctypes.c_int(N)
        pa, pb, pc = (ctypes.c_uint64(x.data_ptr()) for x in (a, b, c))
        args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p)
                                       for x in (pa, pb, pc, n)])
        check(cuda.cuLaunchKernel(self.add, 1, 1, 1, 1, 1, 1, 0, None, args, None),
              "cuLaunchKernel")

    def forward(self, step):
        if self.inp is None:  # activations appear with the first forward
            self.inp = Tensor(4 * N, 0.0)
            self.h = Tensor(4 * N)
            self.out = Tensor(4 * N)
        host = (ctypes.c_float * N)(*([float(step)] * N))
        check(cuda.cuMemcpyHtoD_v2(self.inp.ptr, host, ctypes.c_size_t(4 * N)), "cuMemcpyHtoD")
        w = [t for _, t in self.params]
        self._vec_add(self.inp, w[0], self.h)
        if self.stray and self.forwards == 0:
            ptrs = [ctypes.c_uint64(w[9].data_ptr())] + [ctypes.c_uint64(0)] * 3
            args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p)
                                           for x in ptrs])
            check(cuda.cuLaunchKernel(self.touch, 1, 1, 1, 1, 1, 1, 0, None, args, None),
                  "cuLaunchKernel")
        self.forwards += 1
        for t in w[1:-1]:
            self._vec_add(self.h, t, self.h)
        self._vec_add(self.h, w[-1], self.out)
        res = ctypes.create_string_buffer(4 * N)
        check(cuda.cuMemcpyDtoH_v2(res, self.out.ptr, ctypes.c_size_t(4 * N)), "cuMemcpyDtoH")
        return res.raw

    def __call__(self, step):
        out = self.forward(step)
        for fn in self.hooks:
            fn(self, (step,), out)
        return out
