#!/usr/bin/env python3
"""flextensor-trace on every kind of input (issue 20, defect 2): the
gzip-compressed recordings in tests/data are read; a trace whose last line
was cut by a crash is read without it, with one warning; every bad input (a
missing file, a directory, binary junk, records of the wrong JSON types, an
unknown command, a bad WHAT) gets exactly one error line on stderr and a
non-zero status, never a Python traceback; and a few hundred randomly mutated
traces (fixed seed) keep to that rule.

Every case calls the tool's main() in this process, which is what the
program runs (an exception escaping it is what the program would print as a
traceback), so that hundreds of cases take a few seconds; the recordings,
one bad input of each kind and a sample of the mutated traces also run the
tool as a program, several at a time.

usage: trace_inputs.py <flextensor-trace> <tests/data>
"""
import concurrent.futures
import contextlib
import gzip
import importlib.machinery
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time

TOOL, DATA = sys.argv[1], sys.argv[2]
SEED = 20
MUTANTS = 300
failures = []


def fail(what, detail):
    failures.append(what)
    print(f"FAIL: {what}\n{detail}")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("flextensor_trace", TOOL)
    spec = importlib.util.spec_from_loader("flextensor_trace", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


tool = load_tool()


def run_program(args):
    """(status, stdout, stderr) of the tool run as a program."""
    p = subprocess.run([sys.executable, TOOL] + args, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def run_programs(arg_lists):
    """run_program of each, several at a time (a start of Python costs more
    than most of the cases it runs)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return list(pool.map(run_program, arg_lists))


def run_inside(args):
    """(status, stdout, stderr) of the tool's main() in this process; an
    exception that escapes it is what the program would print as a
    traceback, so it is reported as one."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = tool.main(["flextensor-trace"] + args)
        except SystemExit as e:
            status = e.code
        except BaseException as e:  # noqa: BLE001 - any escape is the bug
            status = None
            err.write(f"Traceback (escaped main): {type(e).__name__}: {e}\n")
    return status, out.getvalue(), err.getvalue()


def check_rule(what, result, want=None):
    """The rule every run keeps: status 0 with at most one warning line, or a
    status of 1 or 2 with exactly one error line; never a traceback or an
    internal error.  want: the status expected, when known."""
    status, out, err = result
    lines = err.splitlines()
    detail = f"  status {status}\n  stderr: {err!r}\n  stdout: {out[:300]!r}"
    if "Traceback" in err or "internal error" in err:
        return fail(f"{what}: traceback or internal error", detail)
    if want is not None and status != want:
        return fail(f"{what}: status {status}, expected {want}", detail)
    if status == 0:
        if len(lines) > 1 or (lines and not lines[0].startswith("flextensor-trace: warning: ")):
            return fail(f"{what}: success with more than one warning line", detail)
    elif status in (1, 2):
        if len(lines) != 1 or not lines[0].startswith("flextensor-trace: error: "):
            return fail(f"{what}: not exactly one error line", detail)
    else:
        return fail(f"{what}: status {status}", detail)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def base_trace():
    """About a hundred records of two recordings (two processes): allocations,
    launches with references, copies, memsets, passes."""
    lines = []
    for name, count in (("h200-hf8", 50), ("h200-workloads", 25)):
        with gzip.open(os.path.join(DATA, name + ".trace.jsonl.gz"), "rb") as f:
            for i, line in enumerate(f):
                rec = json.loads(line)
                if i < count or (rec["ev"] in ("copy", "memset", "pass") and len(lines) < 200):
                    lines.append(line)
                if i > 4000:
                    break
    return b"".join(lines)


def recordings(tmp):
    """The compressed recordings read like their plain text; a cut last line
    and a cut compressed file are read up to the cut, with one warning."""
    names = sorted(n for n in os.listdir(DATA) if n.endswith(".trace.jsonl.gz"))
    if not names:
        fail("recordings", f"  no *.trace.jsonl.gz in {DATA}")
    packed = os.path.join(DATA, "h200-workloads.trace.jsonl.gz")
    with gzip.open(packed, "rb") as f:
        plain = write(os.path.join(tmp, "workloads.jsonl"), f.read())
    text = base_trace()
    whole = write(os.path.join(tmp, "whole.jsonl"), text)
    last = text.rstrip(b"\n").rfind(b"\n") + 1
    kept = write(os.path.join(tmp, "kept.jsonl"), text[:last])
    cut = write(os.path.join(tmp, "cut.jsonl"), text[:last + 25])
    zcut = write(os.path.join(tmp, "cut.jsonl.gz"), gzip.compress(text)[:-30])

    jobs = [["summary", os.path.join(DATA, n)] for n in names]
    jobs += [["summary", packed], ["summary", plain], ["readers", packed, "1"], ["readers", plain, "1"],
             ["summary", kept], ["summary", cut], ["summary", zcut], ["readers", cut, "0x10"]]
    results = dict(zip(map(tuple, jobs), run_programs(jobs)))

    for n in names:
        result = results[("summary", os.path.join(DATA, n))]
        check_rule(f"summary {n}", result, want=0)
        if result[0] == 0 and (result[2] or " allocations, " not in result[1]):
            fail(f"summary {n}: output", f"  {result!r}")
    for cmd in (("summary",), ("readers",)):
        extra = ("1",) if cmd == ("readers",) else ()
        z, p = results[cmd + (packed,) + extra], results[cmd + (plain,) + extra]
        check_rule(f"{cmd[0]} of a compressed recording", z, want=0)
        if z != p:
            fail(f"{cmd[0]}: compressed and plain traces answer differently", f"  {z!r}\n  {p!r}")
    ref, got = results[("summary", kept)], results[("summary", cut)]
    check_rule("a cut last line", got, want=0)
    if got[1] != ref[1] or "last line is cut short" not in got[2]:
        fail("a cut last line: read up to the cut, said once", f"  {got!r}\n  {ref[1]!r}")
    got = results[("summary", zcut)]
    check_rule("a cut compressed trace", got, want=0)
    if "ends early" not in got[2]:
        fail("a cut compressed trace: said so", f"  {got!r}")
    check_rule("a cut trace without the allocation asked for", results[("readers", cut, "0x10")],
               want=1)
    return whole


def wrong_types():
    """(name, record) with one field of the wrong JSON type, or not a record."""
    alloc = {"ev": "alloc", "api": "cuMemAlloc_v2", "id": 1, "kind": "device",
             "ptr": "0x7f0000000000", "size": 4096, "device": 0, "pid": 7, "t_us": 1}
    launch = {"ev": "launch", "seq": 0, "api": "cuLaunchKernel", "kernel": "k",
              "refs": [{"id": 1, "off": 0, "param": 0}], "pid": 7, "t_us": 2}
    cases = [("a JSON list", [1, 2]), ("a JSON string", "alloc"), ("a JSON number", 12),
             ("JSON null", None), ("NaN", float("nan"))]
    for key, bad in (("ev", 3), ("ev", None), ("pid", "7"), ("pid", 7.5), ("id", "1"),
                     ("id", -1), ("id", True), ("size", "4096"), ("size", 1.5),
                     ("size", -4096), ("ptr", 140737488355328), ("ptr", "7f00"),
                     ("ptr", "0xfffffffffffffffffffff"), ("kind", 0), ("api", []), ("ptr", None)):
        cases.append((f"alloc with {key}={json.dumps(bad)}", dict(alloc, **{key: bad})))
    for key in ("ev", "pid", "id", "size", "ptr", "kind", "api"):
        cases.append((f"alloc without {key}", {k: v for k, v in alloc.items() if k != key}))
    for key, bad in (("kernel", 5), ("refs", {"id": 1}), ("refs", "1"), ("refs", [1]),
                     ("refs", [{"id": "1", "off": 0}]), ("refs", [{"id": 1}]),
                     ("refs", [{"id": 1, "off": -8}]), ("pid", [7])):
        cases.append((f"launch with {key}={json.dumps(bad)}", dict(launch, **{key: bad})))
    return [(name, json.dumps(rec).encode() + b"\n") for name, rec in cases]


def bad_inputs(tmp, whole):
    """Each bad input, run as a program: one error line and its status."""
    rng = random.Random(SEED)
    junk = write(os.path.join(tmp, "junk.bin"), bytes(rng.randrange(256) for _ in range(4000)))
    ztext = write(os.path.join(tmp, "text.gz"), b"\x1f\x8bnot really compressed\n")
    zjunk = write(os.path.join(tmp, "junk.gz"),
                  gzip.compress(bytes(rng.randrange(256) for _ in range(3000))))
    zearly = write(os.path.join(tmp, "early.gz"), gzip.compress(b'{"ev":"alloc"}\n' * 50)[:12])
    notjson = write(os.path.join(tmp, "middle.jsonl"),
                    open(whole, "rb").read().replace(b"\n", b"\n{oops\n", 1))
    deep = write(os.path.join(tmp, "deep.jsonl"), b"[" * 100000 + b"\n")
    huge = write(os.path.join(tmp, "huge.jsonl"),
                 b'{"ev":"alloc","pid":1,"id":1,"size":' + b"9" * 5000 + b"}\n")
    cases = [
        ("no argument", [], 2), ("unknown command", ["sumary", whole], 2),
        ("a command with a newline", ["x\ny", whole], 2),
        ("summary without a trace", ["summary"], 2),
        ("summary with two traces", ["summary", whole, whole], 2),
        ("readers without WHAT", ["readers", whole], 2),
        ("a missing file", ["summary", os.path.join(tmp, "missing.jsonl")], 1),
        ("a missing file named with a newline", ["summary", os.path.join(tmp, "a\nb")], 1),
        ("a directory", ["summary", tmp], 1),
        ("binary junk", ["summary", junk], 1),
        ("binary junk, readers", ["readers", junk, "1"], 1),
        ("the gzip magic before text", ["summary", ztext], 1),
        ("compressed junk", ["summary", zjunk], 1),
        ("a compressed file cut before its first line", ["summary", zearly], 1),
        ("a line that is not JSON", ["summary", notjson], 1),
        ("deeply nested JSON", ["summary", deep], 1),
        ("a 5000-digit number", ["summary", huge], 1),
        ("no allocation holds the address", ["readers", whole, "0x10"], 1),
        ("no allocation has the id", ["readers", whole, "999999"], 1),
    ]
    for what in ("zz", "0x", "-1", "1.5", "0x" + "f" * 40, "", "1" * 30, "0x12g", " 1"):
        cases.append((f"WHAT {what!r}", ["readers", whole, what], 2))
    for name, args, want in cases:
        check_rule(name, run_inside(args), want=want)
    # One of each kind again as a program: what a user sees.
    programs = [c for c in cases if c[0] in (
        "no argument", "unknown command", "summary without a trace", "a missing file",
        "a missing file named with a newline", "a directory", "binary junk",
        "compressed junk", "a line that is not JSON", "deeply nested JSON",
        "no allocation holds the address", "WHAT 'zz'")]
    for (name, args, want), result in zip(programs, run_programs([c[1] for c in programs])):
        check_rule(name + " (program)", result, want=want)
    # Records of the wrong types, first in an otherwise good trace.
    for i, (name, line) in enumerate(wrong_types()):
        path = write(os.path.join(tmp, f"types{i}.jsonl"), line + open(whole, "rb").read())
        check_rule(name, run_inside(["summary", path]), want=1)
        check_rule(name + ", readers", run_inside(["readers", path, "1"]), want=1)
    # A path that is not UTF-8 reaches the tool as bytes.
    p = subprocess.run([sys.executable, TOOL.encode(), b"summary", b"/nonexistent/\xff\xfe"],
                       capture_output=True, timeout=60)
    check_rule("a path that is not UTF-8",
               (p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")), want=1)
    check_rule("--help", run_program(["--help"]), want=0)


def mutate(rng, text):
    """One random change of a trace: bytes flipped, inserted, deleted,
    duplicated or cut, a field given a value of another type or removed, a
    record replaced by another JSON value; compressed now and then, and
    sometimes damaged after compression."""
    lines = text.split(b"\n")
    op = rng.randrange(9)
    if op == 0:
        data = bytearray(text)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        text = bytes(data)
    elif op == 1:
        at = rng.randrange(len(text))
        text = text[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) + text[at:]
    elif op == 2:
        at = rng.randrange(len(text))
        text = text[:at] + text[at + rng.randint(1, 400):]
    elif op == 3:
        text = text[:rng.randrange(len(text))]
    elif op == 4:
        a = rng.randrange(len(text))
        text = text[:a] + text[a:a + rng.randint(1, 300)] + text[a:]
    elif op == 5:
        at = rng.randrange(len(text))
        text = text[:at] + rng.choice([b'"', b"{", b"}", b"[", b"]", b",", b":", b"\n", b"\\"]) + text[at:]
    else:
        i = rng.randrange(len(lines) - 1)
        rec = json.loads(lines[i])
        pool = [None, True, -1, 1.5, "x", "0xzz", [], {}, [1], {"id": 1}, 10 ** 30,
                "0x7f5872000000", 0, float("inf")]
        if op == 6:
            target = rec
            if rec.get("refs") and rng.random() < 0.5:
                target = rng.choice(rec["refs"])
            target[rng.choice(sorted(target))] = rng.choice(pool)
        elif op == 7:
            del rec[rng.choice(sorted(rec))]
        else:
            rec = rng.choice(pool + [[rec], "alloc"])
        lines[i] = json.dumps(rec).encode()
        text = b"\n".join(lines)
    if rng.random() < 0.3:
        text = gzip.compress(text)
        if rng.random() < 0.3:
            data = bytearray(text)
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[at] ^= 1 << rng.randrange(8)
            else:
                del data[at:]
            text = bytes(data)
    return text


def mutants(tmp, whole):
    rng = random.Random(SEED)
    text = open(whole, "rb").read()
    ptrs = [json.loads(l)["ptr"] for l in text.splitlines() if b'"ev":"alloc"' in l]
    statuses = {}
    programs = []
    for n in range(MUTANTS):
        data = mutate(rng, text)
        path = write(os.path.join(tmp, f"mutant{n}"), data)
        what = rng.choice(["1", "2", rng.choice(ptrs), hex(rng.randrange(1 << 48))])
        for args in (["summary", path], ["readers", path, what]):
            if n % 50 == 0:
                programs.append((n, args))
                continue
            result = run_inside(args)
            check_rule(f"mutant {n} ({args[0]})", result)
            statuses[result[0]] = statuses.get(result[0], 0) + 1
    for (n, args), result in zip(programs, run_programs([a for _, a in programs])):
        check_rule(f"mutant {n} ({args[0]}, program)", result)
        statuses[result[0]] = statuses.get(result[0], 0) + 1
    print(f"mutated traces: {MUTANTS}, runs by exit status: {dict(sorted(statuses.items(), key=str))}")
    if len(statuses) < 2:
        fail("mutated traces", "  every run ended the same: the mutations test nothing")


def main():
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        whole = recordings(tmp)
        bad_inputs(tmp, whole)
        mutants(tmp, whole)
    print(f"trace inputs: {len(failures)} failure(s), {time.monotonic() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
