#!/usr/bin/env python3
"""Model zoo GPU check: transformers models of several families, randomly
initialised (no downloads), run plain and under the library.

  zoo.py run MODEL TAG OUT        one process: PREFILLS prefills of 1 x LEN
                                  tokens (each its own KV cache), then a
                                  DECODE-step greedy decode with a KV cache;
                                  saves every forward's last-position logits,
                                  times, bytes copied into blocks, phases and
                                  the library's counters to OUT/MODEL-TAG.pt
  zoo.py fraction MODEL OUT SHARE the FT_MAX_GPU_MEM_FRACTION that leaves
                                  SHARE of the decoder's weights off the GPU
  zoo.py report OUT               every library run against its model's
                                  plain run: logits bit for bit, prefill and
                                  decode time against max(resident, floor)

Environment: ZOO_PREFILLS (32), ZOO_LEN (1024), ZOO_DECODE (40), ZOO_LAYERS
(the model's own depth when unset), ZOO_TRUTH=1 (also writes
OUT/MODEL-TAG.truth.json: every parameter's address, size and name, and each
forward's launch window, to read an FT_TRACE of the run against).
The floor of a forward is the bytes the plan offloads over the pinned
host-to-device bandwidth measured in the same process.
"""
import ctypes
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from bench_offload import (Lib, TRACED, budget_fraction, h2d_bandwidth, link_rate, median,  # noqa: E402
                           traced, write_table)

PREFILLS = int(os.environ.get("ZOO_PREFILLS", "32"))
LEN = int(os.environ.get("ZOO_LEN", "1024"))
DECODE = int(os.environ.get("ZOO_DECODE", "40"))
TIMED = 10  # the last TIMED prefills and decode steps are timed
STATS = ("offloaded_bytes", "block_bytes", "offload_copy_bytes", "offload_copies",
         "offload_misses", "offload_conflicts", "offload_demoted", "offload_tails",
         "offload_roaming_refs", "verify_failures", "plan_budget_bytes", "vmm_host_bytes",
         "hidden_readers", "offload_ignored_refs", "offload_held", "offload_sliced_bytes",
         "offload_slice_copies", "offload_slice_bytes", "offload_slice_wholes",
         "offload_table_holds")

# family -> (config class, model class, config[, options]); sizes that make
# offloading matter on a 141 GB GPU at a small fraction. Options: compile
# (the model's forward under torch.compile, default mode: Triton kernels),
# decode_first (the decode steps before the prefills, so that the library
# learns from passes that read only the experts routed to one token),
# experts (transformers' experts backend: "eager" loops over the routed
# experts, one GEMM each; the default, grouped_mm, reads them through a
# pointer array))
MODELS = {
    # Qwen2-7B's shape: q/k/v biases, large vocabulary, untied head (15.2 GB)
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                   num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                   max_position_embeddings=4096, tie_word_embeddings=False)),
    # GPT-2 XL's shape: fused QKV in Conv1D, LayerNorm with bias, GELU,
    # learned positions, tied head (3.2 GB)
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_embd=1600, n_layer=48, n_head=25, n_positions=2048, vocab_size=50257)),
    # Gemma-2B's shape: tied embeddings, (1 + w) RMSNorm, GeGLU, one KV head
    # (5 GB)
    "gemma": ("GemmaConfig", "GemmaForCausalLM",
              dict(hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
                   num_attention_heads=8, num_key_value_heads=1, head_dim=256,
                   vocab_size=256000, max_position_embeddings=4096)),
    # Phi-3-mini's shape: fused qkv_proj and gate_up_proj (7.6 GB)
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
                  max_position_embeddings=4096, tie_word_embeddings=False)),
    # Mixtral's shape at half width: 8 experts, 2 routed per token (5.8 GB);
    # decode first, so the passes it learns from read 2 of 8 experts a layer
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(hidden_size=2048, intermediate_size=7168, num_hidden_layers=8,
                     num_attention_heads=16, num_key_value_heads=8, num_local_experts=8,
                     num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=4096,
                     tie_word_embeddings=False),
                dict(decode_first=True)),
    # the same, its experts run by transformers' loop over routed experts:
    # FT_EXPERT_PAGING loads the routed ones only
    "mixtral-loop": ("MixtralConfig", "MixtralForCausalLM",
                     dict(hidden_size=2048, intermediate_size=7168, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=8, num_local_experts=8,
                          num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=4096,
                          tie_word_embeddings=False),
                     dict(decode_first=True, experts="eager")),
    # Llama-3-8B's width at 8 layers under torch.compile (5.6 GB)
    "llama-compiled": ("LlamaConfig", "LlamaForCausalLM",
                       dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
                            num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                            max_position_embeddings=4096, tie_word_embeddings=False),
                       dict(compile=True)),
}


