#!/usr/bin/env python3
"""Tensor-parallel check (issue 6), one process per GPU under torchrun:
a Llama-shaped decoder split two ways as vLLM splits it (q, k, v, gate and
up by columns, o and down by rows, an NCCL all-reduce after each), random
weights seeded per rank, forwards of fixed 512-token inputs.

  tp.py run TAG OUT     (under torchrun) an all-reduce sum check, warm-up
                        forwards (with the library: until INFERENCE), then
                        FORWARDS timed ones; OUT/TAG.rank<r>.pt gets the
                        logits, times, peak memory and library counters
  tp.py fraction OUT SHARE   FT_MAX_GPU_MEM_FRACTION that leaves SHARE of
                        each rank's decoder weights off its GPU
  tp.py report OUT      every rank of every run against the plain run's

Run by tp.sh.  TP_LAYERS sets the depth (default 16).
"""
import ctypes
import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from bench_offload import budget_fraction, h2d_bandwidth, link_rate, median, write_table  # noqa: E402

LAYERS = int(os.environ.get("TP_LAYERS", "16"))
D, HEADS, KV, FFN, VOCAB, TOKENS = 4096, 32, 8, 14336, 32000, 512
WARM, FORWARDS = 8, 10
STATS = ("offloaded_bytes", "block_bytes", "plan_budget_bytes", "offload_copy_bytes",
         "offload_misses", "offload_conflicts", "vmm_allocs")


def model(torch, rank, world):
    F = torch.nn.functional
    hd, h, kv = D // HEADS, HEADS // world, KV // world

    def w(rows, cols, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(rows, cols, generator=g, device="cuda", dtype=torch.bfloat16) * 0.02

    layers = []
    for i in range(LAYERS):
        s = 1000 * i + 10 * rank
        layers.append({"q": w(h * hd, D, s), "k": w(kv * hd, D, s + 1), "v": w(kv * hd, D, s + 2),
                       "o": w(D, h * hd, s + 3), "gate": w(FFN // world, D, s + 4),
                       "up": w(FFN // world, D, s + 5), "down": w(D, FFN // world, s + 6)})
    emb, head = w(VOCAB, D, 7), w(VOCAB, D, 8)

    def forward(ids):
        import torch.distributed as dist

        x = emb[ids]
        n = ids.shape[0]
        for L in layers:
            y = F.rms_norm(x, (D,))
            q = (y @ L["q"].T).view(n, h, hd).transpose(0, 1)
            k = (y @ L["k"].T).view(n, kv, hd).transpose(0, 1)
            v = (y @ L["v"].T).view(n, kv, hd).transpose(0, 1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            o = a.transpose(0, 1).reshape(n, h * hd) @ L["o"].T
            dist.all_reduce(o)
            x = x + o
            y = F.rms_norm(x, (D,))
            m = (F.silu(y @ L["gate"].T) * (y @ L["up"].T)) @ L["down"].T
            dist.all_reduce(m)
            x = x + m
        return F.rms_norm(x[-1:], (D,)) @ head.T

    params = sum(t.numel() * 2 for L in layers for t in L.values()) + 2 * VOCAB * D * 2
    return forward, params, params - 2 * VOCAB * D * 2


def run(tag, out):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    lib = ctypes.CDLL(None)
    pre = hasattr(lib, "ft_phase")
    t = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    res = {"tag": tag, "rank": rank, "world": world, "bw": h2d_bandwidth(torch),
           "allreduce_ok": bool((t == world * (world + 1) / 2).all()),
           "total": torch.cuda.mem_get_info()[1]}
    forward, res["params"], res["decoder"] = model(torch, rank, world)
    g = torch.Generator(device="cuda").manual_seed(99)
    with torch.inference_mode():
        for i in range(200):
            if i >= WARM and (not pre or lib.ft_phase() == 2):
                break
            forward(torch.randint(0, VOCAB, (TOKENS,), device="cuda", generator=g))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        ts, logits = [], []
        for i in range(FORWARDS):
            ids = torch.randint(0, VOCAB, (TOKENS,), device="cuda",
                                generator=torch.Generator(device="cuda").manual_seed(i))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            lg = forward(ids)
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e3)
            logits.append(lg.cpu())
    res["ms"], res["logits"] = ts, torch.stack(logits)
    res["peak"] = torch.cuda.max_memory_reserved()
    v = ctypes.c_ulonglong(0)
    res["stats"] = {}
    for s in STATS:
        v.value = 0
        if pre:
            lib.ft_stat_get(s.encode(), ctypes.byref(v))
        res["stats"][s] = v.value
    torch.save(res, os.path.join(out, f"{tag}.rank{rank}.pt"))
    print(f"{tag} rank {rank}: all-reduce {'ok' if res['allreduce_ok'] else 'WRONG'}, "
          f"forward {median(ts):.2f} ms, stats {res['stats']}", flush=True)
    dist.destroy_process_group()


def fraction(out, share):
    import torch

    r = torch.load(os.path.join(out, "plain.rank0.pt"))
    print(f"{budget_fraction(r['params'], r['decoder'], share, r['total']):.6f}")


def report(out):
    import torch

    lines = ["| run | rank | all-reduce | logits bit-identical | forward ms | resident ms | "
             "per-GPU floor ms | ratio | weights on GPU GiB (budget) |",
             "|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for path in sorted(glob.glob(os.path.join(out, "*.rank*.pt"))):
        r = torch.load(path)
        p = torch.load(os.path.join(out, f"plain.rank{r['rank']}.pt"))
        same = torch.equal(r["logits"].view(torch.int16), p["logits"].view(torch.int16))
        st = r["stats"]
        ms, res_ms = median(r["ms"]), median(p["ms"])
        floor = st["offloaded_bytes"] / link_rate(r, p) * 1e3
        on_gpu = r["params"] - st["offloaded_bytes"] + st["block_bytes"]
        within = not st["plan_budget_bytes"] or on_gpu <= st["plan_budget_bytes"]
        ok &= same and r["allreduce_ok"] and within
        lines.append(f"| {r['tag']} | {r['rank']} | {'ok' if r['allreduce_ok'] else 'WRONG'} | "
                     f"{'yes' if same else 'NO'} | {ms:.1f} | {res_ms:.1f} | {floor:.1f} | "
                     f"{ms / max(res_ms, floor):.3f} | {on_gpu / 2**30:.2f} "
                     f"({st['plan_budget_bytes'] / 2**30:.2f}) |")
    write_table(out, "tp.md", lines)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "fraction":
        fraction(sys.argv[2], sys.argv[3])
    else:
        sys.exit(report(sys.argv[2]))
