#!/usr/bin/env python3
"""Serving harness (issue 5), no vLLM needed: a Llama-shaped decoder with
random weights, a persistent KV cache of request slots, eager prefill,
decode steps captured as CUDA graphs for batch sizes 1, 2, 4 and 8 with
static inputs, and a loop of mixed requests, as a serving engine runs them.

  serve.py run TAG OUT        one process: eager decode warm-up (with the
                              library: until it reaches INFERENCE, so the
                              graphs are captured with offloading in effect),
                              graph capture, the request loop, then REPLAYS
                              timed replays of the batch-1 graph; saves every
                              request's logits, the times and the library's
                              counters to OUT/TAG.pt; with FT_OFFLOAD_TIMING
                              prints the offload timing table of the loop and
                              that of the timed replays (whose wait per step
                              the report compares with the measured stall)
  serve.py fraction OUT SHARE the FT_MAX_GPU_MEM_FRACTION that leaves SHARE of
                              the decoder weights off the GPU
  serve.py report OUT         every run against the plain one: logits bit for
                              bit, graph decode step vs the resident step and
                              the transfer floor, the timing table's wait per
                              step vs the stall (step - resident step)

Run by serve.sh.  SERVE_LAYERS sets the depth (default 16: 7.5 GB of bf16).
SERVE_PROBE=1 (diagnosis) keeps a sum of every layer's output in each
prefill; the report then names the first layer whose sum differs.
"""
import ctypes
import glob
import os
import sys
import time

# the benchmark's H2D measurement and median (scripts/bench_offload.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from bench_offload import (budget_fraction, h2d_bandwidth, link_rate, median, no_cudnn_attention,  # noqa: E402
                          write_table)

LAYERS = int(os.environ.get("SERVE_LAYERS", "16"))
PROBE = os.environ.get("SERVE_PROBE") == "1"  # per-layer sums of each prefill (diagnosis)
D, HEADS, KV, FFN, VOCAB = 4096, 32, 8, 14336, 32000
SLOTS, MAX_LEN = 8, 256
BATCHES = (1, 2, 4, 8)
WARM, REPLAYS = 12, 30
STATS = ("offloaded_bytes", "block_bytes", "offload_copy_bytes", "offload_misses",
         "graph_launches", "hidden_readers", "offload_conflicts", "plan_budget_bytes",
         "offload_copies", "offload_foreign_refs", "offload_tails", "offload_demoted",
         "offload_roaming_refs", "verify_failures")


def deterministic(torch):
    """The harness's own results must repeat bit for bit, or comparing them
    with the library's says nothing (serve.sh runs it twice to show it):
    cuBLAS with a fixed workspace, PyTorch's deterministic algorithms, and
    no cuDNN SDPA (as the benchmark: it builds kernels per KV length)."""
    skip = os.environ.get("SERVE_SKIP", "").split(",")  # for experiments
    if "cublas" not in skip:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if "algos" not in skip:
        torch.use_deterministic_algorithms(True, warn_only=True)
        if hasattr(torch.utils, "deterministic"):
            torch.utils.deterministic.fill_uninitialized_memory = False
    if "cudnn" not in skip:
        no_cudnn_attention(torch)


