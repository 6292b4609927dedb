#!/usr/bin/env python3
"""Start-up harness (issue 17): a serving engine's start-up as vLLM v1 runs
it, every CUDA graph captured before the library has a plan.

serve.py's Llama-shaped decoder (random weights), started in vLLM's order:
the weights; one eager profile forward at the maximum batched tokens; the
KV cache allocated after it (sized from cudaMemGetInfo); decode graphs
captured for batch sizes 1, 2, 4, 8, 16 and 32; then serving traffic
(requests arriving and finishing: eager prefills, decode steps replayed).
Two variants of the decode graphs:

  full       one graph per batch size holds the whole decode step (vLLM's
             FULL graphs)
  piecewise  one graph per piece between attention ops, attention eager
             between them (vLLM's PIECEWISE graphs): piece 0 is the
             embedding and layer 0 up to its attention, piece i + 1 the
             rest of layer i and layer i + 1 up to its attention, the last
             piece the rest of the last layer, the norm and the head
  compiled   the decode step under torch.compile(mode="reduce-overhead"):
             Triton kernels, graphs recorded by its CUDA graph trees on
             the first calls of each batch size

  startup.py run TAG OUT VARIANT   one process; saves every request's
                                   logits, the batch-1 decode step times
                                   (GPU and host), the start-up times and
                                   the library's counters to OUT/TAG.pt
  startup.py fraction OUT SHARE    FT_MAX_GPU_MEM_FRACTION for SHARE of the
                                   decoder weights off the GPU
  startup.py report OUT            every run against the plain run of its
                                   variant: logits bit for bit, decode step
                                   vs resident and the transfer floor, host
                                   time per replay, graphs substituted or
                                   paged at launch boundaries

Run by startup.sh.
"""
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import serve  # noqa: E402
from serve import (BATCHES, D, HEADS, LAYERS, MAX_LEN, SLOTS, VOCAB, deterministic,  # noqa: E402
                   differing, fill_inputs, serve_requests, stat)
from bench_offload import budget_fraction, h2d_bandwidth, link_rate, median, write_table  # noqa: E402

CAPTURE_SIZES = (1, 2, 4, 8, 16, 32)
REPLAYS = 40
HOST_BURST = 20
STATS = serve.STATS + ("graphs_kept", "graph_keep_us", "graphs_substituted", "graphs_boundary",
                       "graphs_resident", "graph_sub_us", "graph_kept_traps", "passes_eager",
                       "passes_graph", "profile_adopted", "offload_copy_kernels")


class Full:
    """One graph per batch size: the whole decode step."""

    def __init__(self, m, torch, pool):
        self.g = {}
        for b in CAPTURE_SIZES:
            ins = (torch.zeros(b, dtype=torch.long, device="cuda"),
                   torch.full((b,), SLOTS, dtype=torch.long, device="cuda"),
                   torch.arange(b, dtype=torch.long, device="cuda"))
            m.decode(*ins)  # warm-up, as vLLM's before each capture
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = m.decode(*ins)
            self.g[b] = (g, ins, out)

    def step(self, b):
        self.g[b][0].replay()
        return self.g[b][2]

    def launches(self, b):
        return [self.g[b][0].replay]


class Compiled:
    """The decode step under torch.compile(mode="reduce-overhead"): its
    CUDA graph trees record a graph per batch size on the first calls."""

    def __init__(self, m, torch, pool):
        self.f = torch.compile(m.decode, mode="reduce-overhead", dynamic=False)
        self.g = {}
        for b in CAPTURE_SIZES:
            ins = (torch.zeros(b, dtype=torch.long, device="cuda"),
                   torch.full((b,), SLOTS, dtype=torch.long, device="cuda"),
                   torch.arange(b, dtype=torch.long, device="cuda"))
            for _ in range(3):  # compile, warm up, record
                out = self.f(*ins)
            self.g[b] = (None, ins, out)

    def step(self, b):
        return self.f(*self.g[b][1])

    def launches(self, b):
        return [lambda: self.f(*self.g[b][1])]


