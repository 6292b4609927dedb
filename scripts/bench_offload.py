#!/usr/bin/env python3
"""Offloading benchmark (run by scripts/bench-offload.sh on a GPU machine).

A Llama-3-8B-shaped transformers model (32 layers, hidden 4096, GQA 32/8,
vocabulary 128256, random bf16 weights, 16 GB), three workloads: decode
batch 1 (a 32-token prompt, then greedy steps), prefill of 2048 tokens,
prefill of 4 x 4096 tokens (last position's logits).  One process per run:

  bench_offload.py plain OUT           fully resident; then, in the same
                                       process, the side-stream baseline
                                       (a framework-level prefetch of the
                                       next offloaded layer, diffusers-style)
                                       for every share in SHARES
  bench_offload.py lib OUT SHARE MODE  under LD_PRELOAD=libflextensor.so with
                                       the FT_* variables the shell script sets
  bench_offload.py fraction OUT SHARE  the FT_MAX_GPU_MEM_FRACTION whose budget
                                       leaves SHARE of the decoder weights off
                                       the GPU
  bench_offload.py report OUT          OUT/bench.md and OUT/bench.png

Every run measures the pinned host-to-device bandwidth itself; the floor of
a run is its offloaded bytes / that bandwidth, or the resident run's where
that is higher (link_rate: a process that measures a slow link must not
flatter its ratio).  Outputs (every step's and
repetition's logits) are compared bit for bit with the resident run's.
MODE may carry a suffix naming the run's FT_TRANSFER_COMPRESSION
(raw_block_transfer+always), which the shell script sets.  BENCH_WEIGHTS=
lognormal scales every weight matrix's rows by exp(N(0, 0.5)) after the
random init (heavier-tailed exponents, for the codec: its resident run must
be made with the same setting).  BENCH_LAYERS=n makes a smaller model of the same shape (quick checks);
BENCH_ONLY="decode,prefill 2048" runs only those workloads in a lib run
(a diagnosis, e.g. under FT_TRACE: the resident run still has them all;
or a program of one kind of pass: a prefill first in its process repeats
its warm-up, unrecorded, until the library runs its plan, at most
WARMUPS_MAX times).
BENCH_LINGER=dir keeps a lib run alive at its end until dir/go exists.
"""
import ctypes
import glob
import json
import os
import sys
import time

LAYERS = int(os.environ.get("BENCH_LAYERS", "32"))
CFG = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=LAYERS,
           num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
           max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False)
SHARES = [float(s) for s in os.environ.get("SHARES", "0.25 0.5 0.75").split()]
PROMPT, DECODE_STEPS, DECODE_TIMED = 32, 40, 10
PREFILL_REPS = 5  # timed, after one warm-up
WARMUPS_MAX = 16  # a prefill first in its process: warm-ups until INFERENCE
WORKLOADS = (("decode", 1, 1), ("prefill 2048", 1, 2048), ("prefill 4x4096", 4, 4096))
STATS = ("offloaded_bytes", "block_bytes", "offload_copy_bytes", "offload_misses",
         "plan_budget_bytes", "vmm_host_bytes", "vmm_migrated_bytes", "offload_demoted",
         "offload_tails", "offload_conflicts", "offload_roaming_refs", "refs_stale",
         "hidden_readers", "offload_store_bytes", "offload_coded_traps",
         "shm_created_bytes", "shm_attached_bytes", "nvme_bytes", "nvme_reads",
         "nvme_read_bytes", "nvme_read_ns", "nvme_misses", "offload_stage_us",
         "profile_adopted")


# A run that writes an FT_TRACE formats a JSON record at every launch (tens
# of microseconds of host time each): its times are not the library's.
TRACED = " (traced: its times include FT_TRACE's host cost)"


def traced():
    """Whether this process writes an FT_TRACE."""
    return os.environ.get("FT_TRACE", "none") not in ("", "none")


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


class Lib:
    """The library's counters and phase, when it is preloaded."""

    def __init__(self):
        self.c = ctypes.CDLL(None)
        self.on = hasattr(self.c, "ft_phase")
        if self.on:
            self.c.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]

    def stat(self, name):
        if not self.on:
            return 0
        v = ctypes.c_ulonglong(0)
        self.c.ft_stat_get(name.encode(), ctypes.byref(v))
        return v.value

    def phase(self):
        return self.c.ft_phase() if self.on else -1


def rss():
    """(VmRSS, VmHWM) of this process, bytes."""
    got = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            got[k] = int(v.split()[0]) * 1024
    return got.get("VmRSS", 0), got.get("VmHWM", 0)


