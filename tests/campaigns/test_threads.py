"""Campaign 4 of issue 9: building, compiling and running from 8 threads at once.

Each of 8 threads builds its own computations (random op chains from ``chains.py``, with the
inputs as parameters and as constants), prints their HLO and StableHLO text, compiles them and
runs them, all threads starting together at a barrier; the same work is then done on one
thread, twice. Everything must come out identical: the HLO and StableHLO text, the program
shapes and the result bytes (same computation, same compiled code: no tolerance). A second
phase runs one shared executable from the 8 threads at once, each thread with its own inputs.

A computation whose two single-thread runs already differ is not a threading problem. Where
the chain takes the Exp of a surely-NaN value (``chains.evaluate`` notes it) it is the known
XLA:CPU bug (``exp`` of a value LLVM can prove is NaN is compiled into a store of ``poison``,
leaving the output uninitialized; ``chains.py`` describes it; the long profile's seed 2000488
is one): listed with its seed and left out of the comparison. Any other is a failure.

The work runs in a child process (``harness.py``) so that a crash or a deadlock (the harness's
timeout) is reported with the reproducing input instead of killing the test session. The quick
profile does 8 threads x 2 chains x 2 modes (32 compiles on threads, 32 on one thread; a few
seconds); the long profile (``pytest -m campaign``) 8 threads x 40 chains x 2 modes for 3 rounds
with new chains each round, and 200 calls per thread of the shared executable
(``XLASDK_THREADS_LONG`` chains per thread, default 40).
"""

from __future__ import annotations

import os
import time

import chains
import pytest
from harness import Task, run_batch

THREADS = 8
LONG_PER_THREAD = int(os.environ.get("XLASDK_THREADS_LONG", "40"))

SOURCE = '''
import hashlib
import threading
import time

import ml_dtypes
import numpy as np
import xlasdk as xs
from xlasdk import ops


def one(source, leaves, mode):
    """Build, print, compile and run one chain; everything that must not depend on threading."""
    ns = {"np": np, "ml_dtypes": ml_dtypes, "xs": xs, "ops": ops}
    exec(source, ns)
    b = xs.XlaBuilder("chain")
    if mode == "param":
        args = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape), f"x{i}") for i, a in enumerate(leaves)]
    else:
        args = [ops.Constant(b, a) for a in leaves]
    comp = b.build(ns["build"](b, *args))
    hlo = comp.as_hlo_text()
    shlo = comp.as_stablehlo_text()
    exe = xs.compile(comp, device="cpu:0")
    out = (exe(*leaves) if mode == "param" else exe()).to_numpy()
    return (
        hashlib.sha256(hlo.encode()).hexdigest(), hashlib.sha256(shlo.encode()).hexdigest(),
        str(comp.program_shape()), out.dtype.str, out.shape, out.tobytes(),
    )


def run_threads(n, fn, per_thread):
    """Run fn(t, i) for i in range(per_thread) on n threads started together; results[t][i]."""
    results = [[None] * per_thread for _ in range(n)]
    errors = []
    barrier = threading.Barrier(n)

    def worker(t):
        try:
            barrier.wait()
            for i in range(per_thread):
                results[t][i] = fn(t, i)
        except BaseException as e:  # reported, not swallowed
            import traceback
            errors.append(f"thread {t}: {traceback.format_exc()}")
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, errors


def main(inp):
    work, n, shared_calls = inp  # work[t] = [(source, leaves), ...] for thread t
    per = len(work[0])
    jobs = lambda t, i: one(work[t][i // 2][0], work[t][i // 2][1], ("param", "const")[i % 2])
    t0 = time.perf_counter()
    threaded, errors = run_threads(n, jobs, 2 * per)
    t1 = time.perf_counter()
    single = [[jobs(t, i) for i in range(2 * per)] for t in range(n)]
    t2 = time.perf_counter()
    again = [[jobs(t, i) for i in range(2 * per)] for t in range(n)]  # to tell nondeterminism from threading
    # one executable shared by every thread, each with its own inputs (the first parameterized chain)
    source, leaves = work[0][0]
    ns = {"np": np, "ml_dtypes": ml_dtypes, "xs": xs, "ops": ops}
    exec(source, ns)
    b = xs.XlaBuilder("shared")
    args = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape), f"x{i}") for i, a in enumerate(leaves)]
    exe = xs.compile(b.build(ns["build"](b, *args)), device="cpu:0")
    rng = np.random.default_rng(0)
    inputs = [[a if a.dtype == np.bool_ else (a + rng.integers(0, 3, a.shape).astype(a.dtype)) for a in leaves]
              for _ in range(n)]
    call = lambda t, i: exe(*inputs[t]).to_numpy().tobytes()
    shared, errors2 = run_threads(n, call, shared_calls)
    shared_single = [exe(*inputs[t]).to_numpy().tobytes() for t in range(n)]
    shared_again = [exe(*inputs[t]).to_numpy().tobytes() for t in range(n)]
    t3 = time.perf_counter()
    return {
        "threaded": threaded, "single": single, "again": again, "errors": errors + errors2, "shared": shared,
        "shared_single": shared_single, "shared_again": shared_again, "seconds": (t1 - t0, t2 - t1, t3 - t2),
    }
'''