class Piecewise:
    """One graph per piece between attention ops; attention runs eagerly
    between them, into a static buffer the next piece reads."""

    def __init__(self, m, torch, pool):
        self.m, self.torch = m, torch
        self.g = {}
        for b in CAPTURE_SIZES:
            ins = (torch.zeros(b, dtype=torch.long, device="cuda"),
                   torch.full((b,), SLOTS, dtype=torch.long, device="cuda"),
                   torch.arange(b, dtype=torch.long, device="cuda"))
            self.run_eager(ins)  # warm-up
            torch.cuda.synchronize()
            self.g[b] = self.capture(ins, pool)

    # the decode step of serve.py, cut at attention
    def first(self, tok, slot, pos):
        m, torch = self.m, self.torch
        x = m.emb(tok)[:, None]
        mask = (torch.arange(MAX_LEN, device=tok.device)[None] <= pos[:, None])[:, None, None]
        row = slot * MAX_LEN + pos
        return x, mask, row, self.pre(0, x, row)

    def pre(self, i, x, row):
        m, b = self.m, self.m.layers[i]
        bsz, hd = x.shape[0], D // HEADS
        h = b.n1(x)
        q = b.q(h).view(bsz, 1, HEADS, hd).transpose(1, 2)
        kv = serve.KV
        m.kc[i].view(-1, kv, hd).index_copy_(0, row, b.k(h).view(bsz, kv, hd))
        m.vc[i].view(-1, kv, hd).index_copy_(0, row, b.v(h).view(bsz, kv, hd))
        return q

    def attention(self, i, q, slot, mask):
        m = self.m
        return self.torch.nn.functional.scaled_dot_product_attention(
            q, m.kc[i][slot].transpose(1, 2), m.vc[i][slot].transpose(1, 2), attn_mask=mask,
            enable_gqa=True)

    def post(self, i, x, a):
        m, b = self.m, self.m.layers[i]
        bsz = x.shape[0]
        return m.mlp(b, x + b.o(a.transpose(1, 2).reshape(bsz, 1, D)))

    def run_eager(self, ins):
        tok, slot, pos = ins
        x, mask, row, q = self.first(tok, slot, pos)
        for i in range(LAYERS):
            x = self.post(i, x, self.attention(i, q, slot, mask))
            if i + 1 < LAYERS:
                q = self.pre(i + 1, x, row)
        return self.m.head(self.m.norm(x[:, 0]))

    def capture(self, ins, pool):
        torch = self.torch
        tok, slot, pos = ins
        graphs, abuf = [], []

        def cap(fn):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = fn()
            graphs.append(g)
            return out

        x, mask, row, q = cap(lambda: self.first(tok, slot, pos))
        qs = [q]
        out = None
        for i in range(LAYERS):
            a = torch.empty_like(q)
            abuf.append(a)

            def piece(i=i, x=x, a=a):
                y = self.post(i, x, a)
                if i + 1 < LAYERS:
                    return y, self.pre(i + 1, y, row)
                return y, self.m.head(self.m.norm(y[:, 0]))

            x, q = cap(piece)
            if i + 1 < LAYERS:
                qs.append(q)
            else:
                out = q
        return graphs, ins, out, (qs, abuf, mask)

    def step(self, b):
        graphs, (tok, slot, pos), out, (qs, abuf, mask) = self.g[b]
        graphs[0].replay()
        for i in range(LAYERS):
            abuf[i].copy_(self.attention(i, qs[i], slot, mask))
            graphs[i + 1].replay()
        return out

    def launches(self, b):
        return [g.replay for g in self.g[b][0]]


