"""Campaign of issue 17, finding 7: small files whose claims exceed xlasdk's limits are refused
quickly, within a memory bound, with xlasdk errors (``xlasdk run``: exit 2 and the size).

Each trial writes a random module that claims too much: a tuple of 32,769 to 300,000 elements (as
a result, a parameter, or an operand list), a constant of a random element type and rank whose
elements pass 128 MiB (up to 2^62 elements, dimensions past int64, a tuple of them; written as a
list of three values, as one number, or as an empty list), or a valid program whose parameters or
results are too large to allocate (a parameter, a broadcast or an iota of 2^30..2^42 elements, and
at least twice the machine's memory). Through the API, ``xs.load_computation`` must refuse the
claims with a ``FormatError`` naming the limit, and load the valid programs, whose ``xs.compile``
(in the worker) works; through the command line, ``xlasdk run FILE --random-inputs`` must exit 2
with a message that gives the size.

Bounds asserted: each API load within 10 s, each command within 60 s; the peak memory (VmHWM) of
the process that loads and of xlasdk's worker, and of each command's process tree (``wait4``), below
1.5 GiB. Before the fix of finding 7 the same files took 7.3 GiB and 96 s, or allocated 1 GiB
for a 97-byte constant.

The quick profile: 14 API trials and 2 commands; the long one (``pytest -m campaign``):
``XLASDK_BOUNDED_LONG`` API trials (default 300) and a tenth as many commands.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import harness
import pytest

LONG = int(os.environ.get("XLASDK_BOUNDED_LONG", "300"))
REPO = Path(__file__).resolve().parents[2]
API_SECONDS = 10.0
CLI_SECONDS = 60.0
MEMORY = 1536 << 20  # bytes: the peak any process may reach

_TYPES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8,
          "f64": 8, "c64": 8, "c128": 16}

_MACHINE = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

_SOURCE = r'''
import os, resource, time
import xlasdk as xs
from xlasdk.errors import XlaSdkError
from xlasdk._jaxlib import isolated

def _hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

def main(arg):
    path, compile_it = arg
    t0 = time.monotonic()
    try:
        comp = xs.load_computation(path)
        result = ("loaded", str(comp.program_shape())[:200])
        if compile_it:
            exe = xs.compile(comp, cache=False, timeout=120)
            result = ("compiled", str(exe.program_shape())[:200])
    except XlaSdkError as e:
        result = ("xlasdk", type(e).__name__, str(e)[:500])
    except Exception as e:
        result = ("raw", type(e).__name__, str(e)[:500])
    seconds = time.monotonic() - t0
    worker = isolated.worker_pid()
    return result, seconds, _hwm(os.getpid()), _hwm(worker) if worker else 0
'''


def _dims(rng: random.Random, elements: int) -> list[int]:
    """A random rank-1..4 shape of at least ``elements`` elements (and less than twice as many)."""
    rank = rng.randint(1, 4)
    dims = [1] * rank
    left = elements
    for i in range(rank - 1):
        d = max(1, int(left ** (1 / (rank - i)) * rng.uniform(0.5, 2)))
        dims[i] = d
        left = max(1, left // d)
    head = 1
    for d in dims[:-1]:
        head *= d
    dims[-1] = -(-elements // head)  # the product reaches ``elements``: the claim passes the limit
    return dims


def _module(rng: random.Random) -> tuple[str, str, str]:
    """(family, HLO text, the words the refusal must hold: a regular expression)."""
    family = rng.choice(("tuple-result", "tuple-param", "tuple-operands", "constant", "constant", "big-param",
                         "big-result", "big-iota"))
    if family.startswith("tuple"):
        n = rng.choice((32_769, 40_000, 100_000, rng.randint(32_769, 300_000)))
        shape = "(" + ", ".join(["f32[]"] * n) + ")"
        if family == "tuple-result":
            body = f"  p = f32[] parameter(0)\n  ROOT t = {shape} tuple({', '.join(['p'] * n)})"
        elif family == "tuple-param":
            body = f"  p = {shape} parameter(0)\n  ROOT r = f32[] get-tuple-element(p), index=0"
        else:  # the shape says one element, the operand list says n
            body = f"  p = f32[] parameter(0)\n  ROOT t = (f32[]) tuple({', '.join(['p'] * n)})"
        want = rf"has (a tuple shape of {n:,} elements|{n:,} operands), more than the limit of 32,768"
        return family, f"HloModule {family}\n\nENTRY main {{\n{body}\n}}\n", want
    if family == "constant":
        ty = rng.choice(sorted(_TYPES))
        size = _TYPES[ty]
        elements = rng.choice(((128 << 20) // size + 1, 1 << 28, 1 << 32, 1 << 40, 1 << 62))
        dims = _dims(rng, elements)
        if rng.random() < 0.15:
            dims = [rng.choice((2**63 - 1, 2**64, 10**30))] + dims[1:]
        shape = f"{ty}[{','.join(map(str, dims))}]"
        if rng.random() < 0.2:
            shape = f"({shape}, f32[2])"
        value = rng.choice(("{1, 0, 1}", "1", "{}", "{ {1}, {0} }"))
        if shape.startswith("("):
            value = f"({value}, {{1, 2}})"
        text = f"HloModule constant\n\nENTRY main {{\n  ROOT c = {shape} constant({value})\n}}\n"
        return family, text, r"claims|value is one number|can spell at most|dimension|too large|overflow|parse"
    # more than the machine has, whatever is free when it runs: refused by the size alone (a program
    # that fits may run, as it should: an s8[2^30] result took 19.6 GiB and 52 s, as estimated)
    ty = rng.choice(("f32", "s8", "f64", "s32"))
    n = max(1 << rng.randint(30, 42), 2 * _MACHINE // _TYPES[ty] + rng.randrange(1 << 20))
    dims = ",".join(map(str, _dims(rng, n)))
    if family == "big-param":
        axes = ",".join(str(i) for i in range(dims.count(",") + 1))
        body = (f"  p = {ty}[{dims}] parameter(0)\n  c = {ty}[] constant(0)\n"
                f"  ROOT r = {ty}[] reduce(p, c), dimensions={{{axes}}}, to_apply=add")
        head = f"add {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT s = {ty}[] add(a, b)\n}}\n\n"
    elif family == "big-result":
        body = f"  c = {ty}[] constant(1)\n  ROOT r = {ty}[{dims}] broadcast(c), dimensions={{}}"
        head = ""
    else:
        body = f"  ROOT r = {ty}[{dims}] iota(), iota_dimension=0"
        head = ""
    text = f"HloModule {family.replace('-', '_')}\n\n{head}ENTRY main {{\n{body}\n}}\n"
    return family, text, r"the program's inputs and outputs need [\d,]+ bytes, more than the [\d,]+ this machine has"


def _api_campaign(n: int, tmp: Path, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    problems: list[str] = []
    seen: Counter[str] = Counter()
    peaks = [0, 0]
    slowest = 0.0
    with harness.Worker(timeout=300) as w:
        for i in range(n):
            family, text, want = _module(rng)
            path = tmp / f"m{i}.hlo"
            path.write_text(text)
            valid = family.startswith("big")
            o = w.run(harness.Task(_SOURCE, (str(path), valid), key=f"{i}: {family}"))
            if o.status != "ok":
                problems.append(o.describe())
                continue
            result, seconds, hwm, worker_hwm = o.value
            peaks = [max(peaks[0], hwm), max(peaks[1], worker_hwm)]
            slowest = max(slowest, seconds)
            if valid:
                ok = result[0] == "compiled"
            else:
                ok = result[:2] == ("xlasdk", "FormatError") and re.search(want, result[2]) is not None
            if not ok:
                problems.append(f"{i} ({family}, {len(text):,} bytes): {result}")
            if seconds > API_SECONDS:
                problems.append(f"{i} ({family}, {len(text):,} bytes): {seconds:.1f} s")
            seen[f"{family}: {result[0]}"] += 1
            path.unlink()
    print(f"API: {n} modules, {dict(sorted(seen.items()))}; slowest {slowest:.1f} s; peak memory: loading process "
          f"{peaks[0] >> 20} MiB, worker {peaks[1] >> 20} MiB")
    assert not problems, "\n".join(problems[:15])
    assert peaks[0] < MEMORY and peaks[1] < MEMORY, peaks
    return seen


def _cli_campaign(n: int, tmp: Path, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("XLASDK_CACHE_DIR", None)
    problems: list[str] = []
    seen: Counter[str] = Counter()
    peak = 0
    slowest = 0.0
    for i in range(n):
        family, text, want = _module(rng)
        while i < 2 and family.startswith("big") != (i == 1):  # the quick profile: one claim, one big program
            family, text, want = _module(rng)
        path = tmp / f"c{i}.hlo"
        path.write_text(text)
        t0 = time.monotonic()
        with open(tmp / "out", "w+b") as out, open(tmp / "err", "w+b") as err:
            p = subprocess.Popen([sys.executable, "-m", "xlasdk.cli", "run", str(path), "--random-inputs"],
                                 stdout=out, stderr=err, env=env, cwd=tmp)
            deadline = time.monotonic() + CLI_SECONDS
            status = None
            while time.monotonic() < deadline:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.05)
            else:
                p.kill()
                _, status, usage = os.wait4(p.pid, 0)
                problems.append(f"cli {i} ({family}): still running after {CLI_SECONDS:g} s")
            p.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            stderr = err.read().decode(errors="replace")
        seconds = time.monotonic() - t0
        slowest = max(slowest, seconds)
        rss = usage.ru_maxrss * 1024
        peak = max(peak, rss)
        line = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        if p.returncode != 2 or not re.search(want, stderr) or "internal error" in stderr:
            problems.append(f"cli {i} ({family}): exit {p.returncode}: {stderr[-600:]}")
        elif not line.startswith("xlasdk run: error:"):
            problems.append(f"cli {i} ({family}): the last line is {line!r}")
        if rss > MEMORY:
            problems.append(f"cli {i} ({family}): the process tree's peak memory was {rss >> 20} MiB")
        seen[f"{family}: exit {p.returncode}"] += 1
        print(f"  cli {i} ({family}): exit {p.returncode} in {seconds:.1f} s, {rss >> 20} MiB: {line[:160]}")
    print(f"CLI: {n} runs, {dict(sorted(seen.items()))}; slowest {slowest:.1f} s; peak memory {peak >> 20} MiB")
    assert not problems, "\n".join(problems[:15])
    return seen


def test_bounded_quick(tmp_path: Path) -> None:
    seen = _api_campaign(14, tmp_path, seed=77)
    assert any(k.endswith("xlasdk") for k in seen) and any(k.endswith("compiled") for k in seen), seen
    seen = _cli_campaign(2, tmp_path, seed=78)
    assert sum(seen.values()) == 2


@pytest.mark.campaign
def test_bounded_long(tmp_path: Path) -> None:
    _api_campaign(LONG, tmp_path, seed=770)
    _cli_campaign(max(LONG // 10, 2), tmp_path, seed=780)