def _known(seed: int) -> bool:
    """Whether the chain takes the Exp of a surely-NaN value (XLA:CPU may leave that output uninitialized)."""
    notes: set[str] = set()
    chains.evaluate(chains.generate(seed), notes)
    return "exp-of-nan" in notes


def _work(first_seed: int, per_thread: int) -> list[list[tuple[str, list]]]:
    out = []
    for t in range(THREADS):
        row = []
        for i in range(per_thread):
            c = chains.generate(first_seed + t * per_thread + i)
            row.append((c.source(), c.leaves))
        out.append(row)
    return out


def _campaign(per_thread: int, rounds: int, first_seed: int, shared_calls: int) -> str:
    t0 = time.monotonic()
    seeds = [first_seed + r * THREADS * per_thread for r in range(rounds)]
    tasks = [Task(SOURCE, (_work(s, per_thread), THREADS, shared_calls), key=f"round{r}") for r, s in enumerate(seeds)]
    rep = run_batch(tasks, timeout=120 + 5 * per_thread * THREADS, env={"XLASDK_CACHE_DIR": None})
    assert not rep.deaths and not rep.timeouts, rep.describe_failures()
    assert not rep.errors, rep.errors[0].traceback
    compiles = 0
    thread_s = single_s = 0.0
    mismatches: list[str] = []
    nondeterministic: list[str] = []
    what = ["HLO text", "StableHLO text", "program shape", "dtype", "shape", "result bytes"]
    for o, first in zip(rep.outcomes, seeds, strict=True):
        v = o.value
        assert not v["errors"], "\n".join(v["errors"])
        for t in range(THREADS):
            for i, (a, b, c) in enumerate(zip(v["threaded"][t], v["single"][t], v["again"][t], strict=True)):
                compiles += 1
                seed, mode = first + t * per_thread + i // 2, ("param", "const")[i % 2]
                if b != c:  # two runs on one thread differ: not a threading problem
                    diff = [w for w, x, y in zip(what, b, c, strict=True) if x != y]
                    text = f"chain seed {seed} ({mode}): {diff} differ between two 1-thread runs"
                    (nondeterministic if _known(seed) else mismatches).append(text)
                elif a != b:
                    diff = [w for w, x, y in zip(what, a, b, strict=True) if x != y]
                    mismatches.append(f"{o.task.key} thread {t}: chain seed {seed} ({mode}): {diff} differ")
            shared = v["shared"][t]
            if v["shared_single"][t] != v["shared_again"][t]:
                text = f"chain seed {first} (param, shared executable, inputs of thread {t}): two runs differ"
                (nondeterministic if _known(first) else mismatches).append(text)
            elif any(x != v["shared_single"][t] for x in shared):
                mismatches.append(f"{o.task.key} thread {t}: the shared executable's results differ")
        thread_s += v["seconds"][0]
        single_s += v["seconds"][1]
    line = (
        f"threads: {rounds} round(s) x {THREADS} threads x {per_thread} chains x 2 modes = {compiles} "
        f"build+compile+run on threads vs the same on 1 thread (twice), plus {THREADS} x {shared_calls} "
        f"concurrent calls of one executable; failures: {len(mismatches)}, deaths: {len(rep.deaths)}, "
        f"timeouts: {len(rep.timeouts)}, known XLA exp-of-NaN garbage (1-thread runs differ): {len(nondeterministic)}, "
        f"time: {time.monotonic() - t0:.1f} s (8 threads {thread_s:.1f} s, 1 thread {single_s:.1f} s)"
    )
    for text in nondeterministic:
        line += f"\n  known XLA exp-of-NaN garbage, not a threading failure: {text}"
    assert not mismatches, line + "\n" + "\n".join(mismatches)
    return line


def test_threads_quick(capsys: pytest.CaptureFixture[str]) -> None:
    line = _campaign(per_thread=2, rounds=1, first_seed=500_000, shared_calls=20)
    with capsys.disabled():
        print(f"\n[campaign] {line}", flush=True)


@pytest.mark.campaign
def test_threads_long(capsys: pytest.CaptureFixture[str]) -> None:
    line = _campaign(per_thread=LONG_PER_THREAD, rounds=3, first_seed=2_000_000, shared_calls=200)
    with capsys.disabled():
        print(f"\n[campaign] {line}", flush=True)