def model(torch, kv=True):
    F = torch.nn.functional
    hd = D // HEADS

    class Server(torch.nn.Module):
        def __init__(self):
            super().__init__()
            L = torch.nn.Linear
            self.emb = torch.nn.Embedding(VOCAB, D)
            self.layers = torch.nn.ModuleList()
            for _ in range(LAYERS):
                b = torch.nn.Module()
                b.n1, b.n2 = torch.nn.RMSNorm(D), torch.nn.RMSNorm(D)
                b.q, b.k, b.v = L(D, D, bias=False), L(D, KV * hd, bias=False), L(D, KV * hd, bias=False)
                b.o = L(D, D, bias=False)
                b.gate, b.up, b.down = L(D, FFN, bias=False), L(D, FFN, bias=False), L(FFN, D, bias=False)
                self.layers.append(b)
            self.norm = torch.nn.RMSNorm(D)
            self.head = L(D, VOCAB, bias=False)
            if kv:
                self.alloc_kv()

        def alloc_kv(self):
            """The KV cache: [layer, slot, position, kv head, dim]; slot SLOTS
            is where padded batch rows write (startup.py allocates it after
            its profile forward, as vLLM sizes it then)."""
            shape = (LAYERS, SLOTS + 1, MAX_LEN, KV, hd)
            dev = self.emb.weight.device
            self.register_buffer("kc", torch.zeros(shape, dtype=torch.bfloat16, device=dev))
            self.register_buffer("vc", torch.zeros(shape, dtype=torch.bfloat16, device=dev))

        def mlp(self, b, x):
            h = b.n2(x)
            return x + b.down(F.silu(b.gate(h)) * b.up(h))

        def prefill(self, ids, slot):
            """ids [1, n] into slot (a Python int): logits [1, vocab]."""
            n = ids.shape[1]
            x = self.emb(ids)
            for i, b in enumerate(self.layers):
                h = b.n1(x)
                q = b.q(h).view(1, n, HEADS, hd).transpose(1, 2)
                k = b.k(h).view(1, n, KV, hd).transpose(1, 2)
                v = b.v(h).view(1, n, KV, hd).transpose(1, 2)
                self.kc[i, slot, :n] = k[0].transpose(0, 1)
                self.vc[i, slot, :n] = v[0].transpose(0, 1)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                x = self.mlp(b, x + b.o(a.transpose(1, 2).reshape(1, n, D)))
                if PROBE:
                    self.probe.append(x.float().sum())
            return self.head(self.norm(x[:, -1]))

        def decode(self, tok, slot, pos):
            """One token per row: tok, slot, pos [b] (pos = where it goes);
            no host synchronisation (capturable).  Logits [b, vocab]."""
            bsz = tok.shape[0]
            x = self.emb(tok)[:, None]
            mask = (torch.arange(MAX_LEN, device=tok.device)[None] <= pos[:, None])[:, None, None]
            row = slot * MAX_LEN + pos  # into [slot x position] rows: index_copy_
            for i, b in enumerate(self.layers):
                h = b.n1(x)
                q = b.q(h).view(bsz, 1, HEADS, hd).transpose(1, 2)
                self.kc[i].view(-1, KV, hd).index_copy_(0, row, b.k(h).view(bsz, KV, hd))
                self.vc[i].view(-1, KV, hd).index_copy_(0, row, b.v(h).view(bsz, KV, hd))
                a = F.scaled_dot_product_attention(q, self.kc[i][slot].transpose(1, 2),
                                                   self.vc[i][slot].transpose(1, 2),
                                                   attn_mask=mask, enable_gqa=True)
                x = self.mlp(b, x + b.o(a.transpose(1, 2).reshape(bsz, 1, D)))
            return self.head(self.norm(x[:, 0]))

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = Server().eval()
    torch.set_default_dtype(torch.float32)
    return m


class Graphs:
    """The decode step captured once per batch size, with static inputs;
    rows beyond the live requests write into the padding slot."""

    def __init__(self, m, torch):
        from models import capture_graph

        self.g = {}
        for b in BATCHES:
            ins = (torch.zeros(b, dtype=torch.long, device="cuda"),
                   torch.full((b,), SLOTS, dtype=torch.long, device="cuda"),
                   torch.zeros(b, dtype=torch.long, device="cuda"))
            graph, out = capture_graph(lambda ins=ins: m.decode(*ins))
            self.g[b] = (graph, ins, out)

    def __call__(self, tok, slot, pos):
        """tok [n] on the GPU, slot and pos Python lists of n."""
        n = len(slot)
        b = min(x for x in BATCHES if x >= n)
        graph, ins, out = self.g[b]
        fill_inputs(ins, tok, slot, pos)
        graph.replay()
        return out[:n].clone()


def pad(v):
    import torch

    return torch.tensor(v, dtype=torch.long).to("cuda", non_blocking=False)


def fill_inputs(ins, tok, slot, pos):
    """A captured batch size's static inputs (tok, slot, pos: b rows each)
    from n live rows: tok [n] on the GPU, slot and pos Python lists of n.
    Padded rows write distinct rows of the padding slot, so that no two
    rows of index_copy_ write one place (an order-dependent result)."""
    t, s, p = ins
    b, n = t.shape[0], len(slot)
    t.zero_()
    t[:n].copy_(tok)
    s.copy_(pad(slot + [SLOTS] * (b - n)))
    p.copy_(pad(pos + list(range(b - n))))


