"""The reference evaluator's speed (issue "Is XLA right?", Speed), each figure against a peer in the same run.

* ``xs.evaluate`` on each program of ``tests/data/dumps/`` (its recorded inputs), before and after
  XLA's optimizations, against XLA:CPU compiling the same loaded module (``xs.compile(comp,
  cache=False)``: XLA compiles every time), in interleaved rounds. Each round evaluates a freshly
  loaded computation (the first evaluation: it imports the graph and its called functions, as a
  user's ``xlasdk compare`` does); ``again_ms`` is a second evaluation of the same one. Target:
  evaluate / compile <= 1 (what a user waits for is the answer; XLA:CPU runs these programs in
  well under a millisecond once compiled, which no Python reference can match).
* The evaluator's overhead per executed op beyond numpy's own work, on a 10,000-op element-wise
  chain on f32[16] (add, multiply, subtract, maximum with a second parameter): ``xs.evaluate``
  against the same numpy calls written directly (each op in float64 from its f32 operands, rounded
  to f32: what the reference computes), interleaved. Target: (evaluate - numpy) / ops <= 30 us.

    python bench/evaluate.py [--rounds N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402
import numpy as np  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "tests" / "data" / "dumps"
PROGRAMS = ("transformer_bf16", "convnet_train", "gru_scan", "int_indexing", "sharded_mlp")
FORMS = {"before": "module.before_optimizations.txt", "after": "module.cpu_after_optimizations.txt"}
CHAIN_OPS = 10_000
OVERHEAD_TARGET_US = 30.0


def _inputs(program: str) -> list[np.ndarray[Any, Any]]:
    """The program's recorded inputs (``io.npz``: bf16 saved as raw bytes, viewed back)."""
    with np.load(DUMPS / program / "io.npz") as z:
        dtypes = [str(d) for d in z["in_dtypes"]]
        out = []
        for i, name in enumerate(dtypes):
            a = z[f"in{i}"]
            dt = np.dtype(getattr(xs, name)) if name == "bfloat16" else np.dtype(name)
            out.append(a.view(dt) if a.dtype != dt else a)
        return out


def _alternate(fns: dict[str, Callable[[], Any]], rounds: int,
               before: Callable[[], Any] | None = None) -> dict[str, list[float]]:
    """Seconds of one call of each function per round, the order alternating from round to round;
    ``before`` runs untimed at the start of each round."""
    names = list(fns)
    for f in fns.values():
        f()  # warm: imports, XLA's first-compile setup
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        if before is not None:
            before()
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(tm.once(fns[name]))
    return out


def _dump_row(program: str, form: str, path: Path, args: list[np.ndarray[Any, Any]], rounds: int) -> dict[str, Any]:
    """One program and form: its first evaluation against XLA:CPU's compile of the same module."""
    comp = xs.load_computation(path)
    label = f"evaluate {program} ({form} opt), {len(comp.instructions())} instr"
    try:
        xs.compile(comp, cache=False)
    except Exception as e:  # noqa: BLE001 - a module XLA:CPU cannot compile again (partitioned)
        r = tm.row(label, "ms", None, None, "XLA:CPU compile", None, 1.0, "<= 1x")
        r["note"] = f"XLA:CPU cannot compile it alone: {type(e).__name__}: {' '.join(str(e).split())[:120]}"
        return r
    fresh = [comp]

    def load() -> None:
        fresh[0] = xs.load_computation(path)  # a new computation: nothing of it imported yet

    t = _alternate({"evaluate": lambda: xs.evaluate(fresh[0], *args),
                    "compile": lambda: xs.compile(fresh[0], cache=False)}, rounds, before=load)
    again = [tm.once(lambda: xs.evaluate(fresh[0], *args)) for _ in range(rounds)]
    return tm.row(label, "ms", tm.median(t["evaluate"]) * 1e3, tm.median(t["compile"]) * 1e3, "XLA:CPU compile",
                  tm.ratio(t["evaluate"], t["compile"]), 1.0, "<= 1x", again_ms=tm.median(again) * 1e3)


def dump_rows(rounds: int = 3) -> list[dict[str, Any]]:
    """Per program and form: evaluate against XLA:CPU's compile of the same module."""
    return [_dump_row(program, form, DUMPS / program / fname, _inputs(program), rounds)
            for program in PROGRAMS for form, fname in FORMS.items()]


def chain(n: int = CHAIN_OPS) -> tuple[xs.XlaComputation, Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], Any]]:
    """An ``n``-op element-wise chain on f32[16], and the same numpy work written directly."""
    b = xs.XlaBuilder("chain")
    shape = xs.Shape.array_shape(np.float32, (16,))
    x, p = ops.Parameter(b, 0, shape), ops.Parameter(b, 1, shape)
    kinds = (ops.Add, ops.Mul, ops.Sub, ops.Max)
    v = x
    for i in range(n):
        v = kinds[i % 4](v, p)
    comp = b.build(v)
    fns = (np.add, np.multiply, np.subtract, np.maximum)
    f32, f64 = np.float32, np.float64

    def direct(a: np.ndarray[Any, Any], q: np.ndarray[Any, Any]) -> Any:
        with np.errstate(all="ignore"):
            for i in range(n):
                a = fns[i % 4](a.astype(f64), q.astype(f64)).astype(f32)
        return a

    return comp, direct


def overhead_row(rounds: int = 5) -> dict[str, Any]:
    """The evaluator's time per op beyond numpy's own work on the chain (us/op)."""
    comp, direct = chain()
    rng = np.random.default_rng(0)
    a, q = rng.uniform(0.5, 1.0, 16).astype(np.float32), rng.uniform(0.5, 1.0, 16).astype(np.float32)
    (got,) = xs.evaluate(comp, a, q)
    np.testing.assert_array_equal(got, direct(a, q))  # the same work: the same values
    t = _alternate({"evaluate": lambda: xs.evaluate(comp, a, q), "numpy": lambda: direct(a, q)}, rounds)
    per_op = [(e - n) / CHAIN_OPS * 1e6 for e, n in zip(t["evaluate"], t["numpy"], strict=True)]
    overhead = statistics.median(per_op)
    return tm.row(f"evaluator overhead per op, {CHAIN_OPS}-op f32[16] chain", "us", overhead,
                  tm.median(t["numpy"]) / CHAIN_OPS * 1e6, "numpy's own work per op",
                  overhead / OVERHEAD_TARGET_US, 1.0, f"<= {OVERHEAD_TARGET_US:g} us",
                  evaluate_ms=tm.median(t["evaluate"]) * 1e3, numpy_ms=tm.median(t["numpy"]) * 1e3)


def run(rounds: int = 3) -> list[dict[str, Any]]:
    """The rows of ``run_all.py``: one per dump and form, and the per-op overhead."""
    return [*dump_rows(rounds), overhead_row(max(rounds, 3))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the rows as JSON")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(a.rounds)
    tm.print_rows(rows)
    for r in rows:
        if r.get("again_ms") is not None:
            print(f"  {r['figure']}: evaluated again (its graphs imported): {r['again_ms']:.1f} ms")
        if r.get("note"):
            print(f"  note ({r['figure']}): {r['note']}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
