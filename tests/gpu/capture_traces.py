#!/usr/bin/env python3
"""Records FT_TRACE traces of real workloads with their ground truth, for
developing and testing pass detection, weight classification and trap
grouping offline (tests/data/).  Run under the preload:

  LD_PRELOAD=libflextensor.so FT_ENABLED=1 FT_TRACE=OUT/trace.jsonl \
      python3 capture_traces.py OUT

With a second argument `hf8`, records only an 8-layer transformers Llama
with a DynamicCache (prefill, 40 decode steps); with `llama8b`, a
Llama-3-8B-shaped one (32 layers, vocabulary 128256; prefill 32, then
CAPTURE_STEPS decode steps, default 16; truth.json rewritten every step).
Writes OUT/truth.json: for every forward call its launch-sequence window
[first, end) and its kind, and the address ranges of every parameter, KV
cache, input and output buffer, so a test can score what the library infers.
Workloads (all random weights, no downloads):
  hf_cache     transformers Llama (4 layers, untied): prefill + 6 decode steps
               with a DynamicCache, three prompts of different lengths
  hf_nocache   the same model, use_cache=False, varying lengths
  hf_tied      a tied-embedding model, decode-shaped forwards
  manual       a hand-written decoder with a persistent KV cache written by
               index_copy_ each step, eager, then the same step captured as a
               CUDA graph and replayed
"""
import ctypes
import json
import os
import sys

import torch

from models import Manual

lib = ctypes.CDLL(None)
lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]


def seq():
    torch.cuda.synchronize()
    v = ctypes.c_ulonglong(0)
    lib.ft_stat_get(b"launches", ctypes.byref(v))
    return v.value


truth = {"forwards": [], "buffers": []}


def buf(kind, name, t):
    truth["buffers"].append({"kind": kind, "name": name, "ptr": t.data_ptr(),
                             "bytes": t.numel() * t.element_size()})


def forward(workload, kind, fn):
    a = seq()
    out = fn()
    b = seq()
    truth["forwards"].append({"workload": workload, "kind": kind, "first": a, "end": b})
    return out


def hf_model(tied, layers=4):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, tie_word_embeddings=tied)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    return m


def hf_workloads():
    from transformers import DynamicCache

    m = hf_model(False)
    for n, p in m.named_parameters():
        buf("param", "hf." + n, p)
    with torch.inference_mode():
        for plen in (32, 64, 100):
            ids = torch.randint(0, 32000, (1, plen), device="cuda")
            buf("input", f"prompt{plen}", ids)
            cache = DynamicCache()
            out = forward("hf_cache", "prefill", lambda: m(ids, past_key_values=cache, use_cache=True))
            tok = out.logits[:, -1:].argmax(-1)
            for _ in range(6):
                out = forward("hf_cache", "decode",
                              lambda: m(tok, past_key_values=cache, use_cache=True))
                tok = out.logits[:, -1:].argmax(-1)
        for plen in (16, 48, 16, 80):
            ids = torch.randint(0, 32000, (1, plen), device="cuda")
            forward("hf_nocache", "prefill", lambda: m(ids, use_cache=False))
    del m
    torch.cuda.empty_cache()

    t = hf_model(True, layers=2)
    for n, p in t.named_parameters():
        buf("param", "tied." + n, p)
    with torch.inference_mode():
        for _ in range(4):
            ids = torch.randint(0, 32000, (1, 1), device="cuda")
            forward("hf_tied", "decode", lambda: t(ids, use_cache=False))
    del t
    torch.cuda.empty_cache()


def manual_workload():
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = Manual().to(torch.bfloat16).eval()
    for n, p in m.named_parameters():
        buf("param", "manual." + n, p)
    buf("kv_cache", "manual.k", m.k)
    buf("kv_cache", "manual.v", m.v)
    with torch.inference_mode():
        ids = torch.randint(0, 8192, (1, 16), device="cuda")
        pos = torch.arange(16, device="cuda")
        out = forward("manual", "prefill", lambda: m(ids, pos))
        tok = torch.zeros(1, 1, dtype=torch.long, device="cuda")
        p1 = torch.zeros(1, dtype=torch.long, device="cuda")
        buf("input", "manual.tok", tok)
        buf("input", "manual.pos", p1)
        for step in range(16, 26):
            tok.copy_(out[:, -1:].argmax(-1))
            p1.fill_(step)
            out = forward("manual", "decode", lambda: m(tok, p1))
        # The same decode step as a CUDA graph over static buffers.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            m(tok, p1)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        a = seq()
        with torch.cuda.graph(g):
            gout = m(tok, p1)
        truth["forwards"].append({"workload": "manual", "kind": "capture", "first": a, "end": seq()})
        buf("output", "manual.graph_out", gout)
        for step in range(26, 32):
            p1.fill_(step)
            g.replay()
            truth["forwards"].append({"workload": "manual", "kind": "replay", "first": seq(), "end": seq()})


def hf8_workload():
    """An 8-layer transformers Llama with a DynamicCache, prefill 64 then 40
    decode steps: the workload whose boundaries were unstable on the H200."""
    from transformers import DynamicCache

    m = hf_model(False, layers=8)
    for n, p in m.named_parameters():
        buf("param", "hf8." + n, p)
    with torch.inference_mode():
        ids = torch.randint(0, 32000, (1, 64), device="cuda")
        cache = DynamicCache()
        out = forward("hf8", "prefill", lambda: m(ids, past_key_values=cache, use_cache=True))
        tok = out.logits[:, -1:].argmax(-1)
        for _ in range(40):
            out = forward("hf8", "decode", lambda: m(tok, past_key_values=cache, use_cache=True))
            tok = out.logits[:, -1:].argmax(-1)


def llama8b_workload(out):
    from transformers import DynamicCache

    # the benchmark's model (scripts/bench_offload.py)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "scripts"))
    from bench_offload import build

    m = build(torch)
    for n, p in m.named_parameters():
        buf("param", "l8b." + n, p)
    truth["pid"] = os.getpid()
    with torch.inference_mode():
        ids = torch.randint(0, 128256, (1, 32), device="cuda")
        cache = DynamicCache()
        tok = ids
        for i in range(1 + int(os.environ.get("CAPTURE_STEPS", "16"))):
            out_ = forward("l8b", "decode" if i else "prefill",
                           lambda: m(tok, past_key_values=cache, use_cache=True, logits_to_keep=1))
            tok = out_.logits[:, -1:].argmax(-1)
            lib.ft_flush_trace()
            json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=0)
            print(f"step {i}: phase {lib.ft_phase()}", flush=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2 and sys.argv[2] == "hf8":
        hf8_workload()
        lib.ft_flush_trace()
        truth["pid"] = os.getpid()
        json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=0)
        return
    if len(sys.argv) > 2 and sys.argv[2] == "llama8b":
        llama8b_workload(out)
        return
    hf_workloads()
    manual_workload()
    lib.ft_flush_trace()
    truth["pid"] = os.getpid()
    json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=0)
    print(f"{len(truth['forwards'])} forwards, {len(truth['buffers'])} buffers recorded")


if __name__ == "__main__":
    main()