def link_rate(run, plain):
    """The host-to-device rate a run's floor divides by: the higher of its
    own measure and its plain run's (one H100 process of the start-up
    harness measured 39.9 GB/s against 54.9 in all others, which would
    have flattered its ratio by a quarter)."""
    return max(run["bw"], plain["bw"])


def h2d_bandwidth(torch):
    """Pinned host-to-device copy bandwidth, bytes/s (median of 5 x 512 MiB)."""
    n = 512 << 20
    src = torch.empty(n, dtype=torch.uint8).pin_memory()
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    ts = []
    for _ in range(6):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    del src, dst
    torch.cuda.empty_cache()
    return n / median(ts[1:])


def build(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = LlamaForCausalLM(LlamaConfig(**CFG)).eval()
        if os.environ.get("BENCH_WEIGHTS") == "lognormal":
            with torch.no_grad():
                for p in m.parameters():
                    if p.dim() == 2:
                        p.mul_(torch.exp(torch.randn(p.shape[0], 1) * 0.5).to(p.dtype))
    torch.set_default_dtype(torch.float32)
    return m


def sizes(m):
    params = sum(p.numel() * p.element_size() for p in m.parameters())
    layer = sum(p.numel() * p.element_size() for p in m.model.layers[0].parameters())
    return params, layer


class Timer:
    def __init__(self, torch, lib):
        self.torch, self.lib = torch, lib
        self.ms, self.copied, self.misses, self.phases, self.logits = [], [], [], [], []

    def __call__(self, fn):
        t, lib = self.torch, self.lib
        c0, m0 = lib.stat("offload_copy_bytes"), lib.stat("offload_misses")
        t.cuda.synchronize()
        t0 = time.perf_counter()
        lg = fn()
        t.cuda.synchronize()
        self.ms.append((time.perf_counter() - t0) * 1e3)
        self.copied.append(lib.stat("offload_copy_bytes") - c0)
        self.misses.append(lib.stat("offload_misses") - m0)
        self.phases.append(lib.phase())
        self.logits.append(lg.float().cpu())
        return lg

    def drop(self):
        """Forgets the last forward (a warm-up beyond the first)."""
        for v in (self.ms, self.copied, self.misses, self.phases, self.logits):
            v.pop()


def workload(name, b, n, m, torch, lib, t_start=None):
    """Runs one workload: its timed forwards, logits, memory."""
    from transformers import DynamicCache

    torch.cuda.reset_peak_memory_stats()
    g = torch.Generator(device="cuda").manual_seed(b * 100003 + n)
    tm = Timer(torch, lib)
    ready = None
    with torch.inference_mode():
        if name == "decode":
            tok = torch.randint(0, CFG["vocab_size"], (1, PROMPT), device="cuda", generator=g)
            cache = DynamicCache()
            for _ in range(DECODE_STEPS):
                lg = tm(lambda: m(tok, past_key_values=cache, use_cache=True,
                                  logits_to_keep=1).logits[:, -1])
                tok = lg.argmax(-1, keepdim=True)
                if ready is None and t_start is not None and tm.phases[-1] in (-1, 2):
                    ready = time.perf_counter() - t_start
            timed = slice(DECODE_STEPS - DECODE_TIMED, DECODE_STEPS)
        else:
            ids = torch.randint(0, CFG["vocab_size"], (b, n), device="cuda", generator=g)
            fwd = lambda: m(ids, use_cache=False, logits_to_keep=1).logits[:, -1]
            tm(fwd)
            # first in its process (BENCH_ONLY): the library learns from
            # these passes; more warm-ups until it runs the plan, unrecorded
            for _ in range(WARMUPS_MAX):
                if not lib.on or lib.phase() == 2:
                    break
                tm(fwd)
                tm.drop()
            for _ in range(PREFILL_REPS):
                tm(fwd)
            timed = slice(1, 1 + PREFILL_REPS)
    free, total = torch.cuda.mem_get_info()
    return {"ms": tm.ms, "timed": [timed.start, timed.stop], "copied": tm.copied,
            "misses": tm.misses, "phases": tm.phases, "logits": torch.stack(tm.logits),
            "device_used": total - free, "total": total,
            "torch_peak_reserved": torch.cuda.max_memory_reserved(), "ready_s": ready}


class SideStreamPrefetch:
    """The framework-level baseline: the offloaded layers' parameters live in
    pinned host memory; two GPU slots hold two layers; a pre-forward hook
    waits for its layer's copy and starts the next offloaded layer's copy on
    a side stream once that slot's previous user is done (diffusers' group
    offloading with a stream, at layer granularity)."""

    def __init__(self, m, torch, ids):
        self.torch, self.ids = torch, ids
        layers = m.model.layers
        self.layers = [layers[i] for i in ids]
        self.orig = [[p.data for p in L.parameters()] for L in self.layers]
        self.host = [[torch.empty(p.shape, dtype=p.dtype, pin_memory=True).copy_(p)
                      for p in L.parameters()] for L in self.layers]
        self.slots = [[torch.empty_like(p) for p in self.layers[0].parameters()] for _ in range(2)]
        self.stream = torch.cuda.Stream()
        self.loaded = [torch.cuda.Event() for _ in ids]
        self.freed = [torch.cuda.Event() for _ in range(2)]
        for j, L in enumerate(self.layers):
            for p, s in zip(L.parameters(), self.slots[j % 2]):
                p.data = s
        self.hooks = []
        for j, L in enumerate(self.layers):
            self.hooks.append(L.register_forward_pre_hook(lambda mod, a, j=j: self.pre(j)))
            self.hooks.append(L.register_forward_hook(lambda mod, a, o, j=j: self.post(j)))
        self.load(0)

    def load(self, k):
        s = k % 2
        with self.torch.cuda.stream(self.stream):
            self.stream.wait_event(self.freed[s])
            for d, h in zip(self.slots[s], self.host[k]):
                d.copy_(h, non_blocking=True)
            self.loaded[k].record(self.stream)

    def pre(self, j):
        self.torch.cuda.current_stream().wait_event(self.loaded[j])
        self.load((j + 1) % len(self.ids))

    def post(self, j):
        self.freed[j % 2].record(self.torch.cuda.current_stream())

    def remove(self):
        self.torch.cuda.synchronize()
        for h in self.hooks:
            h.remove()
        for L, o in zip(self.layers, self.orig):
            for p, d in zip(L.parameters(), o):
                p.data = d


def spread(n, share):
    """round(share x n) layer indices spread evenly (an even count, so the
    two slots alternate cyclically)."""
    k = int(round(share * n / 2)) * 2
    return [int(i * n / k) for i in range(k)] if k else []


def no_cudnn_attention(torch):
    """cuDNN's SDPA builds a kernel for every new KV length (a new function
    handle each decode step on the H200, ~60 ms of host time before it):
    a process pays that once per length, so the resident run paid it and
    the baseline after it in the same process did not.  Every run uses the
    other SDPA backends instead, so all pay the same."""
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def save(out, name, res):
    import torch

    torch.save(res, os.path.join(out, name + ".pt"))


def run_plain(out):
    import torch

    no_cudnn_attention(torch)
    lib = Lib()
    bw = h2d_bandwidth(torch)
    t0 = time.perf_counter()
    m = build(torch)
    params, layer = sizes(m)
    res = {"kind": "resident", "bw": bw, "params": params, "layer": layer,
           "decoder": layer * LAYERS, "w": {}}
    for name, b, n in WORKLOADS:
        res["w"][name] = workload(name, b, n, m, torch, lib, t0)
        print(f"resident {name}: {median(res['w'][name]['ms'][slice(*res['w'][name]['timed'])]):.1f} ms",
              flush=True)
    res["rss"] = rss()
    save(out, "resident", res)
    for share in SHARES:
        ids = spread(LAYERS, share)
        base = SideStreamPrefetch(m, torch, ids)
        r = {"kind": "baseline", "share": share, "bw": bw, "params": params,
             "offloaded": layer * len(ids), "on_gpu": params - layer * len(ids) + 2 * layer,
             "w": {}}
        for name, b, n in WORKLOADS:
            r["w"][name] = workload(name, b, n, m, torch, lib)
        base.remove()
        del base
        torch.cuda.empty_cache()
        r["rss"] = rss()
        save(out, f"baseline-{share}", r)
        print(f"baseline {share}: done", flush=True)


def run_lib(out, share, mode):
    import torch

    no_cudnn_attention(torch)
    lib = Lib()
    if not lib.on:
        sys.exit("the library is not preloaded")
    bw = h2d_bandwidth(torch)
    t0 = time.perf_counter()
    m = build(torch)
    params, layer = sizes(m)
    r = {"kind": mode, "share": float(share), "bw": bw, "params": params, "w": {},
         "traced": traced()}
    only = [w for w in os.environ.get("BENCH_ONLY", "").split(",") if w]
    for name, b, n in WORKLOADS:
        if only and name not in only:
            continue
        r["w"][name] = workload(name, b, n, m, torch, lib, t0)
        print(f"{mode} {share} {name}: phases {r['w'][name]['phases']}", flush=True)
        # saved after every workload: a run stopped by its time limit
        # still reports the workloads it finished
        st = {s: lib.stat(s) for s in STATS}
        r["stats"] = st
        r["offloaded"] = st["offloaded_bytes"]
        r["on_gpu"] = params - st["offloaded_bytes"] + st["block_bytes"]
        r["rss"] = rss()
        save(out, f"{mode}-{share}", r)
    ref = torch.load(os.path.join(out, "resident.pt"))["w"]
    bad = [n for n in r["w"] if not torch.equal(r["w"][n]["logits"].view(torch.int32),
                                                ref[n]["logits"].view(torch.int32))]
    print(f"{mode} {share}: outputs " + (f"DIFFER in {bad}" if bad else "bit-identical"), flush=True)
    linger()
    sys.exit(3 if bad else 0)


def linger():
    """BENCH_LINGER=dir: says the run is over (dir/ready.<pid>) and waits for
    dir/go, at most 10 minutes: processes sharing a host store
    (tests/gpu/shm.sh) are measured while both are alive."""
    d = os.environ.get("BENCH_LINGER")
    if not d:
        return
    open(os.path.join(d, f"ready.{os.getpid()}"), "w").close()
    for _ in range(6000):
        if os.path.exists(os.path.join(d, "go")):
            return
        time.sleep(0.1)


def budget_fraction(params, decoder, share, total):
    """The FT_MAX_GPU_MEM_FRACTION whose budget (for the weights alone, a
    fraction of the device's total) leaves share of the decoder's weights
    off a GPU of total bytes (also the serving and tensor-parallel checks')."""
    return (params - float(share) * decoder) / total


def write_table(out, name, lines):
    """A report's Markdown lines, printed and written to out/name."""
    text = "\n".join(lines)
    print(text)
    open(os.path.join(out, name), "w").write(text + "\n")


def fraction(out, share):
    import torch

    r = torch.load(os.path.join(out, "resident.pt"))
    print(f"{budget_fraction(r['params'], r['decoder'], share, r['w']['decode']['total']):.6f}")


def report(out):
    import torch

    res = torch.load(os.path.join(out, "resident.pt"))
    runs = [torch.load(p) for p in sorted(glob.glob(os.path.join(out, "*.pt")))
            if not p.endswith("resident.pt")]
    gib = 2 ** 30
    lines = [f"# Offloading benchmark: Llama-3-8B shape ({LAYERS} layers, "
             f"{res['params'] / 1e9:.2f} GB bf16), H2D {res['bw'] / 1e9:.1f} GB/s", "",
             "| workload | run | share of decoder offloaded | offloaded GB | forward ms | "
             "resident ms | floor ms | ratio to max(resident, floor) | weights on GPU GiB "
             "(budget) | device used GiB | host RSS GiB (peak) | ready s | copied GB / forward | "
             "late loads / forward | host store GB (coded traps) | bit-identical |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ok, plot = True, []
    for name, _, _ in WORKLOADS:
        base = res["w"][name]
        t = slice(*base["timed"])
        res_ms = median(base["ms"][t])
        lines.append(f"| {name} | resident | 0 | 0 | {res_ms:.1f} | {res_ms:.1f} | - | 1.000 | "
                     f"{res['params'] / gib:.2f} | {base['device_used'] / gib:.2f} | "
                     f"{res['rss'][0] / gib:.1f} ({res['rss'][1] / gib:.1f}) | "
                     f"{ready(res)} | 0 | 0 | - | yes |")
        for r in sorted(runs, key=lambda r: (r["share"], r["kind"])):
            w = r["w"].get(name)
            if w is None:
                continue
            t = slice(*w["timed"])
            ms = median(w["ms"][t])
            floor = max(r["offloaded"] / link_rate(r, res) * 1e3, disk_floor(r))
            ratio = ms / max(res_ms, floor)
            same = torch.equal(w["logits"].view(torch.int32), base["logits"].view(torch.int32))
            inference = r["kind"] == "baseline" or all(p == 2 for p in w["phases"][t])
            budget = r.get("stats", {}).get("plan_budget_bytes", 0)
            ok &= same and inference and (not budget or r["on_gpu"] <= budget)
            if r["kind"] == "allocation_block_transfer" and abs(r["share"] - 0.5) < 1e-6:
                ok &= ratio <= 1.05
            plot.append((name, r["kind"], r["share"], ratio))
            lines.append(
                f"| {name} | {r['kind']}{TRACED if r.get('traced') else ''} | {r['share']:.2f} ({r['offloaded'] / res['decoder']:.2f}) | "
                f"{r['offloaded'] / 1e9:.2f} | {ms:.1f} | {res_ms:.1f} | {floor:.1f} | {ratio:.3f} | "
                f"{r['on_gpu'] / gib:.2f}" + (f" ({budget / gib:.2f})" if budget else "") +
                f" | {w['device_used'] / gib:.2f} | {r['rss'][0] / gib:.1f} ({r['rss'][1] / gib:.1f}) | "
                f"{ready(r)} | "
                f"{median(w['copied'][t]) / 1e9:.2f} | {median(w['misses'][t]):.0f} | "
                f"{store(r)} | {'yes' if same else 'NO'}"
                f"{'' if inference else ' (not in INFERENCE)'} |")
    for r in runs:
        if disk_rate(r):
            lines.append(f"- {r['kind']} {r['share']}: {r['stats']['nvme_bytes'] / 1e9:.2f} GB of "
                         f"the store in the NVMe tier's file, read at {disk_rate(r) / 1e9:.2f} GB/s "
                         f"(the link: {r['bw'] / 1e9:.1f} GB/s), {r['stats']['nvme_misses']} "
                         f"reads waited for; its floor counts the disk: max(offloaded / link, "
                         f"file bytes / disk)")
    lines += ["", "ratio = forward / max(resident forward, offloaded bytes / H2D bandwidth "
              "measured in the same process, or in the resident run where that was higher); forward = median of the timed forwards (decode: "
              f"the last {DECODE_TIMED} of {DECODE_STEPS} steps; prefill: {PREFILL_REPS} after "
              "one warm-up); ready = process start of the model build to the end of the first "
              "decode step in INFERENCE (resident: of the first step), in parentheses the "
              "seconds of it the plan's application took (the store filled or mapped, pinned); "
              "late loads = trap "
              "copies issued only when a launch already needed them (offload_misses)."]
    write_table(out, "bench.md", lines)
    try:
        draw(plot, os.path.join(out, "bench.png"))
    except ImportError:
        print("matplotlib is missing: no plot")
    return 0 if ok else 1


def disk_rate(r):
    """The NVMe tier's reads, bytes/s as its reader thread saw them (0: none)."""
    st = r.get("stats", {})
    return st["nvme_read_bytes"] / st["nvme_read_ns"] * 1e9 if st.get("nvme_read_ns") else 0


def disk_floor(r):
    """ms a pass needs to read the NVMe tier's traps at the disk's rate."""
    rate = disk_rate(r)
    return r["stats"]["nvme_bytes"] / rate * 1e3 if rate else 0


def store(r):
    st = r.get("stats", {})
    if r["kind"] == "baseline" or not st.get("offload_store_bytes"):
        return "-"
    shared = (f", shared: filled {st['shm_created_bytes'] / 1e9:.2f}"
              if st.get("shm_created_bytes") else "")
    if st.get("shm_attached_bytes"):
        shared += f", {st['shm_attached_bytes'] / 1e9:.2f} mapped"
    return f"{st['offload_store_bytes'] / 1e9:.2f} ({st.get('offload_coded_traps', 0)}{shared})"


def ready(r):
    """Seconds to INFERENCE, and of them applying the plan (offload_stage_us)."""
    s = r["w"].get("decode", {}).get("ready_s")  # none without decode (BENCH_ONLY)
    stage = r.get("stats", {}).get("offload_stage_us")
    return "-" if s is None else f"{s:.1f}" + (f" ({stage / 1e6:.2f})" if stage else "")


def draw(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(WORKLOADS), figsize=(5 * len(WORKLOADS), 4), sharey=True)
    for ax, (name, _, _) in zip(axes, WORKLOADS):
        kinds = sorted({k for n, k, s, q in rows if n == name})
        marks = {"allocation_block_transfer": "o-", "raw_block_transfer": "s-", "baseline": "^--"}
        for kind in kinds:
            mark = marks.get(kind, "d-")
            pts = sorted((s, q) for n, k, s, q in rows if n == name and k == kind)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], mark, label=kind)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.axhline(1.05, color="gray", lw=0.8, ls=":")
        ax.set_title(name)
        ax.set_xlabel("share of decoder weights offloaded")
    axes[0].set_ylabel("forward / max(resident, transfer floor)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "plain":
        run_plain(sys.argv[2])
    elif cmd == "lib":
        run_lib(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "fraction":
        fraction(sys.argv[2], sys.argv[3])
    else:
        sys.exit(report(sys.argv[2]))