def run(tag, out, variant):
    import torch

    lib, pre = serve.open_library()
    deterministic(torch)
    bw = h2d_bandwidth(torch)
    t_start = time.perf_counter()
    m = serve.model(torch, kv=False)  # load the weights
    params, decoder = serve.weight_bytes(m)
    res = {"tag": tag, "variant": variant, "bw": bw, "params": params, "decoder": decoder,
           "logits": {}, "total": torch.cuda.mem_get_info()[1]}
    g = torch.Generator(device="cuda").manual_seed(1)
    with torch.inference_mode():
        # profile_run: one eager forward at the maximum batched tokens (a
        # prefill of MAX_LEN tokens into the padding slot's rows: the KV
        # cache does not exist yet, so a scratch one stands in)
        m.alloc_kv()
        ids = torch.randint(0, VOCAB, (1, MAX_LEN), device="cuda", generator=g)
        m.prefill(ids, SLOTS)
        torch.cuda.synchronize()
        del m.kc, m.vc
        torch.cuda.empty_cache()
        # the KV cache, sized from what the driver says is free
        free, total = torch.cuda.mem_get_info()
        kv_bytes = 2 * LAYERS * (SLOTS + 1) * MAX_LEN * serve.KV * (D // HEADS) * 2
        assert kv_bytes < free, f"KV cache {kv_bytes} B does not fit in {free} B free"
        m.alloc_kv()
        res["kv_free"] = free
        # graphs for every capture size, in one pool (as vLLM)
        pool = torch.cuda.graph_pool_handle()
        t0 = time.perf_counter()
        graphs = {"full": Full, "piecewise": Piecewise, "compiled": Compiled}[variant](
            m, torch, pool)
        torch.cuda.synchronize()
        res["capture_s"] = time.perf_counter() - t0
        res["startup_s"] = time.perf_counter() - t_start
        res["phase_after_capture"] = lib.ft_phase() if pre else -1
        # serving traffic

        def decode(tok, slots, pos):
            n = len(slots)
            b = min(x for x in BATCHES if x >= n)
            fill_inputs(graphs.g[b][1], tok, slots, pos)
            return graphs.step(b)[:n].clone()

        serve_requests(m, torch, g, res, decode)
        res["phase_after_loop"] = lib.ft_phase() if pre else -1
        # batch-1 decode steps: GPU time of a step, host time of its launches
        gr = graphs.g[1]
        gr[1][1].fill_(SLOTS)
        ts, host = [], []
        for i in range(REPLAYS):
            gr[1][2].fill_(i)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            graphs.step(1)
            t2 = time.perf_counter()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t1) * 1e3)
            host.append((t2 - t1) * 1e6)
        res["replay_ms"], res["step_host_us"] = ts, host
        # host time of one graph launch, back to back (the first piece's,
        # or the whole step's graph)
        launch = graphs.launches(1)[0]
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(HOST_BURST):
            launch()
        res["burst_us"] = (time.perf_counter() - t1) * 1e6 / HOST_BURST
        torch.cuda.synchronize()
    res["stats"] = {s: stat(lib, s) for s in STATS}
    res["logits"] = {k: torch.stack(v) for k, v in res["logits"].items()}
    torch.save(res, os.path.join(out, tag + ".pt"))
    print(f"{tag}: {res['decode_steps']} decode steps, phase {res['phase_after_capture']} "
          f"after capture, "
          f"{res['phase_after_loop']} after the loop, capture {res['capture_s']:.2f} s, "
          f"stats {res['stats']}", flush=True)


def fraction(out, share):
    import torch

    import glob

    r = torch.load(sorted(glob.glob(os.path.join(out, "plain-*.pt")))[0])
    print(f"{budget_fraction(r['params'], r['decoder'], share, r['total']):.6f}")


