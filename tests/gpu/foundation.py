#!/usr/bin/env python3
"""GPU check of the foundation: what libflextensor sees of a real PyTorch process.

Run by tests/gpu/foundation.sh, which starts this script several times, with
and without LD_PRELOAD=libflextensor.so, alternating, and then compares:

  run --tag plain|preload|trace --round N --out DIR
      Builds a Llama-shaped transformers model with random bf16 weights and
      runs: eager decode and prefill forwards (timed), a cuBLAS matmul,
      torch.compile (Triton), CUDA graph capture + replay.  Saves outputs and
      numbers to DIR/<tag>-<round>.{pt,json}.  Under the preload it also counts
      the kernels torch.profiler sees for one call of each workload and the
      launches the library saw for the same call.  With --tag trace it maps
      the launches of one forward to the model's parameters through FT_TRACE.
  compare --out DIR
      Prints and writes (DIR/foundation.md, DIR/foundation.json) the report:
      (a) launches seen vs profiler kernels, (b) parameter bytes referenced per
      forward, (c) outputs identical, (d) pass-through overhead.
"""
import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

WARMUP, TIMED = 5, 30


def ft():
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "ft_stat_get"):
        return None
    lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]
    return lib


def stat(lib, name):
    v = ctypes.c_ulonglong(0)
    if lib.ft_stat_get(name.encode(), ctypes.byref(v)) != 0:
        raise RuntimeError("unknown stat " + name)
    return v.value


def build_model(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                      max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    return model.eval()


def count_kernel_nodes(graph):
    """Kernel nodes of a captured CUDA graph, asked of the driver."""
    cu = ctypes.CDLL("libcuda.so.1")
    n = ctypes.c_size_t(0)
    g = ctypes.c_void_p(graph)
    assert cu.cuGraphGetNodes(g, None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * n.value)()
    assert cu.cuGraphGetNodes(g, nodes, ctypes.byref(n)) == 0
    kinds = [ctypes.c_int(0) for _ in range(n.value)]
    for node, k in zip(nodes, kinds):
        assert cu.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(k)) == 0
    return sum(1 for k in kinds if k.value == 0)  # CU_GRAPH_NODE_TYPE_KERNEL


