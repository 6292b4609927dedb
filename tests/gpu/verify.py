#!/usr/bin/env python3
"""GPU check of FT_VERIFY and of readers the executor cannot page (issue 4),
run under the preload with FT_VERIFY=1 and every trap offloaded:

  verify.py writer   in INFERENCE, a kernel writes to an offloaded weight
                     (add_ on a layer's qkv weight): the library must report
                     the trap, the weight's bytes and the kernel
  verify.py hidden   a CUDA graph of one decode step (it reads every weight)
                     captured before the plan is replayed after it: the plan
                     pages it (a substitute, or at its launch boundary), no
                     replay is a hidden reader, and the replay reads no
                     poison (NaN)
  verify.py planted  the same graph with one more kernel at its end that
                     copies a weight read through an address in device
                     memory (a reader no parameter shows): its copy must be
                     NaN after the plan (the substitute poisons the blocks a
                     node is not seen to read), the weight before it

Exits 0 when the library said so (its counters, checked here; the messages
are checked by verify.sh), 1 otherwise.  Manual decoder, random weights.
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from discovery import build  # noqa: E402
from models import capture_graph  # noqa: E402

lib = ctypes.CDLL(None)

# spy(table, out, n): out[i] = (*table)[i] for n 16-bit words.  Loaded and
# launched through the driver API (the preloaded library sees both), so the
# library knows its parameters: the table and out, not the weight.
SPY_PTX = b"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry spy(.param .u64 table, .param .u64 out, .param .u32 n)
{
    .reg .u64 %rd<8>;
    .reg .u32 %r<6>;
    .reg .b16 %h;
    .reg .pred %p;
    ld.param.u64 %rd1, [table];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r5, %r3, %r4, %r2;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.u64 %rd3, [%rd1];
    mul.wide.u32 %rd4, %r5, 2;
    add.u64 %rd5, %rd3, %rd4;
    ld.global.u16 %h, [%rd5];
    add.u64 %rd6, %rd2, %rd4;
    st.global.u16 [%rd6], %h;
DONE:
    ret;
}
"""


def spy_kernel():
    """A launcher of spy: launch(weight, out) on the current stream."""
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")  # the primary context is current
    if cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(SPY_PTX)) or \
            cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"spy"):
        raise RuntimeError("cannot load the spy kernel")

    def launch(table, out):
        n = out.numel()
        args = [ctypes.c_uint64(table.data_ptr()), ctypes.c_uint64(out.data_ptr()),
                ctypes.c_uint32(n)]
        ptrs = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                       for a in args])
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        # (the preloaded library's cuLaunchKernel, the first in the global scope)
        if lib.cuLaunchKernel(fn, (n + 255) // 256, 1, 1, 256, 1, 1, 0, s, ptrs, None):
            raise RuntimeError("cannot launch the spy kernel")
    return launch
lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]


def stat(name):
    v = ctypes.c_ulonglong(0)
    lib.ft_stat_get(name.encode(), ctypes.byref(v))
    return v.value


def main(what):
    m, _ = build("manual", torch)
    tok = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    graph, out = None, None
    # planted: the spied weight (an early layer's, every trap offloaded)
    # and its address, in device memory
    w = m.layers[1].qkv.weight
    table = torch.tensor([w.data_ptr()], dtype=torch.int64, device="cuda")
    seen = torch.empty(4096, dtype=w.dtype, device="cuda")
    launch = spy_kernel() if what == "planted" else None

    def step():
        logits = m(tok, pos)
        if launch:
            launch(table, seen)
        return logits
    with torch.inference_mode():
        for i in range(40):
            pos.fill_(i)
            if what in ("hidden", "planted") and i == 2:
                # capture one step while the library is still learning
                graph, out = capture_graph(step)
                if launch and not torch.equal(seen, w.flatten()[:4096]):
                    print("the spy kernel does not copy the weight")
                    return 1
            logits = m(tok, pos)
            tok = logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            if lib.ft_phase() == 2 and i > 12:
                break
        if lib.ft_phase() != 2 or (what == "writer" and not stat("offloaded_bytes")):
            print(f"not offloading: phase {lib.ft_phase()}, offloaded {stat('offloaded_bytes')}")
            return 1
        if what == "writer":
            m.layers[2].qkv.weight.add_(1)
            for i in range(3):
                m(tok, pos)
            torch.cuda.synchronize()
            print(f"verify_failures {stat('verify_failures')}")
            return 0 if stat("verify_failures") else 1
        graph.replay()
        torch.cuda.synchronize()
        nan = bool(torch.isnan(out.float()).any())
        paged = stat("graphs_substituted") + stat("graphs_boundary")
        if what == "planted":
            spied = bool(torch.isnan(seen.float()).any())
            print(f"graphs paged {paged}, offloaded {stat('offloaded_bytes')}, the unseen "
                  f"reader read NaN: {spied}, logits have NaN: {nan}")
            return 0 if paged and spied and not nan else 1
        print(f"hidden_readers {stat('hidden_readers')}, offloaded {stat('offloaded_bytes')}, "
              f"graphs paged {paged}, replay output has NaN: {nan}")
        return 0 if not nan and not stat("hidden_readers") and paged else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
