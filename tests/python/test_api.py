"""The Python package (python/flextensor) under the preloaded library and the
fake driver: every program runs in a child process, as a user's would
(LD_PRELOAD is read at process start).  Paths come from the environment
meson sets: FT_LIB, FT_FAKE_DIR, FT_PYTHONPATH, FT_RUN."""
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ["FT_LIB"]
FAKE = os.environ["FT_FAKE_DIR"]
PYPATH = os.environ["FT_PYTHONPATH"]

PRELUDE = """
import sys, hashlib
sys.path.insert(0, %r)
import flextensor as ft
""" % HERE


def run(body, preload=True, args=(), **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    e.update(PYTHONPATH=PYPATH, LD_LIBRARY_PATH=FAKE, PYTHONUNBUFFERED="1")
    e.pop("LD_PRELOAD", None)
    if preload:
        e.update(LD_PRELOAD=LIB, FT_ENABLED="1")
    e.update(env)
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)] + list(args),
                       env=e, capture_output=True, text=True, timeout=120)
    return p


def ok(p):
    assert p.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (
        p.returncode, p.stdout, p.stderr[-4000:])
    return p.stdout


FORWARDS = """
import fake_model
m = fake_model.FakeModel(stray="stray" in sys.argv)
if sys.argv[1] == "declare":
    m = ft.offload(m, config=ft.OffloadConfig(profiling_iters=3, offload_timing="eager"))
    print("iters", ft.get_offload_manager().iters_before_inference)
for s in range(12):
    out = m(s)
    phase = ft.get_offload_manager().phase if ft.is_observing() else "-"
    print("step", s, phase, hashlib.sha256(out).hexdigest())
"""


def steps(text):
    return [l.split() for l in text.splitlines() if l.startswith("step ")]


def test_not_preloaded_says_how_to_run():
    p = run("""
        cfg = ft.OffloadConfig(num_blocks=8)   # names only: no library to ask
        for call in (lambda: ft.offload(object(), cfg), ft.get_offload_manager,
                     ft.collect_offload_timing, ft.mark_pass, ft.stats, ft.save_profile):
            try:
                call()
                print("no error")
            except ft.NotPreloadedError as e:
                print("error:", e)
        """, preload=False)
    out = ok(p)
    lines = out.splitlines()
    assert len(lines) == 6 and all(l.startswith("error: ") for l in lines), out
    assert "flextensor-run" in lines[0] and "LD_PRELOAD" in lines[0]


def test_disabled_library_says_so():
    out = ok(run("""
        try:
            ft.get_offload_manager()
        except ft.NotPreloadedError as e:
            print(e)
        """, FT_ENABLED="0"))
    assert "FT_ENABLED=1" in out


def test_declared_model_bit_identical_and_sooner():
    plain = steps(ok(run(FORWARDS, preload=False, args=["plain"])))
    guessed = ok(run(FORWARDS, args=["plain"], FT_PROFILING_ITERS="3"))
    declared = ok(run(FORWARDS, args=["declare"], FT_LOG_LEVEL="info"))
    d = steps(declared)
    assert [s[3] for s in d] == [s[3] for s in plain]
    assert [s[3] for s in steps(guessed)] == [s[3] for s in plain]
    # INFERENCE after max(1, discovery_iters) + profiling_iters forwards,
    # as iters_before_inference said; without the declaration later
    assert "iters 4" in declared
    first = lambda st: next(int(s[1]) for s in st if s[2] == "INFERENCE")
    assert first(d) == 3
    assert first(steps(guessed)) > first(d)