def serve_requests(m, torch, g, res, decode):
    """The request loop: requests() arrive (up to 6 at once, eager prefill
    into a free slot, ids from generator g) and decode a token per step
    with decode(tok [n], slots, positions) -> logits [n] until done; every
    request's logits go to res["logits"], the loop's time and steps to
    res["loop_s"] and res["decode_steps"]."""
    pending = list(enumerate(requests()))
    active = {}  # slot -> [request, next token, position, tokens left]
    free = list(range(SLOTS))
    t0 = time.perf_counter()
    steps = 0
    while pending or active:
        while pending and free and len(active) < 6:  # admit, eager prefill
            rid, (n, new) = pending.pop(0)
            slot = free.pop(0)
            ids = torch.randint(0, VOCAB, (1, n), device="cuda", generator=g)
            m.probe = []
            lg = m.prefill(ids, slot)
            res["logits"][rid] = [lg[0].cpu()]
            if PROBE:
                res.setdefault("probe", {})[rid] = torch.stack(m.probe).cpu()
            active[slot] = [rid, lg.argmax(-1), n, new - 1]
        if not active:
            continue
        slots = sorted(active)
        toks = torch.cat([active[s][1] for s in slots])
        lg = decode(toks, slots, [active[s][2] for s in slots])
        steps += 1
        for j, s in enumerate(slots):
            a = active[s]
            res["logits"][a[0]].append(lg[j].cpu())
            a[1], a[2], a[3] = lg[j:j + 1].argmax(-1), a[2] + 1, a[3] - 1
            if a[3] <= 0:
                del active[s]
                free.append(s)
    torch.cuda.synchronize()
    res["loop_s"], res["decode_steps"] = time.perf_counter() - t0, steps


def requests():
    """Sixteen requests: (prompt length, new tokens), seeded."""
    import random

    r = random.Random(7)
    return [(r.randint(8, 96), r.randint(4, 24)) for _ in range(16)]


def stat(lib, name):
    if not hasattr(lib, "ft_stat_get"):
        return 0
    v = ctypes.c_ulonglong(0)
    lib.ft_stat_get(name.encode(), ctypes.byref(v))
    return v.value


def open_library():
    """The process's symbols, and whether libflextensor is preloaded
    (then ft_stat_get is typed)."""
    lib = ctypes.CDLL(None)
    pre = hasattr(lib, "ft_phase")
    if pre:
        lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]
    return lib, pre


def weight_bytes(m):
    """Bytes of all the model's parameters, and of its decoder layers."""
    params = sum(p.numel() * p.element_size() for p in m.parameters())
    layer = sum(p.numel() * p.element_size() for p in m.layers[0].parameters())
    return params, layer * LAYERS


def run(tag, out):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    lib, pre = open_library()
    deterministic(torch)
    bw = h2d_bandwidth(torch)
    m = model(torch)
    params, decoder = weight_bytes(m)
    g = torch.Generator(device="cuda").manual_seed(1)
    res = {"tag": tag, "bw": bw, "params": params, "decoder": decoder, "logits": {},
           "total": torch.cuda.mem_get_info()[1]}
    with torch.inference_mode():
        # warm-up: eager decode steps in the padding slot, until offloading
        # is in effect (the graphs are captured after it)
        tok = torch.zeros(1, dtype=torch.long, device="cuda")
        pad = torch.full((1,), SLOTS, dtype=torch.long, device="cuda")
        for i in range(200):
            if i >= WARM and (not pre or lib.ft_phase() == 2):
                break
            m.decode(tok, pad, torch.full((1,), i % MAX_LEN, dtype=torch.long, device="cuda"))
        torch.cuda.synchronize()
        res["warm_phase"] = lib.ft_phase() if pre else -1
        graphs = Graphs(m, torch)
        serve_requests(m, torch, g, res, graphs)
        table = timing_table(lib)
        if table:
            print("offload timing of the serving loop (eager prefills, graph decode steps):")
            print(table, flush=True)
        # graph decode steps at batch 1 (issue 5, requirement 7)
        graph, ins, _ = graphs.g[1]
        ins[1].fill_(SLOTS)
        ts = []
        for i in range(REPLAYS):
            ins[2].fill_(i)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            graph.replay()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t1) * 1e3)
        res["replay_ms"] = ts
        table = timing_table(lib)
        if table:
            print(f"offload timing of the {REPLAYS} batch-1 replays:")
            print(table, flush=True)
            # Avg/pass | compute | | | | | transfer | | wait |
            row = [x for x in table.splitlines() if x.startswith("Avg/pass")][0].split("|")
            res["table_ms"] = {"compute": float(row[1]), "transfer": float(row[6]),
                               "wait": float(row[8])}
    res["stats"] = {s: stat(lib, s) for s in STATS}
    res["logits"] = {k: torch.stack(v) for k, v in res["logits"].items()}
    torch.save(res, os.path.join(out, tag + ".pt"))
    print(f"{tag}: {res['decode_steps']} graph decode steps, warm-up ended in phase "
          f"{res['warm_phase']}, stats {res['stats']}", flush=True)


