#!/usr/bin/env python3
"""decode_pass.py LIBFTZ NAME=PTX ...: a compute-bound pass as the engine runs it.
T traps of TRAP MiB (ranges of one coded 1 GiB of bf16 N(0,0.02)) paged
through NB blocks: trap i's load waits for the segment that read block
i % NB last; segment i (G bf16 GEMMs 16384x4096 @ 4096x14336 on the default
stream) waits for trap i's load.  A coded load copies pieces of the image
into a ring of slots and decodes each on a decode stream, as the engine;
a raw load copies the raw bytes into the block.  Per decoder variant and
decode-stream priority (least 0 / greatest) and staging ring (RINGS:
"NxM" is N slots of M MiB; the engine's is 4x64, 2x16 before run72): the pass's time against
the raw pass's; and the GEMMs alone.  Medians of R.  G=1: a copy-bound
pass."""
import os, statistics, sys
import torch
from decode_common import CHUNK, VALS, Ring, Store, launch as launch_at, load

T = int(os.environ.get("T", 24)); TRAP = int(os.environ.get("TRAP", 384)); NB = 4
G = [int(g) for g in os.environ.get("G", "5 1").split()]; R = int(os.environ.get("R", 5))
st = Store(sys.argv[1], 1024)
w, raw_pin, n, off, img_h, desc_d = st.w, st.raw_pin, st.n, st.off, st.img_h, st.desc_d
tc = TRAP * 16  # chunks a trap
ranges = [((i % (n // tc)) * tc, (i % (n // tc)) * tc + tc) for i in range(T)]
blocks = [torch.empty(tc * VALS, dtype=torch.bfloat16, device="cuda") for _ in range(NB)]
RINGS = [tuple(int(v) for v in r.split("x")) for r in os.environ.get("RINGS", "2x16 4x64").split()]
rings = {r: (Ring(st, r[0], r[1] << 20), [st.pieces(*g, r[1] << 20) for g in ranges]) for r in RINGS}
try:
    lo, hi = torch.cuda.Stream.priority_range()
except Exception:
    lo, hi = 0, -5
print(f"# {T} traps of {TRAP} MiB ({ranges[0][1] - ranges[0][0]} chunks, ratio {st.ratio:.4f}), "
      f"{NB} blocks, GPU {torch.cuda.get_device_name()}, stream priorities {lo}..{hi}", flush=True)

def launch(fn, src, bias, a, b, dst, a0, stream):
    launch_at(fn, src, bias, desc_d.data_ptr() + 8 * a, dst.data_ptr() + (a - a0) * CHUNK,
              (tc - (a - a0)) * VALS, b - a, stream)

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
W = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16)
o = torch.empty(16384, 14336, device="cuda", dtype=torch.bfloat16)
cs = torch.cuda.Stream()
gs = torch.cuda.current_stream()

def run_pass(fn, ds, gper, gemms_only=False, ring_at=RINGS[0]):
    ring, tpieces = rings[ring_at]
    ring.reset()
    ready = [torch.cuda.Event() for _ in range(T)]; done = [torch.cuda.Event() for _ in range(T)]
    def load_trap(i):
        blk = blocks[i % NB]; a0, b0 = ranges[i]
        if i >= NB:
            cs.wait_event(done[i - NB])
            if ds is not None:
                ds.wait_event(done[i - NB])
        if fn is None:
            with torch.cuda.stream(cs):
                blk.copy_(raw_pin[a0 * VALS:b0 * VALS], non_blocking=True)
            ready[i].record(cs)
            return
        ring.load(tpieces[i], cs, ds, lambda slot, bias, a, b: launch(fn, slot, bias, a, b, blk, a0, ds))
        ready[i].record(ds)
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    e0.record(gs); cs.wait_event(e0)
    if ds is not None:
        ds.wait_event(e0)
    if not gemms_only:
        for i in range(min(NB, T)):
            load_trap(i)
    for i in range(T):
        if not gemms_only:
            gs.wait_event(ready[i])
        for _ in range(gper):
            torch.matmul(x, W, out=o)
        done[i].record(gs)
        if not gemms_only and i + NB < T:
            load_trap(i + NB)
    e1.record(gs); e1.synchronize()
    return e0.elapsed_time(e1)

def med(f):
    f()
    return statistics.median(f() for _ in range(R))

fns = [(spec.split("=", 1)[0], load(spec.split("=", 1)[1])) for spec in sys.argv[2:]]
dss = {"least": torch.cuda.Stream(priority=lo), "greatest": torch.cuda.Stream(priority=hi)}
for gper in G:
    gm = med(lambda: run_pass(None, None, gper, True))
    raw = med(lambda: run_pass(None, None, gper))
    print(f"\n## {gper} GEMM(s) a trap: GEMMs alone {gm:.2f} ms, raw loads {raw:.2f} ms "
          f"({T * TRAP / 1024 * 1.073741824:.2f} GB raw, floor at the raw pass)")
    print("| decoder | decode priority | ring | pass ms | / raw pass | - GEMMs alone ms |")
    print("|---|---|---|---|---|---|")
    for name, fn in fns:
        for rg in RINGS:
            for pn, ds in dss.items():
                t = med(lambda: run_pass(fn, ds, gper, ring_at=rg))
                print(f"| {name} | {pn} | {rg[0]}x{rg[1]} MiB | {t:.2f} | {t / raw:.4f} | {t - gm:.2f} |",
                      flush=True)
    # the last pass's blocks hold the right bytes
    a0, b0 = ranges[T - 1]
    print("last block bit-exact:", torch.equal(blocks[(T - 1) % NB].view(torch.int16), w[a0 * VALS:b0 * VALS].view(torch.int16)))