def plot(path, bars):
    """A bar chart (SVG, no plotting library needed) of (label, ratio)
    pairs: decode step / max(resident step, transfer floor), with the
    issue's 1.05 goal drawn."""
    w, h, left, top, bw = 120 + 70 * len(bars), 300, 60, 20, 40
    ymax = max([1.2] + [r for _, r in bars])
    y = lambda v: top + (h - top - 80) * (1 - v / ymax)  # noqa: E731
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">decode step / max(resident step, transfer floor)</text>']
    for v in (0, 0.5, 1.0):
        svg.append(f'<text x="10" y="{y(v) + 4:.0f}">{v:.1f}</text>')
    svg.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(1.05):.1f}" y2="{y(1.05):.1f}" '
               'stroke="red" stroke-dasharray="4"/>')
    svg.append(f'<text x="{w - 60}" y="{y(1.05) - 3:.0f}" fill="red">1.05</text>')
    for i, (label, r) in enumerate(bars):
        x = left + 10 + 70 * i
        svg.append(f'<rect x="{x}" y="{y(r):.1f}" width="{bw}" height="{y(0) - y(r):.1f}" '
                   'fill="#4a7ab5"/>')
        svg.append(f'<text x="{x}" y="{y(r) - 3:.0f}">{r:.3f}</text>')
        for j, part in enumerate(label.split("-")):
            svg.append(f'<text x="{x}" y="{y(0) + 14 + 12 * j:.0f}">{part}</text>')
    svg.append("</svg>")
    open(path, "w").write("\n".join(svg) + "\n")


def report(out):
    import glob

    import torch

    runs = [torch.load(p) for p in sorted(glob.glob(os.path.join(out, "*.pt")))]
    plain = {r["variant"]: r for r in runs if r["tag"].startswith("plain")}
    lines = [f"# Start-up harness (graphs captured before the plan): {LAYERS} layers, "
             f"{runs[0]['params'] / 1e9:.2f} GB bf16, H2D {runs[0]['bw'] / 1e9:.1f} GB/s", "",
             "| run | logits bit-identical | decoder offloaded | decode step ms (batch 1) | "
             "resident ms | floor ms | step / max(resident, floor) | host us / step "
             "(plain) | host us / launch, back to back (plain) | substituted | boundary | "
             "resident | substitution ms | clones ms | hidden readers |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    bars = []
    for r in runs:
        p = plain[r["variant"]]
        st = r["stats"]
        ms, res_ms = median(r["replay_ms"][5:]), median(p["replay_ms"][5:])
        host, host_p = median(r["step_host_us"][5:]), median(p["step_host_us"][5:])
        if r is p:
            lines.append(f"| {r['tag']} | - | 0 | {ms:.2f} | {res_ms:.2f} | - | 1.000 | "
                         f"{host:.0f} | {r['burst_us']:.0f} | - | - | - | - | - | - |")
            continue
        bad = differing(torch, r["logits"], p["logits"])
        if bad:
            print(f"{r['tag']}: logits differ in {len(bad)} of {len(p['logits'])} requests "
                  "(request, first row, max |diff|, rows differing/rows): " +
                  ", ".join(f"({k}, {row}, {d:.3g}, {n}/{m})" for k, row, d, n, m in bad[:8]),
                  flush=True)
        floor = st["offloaded_bytes"] / link_rate(r, p) * 1e3
        ratio = ms / max(res_ms, floor)
        ok &= not bad and st["hidden_readers"] == 0 and st["offloaded_bytes"] > 0
        bars.append((r["tag"], ratio))
        lines.append(
            f"| {r['tag']} | {'no' if bad else 'yes'} | "
            f"{st['offloaded_bytes'] / r['decoder']:.0%} | {ms:.2f} | {res_ms:.2f} | "
            f"{floor:.2f} | {ratio:.3f} | {host:.0f} ({host_p:.0f}) | "
            f"{r['burst_us']:.0f} ({p['burst_us']:.0f}) | {st['graphs_substituted']} | "
            f"{st['graphs_boundary']} | {st['graphs_resident']} | "
            f"{st['graph_sub_us'] / 1e3:.1f} | {st['graph_keep_us'] / 1e3:.1f} | "
            f"{st['hidden_readers']} |")
    write_table(out, "startup.md", lines)
    plot(os.path.join(out, "startup.svg"), bars)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "fraction":
        fraction(sys.argv[2], sys.argv[3])
    else:
        sys.exit(report(sys.argv[2]))