def time_forward(torch, fn, n_warm, n_timed):
    for _ in range(n_warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n_timed):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def count_kernels(torch, fn, lib):
    """Kernels torch.profiler sees for one call, and launches the library saw."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    before = stat(lib, "launches") if lib else None
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    after = stat(lib, "launches") if lib else None
    kernels = sum(1 for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA and
                  "memcpy" not in e.name.lower() and "memset" not in e.name.lower())
    return {"profiler_kernels": kernels,
            "library_launches": None if lib is None else after - before}


def parse_trace(path, pid):
    """alloc id -> (ptr, size) live at the first launch of each seq window, and
    launch seq -> list of (id, off)."""
    allocs, launches = {}, {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("pid") != pid:
                continue
            if r["ev"] == "alloc":
                allocs[r["id"]] = (int(r["ptr"], 16), r["size"])
            elif r["ev"] == "launch":
                launches[r["seq"]] = [(x["id"], x["off"]) for x in r.get("refs", [])]
    return allocs, launches


def param_coverage(model, lib, torch, fn):
    """Fraction of parameter bytes whose allocation (and whose exact address) a
    launch of one forward references."""
    torch.cuda.synchronize()
    a = stat(lib, "launches")
    fn()
    torch.cuda.synchronize()
    b = stat(lib, "launches")
    lib.ft_flush_trace()
    allocs, launches = parse_trace(os.environ["FT_TRACE"], os.getpid())
    ids, exact = set(), set()
    for seq in range(a, b):
        for i, off in launches.get(seq, []):
            ids.add(i)
            if i in allocs:
                exact.add(allocs[i][0] + off)
    total = by_alloc = by_addr = 0
    missing = []
    ranges = sorted((p, p + s, i) for i, (p, s) in allocs.items())
    for name, p in model.named_parameters():
        n = p.numel() * p.element_size()
        ptr = p.data_ptr()
        total += n
        owner = [i for lo, hi, i in ranges if lo <= ptr < hi]
        if owner and owner[-1] in ids:
            by_alloc += n
        else:
            missing.append(name)
        if ptr in exact:
            by_addr += n
    return {"launches": b - a, "param_bytes": total, "by_allocation": by_alloc / total,
            "by_exact_address": by_addr / total, "not_referenced": missing[:20]}


def run(args):
    import torch

    lib = ft()
    res = {"tag": args.tag, "round": args.round, "preloaded": lib is not None}
    outs = {}
    model = build_model(torch)
    res["param_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    torch.manual_seed(1)
    dec = torch.randint(0, 32000, (1, 1), device="cuda")
    pre = torch.randint(0, 32000, (1, 512), device="cuda")

    with torch.inference_mode():
        f_dec = lambda: model(dec, use_cache=False).logits
        f_pre = lambda: model(pre, use_cache=False).logits
        outs["decode"] = f_dec().clone()
        outs["prefill"] = f_pre().clone()
        res["decode_ms"] = time_forward(torch, f_dec, WARMUP, TIMED)
        res["prefill_ms"] = time_forward(torch, f_pre, 3, 10)

        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        f_mm = lambda: x @ w
        outs["matmul"] = f_mm().clone()

        def mlp(a, b):
            return torch.nn.functional.silu(a @ b) * a.float().mean().to(a.dtype) + a

        f_c = torch.compile(mlp)
        outs["compile"] = f_c(x, w).clone()
        f_comp = lambda: f_c(x, w)

        # CUDA graph of the decode forward (static input buffer).
        static = dec.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                model(static, use_cache=False)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        cap0 = stat(lib, "captured_launches") if lib else None
        with torch.cuda.graph(g):
            gout = model(static, use_cache=False).logits
        cap1 = stat(lib, "captured_launches") if lib else None
        graph_kernel_nodes = count_kernel_nodes(g.raw_cuda_graph())
        gl0 = stat(lib, "graph_launches") if lib else None
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        gl1 = stat(lib, "graph_launches") if lib else None
        outs["graph"] = gout.clone()

        if lib is not None:
            res["kernels"] = {
                "eager_decode": count_kernels(torch, f_dec, lib),
                "eager_prefill": count_kernels(torch, f_pre, lib),
                "cublas_matmul": count_kernels(torch, f_mm, lib),
                "torch_compile": count_kernels(torch, f_comp, lib),
            }
            res["graph"] = {"captured_launches": cap1 - cap0, "graph_kernel_nodes": graph_kernel_nodes,
                            "eager_kernels_same_forward": res["kernels"]["eager_decode"]["profiler_kernels"],
                            "replays": 3, "graph_launches_seen": gl1 - gl0}
            res["stats"] = {n: stat(lib, n) for n in
                            ("launches", "launches_unscanned", "refs_dropped", "allocs",
                             "frees", "stale_evicted", "copies", "memsets", "tensormaps",
                             "captures", "graph_instantiates", "graph_launches",
                             "getproc_hooked", "dlsym_hooked", "entrypoint_hooked")}
        if args.tag in ("trace", "expandable"):
            res["allocator"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
            res["coverage_decode"] = param_coverage(model, lib, torch, f_dec)
            res["coverage_prefill"] = param_coverage(model, lib, torch, f_pre)

    torch.save({k: v.cpu() for k, v in outs.items()}, os.path.join(args.out, f"{args.tag}-{args.round}.pt"))
    with open(os.path.join(args.out, f"{args.tag}-{args.round}.json"), "w") as f:
        json.dump(res, f)
    print(f"{args.tag} round {args.round}: decode median {statistics.median(res['decode_ms']):.3f} ms")


def overhead(args):
    """Decode forwards only: the pass-through overhead measurement."""
    import torch

    model = build_model(torch)
    torch.manual_seed(1)
    dec = torch.randint(0, 32000, (1, 1), device="cuda")
    with torch.inference_mode():
        times = time_forward(torch, lambda: model(dec, use_cache=False).logits, 20, 200)
    with open(os.path.join(args.out, f"ovh-{args.tag}-{args.round}.json"), "w") as f:
        json.dump({"tag": args.tag, "round": args.round, "decode_ms": times}, f)
    print(f"overhead {args.tag} round {args.round}: decode median {statistics.median(times):.3f} ms")


def overhead_table(out, lines, rep):
    files = sorted(glob.glob(os.path.join(out, "ovh-*.json")))
    if not files:
        return
    med = {}
    for p in files:
        r = json.load(open(p))
        med[(r["tag"], r["round"])] = statistics.median(r["decode_ms"])
    rounds = sorted({rd for (_, rd) in med})
    lines += ["", "## (d') overhead, decode forward only: 200 forwards per process after 20 warm-ups, "
              "processes alternating plain / preload, pinned to the same cores", "",
              "| round | plain median ms | preload median ms | ratio |", "|---|---|---|---|"]
    ratios = []
    for rd in rounds:
        a, b = med.get(("plain", rd)), med.get(("preload", rd))
        if a and b:
            ratios.append(b / a)
            lines.append(f"| {rd} | {a:.3f} | {b:.3f} | {b / a:.4f} |")
    plain = [v for (t, _), v in med.items() if t == "plain"]
    pre = [v for (t, _), v in med.items() if t == "preload"]
    rep["overhead_decode_rounds"] = ratios
    rep["overhead_decode_median_of_medians"] = statistics.median(pre) / statistics.median(plain)
    lines += ["", f"Median of the preload medians / median of the plain medians: "
              f"{rep['overhead_decode_median_of_medians']:.4f}; per-round ratios "
              f"{', '.join(f'{x:.4f}' for x in ratios)}; spread of the plain medians "
              f"{min(plain):.3f}..{max(plain):.3f} ms."]


def compare(args):
    import torch

    runs = {}
    for p in sorted(glob.glob(os.path.join(args.out, "*.json"))):
        if os.path.basename(p).startswith(("foundation", "ovh-")):
            continue
        r = json.load(open(p))
        r["outputs"] = torch.load(p[:-5] + ".pt")
        runs[(r["tag"], r["round"])] = r
    plain = [r for (t, _), r in runs.items() if t == "plain"]
    pre = [r for (t, _), r in runs.items() if t == "preload"]
    trace = [r for (t, _), r in runs.items() if t in ("trace", "expandable")]
    rep = {}
    lines = ["# libflextensor foundation check (GPU)", ""]

    # (c) outputs identical
    ref = plain[0]["outputs"]
    ident = {}
    for r in plain[1:] + pre + trace:
        for k, v in r["outputs"].items():
            ident.setdefault(k, True)
            ident[k] &= bool(torch.equal(v, ref[k]))
    rep["identical"] = ident
    lines += ["## (c) outputs with vs without the library (bitwise)", "",
              "| workload | identical |", "|---|---|"]
    lines += [f"| {k} | {'yes' if v else 'NO'} |" for k, v in ident.items()]

    # (a) launches vs profiler kernels
    k = pre[0]["kernels"]
    rep["kernels"] = k
    lines += ["", "## (a) kernel launches seen by the library vs torch.profiler kernels (one call)", "",
              "| workload | profiler kernels | library launches | equal |", "|---|---|---|---|"]
    for name, v in k.items():
        lines.append(f"| {name} | {v['profiler_kernels']} | {v['library_launches']} | "
                     f"{'yes' if v['profiler_kernels'] == v['library_launches'] else 'NO'} |")
    g = pre[0]["graph"]
    rep["graph"] = g
    lines += ["", f"CUDA graph of the decode forward: {g['captured_launches']} launches seen while "
              f"capturing, {g['graph_kernel_nodes']} kernel nodes in the captured graph "
              f"(the eager forward runs {g['eager_kernels_same_forward']} kernels); "
              f"{g['graph_launches_seen']} of {g['replays']} replays seen as cuGraphLaunch."]

    # (b) coverage
    if trace:
        lines += ["", "## (b) parameter bytes referenced by at least one launch of one forward", "",
                  "| allocator | forward | launches | param bytes | by allocation | by exact address | not referenced |",
                  "|---|---|---|---|---|---|---|"]
        for r in trace:
            for key in ("coverage_decode", "coverage_prefill"):
                c = r[key]
                rep[f"{r['allocator']}:{key}"] = c
                lines.append(f"| {r['allocator']} | {key[9:]} | {c['launches']} | {c['param_bytes']} | "
                             f"{100 * c['by_allocation']:.2f}% | {100 * c['by_exact_address']:.2f}% | "
                             f"{', '.join(c['not_referenced']) or '-'} |")
            st = r["stats"]
            lines.append(f"| {r['allocator']} | counters | allocs {st['allocs']}, "
                         f"cuGetProcAddress hooks {st['getproc_hooked']}, dlsym hooks {st['dlsym_hooked']}, "
                         f"cudaGetDriverEntryPoint hooks {st['entrypoint_hooked']} | | | | |")

    # (d) overhead
    lines += ["", "## (d) pass-through overhead (FT_ENABLED=1, no trace), alternating processes", "",
              "| round | plain decode median ms | preload decode median ms | ratio | plain prefill | preload prefill | ratio |",
              "|---|---|---|---|---|---|---|"]
    ratios_d, ratios_p = [], []
    for rd in sorted({r for (t, r) in runs if t == "plain"}):
        a, b = runs.get(("plain", rd)), runs.get(("preload", rd))
        if not a or not b:
            continue
        ad, bd = statistics.median(a["decode_ms"]), statistics.median(b["decode_ms"])
        ap, bp = statistics.median(a["prefill_ms"]), statistics.median(b["prefill_ms"])
        ratios_d.append(bd / ad)
        ratios_p.append(bp / ap)
        lines.append(f"| {rd} | {ad:.3f} | {bd:.3f} | {bd / ad:.4f} | {ap:.3f} | {bp:.3f} | {bp / ap:.4f} |")
    rep["overhead_decode"] = statistics.median(ratios_d) if ratios_d else None
    rep["overhead_prefill"] = statistics.median(ratios_p) if ratios_p else None
    n_launch = k["eager_decode"]["library_launches"]
    if ratios_d:
        lines += ["", f"Median ratio: decode {rep['overhead_decode']:.4f}, prefill {rep['overhead_prefill']:.4f} "
                  f"({n_launch} launches per decode forward; medians of {TIMED} forwards per process)."]
    overhead_table(args.out, lines, rep)
    s = pre[0]["stats"]
    lines += ["", "## library counters at the end of a preload run", "",
              "| counter | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in s.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    open(os.path.join(args.out, "foundation.md"), "w").write(text)
    json.dump(rep, open(os.path.join(args.out, "foundation.json"), "w"), indent=1, default=str)
    ok = (all(ident.values()) and all(v["profiler_kernels"] == v["library_launches"] for v in k.values())
          and all(r[k]["by_allocation"] == 1.0 for r in trace
                  for k in ("coverage_decode", "coverage_prefill")))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["run", "overhead", "compare"])
    ap.add_argument("--tag", default="plain")
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.cmd == "run":
        run(a)
        return 0
    if a.cmd == "overhead":
        overhead(a)
        return 0
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
