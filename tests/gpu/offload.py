#!/usr/bin/env python3
"""GPU check of offloading (issue 4), one run per process:

  offload.py run WORKLOAD TAG OUT   a prompt then STEPS greedy decode steps of
                                    WORKLOAD (discovery.py's hf or manual);
                                    saves every step's last-position logits,
                                    per-step times, phases, the library's
                                    counters and device memory to
                                    OUT/WORKLOAD-TAG.pt
  offload.py fraction WORKLOAD OUT TARGET   from the plain run: the
                                    FT_MAX_GPU_MEM_FRACTION whose budget for
                                    the weights is TARGET bytes (a share of
                                    the parameters when <= 1)
  offload.py report OUT             compares every preloaded run with the
                                    plain one: logits bitwise equal, bytes
                                    offloaded, device memory, step times vs
                                    resident and vs the transfer floor
Run by offload.sh.  No downloads: random weights, seeded.
"""
import ctypes
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from discovery import build, make_step  # noqa: E402
from models import capture_graph  # noqa: E402

STEPS = 40
STATS = ("offloaded_bytes", "block_bytes", "offload_copies", "offload_misses", "vmm_allocs",
         "vmm_bytes", "passes_eager", "offload_foreign_refs", "offload_copy_bytes",
         "plan_budget_bytes")


def stat(lib, name):
    lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]
    v = ctypes.c_ulonglong(0)
    lib.ft_stat_get(name.encode(), ctypes.byref(v))
    return v.value


def modify(m, torch):
    """In INFERENCE, the program rewrites a weight with a device-to-device
    copy and saves another to the host (a checkpoint): the write must not be
    lost to the next load, the read must see the weight.  Returns a digest of
    the saved weight."""
    w = m.layers[2].qkv.weight
    w.copy_(w.flip(0))
    saved = m.layers[4].up.weight.cpu()
    return float(saved.float().sum())


GRAPH_AT = STEPS - 15  # graph runs: the decode step captured here (in INFERENCE)


class GraphStep:
    """The hand-written decoder's decode step captured as a CUDA graph with
    static inputs (the token, its position), replayed for every later step:
    the library must page the offloaded weights inside the graph."""

    def __init__(self, m, torch, tok, pos):
        self.tok = tok.clone()
        self.pos = torch.full((1,), pos, dtype=torch.long, device="cuda")
        self.graph, self.out = capture_graph(lambda: m(self.tok, self.pos)[:, -1:])

    def __call__(self, tok, pos):
        self.tok.copy_(tok)
        self.pos.fill_(pos)
        self.graph.replay()
        return self.out.clone()


def run(workload, tag, out):
    import torch

    lib = ctypes.CDLL(None)
    pre = hasattr(lib, "ft_phase")
    m, _ = build(workload, torch)
    params = sum(p.numel() * p.element_size() for p in m.parameters())
    times, phases, logits, copied = [], [], [], []
    modifies = tag.startswith("modify") or tag == "plain-modify"
    graphs = tag.startswith("graph") or tag == "plain-graph"
    digest, graph_step = None, None
    with torch.inference_mode():
        step, tok, _ = make_step(workload, m, torch)
        for i in range(STEPS):
            if modifies and i == STEPS - 10:
                digest = modify(m, torch)
            # manual: the prompt is 16 tokens, so decode step i is at position 15 + i
            if graphs and i == GRAPH_AT:
                graph_step = GraphStep(m, torch, tok, 15 + i)
            before = stat(lib, "offload_copy_bytes") if pre else 0
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            lg = graph_step(tok, 15 + i) if graph_step else step(tok)
            tok = lg.argmax(-1)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            copied.append((stat(lib, "offload_copy_bytes") if pre else 0) - before)
            logits.append(lg.float().cpu())
            phases.append(lib.ft_phase() if pre else -1)
    free, total = torch.cuda.mem_get_info()
    res = {"workload": workload, "tag": tag, "times_ms": times, "phases": phases, "copied": copied,
           "modify": modifies, "graph": graphs, "digest": digest,
           "logits": torch.cat(logits), "params": params, "used": total - free, "total": total,
           "reserved": torch.cuda.memory_reserved(),
           "stats": {s: stat(lib, s) for s in STATS} if pre else {}}
    torch.save(res, os.path.join(out, f"{workload}-{tag}.pt"))
    print(f"{workload} {tag}: phases {phases}, stats {res['stats']}")


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


def report(out):
    import torch

    lines, ok = ["# Offloading on the H200", ""], True
    for plain_path in sorted(glob.glob(os.path.join(out, "*-plain.pt"))):
        plain = torch.load(plain_path)
        mod_path = plain_path.replace("-plain.pt", "-plain-modify.pt")
        plain_mod = torch.load(mod_path) if os.path.exists(mod_path) else None
        graph_path = plain_path.replace("-plain.pt", "-plain-graph.pt")
        plain_graph = torch.load(graph_path) if os.path.exists(graph_path) else None
        w = plain["workload"]
        # steady steps: the last half, where every preloaded run is in INFERENCE
        half = STEPS // 2
        res_ms = median(plain["times_ms"][half:])
        lines += [f"## {w}: {plain['params'] / 2**20:.0f} MiB of parameters, resident decode "
                  f"step {res_ms:.3f} ms (median of steps {half + 1}..{STEPS})", "",
                  "| run | logits bitwise equal | offloaded MiB | blocks MiB | weights on GPU MiB "
                  "(budget) | device used MiB (plain " + f"{plain['used'] / 2**20:.0f}) | step ms | "
                  "copied MiB/step | floor ms | step / max(resident, floor) | misses |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for path in sorted(glob.glob(os.path.join(out, f"{w}-*.pt"))):
            r = torch.load(path)
            if r["tag"].startswith("plain"):
                continue
            base = plain_mod if r["modify"] else plain_graph if r.get("graph") else plain
            # bit for bit (torch.equal calls NaN unequal to itself)
            same = base is not None and \
                torch.equal(r["logits"].view(torch.int32), base["logits"].view(torch.int32)) and \
                r["digest"] == base["digest"]
            inference = r["phases"][half] == 2 if r["phases"] else False
            ok &= same and inference
            st = r["stats"]
            ms = median(r["times_ms"][half:])
            cp = median(r["copied"][half:])
            floor = cp / 54e9 * 1e3  # the H200's 54 GB/s of pinned host-to-device copies
            on_gpu = plain["params"] - st["offloaded_bytes"] + st["block_bytes"]
            budget = f" ({st['plan_budget_bytes'] / 2**20:.0f})" if st["plan_budget_bytes"] else ""
            lines.append(f"| {r['tag']} | {'yes' if same else 'NO'} | "
                         f"{st['offloaded_bytes'] / 2**20:.0f} | {st['block_bytes'] / 2**20:.0f} | "
                         f"{on_gpu / 2**20:.0f}{budget} | {r['used'] / 2**20:.0f} | {ms:.3f} | "
                         f"{cp / 2**20:.0f} | {floor:.3f} | {ms / max(res_ms, floor):.3f} | "
                         f"{st['offload_misses']} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    open(os.path.join(out, "offload.md"), "w").write(text)
    return 0 if ok else 1


def fraction(workload, out, target):
    import torch

    r = torch.load(os.path.join(out, f"{workload}-plain.pt"))
    # the library's budget is for the weights alone (fraction x total, as
    # upstream): target bytes, or a share of the parameters when <= 1
    t = float(target)
    t = t * r["params"] if t <= 1 else t
    print(f"{t / r['total']:.6f}")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "fraction":
        fraction(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(report(sys.argv[2]))