@pytest.mark.parametrize("stray", ["", "stray"])
def test_declared_traps_named_and_offloaded(stray):
    plain = steps(ok(run(FORWARDS, preload=False, args=["plain", stray])))
    out = ok(run(FORWARDS + """
r = ft.collect_offload_timing()
print(ft.format_offload_timing_table(r))
print("rows", [x["trap"] for x in r.rows])
s = ft.stats()
print("stats", s["declared_tensors"], s["offloaded_bytes"] > 0, s["passes_marked"])
""", args=["declare", stray]))
    # a stale pointer to layer 4 in the first pass neither moves layer 4 in
    # the pass nor changes a result
    assert [s[3] for s in steps(out)] == [s[3] for s in plain]
    assert "Offload Timing (" in out and "model.layers.5" in out
    assert ("rows ['model.embed_tokens', 'model.layers.0', 'model.layers.1', "
            "'model.layers.2', 'model.layers.3', 'model.layers.4', 'model.layers.5', "
            "'lm_head']") in out
    assert "stats 15 True 12" in out


def test_profile_saved_with_module_names(tmp_path):
    out = ok(run(FORWARDS + """
import json, os
try:
    ft.save_profile(None)
except ValueError as e:
    print("no dir:", e)
path = ft.save_profile(sys.argv[2])
labels = [t["label"] for t in json.load(open(path))["traps"]]
print("labels", labels[:2], labels[-1])
""", args=["declare", str(tmp_path)]))
    assert "no dir:" in out
    assert "labels ['model.embed_tokens', 'model.layers.0'] lm_head" in out


def test_save_before_inference_raises(tmp_path):
    out = ok(run("""
        try:
            ft.save_profile(sys.argv[1])
        except RuntimeError as e:
            print("runtime:", e)
        try:
            ft.load_profile(sys.argv[1])
        except FileNotFoundError as e:
            print("missing:", e)
        """, args=[str(tmp_path)]))
    assert "runtime:" in out and "INFERENCE" in out and "missing:" in out


def test_config_validated_with_library_messages():
    out = ok(run("""
        for kw in (dict(num_blocks=1), dict(transfer_mode="fast"),
                   dict(max_gpu_mem_fraction=1.5), dict(min_blocks=8),
                   dict(transfer_mode="strategy", offload_timing="eager"),
                   dict(include_patterns=["class:*DecoderLayer"]), dict(shm_namespace="a/b"),
                   dict(warmup_iters=2), dict(num_block=8), dict(load_strategy=object())):
            try:
                ft.OffloadConfig(**kw)
                print("accepted", kw)
            except (ValueError, TypeError) as e:
                print(type(e).__name__ + ":", e)
        c = ft.OffloadConfig(num_blocks=8, min_blocks=6, profiling_iters=15)
        print("ok", c.num_blocks, c.min_blocks, c.pre_inference_iters)
        """))
    lines = out.splitlines()
    assert "FT_NUM_BLOCKS=1 is not valid: expected a whole number from 2 to 1024" in lines[0]
    assert "FT_TRANSFER_MODE=fast is not valid" in lines[1]
    assert "FT_MAX_GPU_MEM_FRACTION=1.5 is not valid" in lines[2]
    assert "FT_MIN_BLOCKS=8 is larger than FT_NUM_BLOCKS=4" in lines[3]
    assert "FT_OFFLOAD_TIMING needs a block transfer mode" in lines[4]
    assert "FT_INCLUDE_PATTERNS is not supported" in lines[5]
    assert "FT_SHM_NAMESPACE=a/b is not valid: expected a name" in lines[6]
    assert "'warmup_iters' was removed in 0.4.0" in lines[7]
    assert lines[8].startswith("TypeError:") and "did you mean 'num_blocks'" in lines[8]
    assert "load_strategy is not supported" in lines[9]
    assert lines[10] == "ok 8 6 16"


