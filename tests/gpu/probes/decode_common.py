"""What the decoder probes share: MIB MiB of bf16 N(0,0.02) coded by the
host codec (a shared library built from src/engine/codec.c), its image
pinned on the host and on the GPU, its pieces (16 MiB by default: the engine's
before run72), and the
decoder loaded from PTX and launched through the driver."""
import ctypes as C
import torch

SLOT = 16 << 20   # the engine's FT_OFF_SLOT_BYTES before run72 (now 64 MiB)
VALS = 32768      # FT_Z_VALS
CHUNK = 65536     # FT_Z_CHUNK
cu = C.CDLL("libcuda.so.1")


class Z(C.Structure):  # struct ft_z_image
    _fields_ = [("data", C.c_void_p), ("bytes", C.c_size_t), ("raw_bytes", C.c_size_t),
                ("desc", C.POINTER(C.c_uint64)), ("nchunks", C.c_uint32), ("coded", C.c_uint32)]


class Store:
    """w (the words on the GPU), raw_pin (pinned), z, nvals, n (chunks),
    desc, off (each chunk's image offset), img_h (pinned), desc_d."""

    def __init__(self, libftz, mib):
        torch.zeros(1, device="cuda")
        ftz = C.CDLL(libftz)
        g = torch.Generator(device="cuda").manual_seed(0)
        self.w = (torch.randn(mib << 19, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
        self.raw_pin = self.w.cpu().pin_memory()
        self.z = z = Z()
        assert ftz.ft_z_encode(C.c_void_p(self.raw_pin.data_ptr()),
                               C.c_size_t(self.raw_pin.numel() * 2), 0, C.byref(z)) == 0
        self.nvals, self.n = self.raw_pin.numel(), z.nchunks
        self.desc = [z.desc[i] for i in range(self.n + 1)]
        self.off = [d & ((1 << 40) - 1) for d in self.desc]
        self.img_h = torch.empty(z.bytes, dtype=torch.uint8).pin_memory()
        C.memmove(self.img_h.data_ptr(), z.data, z.bytes)
        self.desc_d = torch.tensor([d - (1 << 64) if d >= 1 << 63 else d for d in self.desc],
                                   dtype=torch.int64).cuda()
        self.ratio = z.raw_bytes / z.bytes

    def pieces(self, a0, b0, slot=SLOT):
        """Chunks [a0, b0) in the engine's pieces: [(a, b)], each's image
        at most slot bytes (one chunk at least)."""
        out, a, off = [], a0, self.off
        while a < b0:
            b = a + 1
            while b < b0 and off[b + 1] - off[a] <= slot:
                b += 1
            out.append((a, b))
            a = b
        return out


def ck(r, what):
    if r:
        raise RuntimeError(f"{what}: CUresult {r}")


def load(path):
    """ft_z_decode of the PTX at path."""
    mod, fn = C.c_void_p(), C.c_void_p()
    ck(cu.cuModuleLoadData(C.byref(mod), open(path, "rb").read() + b"\0"), "cuModuleLoadData " + path)
    ck(cu.cuModuleGetFunction(C.byref(fn), mod, b"ft_z_decode"), "cuModuleGetFunction")
    return fn


def launch(fn, src, bias, desc, dst, nvals, nchunks, stream):
    """The decoder's launch as the engine makes it (gpu.c): a block per chunk."""
    args = [C.c_uint64(src), C.c_uint64(bias), C.c_uint64(desc), C.c_uint64(dst),
            C.c_uint64(nvals), C.c_uint32(nchunks)]
    p = (C.c_void_p * 6)(*[C.cast(C.pointer(x), C.c_void_p) for x in args])
    ck(cu.cuLaunchKernel(fn, nchunks, 1, 1, 256, 1, 1, 0, C.c_void_p(stream.cuda_stream), p, None),
       "cuLaunchKernel")


class Ring:
    """The engine's staging slots (nslot of slot bytes): a piece's image is
    copied into the next slot on the copy stream (once the decode of the
    piece before in that slot is done), then decoded from it on the
    decode stream."""

    def __init__(self, st, nslot=2, slot=SLOT):
        self.st, self.nslot = st, nslot
        self.slots = [torch.empty(slot, dtype=torch.uint8, device="cuda") for _ in range(nslot)]
        self.reset()

    def reset(self):
        self.full = [torch.cuda.Event() for _ in range(self.nslot)]
        self.freed = [torch.cuda.Event() for _ in range(self.nslot)]
        self.used, self.s = [False] * self.nslot, 0

    def load(self, pieces, cs, ds, decode):
        """Each piece (a, b) of pieces staged, then decode(slot, bias, a, b)
        queued on ds."""
        off = self.st.off
        for (a, b) in pieces:
            s = self.s
            if self.used[s]:
                cs.wait_event(self.freed[s])
            span = off[b] - off[a]
            with torch.cuda.stream(cs):
                self.slots[s][:span].copy_(self.st.img_h[off[a]:off[a] + span], non_blocking=True)
            self.full[s].record(cs)
            ds.wait_event(self.full[s])
            decode(self.slots[s].data_ptr(), off[a], a, b)
            self.freed[s].record(ds)
            self.used[s] = True
            self.s = (s + 1) % self.nslot
