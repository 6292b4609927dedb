#!/usr/bin/env python3
"""GPU check of FT_VERIFY and of readers the executor cannot page (issue 4),
run under the preload with FT_VERIFY=1 and every trap offloaded:

  verify.py writer   in INFERENCE, a kernel writes to an offloaded weight
                     (add_ on a layer's qkv weight): the library must report
                     the trap, the weight's bytes and the kernel
  verify.py hidden   a CUDA graph of one decode step (it reads every weight)
                     captured before the plan is replayed after it: the plan
                     leaves every weight on the GPU (verify.sh checks the log
                     says why), no replay is a hidden reader, and the replay
                     reads no poison (NaN)

Exits 0 when the library said so (its counters, checked here; the messages
are checked by verify.sh), 1 otherwise.  Manual decoder, random weights.
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from discovery import build  # noqa: E402
from models import capture_graph  # noqa: E402

lib = ctypes.CDLL(None)
lib.ft_stat_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]


def stat(name):
    v = ctypes.c_ulonglong(0)
    lib.ft_stat_get(name.encode(), ctypes.byref(v))
    return v.value


def main(what):
    m, _ = build("manual", torch)
    tok = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    graph, out = None, None
    with torch.inference_mode():
        for i in range(40):
            pos.fill_(i)
            if what == "hidden" and i == 2:
                # capture one step while the library is still learning
                graph, out = capture_graph(lambda: m(tok, pos))
            logits = m(tok, pos)
            tok = logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            if lib.ft_phase() == 2 and i > 12:
                break
        if lib.ft_phase() != 2 or (what == "writer" and not stat("offloaded_bytes")):
            print(f"not offloading: phase {lib.ft_phase()}, offloaded {stat('offloaded_bytes')}")
            return 1
        if what == "writer":
            m.layers[2].qkv.weight.add_(1)
            for i in range(3):
                m(tok, pos)
            torch.cuda.synchronize()
            print(f"verify_failures {stat('verify_failures')}")
            return 0 if stat("verify_failures") else 1
        graph.replay()
        torch.cuda.synchronize()
        nan = bool(torch.isnan(out.float()).any())
        print(f"hidden_readers {stat('hidden_readers')}, offloaded {stat('offloaded_bytes')}, "
              f"replay output has NaN: {nan}")
        return 0 if not nan and not stat("hidden_readers") and not stat("offloaded_bytes") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