def test_start_options_must_match_and_plan_options_are_set():
    out = ok(run("""
        import fake_model
        m = fake_model.FakeModel()
        try:
            ft.offload(m, ft.OffloadConfig(max_gpu_mem_fraction=0.5))
        except ValueError as e:
            print("start:", e)
        ft.offload(m, ft.OffloadConfig(gpu_device=None, pinned_memory=True, num_blocks=6,
                                       min_blocks=6, discovery_iters=2, profiling_iters=2))
        print("iters", ft.get_offload_manager().iters_before_inference)
        for s in range(4):
            m(s)
        print("phase", ft.get_offload_manager().phase)
        try:
            ft.offload(m, ft.OffloadConfig(num_blocks=8))
        except ValueError as e:
            print("late:", e)
        """))
    assert ("start: offload(): the running configuration does not match the OffloadConfig: "
            "max_gpu_mem_fraction is read when the program starts") in out
    assert "FT_MAX_GPU_MEM_FRACTION=none, not 0.5" in out
    assert "iters 4" in out and "phase INFERENCE" in out
    assert "late:" in out and "num_blocks can change only before" in out


def test_mark_pass_counts_and_timing_off():
    out = ok(run("""
        print("marks", ft.mark_pass(), ft.mark_pass())
        print("collect", ft.collect_offload_timing())
        print("update", ft.update_offload_timing())
        try:
            ft.reset_offload_timing()
        except RuntimeError as e:
            print("reset:", e)
        print("version", ft.version())
        """))
    assert "marks 1 2" in out and "collect None" in out and "update False" in out
    assert "reset: reset_offload_timing(): timing is off" in out


def test_python_m_flextensor_run():
    e = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    e.update(PYTHONPATH=PYPATH, LD_LIBRARY_PATH=FAKE)
    p = subprocess.run([sys.executable, "-m", "flextensor", "run", "--num-blocks", "8", "--",
                        "sh", "-c", "echo $FT_ENABLED $FT_NUM_BLOCKS; echo $LD_PRELOAD"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.splitlines()[:2]
    assert first == "1 8" and second.endswith("libflextensor.so")
    bad = subprocess.run([sys.executable, "-m", "flextensor", "run", "--num-blocks", "1", "--",
                          "true"], env=e, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "FT_NUM_BLOCKS=1 is not valid" in bad.stderr
    helped = subprocess.run([sys.executable, "-m", "flextensor", "run", "--help"], env=e,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--mem-fraction" in helped.stdout


def test_unmarked_passes_are_said():
    # a program that declares its model but never lets the hook run (it
    # calls forward directly) is told, within a bounded number of launches,
    # why the library learns nothing
    p = run("""
        import ctypes, fake_model
        m = ft.offload(fake_model.FakeModel())
        cuda = fake_model.cuda
        ptrs = [ctypes.c_uint64(0)] * 4
        args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p)
                                       for x in ptrs])
        for _ in range(201000):
            cuda.cuLaunchKernel(m.touch, 1, 1, 1, 1, 1, 1, 0, None, args, None)
        print("phase", ft.get_offload_manager().phase)
        """)
    out = ok(p)
    assert "phase DISCOVERY" in out
    assert "no pass was marked" in p.stderr and "model.forward(x)" in p.stderr


def test_tensors_moved_after_offload_are_declared_again():
    # a parameter replaced after offload() (model.half(), model.to()): the
    # first mark finds it moved, declares the model again, and discovery
    # starts over on what the model now is
    body = """
import fake_model
m = fake_model.FakeModel()
if sys.argv[1] == "declare":
    m = ft.offload(m, config=ft.OffloadConfig(profiling_iters=3))
name, old = m.params[5]
m.params[5] = (name, fake_model.Tensor(old.nbytes, 0.25 * 4))  # layer 2's first, elsewhere
for s in range(10):
    out = m(s)
    print("step", s, hashlib.sha256(out).hexdigest())
print("phase", ft.get_offload_manager().phase if ft.is_observing() else "-")
print("offloaded", ft.stats()["offloaded_bytes"] if ft.is_observing() else 0)
"""
    plain = ok(run(body, preload=False, args=["plain"]))
    p = run(body, args=["declare"])
    out = ok(p)
    assert [l for l in out.splitlines() if l.startswith("step")] == \
        [l for l in plain.splitlines() if l.startswith("step")]
    assert "declared again, discovery starts over" in p.stderr
    assert "phase INFERENCE" in out and "offloaded 0" not in out