def timing_table(lib):
    """The library's offload timing report since the last one (the C API,
    as the README's ctypes example), or None when timing is off."""
    if not hasattr(lib, "ft_offload_timing_collect"):
        return None
    buf = ctypes.create_string_buffer(1 << 17)
    lib.ft_offload_timing_collect.restype = ctypes.c_long
    if lib.ft_offload_timing_collect(buf, ctypes.c_ulong(len(buf))) <= 0:
        return None
    return buf.value.decode()


def fraction(out, share):
    import torch

    r = torch.load(os.path.join(out, "plain.pt"))
    print(f"{budget_fraction(r['params'], r['decoder'], share, r['total']):.6f}")


def differing(torch, got, want):
    """(request, first differing row, max |difference| there, differing
    rows, rows) of every request whose logits are not bit for bit want's."""
    bad = []
    for k in sorted(want):
        a, b = got.get(k), want[k]
        if a is None or a.shape != b.shape:
            bad.append((k, -1, float("inf"), 0, len(b)))
            continue
        rows = (a.view(torch.int16) != b.view(torch.int16)).any(-1).nonzero()
        if len(rows):
            i = int(rows[0])
            bad.append((k, i, float((a[i].float() - b[i].float()).abs().max()), len(rows),
                        len(b)))
    return bad


def report(out):
    import torch

    plain = torch.load(os.path.join(out, "plain.pt"))
    res_ms = median(plain["replay_ms"][5:])
    lines = [f"# Serving harness: {LAYERS} layers, {plain['params'] / 1e9:.2f} GB bf16, "
             f"H2D {plain['bw'] / 1e9:.1f} GB/s", "",
             "| run | logits bit-identical | decoder offloaded | graph decode step ms (batch 1) | "
             "resident ms | "
             "floor ms | ratio | graph launches | hidden readers | table wait ms / step | "
             "stall ms (step - resident) | wait / stall |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|",
             f"| plain | - | 0 | {res_ms:.2f} | {res_ms:.2f} | - | 1.000 | - | - | - | - | - |"]
    ok = True
    for path in sorted(glob.glob(os.path.join(out, "*.pt"))):
        r = torch.load(path)
        if r["tag"] == "plain":
            continue
        bad = differing(torch, r["logits"], plain["logits"])
        same = not bad
        if bad:
            print(f"{r['tag']}: logits differ in {len(bad)} of {len(plain['logits'])} requests; "
                  "(request, first row: 0 = prefill, k = decode step k, max |diff| there, "
                  "rows differing of rows): " +
                  ", ".join(f"({k}, {row}, {d:.3g}, {n}/{m})" for k, row, d, n, m in bad[:8]),
                  flush=True)
        for k, _, _, _, _ in bad:
            if "probe" in r and "probe" in plain:
                d = (r["probe"][k] != plain["probe"][k]).nonzero()
                print(f"{r['tag']}: request {k}'s prefill first differs after layer "
                      f"{int(d[0]) if len(d) else '-'}", flush=True)
        st = r["stats"]
        ms = median(r["replay_ms"][5:])
        floor = st["offloaded_bytes"] / link_rate(r, plain) * 1e3
        ratio = ms / max(res_ms, floor)
        ok &= same and st["hidden_readers"] == 0
        stall = ms - res_ms
        wait = r.get("table_ms", {}).get("wait")
        agree = f"{wait / stall:.3f}" if wait is not None and stall > 0 else "-"
        share = st["offloaded_bytes"] / plain["decoder"]
        lines.append(f"| {r['tag']} | {'yes' if same else 'NO'} | {share:.0%} | {ms:.2f} | "
                     f"{res_ms:.2f} | "
                     f"{floor:.2f} | {ratio:.3f} | {st['graph_launches']} | "
                     f"{st['hidden_readers']} | {'-' if wait is None else f'{wait:.2f}'} | "
                     f"{stall:.2f} | {agree} |")
    write_table(out, "serve.md", lines)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "fraction":
        fraction(sys.argv[2], sys.argv[3])
    else:
        sys.exit(report(sys.argv[2]))
