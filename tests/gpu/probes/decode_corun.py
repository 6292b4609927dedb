#!/usr/bin/env python3
"""decode_corun.py LIBFTZ NAME=PTX ...: the store's GPU decoder against a
compute-bound load.  1 GiB (MIB) of bf16 N(0,0.02) coded by the host
encoder; per decoder variant: decode alone (engine pieces of 16 MiB of
image; one launch of all chunks), the engine's pipeline alone (pieces
copied from pinned host memory into two slots, decoded on a second
stream), and the pipeline REP times beside K bf16 GEMMs (16384x4096 @
4096x14336) on the default stream: what it adds to the GEMMs' time, against
raw copies of the same bytes beside them.  Medians of R."""
import os, statistics, sys
import torch
from decode_common import CHUNK, SLOT, VALS, Ring, Store, launch as launch_at, load

MIB = int(os.environ.get("MIB", 1024)); REP = int(os.environ.get("REP", 9))
K = int(os.environ.get("K", 110)); R = int(os.environ.get("R", 5))
st = Store(sys.argv[1], MIB)
w, raw_pin, nvals, n, off, img_h, desc_d = st.w, st.raw_pin, st.nvals, st.n, st.off, st.img_h, st.desc_d
img_d = img_h.cuda()
dst = torch.empty(nvals, dtype=torch.bfloat16, device="cuda")
ring = Ring(st)
pieces = st.pieces(0, n)
print(f"# {MIB} MiB, ratio {st.ratio:.4f}, {n} chunks, {len(pieces)} pieces, "
      f"GPU {torch.cuda.get_device_name()}", flush=True)

def launch(fn, src, bias, a, b, stream):
    launch_at(fn, src, bias, desc_d.data_ptr() + 8 * a, dst.data_ptr() + a * CHUNK,
              nvals - a * VALS, b - a, stream)

cs = torch.cuda.Stream(); ds = torch.cuda.Stream(priority=0)

def pipeline(fn, rep, coded=True):
    ring.reset()
    for _ in range(rep):
        if not coded:
            with torch.cuda.stream(cs):
                for k in range(0, nvals, SLOT // 2):
                    dst[k:k + SLOT // 2].copy_(raw_pin[k:k + SLOT // 2], non_blocking=True)
            continue
        ring.load(pieces, cs, ds, lambda slot, bias, a, b: launch(fn, slot, bias, a, b, ds))
    if not coded:
        ds.wait_stream(cs)

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
W = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16)
o = torch.empty(16384, 14336, device="cuda", dtype=torch.bfloat16)

gs = torch.cuda.current_stream()
hp = torch.cuda.Stream(priority=-5)

def timed(f):
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    cur = torch.cuda.current_stream()
    e0.record(cur); cs.wait_event(e0); ds.wait_event(e0); hp.wait_event(e0)
    f()
    cur.wait_stream(ds); cur.wait_stream(cs); cur.wait_stream(hp); e1.record(cur); e1.synchronize()
    return e0.elapsed_time(e1)

def gemms():
    with torch.cuda.stream(gs):
        for _ in range(K):
            torch.matmul(x, W, out=o)

def med(f):
    f()
    return statistics.median(timed(f) for _ in range(R))

gm = med(gemms)
rawp = med(lambda: pipeline(None, REP, False))
rawc = med(lambda: (pipeline(None, REP, False), gemms()))
print(f"gemms alone {gm:.2f} ms; raw copies of {REP} x {MIB} MiB alone {rawp:.2f} ms, beside the gemms {rawc:.2f} ms (+{rawc - gm:.2f})")
print("| variant | decode alone, pieces GB/s | one launch GB/s | pipeline alone ms (raw GB/s) | beside gemms ms | added to gemms ms | added vs raw ms | decode ms alone x REP | bit-exact |")
print("|---|---|---|---|---|---|---|---|---|")
if os.environ.get("NCU"):
    for spec in sys.argv[2:]:
        fn = load(spec.split("=", 1)[1]); a, b = pieces[1]
        launch(fn, img_d.data_ptr() + off[a], off[a], a, b, ds)
    torch.cuda.synchronize()
    sys.exit(0)
for spec in sys.argv[2:]:
    name, path = spec.split("=", 1)
    if name.endswith("@hp"):
        gs = hp
        gm = med(gemms)
        rawc = med(lambda: (pipeline(None, REP, False), gemms()))
        print(f"| (gemms on a stream of priority -5 from here: alone {gm:.2f} ms, beside raw copies {rawc:.2f} ms) |")
    fn = load(path)
    dec_pieces = med(lambda: [launch(fn, img_d.data_ptr() + off[a], off[a], a, b, ds) for (a, b) in pieces])
    dec_one = med(lambda: launch(fn, img_d.data_ptr(), 0, 0, n, ds))
    dst.zero_(); torch.cuda.synchronize()
    pipe = med(lambda: pipeline(fn, 1))
    ok = torch.equal(dst.view(torch.int16), w.view(torch.int16))
    co = med(lambda: (pipeline(fn, REP), gemms()))
    byt = nvals * 2
    print(f"| {name} | {byt / dec_pieces / 1e6:.1f} | {byt / dec_one / 1e6:.1f} | {pipe:.2f} ({byt / pipe / 1e6:.1f}) | "
          f"{co:.2f} | {co - gm:.2f} | {co - rawc:.2f} | {dec_pieces * REP:.2f} | {'yes' if ok else 'NO'} |", flush=True)