def deterministic(torch):
    """The plain run must repeat itself bit for bit, or comparing it with the
    library's says nothing: fixed cuBLAS workspace, deterministic algorithms,
    no cuDNN SDPA (it builds kernels per length)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    if hasattr(torch.utils, "deterministic"):
        torch.utils.deterministic.fill_uninitialized_memory = False
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def build(name, torch):
    import transformers

    cfg_cls, model_cls, cfg = MODELS[name][:3]
    cfg = dict(cfg)
    if os.environ.get("ZOO_LAYERS"):
        cfg["n_layer" if "n_layer" in cfg else "num_hidden_layers"] = int(os.environ["ZOO_LAYERS"])
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = getattr(transformers, model_cls)(getattr(transformers, cfg_cls)(**cfg)).eval()
    torch.set_default_dtype(torch.float32)
    return m, cfg


def options(name):
    return MODELS[name][3] if len(MODELS[name]) > 3 else {}


def routing(m, torch):
    """A list that the top-k expert indices of every MoE layer's forward are
    appended to, with the layer's expert count (transformers' *Experts
    modules); it stays empty for a dense model."""
    seen = []

    def hook(mod, args, kwargs):
        for v in list(args) + list(kwargs.values()):
            if torch.is_tensor(v) and v.dtype in (torch.int64, torch.int32):
                seen.append((v, mod.num_experts))
                return

    for mod in m.modules():
        if type(mod).__name__.endswith("Experts") and hasattr(mod, "num_experts"):
            mod.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


def routed_share(seen, torch):
    """The share of the experts a forward routed to, over its MoE layers
    (None for a dense model); empties seen."""
    if not seen:
        return None
    r = sum(int(torch.unique(i).numel()) for i, _ in seen) / sum(n for _, n in seen)
    seen.clear()
    return r


def nan_watch(m, torch, where, lib, out):
    """ZOO_NAN=1: after each forward, the first module (in the order they
    ran) whose output holds NaN or Inf is said on stderr, once, with the
    forward it ran in (where: [kind, index]) and the launches it made:
    under FT_VERIFY a launch that read a poisoned block, a trap the library
    did not load for it, lies in that module.  The checks are queued on the
    GPU with the model's work and read at the forward's end (the run's
    timing stays close to an unwatched one: a check that synchronised at
    each module never saw the failure); the library's journal of its steps
    (ft_verify_journal) goes to out/journal-<pid>.txt then.  Returns the
    function forward() calls once its forward is done."""
    names = {mod: n for n, mod in m.named_modules()}
    flags = []
    said = []

    def tensors(x):
        if torch.is_tensor(x):
            return [x] if x.is_floating_point() else []
        if isinstance(x, (tuple, list)):
            return [t for v in x for t in tensors(v)]
        if isinstance(x, dict):
            return [t for v in x.values() for t in tensors(v)]
        return []

    def hook(mod, args, kwargs, res):
        ts = tensors(res)
        if not said and ts:
            ok = torch.stack([torch.isfinite(t).all() for t in ts]).all()
            flags.append((names[mod], mod, ok, lib.stat("launches")))

    for mod in m.modules():
        mod.register_forward_hook(hook, with_kwargs=True)

    def done():
        before = lib.stat("launches")
        got = [(n, mod, bool(ok), at) for n, mod, ok, at in flags]
        flags.clear()
        bad = [i for i, g in enumerate(got) if not g[2]]
        if said or not bad:
            return
        i = bad[0]
        name, mod, _, at = got[i]
        prev = got[i - 1][3] if i else 0
        said.append(name)
        params = [(n, hex(p.data_ptr()), p.numel() * p.element_size())
                  for n, p in mod.named_parameters(recurse=False)]
        path = os.path.join(out, f"journal-{os.getpid()}.txt")
        wrote = lib.c.ft_verify_journal(path.encode()) == 0 if lib.on else False
        print(f"ZOO_NAN: first at {name} ({type(mod).__name__}), {where[0]} {where[1]}, "
              f"launches {prev}..{at} (the forward ended at {before}), its own parameters "
              f"{params}; journal {path if wrote else 'not written'}",
              file=sys.stderr, flush=True)

    return done


def decoder_bytes(m):
    """The bytes of the model's largest ModuleList (its decoder layers,
    whatever the family calls them)."""
    import torch

    return max(sum(p.numel() * p.element_size() for p in x.parameters())
               for x in m.modules() if isinstance(x, torch.nn.ModuleList))


def run(name, tag, out):
    import torch
    from transformers import DynamicCache

    deterministic(torch)
    lib = Lib()
    bw = h2d_bandwidth(torch)
    m, cfg = build(name, torch)
    opts = options(name)
    if opts.get("experts"):
        # (transformers 5: without the method, the model's own loop runs)
        if hasattr(m, "set_experts_implementation"):
            m.set_experts_implementation(opts["experts"])
        else:
            print(f"{name}: transformers has no experts backends; its default runs")
    seen = routing(m, torch)
    where = ["", 0]
    watched = (nan_watch(m, torch, where, lib, out) if os.environ.get("ZOO_NAN") == "1"
               else lambda: None)
    params = sum(p.numel() * p.element_size() for p in m.parameters())
    g = torch.Generator(device="cpu").manual_seed(1)
    gd = torch.Generator(device="cpu").manual_seed(2)  # decode's prompt: any PREFILLS
    vocab = cfg["vocab_size"]
    rec = {"prefill": [], "decode": []}
    windows = []

    def forward(kind, fn):
        where[:] = [kind, len(rec[kind])]
        c0 = lib.stat("offload_copy_bytes")
        s0 = lib.stat("launches")
        seen.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        lg = fn()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        watched()
        windows.append({"kind": kind, "first": s0, "end": lib.stat("launches")})
        rec[kind].append({"ms": ms, "copied": lib.stat("offload_copy_bytes") - c0,
                          "phase": lib.phase(), "logits": lg.float().cpu(),
                          "routed": routed_share(seen, torch)})
        return lg

    if "declare" in tag:
        # the Python package: the model's tensors declared, its forwards
        # marked (python/flextensor; PYTHONPATH has it)
        import flextensor
        flextensor.offload(m)
    fwd = torch.compile(m) if opts.get("compile") else m

    def prefills():
        for i in range(PREFILLS):
            ids = torch.randint(0, vocab, (1, LEN), generator=g).cuda()
            forward("prefill", lambda: fwd(input_ids=ids, past_key_values=DynamicCache(),
                                           use_cache=True).logits[:, -1])

    def decode():
        cache = DynamicCache()
        ids = torch.randint(0, vocab, (1, 32), generator=gd).cuda()
        tok = fwd(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1].argmax(-1)
        for i in range(DECODE):
            lg = forward("decode", lambda: fwd(input_ids=tok[:, None], past_key_values=cache,
                                               use_cache=True).logits[:, -1])
            tok = lg.argmax(-1)

    with torch.inference_mode():
        for part in ((decode, prefills) if opts.get("decode_first") else (prefills, decode)):
            part()
    free, total = torch.cuda.mem_get_info()
    res = {"model": name, "tag": tag, "params": params, "decoder": decoder_bytes(m),
           "total": total, "used": total - free, "bw": bw, "rec": rec,
           "stats": {s: lib.stat(s) for s in STATS} if lib.on else {},
           "traced": traced()}
    torch.save(res, os.path.join(out, f"{name}-{tag}.pt"))
    if os.environ.get("ZOO_TRUTH") == "1":
        truth = {"forwards": windows,
                 "params": [{"name": n, "ptr": p.data_ptr(), "bytes": p.numel() * p.element_size()}
                            for n, p in m.named_parameters()]}
        json.dump(truth, open(os.path.join(out, f"{name}-{tag}.truth.json"), "w"))
    print(f"{name} {tag}: {len(rec['prefill'])} prefills, {len(rec['decode'])} decode steps, "
          f"stats {res['stats']}")


def fraction(name, out, share):
    import torch

    r = torch.load(os.path.join(out, f"{name}-plain.pt"))
    print(f"{budget_fraction(r['params'], r['decoder'], share, r['total']):.6f}")


def verify_decode(name):
    """The decode steps of an FT_VERIFY run: its decode steps must run in
    INFERENCE too, and a model that decodes first reaches it after 8-22
    forwards."""
    print(os.environ.get("ZOO_VERIFY_DECODE") or (30 if options(name).get("decode_first") else 6))


def same(a, b):
    import torch

    return torch.equal(a.view(torch.int32), b.view(torch.int32))


def timing(r, kind):
    """(median ms, median bytes copied) of the timed forwards of a kind."""
    xs = r["rec"][kind][-TIMED:]
    return median([x["ms"] for x in xs]), median([x["copied"] for x in xs])


def runs(out):
    """Every library run in OUT with its model's plain run: (plain, run)
    pairs, by model and tag."""
    import torch

    pairs = []
    for plain_path in sorted(glob.glob(os.path.join(out, "*-plain.pt"))):
        plain = torch.load(plain_path)
        for path in sorted(glob.glob(os.path.join(out, f"{plain['model']}-*.pt"))):
            r = torch.load(path)
            if not r["tag"].startswith("plain"):
                pairs.append((plain, r))
    return pairs


def report(out):
    ok = True
    lines = ["# Model zoo on the GPU", "",
             "ratio = median of the last %d forwards / max(resident, floor); floor = the "
             "bytes the plan offloads / H2D bandwidth (same process): each offloaded byte "
             "crosses PCIe once per forward; copied = bytes copied into blocks per forward "
             "/ bytes offloaded (above 1: some crossed twice)" % TIMED, "",
             "| model | run | offloaded GB (share) | prefill identical | decode identical | "
             "prefill ms | resident | "
             "floor | ratio | copied | decode ms | resident | floor | ratio | copied | "
             "late loads | conflicts | demoted | ignored refs (held) | verify failures | "
             "INFERENCE after |",
             "|" + "---|" * 21]
    pairs = runs(out)
    for plain, r in pairs:
        name = plain["model"]
        pre_res, _ = timing(plain, "prefill")
        dec_res, _ = timing(plain, "decode")
        cols = []
        for kind in ("prefill", "decode"):
            # a shorter run (FT_VERIFY: slow) is compared with the
            # plain run's first forwards
            a, b = r["rec"][kind], plain["rec"][kind]
            bad = [i for i, (x, y) in enumerate(zip(a, b)) if not same(x["logits"], y["logits"])]
            good = 0 < len(a) <= len(b) and not bad
            ok &= good
            if good or bad or not a:
                cols.append(f"yes ({len(a)})" if good else
                            f"NO ({len(bad)} of {len(a)}, first {bad[:1]})")
            else:  # (more forwards than the plain run made: not all compared)
                cols.append(f"NOT COMPARED ({len(b)} of {len(a)} identical; the plain run "
                            f"made {len(b)})")
        inference = all(x["phase"] == 2 for k in ("prefill", "decode")
                        for x in r["rec"][k][-1:])
        ok &= inference
        nums = []
        st = r["stats"]
        off = st.get("offloaded_bytes", 0)
        for kind, res_ms in (("prefill", pre_res), ("decode", dec_res)):
            if "verify" in r["tag"]:
                nums += ["-"] * 5  # FT_VERIFY: nothing prefetched, blocks checked
                continue
            ms, copied = timing(r, kind)
            floor = off / link_rate(r, plain) * 1e3
            nums += [f"{ms:.2f}", f"{res_ms:.2f}", f"{floor:.2f}",
                     f"{ms / max(res_ms, floor):.3f}",
                     f"{copied / off:.2f}" if off else "-"]
        fwd = len(r["rec"]["prefill"]) + len(r["rec"]["decode"])
        # recorded forwards (in the order run) until the phase read
        # after one was INFERENCE
        order = (("decode", "prefill") if options(name).get("decode_first")
                 else ("prefill", "decode"))
        seq = [x["phase"] for k in order for x in r["rec"][k]]
        at = next((i + 1 for i, ph in enumerate(seq) if ph == 2), None)
        share = f"{off / 1e9:.2f} ({off / r['params']:.2f})" if r.get("params") else "-"
        lines.append(f"| {name} | {r['tag']}{'' if inference else ' (not in INFERENCE)'}"
                     f"{TRACED if r.get('traced') else ''} | "
                     + " | ".join([share] + cols + nums) + f" | {st.get('offload_misses', 0)} in {fwd} | "
                     f"{st.get('offload_conflicts', 0)} | {st.get('offload_demoted', 0)} | "
                     f"{st.get('offload_ignored_refs', 0)} ({st.get('offload_held', 0)}) | "
                     f"{st.get('verify_failures', 0)} | {at if at else '-'} |")
    lines += moe_table(pairs)
    write_table(out, "zoo.md", lines)
    return 0 if ok else 1


def moe_table(pairs):
    """Mixture-of-experts runs against two floors: every offloaded byte once
    a forward (all experts of the offloaded layers), and only the routed
    experts' (the offloaded bytes less the sliced experts' share that the
    forward did not route to: offload_sliced_bytes x (1 - routed share));
    runs without slices (FT_EXPERT_PAGING=0, graphs, coded stores) get the
    first only."""
    lines = ["", "## Mixture-of-experts: the floors of all experts and of the routed ones", "",
             "routed = the share of a layer's experts a forward routes to (median); floor "
             "(routed) = (offloaded - sliced x (1 - routed)) / H2D; slices = "
             "offload_slice_copies (of them, whole: offload_slice_wholes)", "",
             "| model | run | forward | ms | resident | floor (all) | ratio | routed | "
             "floor (routed) | ratio (routed) | MB copied | slices (whole) |",
             "|" + "---|" * 12]
    for plain, r in pairs:
        name, st = plain["model"], r["stats"]
        if plain["rec"]["decode"][-1].get("routed") is None or "verify" in r["tag"]:
            continue
        off, sliced = st.get("offloaded_bytes", 0), st.get("offload_sliced_bytes", 0)
        for kind in ("prefill", "decode"):
            ms, copied = timing(r, kind)
            res, _ = timing(plain, kind)
            routed = median([x["routed"] for x in r["rec"][kind][-TIMED:]])
            fa = off / link_rate(r, plain) * 1e3
            fb = (off - sliced * (1 - routed)) / link_rate(r, plain) * 1e3
            rb = f"{fb:.2f} | {ms / max(res, fb):.3f}" if sliced else "- | -"
            tag = r["tag"] + (TRACED if r.get("traced") else "")
            lines.append(f"| {name} | {tag} | {kind} | {ms:.2f} | {res:.2f} | "
                         f"{fa:.2f} | {ms / max(res, fa):.3f} | {routed:.2f} | {rb} | "
                         f"{copied / 1e6:.1f} | {st.get('offload_slice_copies', 0)} "
                         f"({st.get('offload_slice_wholes', 0)}) |")
    return lines


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "fraction":
        fraction(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "verify-decode":
        verify_decode(sys.argv[2])
    else:
        sys.exit(report(sys.argv[2]))
